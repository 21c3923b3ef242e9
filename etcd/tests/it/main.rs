//! The cluster store's integration tests, one binary: the kv layer's store-independent
//! suite (the same files as `kv/tests/it`, expanded over [`stampkv_etcd::EtcdStore`] by
//! this crate's `common::for_each_store`), then what only a cluster has: several
//! servers on one database, members killed under load.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unreachable,
    reason = "test code: a panic is a failed test"
)]

mod bulk;
mod cluster;
mod common;
mod expiry;
mod failover;
mod history;
mod limits;

#[path = "../../../kv/tests/it/atomic.rs"]
mod atomic;
#[path = "../../../kv/tests/it/behaviour.rs"]
mod behaviour;
#[path = "../../../kv/tests/it/deno_parity.rs"]
mod deno_parity;
#[path = "../../../kv/tests/it/list.rs"]
mod list;
#[path = "../../../kv/tests/it/queue.rs"]
mod queue;
#[path = "../../../kv/tests/it/queue_parity.rs"]
mod queue_parity;
#[path = "../../../kv/tests/it/remote.rs"]
mod remote;
