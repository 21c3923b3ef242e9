//! The kv layer's integration tests, one binary. Every test that does not depend on the
//! engine runs twice, on the LSM engine and on the optimistic reference store
//! ([`common::for_each_store`]); durability, files and maintenance tests run on the engine.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unreachable,
    reason = "test code: a panic is a failed test"
)]

mod common;

mod atomic;
mod behaviour;
mod bulk;
mod deno_parity;
mod foreign;
mod list;
mod queue;
mod queue_parity;
mod read_only;
mod remote;
