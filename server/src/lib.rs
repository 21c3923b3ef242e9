//! A KV Connect server for stampkv databases: real Deno programs (`Deno.openKv("http://...")`)
//! and the `@deno/kv` client use a stampkv database over HTTP.
//!
//! Protocol versions 1, 2 and 3 (`../shared/reference/deno-kv-semantics.md` §9): the metadata
//! exchange (`POST /`), and `snapshot_read`, `atomic_write` and `watch` under `/v2`. Small
//! reads (at most `inline_read_limit` entries) run on the async runtime's thread; larger
//! reads, commits and the reads of watches run on the blocking pool, at most `max_blocking`
//! at once. Watch streams are async (see [`watch`]). `GET /metrics` serves Prometheus text
//! to callers with the token (or to anyone on the optional metrics-only listener).
//!
//! The network tier holds up against hostile clients ([`NetConfig`]): a bounded table of
//! connections that closes idle ones, timeouts on headers, bodies and idleness, body sizes
//! checked from `Content-Length` first, bounded watch streams per server and per
//! connection, accept errors backed off, and a shutdown with a time limit.
//!
//! Enqueues inside an `atomic_write` are refused with a 400 (`Enqueue operations are not
//! supported by this server.`): Deno's client never sends one, and the protocol has no way
//! to listen to a queue, so a message could never be delivered to a remote client.

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

mod backend;
mod config;
mod errors;
mod metadata;
pub mod metrics;
mod read;
mod request;
mod routes;
mod service;
pub mod watch;
mod write;

pub use stampkv_kvconnect as proto;

pub use backend::ServedStore;
pub use config::{database_id_for, Config, ConfigError, NetConfig};
pub use metrics::Metrics;
pub use routes::{metrics_router, router, serve};
pub use service::Server;
