//! HTTP/1.1 with a keep-alive connection pool (hyper's legacy client, plain `http` only),
//! the per-request timeout, the added latency, and the retries of 5xx answers and network
//! errors.

use crate::options::ConnectOptions;
use crate::stats::{Counters, Kind};
use crate::RemoteError;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

/// The largest answer body read (a list batch of 1000 entries of 64 KiB is 64 MiB).
const MAX_ANSWER_BYTES: usize = 256 << 20;

/// How long an idle pooled connection is kept.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Sends requests, retrying as the options say, and counts them.
#[derive(Debug)]
pub(crate) struct Transport {
    http: Client<HttpConnector, Full<Bytes>>,
    pub(crate) options: ConnectOptions,
    pub(crate) counters: Counters,
}

/// A successful (200) answer.
pub(crate) enum Answer {
    /// The whole body.
    Body(Bytes),
    /// The answer with its body not read yet (a watch stream).
    Stream(Response<Incoming>),
}

/// How one attempt failed.
enum Failure {
    /// An answer other than 200 (its body read).
    Status(StatusCode, String),
    /// No answer: connect, send or receive failed, or timed out.
    Network(String),
}

impl Transport {
    pub(crate) fn new(options: ConnectOptions) -> Transport {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let http =
            Client::builder(TokioExecutor::new()).pool_idle_timeout(POOL_IDLE_TIMEOUT).build(connector);
        Transport { http, options, counters: Counters::default() }
    }

    /// POSTs `body` to `url` until it gets a 200, a 4xx (final) or runs out of attempts.
    /// `streaming`: return the 200 answer before reading its body.
    pub(crate) async fn post(
        &self,
        kind: Kind,
        url: &str,
        headers: &[(HeaderName, String)],
        body: Bytes,
        streaming: bool,
    ) -> Result<Answer, RemoteError> {
        let uri: Uri =
            url.parse().map_err(|e| RemoteError::Protocol(format!("invalid request URL `{url}`: {e}")))?;
        let attempts = self.options.retry.attempts.max(1);
        let mut last = String::new();
        for attempt in 1..=attempts {
            if attempt > 1 {
                self.counters.retried();
                tokio::time::sleep(self.options.retry.delay(attempt - 1)).await;
            }
            if !self.options.added_latency.is_zero() {
                tokio::time::sleep(self.options.added_latency).await;
            }
            self.counters.sent(kind);
            let request = build_request(&uri, headers, body.clone())?;
            let timeout = self.options.request_timeout;
            let outcome = match tokio::time::timeout(timeout, self.exchange(request, streaming)).await {
                Ok(outcome) => outcome,
                Err(_) => Err(Failure::Network(format!("no answer within {timeout:?}"))),
            };
            match outcome {
                Ok(answer) => return Ok(answer),
                Err(Failure::Status(status, text)) if status.is_server_error() => {
                    last = format!("status {}: {}", status.as_u16(), text.trim());
                }
                Err(Failure::Status(status, text)) => {
                    return Err(RemoteError::Http { status: status.as_u16(), body: text });
                }
                Err(Failure::Network(reason)) => last = reason,
            }
        }
        Err(RemoteError::Unavailable { attempts, last: format!("{url}: {last}") })
    }

    async fn exchange(&self, request: Request<Full<Bytes>>, streaming: bool) -> Result<Answer, Failure> {
        let response = self.http.request(request).await.map_err(|e| Failure::Network(error_chain(&e)))?;
        let status = response.status();
        if status == StatusCode::OK && streaming {
            return Ok(Answer::Stream(response));
        }
        let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| Failure::Network(format!("reading the answer failed: {e}")))?
            .to_bytes();
        if status == StatusCode::OK {
            Ok(Answer::Body(body))
        } else {
            Err(Failure::Status(status, String::from_utf8_lossy(&body).into_owned()))
        }
    }
}

fn build_request(
    uri: &Uri,
    headers: &[(HeaderName, String)],
    body: Bytes,
) -> Result<Request<Full<Bytes>>, RemoteError> {
    let mut request = Request::new(Full::new(body));
    *request.method_mut() = Method::POST;
    *request.uri_mut() = uri.clone();
    let map = request.headers_mut();
    map.insert(USER_AGENT, HeaderValue::from_static(concat!("stampkv-client/", env!("CARGO_PKG_VERSION"))));
    for (name, value) in headers {
        let value = HeaderValue::from_str(value)
            .map_err(|_| RemoteError::Protocol(format!("the {name} header value is not valid in HTTP")))?;
        map.insert(name.clone(), value);
    }
    Ok(request)
}

/// The headers of a metadata exchange.
pub(crate) fn metadata_headers(access_token: &str) -> Vec<(HeaderName, String)> {
    vec![(AUTHORIZATION, format!("Bearer {access_token}")), (CONTENT_TYPE, "application/json".to_owned())]
}

/// The headers of a data path call in protocol `version`.
pub(crate) fn data_headers(version: u8, token: &str, database_id: &str) -> Vec<(HeaderName, String)> {
    let mut headers =
        vec![(AUTHORIZATION, format!("Bearer {token}")), (CONTENT_TYPE, "application/x-protobuf".to_owned())];
    if version == 1 {
        headers.push((HeaderName::from_static("x-transaction-domain-id"), database_id.to_owned()));
    } else {
        headers.push((HeaderName::from_static("x-denokv-database-id"), database_id.to_owned()));
        headers.push((HeaderName::from_static("x-denokv-version"), version.to_string()));
    }
    headers
}

/// An error and its sources on one line (hyper's own text alone is `client error (Connect)`).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}
