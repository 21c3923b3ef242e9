//! Integration tests of the table layer (one test binary; modules by topic).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unreachable,
    reason = "test code: a panic is a failed test"
)]

mod builder;
mod cache;
mod cached_index;
mod common;
mod compression;
mod corruption;
mod filter;
mod footer;
mod model;
mod properties;
mod readahead;
