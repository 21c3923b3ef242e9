//! Errors of the Deno KV layer. `Display` gives Deno's exact message for every error Deno
//! has, and [`KvError::js_class`] the JavaScript error class Deno throws.

use crate::{KeyError, ValueError};
use std::fmt;

/// Everything a stampkv operation can fail with.
#[derive(Debug)]
#[non_exhaustive]
pub enum KvError {
    /// A write, check or delete of the empty key.
    EmptyKey,
    /// A key written, deleted or checked is too large.
    KeyTooLargeForWrite {
        /// The limit in bytes.
        max: usize,
    },
    /// A key read (or a range end) is too large.
    KeyTooLargeForRead {
        /// The limit in bytes.
        max: usize,
    },
    /// A value is too large.
    ValueTooLarge {
        /// The limit in bytes.
        max: usize,
    },
    /// Too many keys in one `get_many`.
    TooManyRanges {
        /// The limit.
        max: usize,
    },
    /// A list batch size over the limit.
    TooManyEntries {
        /// The limit.
        max: usize,
    },
    /// Too many checks in one atomic operation.
    TooManyChecks {
        /// The limit.
        max: usize,
    },
    /// Too many mutations and enqueues in one atomic operation.
    TooManyMutations {
        /// The limit.
        max: usize,
    },
    /// The keys and values of one atomic operation are too large.
    TotalMutationSizeTooLarge {
        /// The limit in bytes.
        max: usize,
    },
    /// The keys of one atomic operation are too large.
    TotalKeySizeTooLarge {
        /// The limit in bytes.
        max: usize,
    },
    /// Too many keys watched at once.
    TooManyWatchedKeys {
        /// The limit.
        max: usize,
    },
    /// A check whose versionstamp is not 20 hex characters, or whose key cannot be encoded
    /// (Deno reports both as `Invalid check`).
    InvalidCheck,
    /// A mutation that makes no sense (the text after `Invalid mutation: `).
    InvalidMutation(String),
    /// A mutation whose key cannot be encoded: `Invalid mutation: ` and the key's error
    /// (a bigint part over 255 bytes: `Invalid mutation: BigUint requires more than 255
    /// bytes to be represented`), as Deno reports it for `set`, `delete`, `sum`, ....
    InvalidMutationKey(KeyError),
    /// An `expire_in` that is not a whole number of milliseconds (Deno's `expireIn` must be
    /// a non-negative integer): `expireIn must be a non-negative integer: received 1.5`.
    InvalidExpireIn {
        /// The value given, in milliseconds, as JavaScript prints it (`1.5`).
        received: String,
    },
    /// A sum/min/max on a stored value that is not a `KvU64`.
    NonU64Value {
        /// `sum`, `min` or `max`.
        operation: &'static str,
    },
    /// A min/max whose operand is not a `KvU64`.
    NonU64Operand {
        /// `min` or `max`.
        operation: &'static str,
    },
    /// A sum on V8 numbers failed (Deno's text).
    Sum(String),
    /// A list selector or option Deno rejects (Deno's text).
    InvalidList(&'static str),
    /// A list cursor that is not valid base64 of a key suffix.
    InvalidCursor,
    /// A list cursor pointing outside the selector's range.
    CursorOutOfBounds,
    /// `cursor()` of a list iterator before its first `next()`.
    CursorBeforeFirstIteration,
    /// A list limit of zero.
    InvalidLimit {
        /// The value given.
        received: usize,
    },
    /// A list batch size of zero.
    InvalidBatchSize {
        /// The value given.
        received: usize,
    },
    /// An enqueue Deno refuses when it is built (its text): the delay or the backoff
    /// schedule.
    InvalidEnqueue(String),
    /// An enqueue whose `keys_if_undelivered` holds a key that cannot be encoded (a bigint
    /// part over 255 bytes): Deno's `Invalid enqueue`, with the key's error as the source.
    /// Reported at commit, after malformed checks and mutations.
    InvalidEnqueueKey(KeyError),
    /// An enqueue payload over the limit: `enqueue payload too large (max 65536 bytes)`.
    /// Reported at commit, after the key and value sizes of the mutations.
    EnqueuePayloadTooLarge {
        /// The limit in bytes.
        max: usize,
    },
    /// `listen_queue` on a closed database.
    QueueClosed,
    /// A key that cannot be encoded or a stored key that cannot be decoded.
    Key(KeyError),
    /// A value that cannot be encoded or decoded.
    Value(ValueError),
    /// The store under the database failed (I/O, corruption, a lock held elsewhere, ...).
    Storage(StorageError),
    /// The database was closed.
    Closed,
    /// A restore (`stampkv::Kv::restore`) given entries or messages it cannot take, or
    /// that cannot be installed (the text says why).
    InvalidRestore(String),
}

impl KvError {
    /// The JavaScript error class Deno throws for this error (`TypeError`, `RangeError` or
    /// `Error`).
    pub fn js_class(&self) -> &'static str {
        match self {
            KvError::CursorBeforeFirstIteration
            | KvError::InvalidLimit { .. }
            | KvError::InvalidBatchSize { .. } => "Error",
            KvError::Storage(_) | KvError::Closed | KvError::QueueClosed | KvError::InvalidRestore(_) => {
                "Error"
            }
            _ => "TypeError",
        }
    }
}

impl fmt::Display for KvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvError::EmptyKey => f.write_str("key cannot be empty"),
            KvError::KeyTooLargeForWrite { max } => write!(f, "Key too large for write (max {max} bytes)"),
            KvError::KeyTooLargeForRead { max } => write!(f, "Key too large for read (max {max} bytes)"),
            KvError::ValueTooLarge { max } => write!(f, "Value too large (max {max} bytes)"),
            KvError::TooManyRanges { max } => write!(f, "Too many ranges (max {max})"),
            KvError::TooManyEntries { max } => write!(f, "Too many entries (max {max})"),
            KvError::TooManyChecks { max } => write!(f, "Too many checks (max {max})"),
            KvError::TooManyMutations { max } => write!(f, "Too many mutations (max {max})"),
            KvError::TotalMutationSizeTooLarge { max } => {
                write!(f, "Total mutation size too large (max {max} bytes)")
            }
            KvError::TotalKeySizeTooLarge { max } => write!(f, "Total key size too large (max {max} bytes)"),
            KvError::TooManyWatchedKeys { max } => write!(f, "Too many keys (max {max})"),
            KvError::InvalidCheck => f.write_str("Invalid check"),
            KvError::InvalidMutation(what) => write!(f, "Invalid mutation: {what}"),
            KvError::InvalidMutationKey(e) => write!(f, "Invalid mutation: {e}"),
            KvError::InvalidExpireIn { received } => {
                write!(f, "expireIn must be a non-negative integer: received {received}")
            }
            KvError::NonU64Value { operation } => {
                write!(f, "Failed to perform '{operation}' mutation on a non-U64 value in the database")
            }
            KvError::NonU64Operand { operation } => {
                write!(f, "Failed to perform '{operation}' mutation on a non-U64 operand")
            }
            KvError::Sum(text) => f.write_str(text),
            KvError::InvalidList(text) => f.write_str(text),
            KvError::InvalidCursor => f.write_str("invalid cursor"),
            KvError::CursorOutOfBounds => f.write_str("cursor out of bounds"),
            KvError::CursorBeforeFirstIteration => f.write_str("Cannot get cursor before first iteration"),
            KvError::InvalidLimit { received } => {
                write!(f, "Limit must be a positive integer: received {received}")
            }
            KvError::InvalidBatchSize { received } => {
                write!(f, "batchSize must be a positive integer: received {received}")
            }
            KvError::Key(e) => write!(f, "{e}"),
            KvError::Value(e) => write!(f, "{e}"),
            KvError::Storage(e) => write!(f, "{e}"),
            KvError::Closed => f.write_str("the database is closed"),
            KvError::InvalidEnqueue(text) => f.write_str(text),
            KvError::InvalidEnqueueKey(_) => f.write_str("Invalid enqueue"),
            KvError::EnqueuePayloadTooLarge { max } => {
                write!(f, "enqueue payload too large (max {max} bytes)")
            }
            KvError::QueueClosed => f.write_str("Queue already closed"),
            KvError::InvalidRestore(text) => f.write_str(text),
        }
    }
}

impl std::error::Error for KvError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KvError::Key(e) | KvError::InvalidMutationKey(e) | KvError::InvalidEnqueueKey(e) => Some(e),
            KvError::Value(e) => Some(e),
            KvError::Storage(e) => Some(e),
            _ => None,
        }
    }
}

impl From<KeyError> for KvError {
    fn from(e: KeyError) -> Self {
        KvError::Key(e)
    }
}

impl From<ValueError> for KvError {
    fn from(e: ValueError) -> Self {
        KvError::Value(e)
    }
}

impl From<StorageError> for KvError {
    fn from(e: StorageError) -> Self {
        KvError::Storage(e)
    }
}

/// A failure of the store under a database, with the store's own error inside (reach it
/// with [`StorageError::downcast_ref`] or [`std::error::Error::source`]).
#[derive(Debug)]
pub struct StorageError {
    kind: StorageErrorKind,
    source: Box<dyn std::error::Error + Send + Sync + 'static>,
}

/// What kind of store failure a [`StorageError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StorageErrorKind {
    /// Reading or writing the store's files (or its network) failed.
    Io,
    /// Stored data failed its checksum or does not parse.
    Corruption,
    /// Another process holds the store.
    Locked,
    /// The store refused an argument (a bad option, a restore it cannot take).
    InvalidArgument,
    /// The store is out of reach for now (a cluster without a quorum, a timeout). A commit
    /// failing with it was not applied (an unknown outcome is [`OutcomeUnknown`]), so it
    /// may be retried.
    ///
    /// [`OutcomeUnknown`]: StorageErrorKind::OutcomeUnknown
    Unavailable,
    /// The database is open read-only and the operation would write.
    ReadOnly,
    /// The store's storage quota is used up: writes fail until space is freed, reads work.
    QuotaExceeded,
    /// A commit was sent but whether it was applied could not be learned in time (a
    /// networked store that lost its cluster). Retrying it may apply it twice.
    OutcomeUnknown,
    /// Anything else.
    Other,
}

impl StorageError {
    /// A store failure of `kind` caused by `source`.
    pub fn new(
        kind: StorageErrorKind,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        StorageError { kind, source: source.into() }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> StorageErrorKind {
        self.kind
    }

    /// The store's own error, if it is a `T`.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.source.downcast_ref::<T>()
    }
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.source, f)
    }
}

impl std::error::Error for StorageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}
