//! Network benchmarks and checks of `stampkv serve`, run as examples of this package:
//!
//! - `hostile`: hostile clients (idle sockets, slow bodies, an over-limit read, 1,000
//!   watchers, SIGTERM) against a real server process while a well-behaved client keeps
//!   working; `--check` asserts behaviour, `--bench` prints a table.
//!
//! Its library holds what they share: [`wire`], KV Connect over hyper's connection-level
//! client. The KV Connect load generator (`stampkv-benches`' `kvc_load` example) uses it too.
//!
//! The package is apart from `stampkv-benches` so that building these examples in release
//! does not compile the peer engines as well.

#![forbid(unsafe_code)]

pub mod wire;
