//! The last step of every handler: an error turned into its answer, the request counted.

use crate::metrics::EdgeMetrics;
use axum::response::{IntoResponse, Response};
use stampkv_kvconnect::http::HttpError;

/// Counts the request of `kind` in `metrics` and turns an error into its answer.
pub(crate) fn record(
    metrics: &EdgeMetrics,
    kind: &'static str,
    result: Result<Response, HttpError>,
) -> Response {
    let response = result.unwrap_or_else(IntoResponse::into_response);
    metrics.request(kind, response.status().as_u16());
    response
}
