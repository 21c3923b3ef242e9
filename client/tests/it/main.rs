//! The client's integration tests, one binary: the typed client against stampkv's server
//! and the reference `denokv`, a scripted KV Connect server, and a model test against a
//! local database.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unreachable,
    reason = "test code: a panic is a failed test"
)]

mod common;

mod denokv;
mod endpoints;
mod model;
mod typed;
