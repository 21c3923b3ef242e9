//! Integration tests of stampkv-wal (one test binary to keep link time low).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unreachable,
    reason = "test code: a panic is a failed test"
)]

mod common;
mod corruption;
mod modes;
mod roundtrip;
mod truncation;
mod wal;
mod writeback;
