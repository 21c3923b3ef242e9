//! `snapshot_read` on both endpoints: eventual reads from the cache, strong reads forwarded.

use crate::cache::{Answer, RangeKey};
use crate::service::Edge;
use crate::wire;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use stampkv_client::RemoteError;
use stampkv_kvconnect as proto;
use stampkv_kvconnect::http::{check_data_path, checked_body, decode, protobuf};
use stampkv_kvconnect::http::{check_read, HttpError};
use stampkv_model::Consistency;
use std::sync::Arc;
use std::time::Instant;

/// The answer to a failed upstream call: the upstream's own 4xx as it was; a 502 for an
/// answer that breaks the protocol (undecodable, the wrong shape); a 503 naming the upstream
/// when it cannot be reached (clients retry a 503).
pub(crate) fn upstream_error(edge: &Edge, e: &RemoteError) -> HttpError {
    match e {
        RemoteError::Http { status, body } if (400..500).contains(status) => HttpError {
            status: StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_GATEWAY),
            text: body.clone(),
        },
        RemoteError::Decode(what) | RemoteError::Protocol(what) => HttpError {
            status: StatusCode::BAD_GATEWAY,
            text: format!("The edge's upstream {} gave an invalid answer: {what}", edge.config.upstream_url),
        },
        other => HttpError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            text: format!("The edge cannot reach its upstream {}: {other}", edge.config.upstream_url),
        },
    }
}

/// Records the request and turns an error into its answer.
pub(crate) fn record(edge: &Edge, kind: &'static str, result: Result<Response, HttpError>) -> Response {
    let response = result.unwrap_or_else(IntoResponse::into_response);
    edge.metrics.request(kind, response.status().as_u16());
    response
}

/// Checks the headers and decodes a `SnapshotRead` with the server's limits.
async fn read_request(edge: &Edge, headers: &HeaderMap, body: Body) -> Result<Vec<RangeKey>, HttpError> {
    let net = &edge.config.net;
    let checked = check_data_path(&net.access_token, &edge.database_id, headers);
    let (_, body) = checked_body(checked, headers, body, net.max_body_bytes, net.body_read_timeout).await?;
    let request: proto::SnapshotRead = decode(&body)?;
    check_read(&request)?;
    Ok(request
        .ranges
        .iter()
        .map(|range| RangeKey::of(&range.start, &range.end, range.limit, range.reverse))
        .collect())
}

/// `POST /eventual/snapshot_read`.
pub(crate) async fn eventual_read(State(edge): State<Arc<Edge>>, headers: HeaderMap, body: Body) -> Response {
    let result = async {
        let keys = read_request(&edge, &headers, body).await?;
        let answers = edge.read_cached(&keys).await?;
        Ok(([(header::CONTENT_TYPE, "application/x-protobuf")], wire::eventual_output(&answers))
            .into_response())
    }
    .await;
    record(&edge, "eventual_read", result)
}

/// `POST /v2/snapshot_read`: forwarded as a strong read. Cached entries of the same ranges
/// are brought up to date with the answer.
pub(crate) async fn strong_read(State(edge): State<Arc<Edge>>, headers: HeaderMap, body: Body) -> Response {
    let result = async {
        let keys = read_request(&edge, &headers, body).await?;
        let since = edge.store.lock().invalidations.epoch();
        let request = proto::SnapshotRead { ranges: keys.iter().map(RangeKey::to_proto).collect() };
        edge.metrics.upstream_reads.add(1);
        let output = edge
            .upstream
            .snapshot_read_raw(&request, Consistency::Strong)
            .await
            .map_err(|e| upstream_error(&edge, &e))?;
        if output.ranges.len() == keys.len() {
            let now = Instant::now();
            let mut store = edge.store.lock();
            for (key, range) in keys.iter().zip(&output.ranges) {
                if store.cache.contains(key) && !store.invalidations.touched_since(since, key) {
                    store.cache.insert(key.clone(), wire::answer(range, now));
                    if let RangeKey::Point(point) = key {
                        store.pushed.remove(point);
                    }
                }
            }
        }
        Ok(protobuf(&output))
    }
    .await;
    record(&edge, "strong_read", result)
}

impl Edge {
    /// The answers of `keys` for an eventual read: fresh cached answers as they are (starting
    /// refreshes of those near expiry), the rest fetched, waiting on fills in flight.
    pub(crate) async fn read_cached(self: &Arc<Self>, keys: &[RangeKey]) -> Result<Vec<Answer>, HttpError> {
        let now = Instant::now();
        let ttl = self.config.cache_ttl;
        let refresh_after = self.config.refresh_after();
        let mut answers: Vec<Option<Answer>> = vec![None; keys.len()];
        let mut expired: Vec<Option<Answer>> = vec![None; keys.len()];
        let mut missing = Vec::new();
        let mut refresh = Vec::new();
        {
            let mut store = self.store.lock();
            for (i, key) in keys.iter().enumerate() {
                let Some(found) = store.cache.get(key) else {
                    missing.push(i);
                    continue;
                };
                let age = now.saturating_duration_since(found.fetched_at);
                let pushed = matches!(key, RangeKey::Point(k) if store.pushed.contains(k));
                if pushed || age < ttl {
                    if !pushed && age >= refresh_after {
                        refresh.push(key.clone());
                    }
                    let counter =
                        if found.entries == 0 { &self.metrics.negative_hits } else { &self.metrics.hits };
                    counter.add(1);
                    self.metrics.served_age(age);
                    if let Some(slot) = answers.get_mut(i) {
                        *slot = Some(found);
                    }
                } else {
                    if let Some(slot) = expired.get_mut(i) {
                        *slot = Some(found);
                    }
                    missing.push(i);
                }
            }
        }
        if !refresh.is_empty() {
            self.refresh(refresh);
        }
        if !missing.is_empty() {
            self.metrics.misses.add(missing.len() as u64);
            let wanted: Vec<RangeKey> = missing.iter().filter_map(|&i| keys.get(i).cloned()).collect();
            let pending = self.fetch(&wanted);
            for (&i, waiter) in missing.iter().zip(pending) {
                let answer = match waiter.answer().await {
                    Ok(answer) => answer,
                    Err(e) => self.stale_or_error(expired.get_mut(i).and_then(Option::take), &e)?,
                };
                if let Some(slot) = answers.get_mut(i) {
                    *slot = Some(answer);
                }
            }
        }
        answers
            .into_iter()
            .map(|a| {
                a.ok_or_else(|| HttpError {
                    status: StatusCode::INTERNAL_SERVER_ERROR,
                    text: "A range was left without an answer.".into(),
                })
            })
            .collect()
    }

    /// While the upstream fails, an expired answer is still served up to `stale_if_error`
    /// past its expiry; otherwise the failure is the answer.
    fn stale_or_error(&self, expired: Option<Answer>, e: &RemoteError) -> Result<Answer, HttpError> {
        let unreachable = !matches!(e, RemoteError::Http { status, .. } if (400..500).contains(status));
        if let Some(answer) = expired {
            let age = answer.fetched_at.elapsed();
            if unreachable && age <= self.config.cache_ttl + self.config.stale_if_error {
                self.metrics.stale_served.add(1);
                self.metrics.served_age(age);
                return Ok(answer);
            }
        }
        Err(upstream_error(self, e))
    }
}
