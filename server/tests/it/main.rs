//! The server's integration tests, one binary: KV Connect over loopback sockets (every bad
//! input and the happy paths) and the network tier against misbehaving clients.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unreachable,
    reason = "test code: a panic is a failed test"
)]

mod network;
mod protocol;
