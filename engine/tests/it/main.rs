//! The engine's integration tests, one binary: the public API, checkpoints, concurrency,
//! cursors, failures and lock order, fault injection, ingestion, the shape of the levels,
//! randomised models, the table cache, verify and repair. The process-kill tests
//! (`crash_process`, `crash_mapped_wal`) are binaries of their own (`harness = false`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unreachable,
    reason = "test code: a panic is a failed test"
)]

mod common;

mod basic;
mod checkpoint;
mod concurrency;
mod cursor;
mod deferred;
mod failures_and_locks;
mod faults;
mod idle_flush;
mod ingest;
mod levels;
mod model;
mod table_cache;
mod verify_repair;
