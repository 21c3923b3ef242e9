//! stampkv: an embedded, crash-safe key-value database with the data model and transaction
//! semantics of Deno KV, on stampkv's own log-structured storage engine.
//!
//! ```
//! use stampkv::{key, Kv, KvOptions, KvValue, Value};
//!
//! let kv = Kv::open_in_memory(KvOptions::default())?;
//! let versionstamp = kv.set(&key!["users", 42], &Value::from("ada"))?;
//! let entry = kv.get::<Value>(&key!["users", 42])?;
//! assert_eq!(entry.value, Some(Value::from("ada")));
//! assert_eq!(entry.versionstamp, Some(versionstamp));
//! let result = kv
//!     .atomic()
//!     .check(&key!["users", 42], Some(versionstamp))
//!     .sum(&key!["visits"], 1)
//!     .commit()?;
//! assert!(result.ok());
//! # Ok::<(), stampkv::KvError>(())
//! ```
//!
//! See `../shared/SPEC.md` for the contract and DESIGN.md for how it maps onto the engine.

#![forbid(unsafe_code)]

mod atomic;
pub mod bulk;
mod db;
pub mod engine;
mod entry;
mod list;
mod queue;
pub mod remote;
mod shared;
mod storage_error;
pub mod store;
mod watch;

pub use stampkv_model::{inspect, key, select, value};

pub use atomic::{AtomicOperation, Check, Mutation, MutationKind};
pub use bulk::{BulkEntry, BulkSnapshot, QueuedMessage, Restore, RestoreSummary};
pub use db::{Kv, KvOptions};
pub use engine::{KvEngine, ManualClock, SyncMode};
pub use list::ListIter;
pub use queue::{EnqueueOptions, ListenOptions, QueueListener, QueueMessage, DEFAULT_BACKOFF_MS};
pub use stampkv_model::{
    CommitResult, Consistency, FromKvValue, InvalidVersionstamp, Key, KeyError, KeyPart, KvBigInt, KvEntry,
    KvEntryMaybe, KvError, KvValue, Limits, ListOptions, ParseBigIntError, Selector, SetOptions,
    StorageError, StorageErrorKind, SumError, ToKvValue, TryFromBigIntError, Value, ValueError, Versionstamp,
};
pub use store::ForeignCommitSink;
pub use watch::{Watch, WatchPoll};
