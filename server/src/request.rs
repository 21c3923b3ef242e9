//! What every request shares: the bearer token check (constant time), the bounded body
//! read, the protocol headers of the data path, protobuf in and out, and the per-request metric.
//!
//! The public functions take the expected token and database id as arguments, so that other
//! KV Connect front ends (a caching edge) check requests exactly as this server does.

use crate::errors::{bad, HttpError};
use crate::service::Server;
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use prost::Message;

/// Checks `authorization: Bearer <token>` in constant time.
pub(crate) fn authorize(server: &Server, headers: &HeaderMap) -> Result<(), HttpError> {
    check_token(&server.config.access_token, headers)
}

/// Checks that `headers` carry `authorization: Bearer <expected>` (compared in constant time):
/// 401 `Malformed authorization header.` or `Invalid access token.` otherwise.
pub fn check_token(expected: &str, headers: &HeaderMap) -> Result<(), HttpError> {
    let unauthorized = |text: &str| HttpError { status: StatusCode::UNAUTHORIZED, text: text.into() };
    let value = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| unauthorized("Malformed authorization header."))?;
    let token =
        value.strip_prefix("Bearer ").ok_or_else(|| unauthorized("Malformed authorization header."))?;
    if constant_time_eq(token.as_bytes(), expected.as_bytes()) {
        Ok(())
    } else {
        Err(unauthorized("Invalid access token."))
    }
}

/// Compares without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, x) in a.iter().enumerate() {
        let y = b.get(i % b.len().max(1)).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

/// Reads the body, at most `max_body_bytes` (413 beyond).
pub(crate) async fn read_body(server: &Server, body: Body) -> Result<Bytes, HttpError> {
    read_limited(body, server.config.max_body_bytes).await
}

/// Reads a request body of at most `max` bytes: 413 beyond.
pub async fn read_limited(body: Body, max: usize) -> Result<Bytes, HttpError> {
    axum::body::to_bytes(body, max).await.map_err(|_| HttpError {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        text: format!("The request body is too large (max {max} bytes)."),
    })
}

pub(crate) fn record(server: &Server, kind: &'static str, result: Result<Response, HttpError>) -> Response {
    let response = result.unwrap_or_else(IntoResponse::into_response);
    server.metrics.request(kind, response.status().as_u16());
    response
}

/// Checks the data path headers; returns the protocol version (1, 2 or 3).
pub(crate) fn data_path(server: &Server, headers: &HeaderMap) -> Result<u8, HttpError> {
    check_data_path(&server.config.access_token, &server.database_id, headers)
}

/// Checks a data path request's token, protocol version header and database id; returns
/// the protocol version (1, 2 or 3). 401 for a bad token, 400 for the rest.
pub fn check_data_path(token: &str, database_id: &str, headers: &HeaderMap) -> Result<u8, HttpError> {
    check_token(token, headers)?;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (version, id) = match (header("x-denokv-version"), header("x-transaction-domain-id")) {
        (Some("2"), _) => (2, header("x-denokv-database-id")),
        (Some("3"), _) => (3, header("x-denokv-database-id")),
        (Some(_), _) => {
            return Err(bad("Unsupported protocol version: the server speaks versions 1, 2 and 3."))
        }
        (None, Some(id)) => (1, Some(id)),
        (None, None) => return Err(bad("Missing x-denokv-version header.")),
    };
    if id != Some(database_id) {
        return Err(bad("Invalid database id."));
    }
    Ok(version)
}

/// Decodes a protobuf request body; an empty or undecodable body is a 400.
pub fn decode<M: Message + Default>(body: &[u8]) -> Result<M, HttpError> {
    if body.is_empty() {
        return Err(bad("The request body is empty."));
    }
    M::decode(body).map_err(|e| bad(format!("The request body is not a valid protobuf message: {e}")))
}

/// A 200 answer carrying `message` as `application/x-protobuf`.
pub fn protobuf(message: &impl Message) -> Response {
    ([(header::CONTENT_TYPE, "application/x-protobuf")], message.encode_to_vec()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_compares() {
        assert!(constant_time_eq(b"abcdefghijkl", b"abcdefghijkl"));
        assert!(!constant_time_eq(b"abcdefghijkl", b"abcdefghijkm"));
        assert!(!constant_time_eq(b"abcdefghijk", b"abcdefghijkl"));
        assert!(!constant_time_eq(b"", b"abcdefghijkl"));
    }
}
