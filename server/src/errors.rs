//! The mapping from database errors to error answers, and the bridge that runs blocking database calls off the async runtime.

use crate::backend::ServedStore;
use crate::service::Server;
use axum::http::StatusCode;
use stampkv::{KvError, StorageErrorKind};

/// The answer (a 400: final, never retried) to a write while the store's quota is used up.
pub(crate) const QUOTA_EXCEEDED: &str = "database storage quota exceeded";
pub(crate) use stampkv_kvconnect::http::{bad, unavailable, HttpError};

/// The answer to a `KvError` from the database: the reference server's texts for the
/// limits, Deno's text (a 400) for everything the request did wrong, 503 once closed or
/// while the store is out of reach (nothing applied: a retry is safe), a 400 while its
/// quota is used up, 500 for the rest. A commit whose outcome is unknown never gets here
/// (see `write.rs`).
pub(crate) fn kv_error(e: KvError) -> HttpError {
    match e {
        KvError::Closed => unavailable(),
        KvError::Storage(e) if e.kind() == StorageErrorKind::Unavailable => {
            // Nothing was applied: the client may retry (Deno's clients retry a 5xx).
            tracing::warn!(error = %e, "store unavailable");
            unavailable()
        }
        KvError::Storage(e) if e.kind() == StorageErrorKind::QuotaExceeded => {
            tracing::warn!(error = %e, "storage quota exceeded");
            bad(QUOTA_EXCEEDED)
        }
        KvError::Storage(e) => {
            tracing::error!(error = %e, kind = ?e.kind(), "storage error");
            HttpError { status: StatusCode::INTERNAL_SERVER_ERROR, text: "Internal server error.".into() }
        }
        KvError::TooManyChecks { .. } => bad("Too many checks included in atomic write."),
        KvError::TooManyMutations { .. } => bad("Too many mutations / enqueues included in atomic write."),
        KvError::KeyTooLargeForWrite { .. } | KvError::KeyTooLargeForRead { .. } => {
            bad("A key exceeds the key size limit.")
        }
        KvError::ValueTooLarge { .. } => bad("A value exceeds the value size limit."),
        KvError::TotalMutationSizeTooLarge { .. } | KvError::TotalKeySizeTooLarge { .. } => {
            bad("The total size of the atomic write is too large.")
        }
        KvError::TooManyWatchedKeys { .. } => bad(stampkv_kvconnect::http::TOO_MANY_WATCHED_KEYS),
        other => bad(other.to_string()),
    }
}

/// Runs a blocking database call off the async runtime, when one of the server's turns
/// for blocking work is free (at most `max_blocking` run at once; the rest wait).
pub(crate) async fn blocking<S: ServedStore, T: Send + 'static>(
    server: &Server<S>,
    f: impl FnOnce() -> Result<T, HttpError> + Send + 'static,
) -> Result<T, HttpError> {
    let Ok(turn) = server.blocking.clone().acquire_owned().await else {
        return Err(unavailable());
    };
    let result = tokio::task::spawn_blocking(move || {
        let _turn = turn;
        f()
    })
    .await;
    match result {
        Ok(result) => result,
        Err(e) => {
            tracing::error!(error = %e, "blocking task failed");
            Err(HttpError {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                text: "Internal server error.".into(),
            })
        }
    }
}
