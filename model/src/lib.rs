//! Deno KV's data model, without storage and without I/O: tuple keys and their encoding
//! (byte-identical to Deno's), values (the V8 serialization, `KvU64`, bytes), bigints,
//! versionstamps, the limits and their error texts, list selectors and cursors, and the
//! entries reads return.
//!
//! The embedded database (`stampkv`), the KV Connect client and server, the edge and the
//! command line all take these types from here; `stampkv` re-exports them, so library
//! users depend on `stampkv` alone.
//!
//! ```
//! use stampkv_model::{key, Key, KvValue};
//!
//! let encoded = key!["users", 42].encode()?;
//! assert_eq!(Key::decode(&encoded)?, key!["users", 42]);
//! assert_eq!(KvValue::decode_stored(&KvValue::Bytes(vec![1]).encode_stored())?, KvValue::Bytes(vec![1]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

mod bigint;
pub mod civil;
mod entry;
mod error;
pub mod inspect;
pub mod key;
mod limits;
mod options;
pub mod select;
pub mod value;
mod versionstamp;

pub use bigint::{KvBigInt, ParseBigIntError, TryFromBigIntError};
pub use entry::{FromKvValue, KvEntry, KvEntryMaybe, ToKvValue};
pub use error::{KvError, StorageError, StorageErrorKind};
pub use key::{Key, KeyError, KeyPart};
pub use limits::Limits;
pub use options::{CommitResult, SetOptions};
pub use select::{Consistency, ListOptions, Selector};
pub use value::{KvValue, SumError, Value, ValueError};
pub use versionstamp::{InvalidVersionstamp, Versionstamp};
