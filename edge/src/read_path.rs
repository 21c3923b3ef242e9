//! The read path of `snapshot_read`: eventual reads answered from the cache (fills for the
//! misses, refresh-ahead, stale answers while the upstream is down), strong reads forwarded
//! with the cached copies of their ranges brought up to date.

use crate::cache::{Answer, RangeKey};
use crate::fill::Filler;
use crate::metrics::EdgeMetrics;
use crate::store::Store;
use crate::upstream::{is_unreachable, upstream_error};
use axum::http::StatusCode;
use stampkv_client::{RemoteError, RemoteKv};
use stampkv_kvconnect as proto;
use stampkv_kvconnect::http::HttpError;
use stampkv_model::Consistency;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long answers are served, from the configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Freshness {
    /// How long a cached answer is served without asking upstream.
    pub(crate) ttl: Duration,
    /// The age from which an answer read again is refreshed in the background.
    pub(crate) refresh_after: Duration,
    /// How long past expiry an answer is still served while the upstream cannot be reached.
    pub(crate) stale_if_error: Duration,
}

/// Answers the ranges of a `snapshot_read`.
#[derive(Debug)]
pub(crate) struct ReadPath {
    store: Arc<Store>,
    filler: Arc<Filler>,
    upstream: RemoteKv,
    /// The upstream's URL, named in errors.
    upstream_url: String,
    freshness: Freshness,
    metrics: Arc<EdgeMetrics>,
}

impl ReadPath {
    /// A read path over `store`, filling misses with `filler` and forwarding strong reads to
    /// `upstream` (at `upstream_url`), counting in `metrics`.
    pub(crate) fn new(
        store: Arc<Store>,
        filler: Arc<Filler>,
        upstream: RemoteKv,
        upstream_url: String,
        freshness: Freshness,
        metrics: Arc<EdgeMetrics>,
    ) -> ReadPath {
        ReadPath { store, filler, upstream, upstream_url, freshness, metrics }
    }

    /// The answers of `keys` for an eventual read: fresh cached answers as they are (starting
    /// refreshes of those near expiry), the rest fetched, waiting on fills in flight.
    pub(crate) async fn eventual(&self, keys: &[RangeKey]) -> Result<Vec<Answer>, HttpError> {
        let now = Instant::now();
        let Freshness { ttl, refresh_after, .. } = self.freshness;
        let mut answers: Vec<Option<Answer>> = vec![None; keys.len()];
        let mut expired: Vec<Option<Answer>> = vec![None; keys.len()];
        let mut missing = Vec::new();
        let mut refresh = Vec::new();
        for (i, (key, found)) in keys.iter().zip(self.store.lookup(keys)).enumerate() {
            let Some(found) = found else {
                missing.push(i);
                continue;
            };
            let age = now.saturating_duration_since(found.answer.fetched_at);
            if found.pushed || age < ttl {
                if !found.pushed && age >= refresh_after {
                    refresh.push(key.clone());
                }
                let counter =
                    if found.answer.entries == 0 { &self.metrics.negative_hits } else { &self.metrics.hits };
                counter.add(1);
                self.metrics.served_age(age);
                if let Some(slot) = answers.get_mut(i) {
                    *slot = Some(found.answer);
                }
            } else {
                if let Some(slot) = expired.get_mut(i) {
                    *slot = Some(found.answer);
                }
                missing.push(i);
            }
        }
        if !refresh.is_empty() {
            self.filler.refresh(refresh);
        }
        if !missing.is_empty() {
            self.metrics.misses.add(missing.len() as u64);
            let wanted: Vec<RangeKey> = missing.iter().filter_map(|&i| keys.get(i).cloned()).collect();
            let pending = self.filler.fetch(&wanted);
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
        if let Some(answer) = expired {
            let age = answer.fetched_at.elapsed();
            if is_unreachable(e) && age <= self.freshness.ttl + self.freshness.stale_if_error {
                self.metrics.stale_served.add(1);
                self.metrics.served_age(age);
                return Ok(answer);
            }
        }
        Err(upstream_error(&self.upstream_url, e))
    }

    /// A strong read of `keys`, forwarded upstream. Cached entries of the same ranges are
    /// brought up to date with the answer.
    pub(crate) async fn strong(&self, keys: &[RangeKey]) -> Result<proto::SnapshotReadOutput, HttpError> {
        let since = self.store.epoch();
        let request = proto::SnapshotRead { ranges: keys.iter().map(RangeKey::to_proto).collect() };
        self.metrics.upstream_reads.add(1);
        let output = self
            .upstream
            .snapshot_read_raw(&request, Consistency::Strong)
            .await
            .map_err(|e| upstream_error(&self.upstream_url, &e))?;
        if output.ranges.len() == keys.len() {
            self.store.update_cached(keys, since, &output.ranges);
        }
        Ok(output)
    }
}
