//! The edge's integration tests, one binary: edges on loopback in front of a primary and of
//! each other.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unreachable,
    reason = "test code: a panic is a failed test"
)]

mod tiers;
