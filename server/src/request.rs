//! What each request of this server shares: its token and database id checked, its body
//! read within the limits, and its outcome counted.

use crate::backend::ServedStore;
use crate::errors::HttpError;
use crate::service::Server;
use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use stampkv_kvconnect::http::{check_data_path, checked_body};
pub(crate) use stampkv_kvconnect::http::{check_token, decode, protobuf};

/// A metadata request of this server (token checked): its body.
pub(crate) async fn metadata_request<S: ServedStore>(
    server: &Server<S>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, HttpError> {
    let net = &server.config.net;
    let checked = check_token(&net.access_token, headers);
    Ok(checked_body(checked, headers, body, net.max_body_bytes, net.body_read_timeout).await?.1)
}

/// A data path request of this server: its protocol version and its body.
pub(crate) async fn data_request<S: ServedStore>(
    server: &Server<S>,
    headers: &HeaderMap,
    body: Body,
) -> Result<(u8, Bytes), HttpError> {
    let net = &server.config.net;
    checked_body(data_path(server, headers), headers, body, net.max_body_bytes, net.body_read_timeout).await
}

/// Turns a handler's result into the answer and counts it under `kind`.
pub(crate) fn record<S: ServedStore>(
    server: &Server<S>,
    kind: &'static str,
    result: Result<Response, HttpError>,
) -> Response {
    let response = result.unwrap_or_else(IntoResponse::into_response);
    server.metrics.request(kind, response.status().as_u16());
    response
}

/// Checks the data path headers; returns the protocol version (1, 2 or 3).
pub(crate) fn data_path<S: ServedStore>(server: &Server<S>, headers: &HeaderMap) -> Result<u8, HttpError> {
    check_data_path(&server.config.net.access_token, &server.database_id, headers)
}
