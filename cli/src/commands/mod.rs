//! One module per group of subcommands.

pub mod backup;
pub mod data;
pub mod deno_sqlite;
pub mod dump;
pub mod edge;
pub mod maintenance;
pub mod serve;
