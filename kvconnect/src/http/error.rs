//! Error answers: a status and a plain-text body.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

/// An error answer: a status and a plain-text body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    /// The status.
    pub status: StatusCode,
    /// The body.
    pub text: String,
}

/// A 400 with `text`.
pub fn bad(text: impl Into<String>) -> HttpError {
    HttpError::bad(text)
}

/// The reference server's 503.
pub fn unavailable() -> HttpError {
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

/// The 404 answer of every front end.
pub async fn not_found() -> HttpError {
    HttpError { status: StatusCode::NOT_FOUND, text: "Resource not found.".into() }
}

/// The 405 answer of every front end.
pub async fn method_not_allowed() -> HttpError {
    HttpError { status: StatusCode::METHOD_NOT_ALLOWED, text: "Method not allowed.".into() }
}
