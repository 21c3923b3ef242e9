//! What every request shares: the bearer token check (constant time), the bounded body
//! read, the protocol headers of the data path, and protobuf in and out. The functions take
//! the expected token and database id as arguments: every front end (the server, a caching
//! edge) checks requests the same way.

use super::error::{bad, HttpError};
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use prost::Message;
use std::time::Duration;

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

/// Reads a request body of at most `max` bytes within `timeout`: 413 when `Content-Length`
/// says more (before anything is read) or the body grows beyond `max`, 408 when it does
/// not arrive in time, 400 when it is malformed (a broken chunked encoding, a body shorter
/// than its `Content-Length`).
pub async fn read_limited(
    headers: &HeaderMap,
    body: Body,
    max: usize,
    timeout: Duration,
) -> Result<Bytes, HttpError> {
    let too_large = || HttpError {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        text: format!("The request body is too large (max {max} bytes)."),
    };
    if let Some(length) = headers.get(header::CONTENT_LENGTH) {
        let length = length.to_str().ok().and_then(|l| l.trim().parse::<u64>().ok());
        match length {
            Some(length) if length > u64::try_from(max).unwrap_or(u64::MAX) => return Err(too_large()),
            Some(_) => {}
            None => return Err(bad("The Content-Length header is invalid.")),
        }
    }
    let read = http_body_util::BodyExt::collect(http_body_util::Limited::new(body, max));
    match tokio::time::timeout(timeout, read).await {
        Err(_) => Err(HttpError {
            status: StatusCode::REQUEST_TIMEOUT,
            text: format!("The request body did not arrive within {} ms.", timeout.as_millis()),
        }),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(e)) => Err(bad(format!("The request body could not be read: {e}."))),
    }
}

/// The body of a request whose headers passed `checked` (read with `max` and `timeout` as
/// [`read_limited`] does), or `checked`'s error once the refused request's body has been
/// drained, so that a 401 or 400 leaves a keep-alive connection usable.
pub async fn checked_body<T>(
    checked: Result<T, HttpError>,
    headers: &HeaderMap,
    body: Body,
    max: usize,
    timeout: Duration,
) -> Result<(T, Bytes), HttpError> {
    match checked {
        Ok(value) => Ok((value, read_limited(headers, body, max, timeout).await?)),
        Err(e) => {
            drain(headers, body).await;
            Err(e)
        }
    }
}

/// Reads and discards what is left of a refused request's body (at most 64 KiB, for at
/// most a second), so that an HTTP/1.1 connection stays usable for the next request.
/// A larger or slower body is left: the connection then closes after the answer.
pub async fn drain(headers: &HeaderMap, body: Body) {
    let _ = read_limited(headers, body, 64 << 10, Duration::from_secs(1)).await;
}

/// Checks a data path request's token, protocol version header and database id; returns
/// the protocol version (1, 2 or 3). 401 for a bad token, 400 for the rest.
pub fn check_data_path(token: &str, database_id: &str, headers: &HeaderMap) -> Result<u8, HttpError> {
    check_token(token, headers)?;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (version, id) = match (header("x-denokv-version"), header("x-transaction-domain-id")) {
        (Some("2"), _) => (2, header("x-denokv-database-id")),
        (Some("3"), _) => (3, header("x-denokv-database-id")),
        (Some(other), _) => {
            return Err(bad(format!(
                "Unsupported protocol version {other:?} in x-denokv-version: this server takes 2 or 3 there \
                 (protocol version 1 sends no x-denokv-version header)."
            )))
        }
        (None, Some(id)) => (1, Some(id)),
        (None, None) => return Err(bad("Missing x-denokv-version header.")),
    };
    if id != Some(database_id) {
        return Err(bad("Invalid database id."));
    }
    Ok(version)
}

/// Decodes a protobuf request body; an undecodable body is a 400. An empty body is the
/// message with every field at its default (what an empty `getMany`, `atomic().commit()`
/// or `watch` encodes to), as protobuf says.
pub fn decode<M: Message + Default>(body: &[u8]) -> Result<M, HttpError> {
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
