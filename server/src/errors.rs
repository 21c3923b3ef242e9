//! Error answers (status and plain-text body), the mapping from database errors, and the
//! bridge that runs blocking database calls off the async runtime.

use crate::service::Server;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use stampkv::KvError;

/// An error answer: a status and a plain-text body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    /// The status.
    pub status: StatusCode,
    /// The body.
    pub text: String,
}

pub(crate) fn bad(text: impl Into<String>) -> HttpError {
    HttpError::bad(text)
}

pub(crate) fn unavailable() -> HttpError {
    HttpError::unavailable()
}

impl HttpError {
    /// A 400 with `text`.
    pub fn bad(text: impl Into<String>) -> HttpError {
        HttpError { status: StatusCode::BAD_REQUEST, text: text.into() }
    }

    /// The reference server's 503: `The server is temporarially unavailable, try again later.`
    pub fn unavailable() -> HttpError {
        HttpError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            text: "The server is temporarially unavailable, try again later.".into(),
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        (self.status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], self.text).into_response()
    }
}

/// The answer to a `KvError` from the database: the reference server's texts for the
/// limits, Deno's text (a 400) for everything the request did wrong, 503 once closed.
pub(crate) fn kv_error(e: KvError) -> HttpError {
    match e {
        KvError::Closed => unavailable(),
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
        KvError::TooManyWatchedKeys { .. } => bad(crate::watch::TOO_MANY_WATCHED_KEYS),
        other => bad(other.to_string()),
    }
}

/// Runs a blocking database call off the async runtime, when one of the server's turns
/// for blocking work is free (at most `max_blocking` run at once; the rest wait).
pub(crate) async fn blocking<T: Send + 'static>(
    server: &Server,
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
