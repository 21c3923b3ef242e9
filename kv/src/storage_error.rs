//! The engine's errors as the data model's [`KvError`]s.

use crate::{KvError, StorageError, StorageErrorKind};
use stampkv_engine::Error;

/// Converts an engine error: a closed engine is [`KvError::Closed`], anything else a
/// [`KvError::Storage`] of the matching kind, with the engine's error inside.
pub(crate) fn from_engine(error: Error) -> KvError {
    let kind = match &error {
        Error::Closed => return KvError::Closed,
        Error::Io { .. } => StorageErrorKind::Io,
        Error::Corruption { .. } => StorageErrorKind::Corruption,
        Error::Locked { .. } => StorageErrorKind::Locked,
        Error::InvalidArgument(_) => StorageErrorKind::InvalidArgument,
        _ => StorageErrorKind::Other,
    };
    KvError::Storage(StorageError::new(kind, error))
}
