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

mod atomic;
mod base64;
mod bigint;
pub mod bulk;
mod db;
pub mod engine;
mod entry;
mod error;
pub mod key;
mod limits;
mod list;
mod queue;
pub mod remote;
pub mod value;
mod versionstamp;
mod watch;

pub use atomic::{AtomicOperation, Check, CommitResult, Mutation, MutationKind};
pub use bigint::KvBigInt;
pub use bigint::{ParseBigIntError, TryFromBigIntError};
pub use bulk::{BulkEntry, BulkSnapshot, QueuedMessage, Restore, RestoreSummary};
pub use db::{Kv, KvOptions, SetOptions};
pub use engine::{KvEngine, ManualClock, SyncMode};
pub use entry::{FromKvValue, KvEntry, KvEntryMaybe, ToKvValue};
pub use error::KvError;
pub use key::{Key, KeyError, KeyPart};
pub use limits::Limits;
pub use list::{Consistency, ListIter, ListOptions, Selector};
pub use queue::{EnqueueOptions, ListenOptions, QueueListener, QueueMessage, DEFAULT_BACKOFF_MS};
pub use value::{KvValue, SumError, Value, ValueError};
pub use versionstamp::{InvalidVersionstamp, Versionstamp};
pub use watch::{Watch, WatchPoll};
