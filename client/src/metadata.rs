//! The metadata exchange's answer: the protocol version, database id, token, endpoints
//! (resolved to absolute URLs) and the time to refresh it.

use crate::RemoteError;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use url::Url;

/// The protocol versions this client speaks, sent as `supportedVersions`.
pub(crate) const SUPPORTED_VERSIONS: [u8; 3] = [1, 2, 3];

/// Refresh at the latest this long before `expiresAt`.
const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);

/// A parsed metadata exchange answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Metadata {
    /// The negotiated protocol version (1, 2 or 3).
    pub version: u8,
    /// The database id, sent with every data path call.
    pub database_id: String,
    /// The bearer token of the data path.
    pub token: String,
    /// The first strong endpoint: strong reads and atomic writes go there.
    pub strong: String,
    /// The first endpoint that is not strong, if any: eventual reads and watches go there.
    pub eventual: Option<String>,
    /// When to exchange the metadata again.
    pub refresh_at: Instant,
}

impl Metadata {
    /// Parses an answer received at `now` (`now_wall` on the wall clock) from the metadata
    /// URL `base`.
    pub(crate) fn parse(
        body: &[u8],
        base: &Url,
        now: Instant,
        now_wall: SystemTime,
    ) -> Result<Metadata, RemoteError> {
        let invalid = |what: String| RemoteError::Metadata(format!("invalid answer: {what}"));
        let json: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| invalid(format!("not JSON ({e})")))?;
        let field = |name: &str| json.get(name).ok_or_else(|| invalid(format!("no `{name}`")));
        let text = |name: &str| -> Result<String, RemoteError> {
            field(name)?
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| invalid(format!("`{name}` is not a string")))
        };
        let version =
            field("version")?.as_u64().ok_or_else(|| invalid("`version` is not a number".into()))?;
        let version =
            u8::try_from(version).ok().filter(|v| SUPPORTED_VERSIONS.contains(v)).ok_or_else(|| {
                RemoteError::Metadata(format!("unsupported KV Connect metadata version {version}"))
            })?;
        let database_id = text("databaseId")?;
        let token = text("token")?;
        let expires_at = parse_rfc3339(&text("expiresAt")?)
            .ok_or_else(|| invalid("`expiresAt` is not an RFC 3339 time".into()))?;
        let endpoints =
            field("endpoints")?.as_array().ok_or_else(|| invalid("`endpoints` is not an array".into()))?;
        let (mut strong, mut eventual) = (None, None);
        for endpoint in endpoints {
            let url = endpoint
                .get("url")
                .and_then(|u| u.as_str())
                .ok_or_else(|| invalid("an endpoint without a `url`".into()))?;
            let consistency = endpoint
                .get("consistency")
                .and_then(|c| c.as_str())
                .ok_or_else(|| invalid("an endpoint without a `consistency`".into()))?;
            let slot = if consistency == "strong" { &mut strong } else { &mut eventual };
            if slot.is_none() {
                *slot = Some(resolve_endpoint(base, version, url)?);
            }
        }
        let strong =
            strong.ok_or_else(|| RemoteError::Metadata("no strong endpoint in the answer".into()))?;
        Ok(Metadata {
            version,
            database_id,
            token,
            strong,
            eventual,
            refresh_at: now + refresh_after(now_wall, expires_at),
        })
    }

    /// The endpoint of an eventual read or a watch: the eventual one, else the strong one.
    pub(crate) fn eventual_or_strong(&self) -> &str {
        self.eventual.as_deref().unwrap_or(&self.strong)
    }
}

/// How long after `now` to refresh metadata that expires at `expires_at`: when less than
/// 5 minutes or half the lifetime remain, whichever is smaller.
pub(crate) fn refresh_after(now: SystemTime, expires_at: SystemTime) -> Duration {
    let lifetime = expires_at.duration_since(now).unwrap_or(Duration::ZERO);
    lifetime - REFRESH_MARGIN.min(lifetime / 2)
}

/// Resolves an endpoint URL: absolute in version 1, relative to the metadata URL in 2 and
/// 3. Only `http` is supported; the result has no trailing `/`.
pub(crate) fn resolve_endpoint(base: &Url, version: u8, endpoint: &str) -> Result<String, RemoteError> {
    let resolved = if version == 1 { Url::parse(endpoint) } else { base.join(endpoint) };
    let url =
        resolved.map_err(|e| RemoteError::Metadata(format!("invalid endpoint URL `{endpoint}`: {e}")))?;
    check_scheme(&url)?;
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

/// Refuses every scheme but `http`.
pub(crate) fn check_scheme(url: &Url) -> Result<(), RemoteError> {
    match url.scheme() {
        "http" => Ok(()),
        "https" => Err(RemoteError::Protocol(format!(
            "cannot reach {url}: https is not supported by this client (no TLS); use http, e.g. behind a TLS-terminating proxy"
        ))),
        other => Err(RemoteError::Protocol(format!("cannot reach {url}: unsupported URL scheme `{other}`"))),
    }
}

/// Parses an RFC 3339 time (`2024-02-29T23:59:59.123Z`, `...+01:00`).
pub(crate) fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        part.bytes().all(|b| b.is_ascii_digit()).then(|| part.parse().ok())?
    };
    let at = |i: usize| bytes.get(i).copied();
    if at(4) != Some(b'-') || at(7) != Some(b'-') || !matches!(at(10), Some(b'T' | b't' | b' ')) {
        return None;
    }
    if at(13) != Some(b':') || at(16) != Some(b':') {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0u32;
    if at(i) == Some(b'.') {
        i += 1;
        let digits = bytes.get(i..)?.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        let fraction = text.get(i..i + digits.min(9))?;
        nanos = fraction.parse::<u32>().ok()? * 10u32.pow(u32::try_from(9 - digits.min(9)).ok()?);
        i += digits;
    }
    let offset_secs = match (at(i), text.get(i..)?.len()) {
        (Some(b'Z' | b'z'), 1) => 0,
        (Some(sign @ (b'+' | b'-')), 6) if at(i + 3) == Some(b':') => {
            let secs = number(i + 1..i + 3)? * 3600 + number(i + 4..i + 6)? * 60;
            if sign == b'+' {
                secs
            } else {
                -secs
            }
        }
        _ => return None,
    };
    let secs =
        stampkv_model::civil::days_from_civil(year, u32::try_from(month).ok()?, u32::try_from(day).ok()?)
            * 86_400
            + hour * 3600
            + minute * 60
            + second
            - offset_secs;
    let whole = UNIX_EPOCH.checked_add(Duration::from_secs(u64::try_from(secs).ok()?))?;
    whole.checked_add(Duration::from_nanos(u64::from(nanos)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a panic is a failed test")]

    use super::*;

    fn base() -> Url {
        Url::parse("http://127.0.0.1:4512/kv/connect").unwrap()
    }

    #[test]
    fn parses_rfc3339() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(UNIX_EPOCH));
        let t = UNIX_EPOCH + Duration::from_millis(1_709_251_199_123);
        assert_eq!(parse_rfc3339("2024-02-29T23:59:59.123Z"), Some(t));
        assert_eq!(parse_rfc3339("2024-03-01T00:59:59.123+01:00"), Some(t));
        assert_eq!(parse_rfc3339("2024-02-29T22:59:59.123000-01:00"), Some(t));
        for bad in
            ["", "2024-02-29", "2024-02-29T23:59:59", "2024-13-01T00:00:00Z", "2024-02-29T23:59:59.Z", "x"]
        {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn refresh_at_five_minutes_or_half_the_lifetime() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let day = Duration::from_secs(86_400);
        assert_eq!(refresh_after(now, now + day), day - Duration::from_secs(300));
        assert_eq!(refresh_after(now, now + Duration::from_secs(120)), Duration::from_secs(60));
        assert_eq!(refresh_after(now, now - Duration::from_secs(1)), Duration::ZERO);
    }

    #[test]
    fn endpoints_resolve_per_version() {
        assert_eq!(resolve_endpoint(&base(), 2, "/v2").unwrap(), "http://127.0.0.1:4512/v2");
        assert_eq!(resolve_endpoint(&base(), 3, "v2/").unwrap(), "http://127.0.0.1:4512/kv/v2");
        assert_eq!(resolve_endpoint(&base(), 3, "http://other:1/x").unwrap(), "http://other:1/x");
        assert_eq!(resolve_endpoint(&base(), 1, "http://other:1/v2").unwrap(), "http://other:1/v2");
        assert!(matches!(resolve_endpoint(&base(), 1, "/v2"), Err(RemoteError::Metadata(_))));
        let tls = resolve_endpoint(&base(), 3, "https://kv.example/v2").unwrap_err().to_string();
        assert!(tls.contains("https is not supported"), "{tls}");
    }

    #[test]
    fn picks_first_strong_and_first_other_endpoint() {
        let body = br#"{"version":3,"databaseId":"db","token":"t","expiresAt":"2999-01-01T00:00:00Z",
            "endpoints":[{"url":"/e1","consistency":"eventual"},{"url":"/s1","consistency":"strong"},
                         {"url":"/s2","consistency":"strong"},{"url":"/e2","consistency":"eventual"}]}"#;
        let m = Metadata::parse(body, &base(), Instant::now(), SystemTime::now()).unwrap();
        assert_eq!((m.version, m.database_id.as_str(), m.token.as_str()), (3, "db", "t"));
        assert_eq!(m.strong, "http://127.0.0.1:4512/s1");
        assert_eq!(m.eventual.as_deref(), Some("http://127.0.0.1:4512/e1"));
        let only_strong = br#"{"version":2,"databaseId":"d","token":"t","expiresAt":"2999-01-01T00:00:00Z",
            "endpoints":[{"url":"/v2","consistency":"strong"}]}"#;
        let m = Metadata::parse(only_strong, &base(), Instant::now(), SystemTime::now()).unwrap();
        assert_eq!(m.eventual_or_strong(), "http://127.0.0.1:4512/v2");
    }

    #[test]
    fn refuses_bad_answers() {
        let cases: [(&[u8], &str); 4] = [
            (b"nope", "not JSON"),
            (
                br#"{"version":1000,"databaseId":"d","token":"t","expiresAt":"2999-01-01T00:00:00Z","endpoints":[]}"#,
                "unsupported KV Connect metadata version 1000",
            ),
            (
                br#"{"version":3,"databaseId":"d","token":"t","expiresAt":"2999-01-01T00:00:00Z",
                    "endpoints":[{"url":"/e","consistency":"eventual"}]}"#,
                "no strong endpoint",
            ),
            (br#"{"version":3,"databaseId":"d","token":"t","expiresAt":"soon","endpoints":[]}"#, "expiresAt"),
        ];
        for (body, expected) in cases {
            match Metadata::parse(body, &base(), Instant::now(), SystemTime::now()) {
                Err(e) => assert!(e.to_string().contains(expected), "{e} should contain {expected}"),
                Ok(m) => panic!("accepted {m:?}"),
            }
        }
    }
}
