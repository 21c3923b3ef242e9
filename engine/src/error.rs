//! The engine's error type.

use std::fmt;
use std::io;

/// Result alias of the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the engine.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An I/O error, with what was being done.
    Io {
        /// The operation and file.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
    /// Stored data failed a checksum or structure check. Never returned as data.
    Corruption {
        /// The damaged file.
        file: String,
        /// Byte offset of the damage, when known.
        offset: Option<u64>,
        /// What was wrong.
        reason: String,
    },
    /// A file written by an unknown format version.
    Unsupported(String),
    /// Another open database holds the directory's lock.
    Locked {
        /// The database directory.
        path: String,
        /// The process holding the lock for writing, if it is known and still running.
        holder: Option<u32>,
    },
    /// The caller passed something the engine cannot accept.
    InvalidArgument(String),
    /// A write, sync or background job failed earlier; the database accepts no more writes
    /// (reads still work). Reopen it to recover from the last durable state.
    Poisoned {
        /// The first failure.
        reason: String,
    },
    /// The database was closed.
    Closed,
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        Error::Io { context: context.into(), source }
    }

    pub(crate) fn corruption(
        file: impl Into<String>,
        offset: Option<u64>,
        reason: impl Into<String>,
    ) -> Self {
        Error::Corruption { file: file.into(), offset, reason: reason.into() }
    }

    /// Whether this is a corruption error.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { context, source } => write!(f, "I/O error while {context}: {source}"),
            Error::Corruption { file, offset: Some(offset), reason } => {
                write!(f, "corruption in {file} at offset {offset}: {reason}")
            }
            Error::Corruption { file, offset: None, reason } => write!(f, "corruption in {file}: {reason}"),
            Error::Unsupported(what) => write!(f, "unsupported format: {what}"),
            Error::Locked { path, holder: Some(pid) } => {
                write!(f, "database {path} is already open (its LOCK is held by process {pid})")
            }
            Error::Locked { path, holder: None } => {
                write!(f, "database {path} is already open (its LOCK is held by this or another process)")
            }
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::Poisoned { reason } => {
                write!(f, "database refuses writes after an earlier failure: {reason}")
            }
            Error::Closed => write!(f, "database is closed"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<stampkv_wal::WalError> for Error {
    fn from(e: stampkv_wal::WalError) -> Self {
        use stampkv_wal::WalError;
        match e {
            WalError::Corruption { file, offset, reason } => {
                Error::Corruption { file, offset: Some(offset), reason }
            }
            WalError::Io(source) => Error::io("writing the write-ahead log", source),
            WalError::Poisoned => Error::Poisoned { reason: "the write-ahead log failed earlier".into() },
            WalError::Closed => Error::Closed,
            e @ (WalError::RecordTooLarge { .. } | WalError::SegmentFull { .. }) => {
                Error::InvalidArgument(e.to_string())
            }
            e @ WalError::Unsupported { .. } => Error::Unsupported(e.to_string()),
        }
    }
}

impl From<stampkv_sstable::TableError> for Error {
    fn from(e: stampkv_sstable::TableError) -> Self {
        use stampkv_sstable::TableError;
        match e {
            TableError::Corruption { file, offset, reason } => {
                Error::Corruption { file, offset: Some(offset), reason }
            }
            TableError::Io(source) => Error::io("reading a table", source),
            other => Error::Unsupported(other.to_string()),
        }
    }
}
