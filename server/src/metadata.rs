//! The metadata exchange (`POST /`): version negotiation, database id, endpoints, expiry.

use crate::errors::{bad, HttpError};
use crate::request::{authorize, read_body, record};
use crate::service::Server;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub(crate) async fn metadata(State(server): State<Arc<Server>>, headers: HeaderMap, body: Body) -> Response {
    let result = metadata_inner(&server, &headers, body).await;
    record(&server, "metadata", result)
}

async fn metadata_inner(server: &Server, headers: &HeaderMap, body: Body) -> Result<Response, HttpError> {
    authorize(server, headers)?;
    let body = read_body(server, body).await?;
    let version = negotiate_version(&body)?;
    let url = if version == 1 {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .ok_or_else(|| bad("Protocol version 1 needs a host header."))?;
        format!("http://{host}/v2")
    } else {
        "/v2".to_string()
    };
    let expires_at = SystemTime::now() + Duration::from_secs(24 * 3600);
    let body = serde_json::json!({
        "version": version,
        "databaseId": server.database_id,
        "endpoints": [{ "url": url, "consistency": "strong" }],
        "token": server.config.access_token,
        "expiresAt": rfc3339(expires_at),
    });
    Ok(([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response())
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

/// Formats a time as RFC 3339 in UTC with milliseconds.
pub fn rfc3339(time: SystemTime) -> String {
    let ms = time.duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    let secs = i64::try_from(ms / 1000).unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_709_251_199_123);
        assert_eq!(rfc3339(t), "2024-02-29T23:59:59.123Z");
    }
}
