//! The data model's integration tests, one binary: key encoding (byte-identical to Deno's)
//! and values (the V8 serialization, sums, serde).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unreachable,
    reason = "test code: a panic is a failed test"
)]

mod keys;
mod values;
