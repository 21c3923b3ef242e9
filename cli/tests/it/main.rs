//! The command line's integration tests, one binary: each runs the built `stampkv` binary
//! (data commands, dump and load, Deno's SQLite files, backup, maintenance, report output,
//! `serve` and `edge` as processes).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unreachable,
    reason = "test code: a panic is a failed test"
)]

mod common;
mod dump_support;

mod backup;
mod data;
mod deno_sqlite;
mod dump;
mod edge;
mod maintenance;
mod output;
mod serve;
