//! A caching KV Connect edge, in the manner of Cloudflare Workers KV's points of presence:
//! eventual reads are answered from memory, close to the clients, while the data lives in
//! one primary (`stampkv serve`, or any KV Connect service).
//!
//! - **Endpoints.** The metadata exchange lists two endpoints, both on the edge: a strong one
//!   (`/v2`), which forwards reads and atomic writes to the upstream, and an eventual one
//!   (`/eventual`), which answers reads from the cache with `read_is_strongly_consistent =
//!   false`. `@deno/kv` sends `consistency: "eventual"` reads and watches to the eventual
//!   endpoint; Deno's built-in client uses only the strong one, so it stays correct, only not
//!   accelerated.
//! - **Cache.** Each read range is cached with its answer, found or not (negative caching),
//!   for `cache_ttl`; a `get` of a key is one entry whatever its limit. Memory is bounded by
//!   `max_memory` with SIEVE eviction ([`cache`]). Answers read again after `refresh_ahead`
//!   of the TTL are refreshed in the background while the cached copy is served. Concurrent
//!   misses of one range share one upstream read.
//! - **Writes through the edge** are forwarded and, once committed, drop the cached entries of
//!   the keys they touched, so the next read at this edge sees the write.
//! - **Push mode** subscribes upstream (`watch`) to cached keys: changes arrive as they are
//!   committed, and a key under a live subscription stays fresh beyond the TTL.
//! - **Watch fan-out.** Every client watching the same keys at an edge shares one upstream
//!   watch stream.
//! - **Tiers.** An edge's upstream may be another edge: local edges in front of a regional one
//!   in front of the primary.
//! - **Upstream down.** Fresh entries are served as usual; expired ones are served for up to
//!   `stale_if_error` longer (counted); a miss is a 503 saying the upstream is unreachable.

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

pub mod cache;
mod config;
mod fill;
pub mod invalidations;
mod listen;
mod metadata;
pub mod metrics;
mod push;
mod read;
mod read_path;
mod respond;
mod service;
mod store;
mod upstream;
mod watch;
mod watch_hub;
mod wire;
mod write;

pub use config::EdgeConfig;
pub use listen::{router, serve};
pub use service::{Edge, EdgeError};
