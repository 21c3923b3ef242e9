//! A KV Connect server for stampkv databases: real Deno programs (`Deno.openKv("http://...")`)
//! and the `@deno/kv` client use a stampkv database over HTTP.
//!
//! Protocol versions 1, 2 and 3 (`../shared/reference/deno-kv-semantics.md` §9): the metadata
//! exchange (`POST /`), and `snapshot_read`, `atomic_write` and `watch` under `/v2`. Every
//! engine call runs on a blocking thread (`spawn_blocking`; a watch stream has a thread of
//! its own), never on the async runtime. `GET /metrics` serves Prometheus text.
//!
//! Enqueues inside an `atomic_write` are refused with a 400 (`Enqueue operations are not
//! supported by this server.`): Deno's client never sends one, and the protocol has no way
//! to listen to a queue, so a message could never be delivered to a remote client.

mod config;
mod errors;
mod listen;
mod log;
mod metadata;
pub mod metrics;
pub use stampkv_proto as proto;
mod read;
pub mod request;
mod service;
mod watch;
mod write;

pub use config::{database_id_for, Config, ConfigError};
pub use errors::HttpError;
pub use listen::{router, serve, serve_router};
pub use log::log;
pub use metadata::{negotiate_version, rfc3339};
pub use metrics::Metrics;
pub use service::Server;

/// Most ranges one `snapshot_read` may ask for (Deno's `getMany` sends at most 10).
pub const MAX_READ_RANGES: usize = 10;
/// Largest `limit` of one read range (Deno's largest list batch).
pub const MAX_READ_LIMIT: i32 = 1000;
/// Longest encoded key a read range may carry as start or end (Deno's read key limit).
pub const MAX_READ_KEY_BYTES: usize = 2049;
