//! A KV Connect client: a stampkv server, `denokv`, or any other KV Connect database, used
//! from async Rust with the data model's types ([`Key`](stampkv_model::Key),
//! [`KvValue`](stampkv_model::KvValue), [`Versionstamp`](stampkv_model::Versionstamp), ...,
//! from `stampkv_model`, which `stampkv` re-exports). The client does not contain the
//! storage engine.
//!
//! ```no_run
//! use stampkv_model::{key, ListOptions, Selector, Value};
//! use stampkv_client::{ConnectOptions, RemoteKv};
//!
//! # async fn example() -> Result<(), stampkv_client::RemoteError> {
//! let kv = RemoteKv::connect("http://127.0.0.1:4512", ConnectOptions::new("my-access-token")).await?;
//! let versionstamp = kv.set(&key!["users", 42], &Value::from("ada")).await?;
//! let entry = kv.get::<Value>(&key!["users", 42]).await?;
//! assert_eq!(entry.versionstamp, Some(versionstamp));
//! let result = kv
//!     .atomic()
//!     .check(&key!["users", 42], Some(versionstamp))
//!     .sum(&key!["visits"], 1)
//!     .commit()
//!     .await?;
//! assert!(result.ok());
//! let users = kv.list::<Value>(&Selector::prefix(key!["users"]), &ListOptions::default())?.collect().await?;
//! assert_eq!(users.len(), 1);
//! # Ok(())
//! # }
//! ```
//!
//! **Two layers.** The typed layer ([`RemoteKv::get`], [`RemoteKv::get_many`],
//! [`RemoteKv::list`], [`RemoteKv::atomic`], [`RemoteKv::watch`], ...) mirrors
//! `stampkv::Kv` and checks Deno's limits before sending, with Deno's error texts. The raw
//! layer ([`RemoteKv::snapshot_read_raw`], [`RemoteKv::atomic_write_raw`],
//! [`RemoteKv::watch_raw`]) sends and returns the protocol's messages
//! ([`stampkv_kvconnect`]) as they are, for programs that forward them.
//!
//! **Endpoints**, chosen as the `@deno/kv` npm client chooses them: strong reads and atomic
//! writes go to the first `strong` endpoint of the metadata; eventual reads and watches to
//! the first endpoint that is not strong, else to the strong one.
//!
//! **Retries.** 5xx answers and network errors (including a `request_timeout`) are retried
//! with randomized exponential backoff ([`Retry`]); 4xx answers are final
//! ([`RemoteError::Http`] with the server's text).
//!
//! **Metadata** is exchanged again when less than 5 minutes or half its lifetime remain
//! before its `expiresAt`, and at once when a call is answered 401 or 400 `Invalid
//! database id.` (a restarted server hands out a new id); that call is then sent once more.
//!
//! **Not supported:** TLS (`https` URLs are refused; put a TLS-terminating proxy in front
//! or use plain `http` on a trusted network), queues (`enqueue` and `listenQueue`: KV
//! Connect has no way to receive queue messages), following redirects of the metadata URL,
//! and sums of V8 numbers (`sum` takes `KvU64` operands).

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

mod api;
mod atomic;
mod convert;
mod error;
mod list;
mod metadata;
mod options;
mod remote;
mod stats;
mod transport;
mod watch;

pub use atomic::RemoteAtomic;
pub use error::RemoteError;
pub use list::RemoteList;
pub use options::{ConnectOptions, Retry};
pub use remote::RemoteKv;
pub use stampkv_kvconnect as proto;
pub use stats::ClientStats;
pub use watch::{RawWatchStream, WatchStream};
