//! What every front end's metadata exchange shares: version negotiation, the host of a
//! protocol-1 endpoint, and the dates of the answer.

use super::error::{bad, HttpError};
use axum::http::{header, HeaderMap};
use std::time::{SystemTime, UNIX_EPOCH};

/// The host of a protocol-1 endpoint URL, from the `Host` header: it must be a plain
/// authority (a host name or address and an optional port, no user info, path or spaces),
/// so that the URL handed back cannot point anywhere the client did not ask for.
pub fn version1_host(headers: &HeaderMap) -> Result<String, HttpError> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .ok_or_else(|| bad("Protocol version 1 needs a host header."))?;
    let authority: axum::http::uri::Authority =
        host.parse().map_err(|_| bad("The host header is not a valid host name and port."))?;
    let plain = authority.as_str().len() == host.len()
        && !host.contains('@')
        && !authority.host().is_empty()
        && host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']' | '_'));
    if !plain {
        return Err(bad("The host header is not a valid host name and port."));
    }
    Ok(authority.as_str().to_string())
}

/// Picks the protocol version for a metadata exchange request body
/// (`{"supportedVersions":[...]}`): the highest of 3, 2 and 1 offered, or a 400 with the
/// reference server's texts.
pub fn negotiate_version(body: &[u8]) -> Result<u64, HttpError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(bad("The server requires at least protocol version 2. Use Deno 1.38.0 or newer."));
    }
    let request: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| bad(format!("Invalid metadata exchange request: {e}")))?;
    let offered = request
        .get("supportedVersions")
        .and_then(|v| v.as_array())
        .ok_or_else(|| bad("Invalid metadata exchange request: missing supportedVersions"))?;
    [3u64, 2, 1]
        .into_iter()
        .find(|v| offered.iter().any(|o| o.as_u64() == Some(*v)))
        .ok_or_else(|| {
            bad("The server could not negotiate a protocol version. The server requires protocol version 1, 2 or 3.")
        })
}

/// Formats a time as RFC 3339 in UTC with milliseconds (`2024-02-29T23:59:59.123Z`); a
/// time before the Unix epoch is shown as the epoch.
pub fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_millis(time.max(UNIX_EPOCH)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn version1_hosts_must_be_plain_authorities() {
        let host = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, value.parse().unwrap_or(axum::http::HeaderValue::from_static("x")));
            version1_host(&headers).map_err(|e| e.text)
        };
        assert_eq!(host("127.0.0.1:4512").as_deref(), Ok("127.0.0.1:4512"));
        assert_eq!(host("[::1]:80").as_deref(), Ok("[::1]:80"));
        assert_eq!(host("kv.example").as_deref(), Ok("kv.example"));
        for bad_host in ["user@evil.example", "evil.example/x", "a b", "evil.example?x", ""] {
            assert!(host(bad_host).is_err(), "{bad_host:?} is refused");
        }
    }

    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_709_251_199_123);
        assert_eq!(rfc3339(t), "2024-02-29T23:59:59.123Z");
    }
}
