//! How a failed upstream call is answered to the edge's client.

use axum::http::StatusCode;
use stampkv_client::RemoteError;
use stampkv_kvconnect::http::HttpError;

/// The answer to a failed call to the upstream at `upstream_url`: the upstream's own 4xx as
/// it was; a 502 for an answer that breaks the protocol (undecodable, the wrong shape); a 503
/// naming the upstream when it cannot be reached (clients retry a 503).
pub(crate) fn upstream_error(upstream_url: &str, e: &RemoteError) -> HttpError {
    match e {
        RemoteError::Http { status, body } if (400..500).contains(status) => HttpError {
            status: StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_GATEWAY),
            text: body.clone(),
        },
        RemoteError::Decode(what) | RemoteError::Protocol(what) => HttpError {
            status: StatusCode::BAD_GATEWAY,
            text: format!("The edge's upstream {upstream_url} gave an invalid answer: {what}"),
        },
        other => HttpError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            text: format!("The edge cannot reach its upstream {upstream_url}: {other}"),
        },
    }
}

/// Whether `e` says the upstream could not be reached (or answered wrongly), rather than
/// refusing the request with a 4xx of its own.
pub(crate) fn is_unreachable(e: &RemoteError) -> bool {
    !matches!(e, RemoteError::Http { status, .. } if (400..500).contains(status))
}
