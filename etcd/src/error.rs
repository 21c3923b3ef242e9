//! etcd's errors as the store reports them, and which of them leave a commit's outcome
//! unknown.

use stampkv::{KvError, StorageError, StorageErrorKind};
use tonic::Code;

/// What a failed etcd call says about a write it carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteOutcome {
    /// etcd refused the request before applying it (a limit, the storage quota, an
    /// endpoint that could not be reached at all): nothing was applied.
    NotApplied,
    /// The request may or may not have been applied (a transport failure or a timeout
    /// after it was sent, a leader change): the commit must be settled.
    Unknown,
}

/// Whether a failed write call may have been applied.
pub(crate) fn write_outcome(error: &etcd_client::Error) -> WriteOutcome {
    match error {
        etcd_client::Error::GRpcStatus(status) => match status.code() {
            Code::InvalidArgument
            | Code::ResourceExhausted
            | Code::FailedPrecondition
            | Code::PermissionDenied
            | Code::Unauthenticated
            | Code::OutOfRange
            | Code::Unimplemented => WriteOutcome::NotApplied,
            // A balanced channel fails a call to a dead member at once, before sending it.
            Code::Unavailable if never_sent(status.message()) => WriteOutcome::NotApplied,
            _ => WriteOutcome::Unknown,
        },
        etcd_client::Error::InvalidArgs(_) | etcd_client::Error::InvalidUri(_) => WriteOutcome::NotApplied,
        _ => WriteOutcome::Unknown,
    }
}

/// Whether a call failed while connecting, so it never reached etcd.
fn never_sent(message: &str) -> bool {
    message.contains("tcp connect error")
        || message.contains("Connection refused")
        || message.contains("error trying to connect")
}

/// The text etcd answers when its storage quota is used up.
const NO_SPACE: &str = "database space exceeded";

/// A [`KvError`] for a failed etcd call made while doing `what`.
pub(crate) fn storage_error(what: &str, error: etcd_client::Error) -> KvError {
    let kind = match &error {
        etcd_client::Error::GRpcStatus(status) => match status.code() {
            Code::ResourceExhausted if status.message().contains(NO_SPACE) => StorageErrorKind::QuotaExceeded,
            Code::InvalidArgument | Code::OutOfRange => StorageErrorKind::InvalidArgument,
            Code::PermissionDenied | Code::Unauthenticated => StorageErrorKind::Other,
            _ => StorageErrorKind::Unavailable,
        },
        _ => StorageErrorKind::Unavailable,
    };
    KvError::Storage(StorageError::new(kind, format!("etcd: {what}: {error}")))
}

/// A [`KvError`] of `kind` with `message`.
pub(crate) fn error(kind: StorageErrorKind, message: impl Into<String>) -> KvError {
    KvError::Storage(StorageError::new(kind, message.into()))
}
