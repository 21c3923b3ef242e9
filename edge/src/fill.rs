//! Upstream reads for cache misses and refreshes, coalesced: every range has at most one
//! upstream read in flight, and every request missing it waits on that one.
//!
//! A fill runs as a task of its own, so a client that goes away does not cancel what other
//! clients wait on. Its answers are cached unless a change recorded since it started touches
//! their range (see [`crate::invalidations`]).
//!
//! [`Filler`] owns the upstream reads in flight; it caches what they bring in the [`Store`].

use crate::cache::{Answer, RangeKey};
use crate::metrics::EdgeMetrics;
use crate::store::Store;
use crate::wire;
use futures_util::future::{BoxFuture, FutureExt, Shared};
use parking_lot::Mutex;
use stampkv_client::{RemoteError, RemoteKv};
use stampkv_kvconnect as proto;
use stampkv_model::Consistency;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

/// What a fill ends with: the answers of its ranges in order, or why the upstream failed.
pub(crate) type FillResult = Result<Arc<Vec<Answer>>, Arc<RemoteError>>;

/// A fill in flight, and which of its ranges a waiter wants.
#[derive(Clone)]
pub(crate) struct Pending {
    fill: Shared<BoxFuture<'static, FillResult>>,
    index: usize,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").field("index", &self.index).finish_non_exhaustive()
    }
}

impl Pending {
    /// Waits for the fill; the answer of this waiter's range.
    pub(crate) async fn answer(self) -> Result<Answer, Arc<RemoteError>> {
        let answers = self.fill.await?;
        answers.get(self.index).cloned().ok_or_else(|| {
            Arc::new(RemoteError::Protocol("the upstream answered fewer ranges than asked".into()))
        })
    }
}

/// The upstream reads in flight, by range: joins a miss to the read of its range, or starts
/// one.
#[derive(Debug)]
pub(crate) struct Filler {
    store: Arc<Store>,
    upstream: RemoteKv,
    metrics: Arc<EdgeMetrics>,
    flights: Mutex<HashMap<RangeKey, Pending>>,
}

impl Filler {
    /// A filler reading from `upstream` into `store`, counting in `metrics`.
    pub(crate) fn new(store: Arc<Store>, upstream: RemoteKv, metrics: Arc<EdgeMetrics>) -> Filler {
        Filler { store, upstream, metrics, flights: Mutex::new(HashMap::new()) }
    }

    /// Joins the fill in flight of each range, starting one upstream read for those with none.
    pub(crate) fn fetch(self: &Arc<Self>, keys: &[RangeKey]) -> Vec<Pending> {
        let mut flights = self.flights.lock();
        let mut seen = HashSet::new();
        let fresh: Vec<RangeKey> =
            keys.iter().filter(|k| !flights.contains_key(*k) && seen.insert(*k)).cloned().collect();
        let joined = keys.len() - fresh.len();
        self.metrics.coalesced.add(joined as u64);
        if !fresh.is_empty() {
            let fill = self.start_fill(fresh.clone());
            for (index, key) in fresh.into_iter().enumerate() {
                flights.insert(key, Pending { fill: fill.clone(), index });
            }
        }
        keys.iter().filter_map(|k| flights.get(k).cloned()).collect()
    }

    /// Starts background refreshes of the ranges that have no fill in flight.
    pub(crate) fn refresh(self: &Arc<Self>, keys: Vec<RangeKey>) {
        let mut flights = self.flights.lock();
        let mut seen = HashSet::new();
        let fresh: Vec<RangeKey> =
            keys.into_iter().filter(|k| !flights.contains_key(k) && seen.insert(k.clone())).collect();
        if fresh.is_empty() {
            return;
        }
        self.metrics.refreshes.add(fresh.len() as u64);
        let fill = self.start_fill(fresh.clone());
        for (index, key) in fresh.into_iter().enumerate() {
            flights.insert(key, Pending { fill: fill.clone(), index });
        }
    }

    /// Spawns one upstream read of `keys`. The caller holds the flight map's lock and
    /// registers the fill there; the task takes the lock to unregister, so it cannot
    /// unregister before it was registered.
    fn start_fill(self: &Arc<Self>, keys: Vec<RangeKey>) -> Shared<BoxFuture<'static, FillResult>> {
        let since = self.store.epoch();
        let filler = self.clone();
        let task = tokio::spawn(async move {
            let request = proto::SnapshotRead { ranges: keys.iter().map(RangeKey::to_proto).collect() };
            filler.metrics.upstream_reads.add(1);
            let result = filler.upstream.snapshot_read_raw(&request, Consistency::Eventual).await;
            let outcome = match result {
                Ok(output) if output.ranges.len() == keys.len() => {
                    Ok(Arc::new(filler.settle(&keys, since, &output)))
                }
                Ok(_) => Err(Arc::new(RemoteError::Protocol(
                    "the upstream answered a different number of ranges than asked".into(),
                ))),
                Err(e) => Err(Arc::new(e)),
            };
            if outcome.is_err() {
                filler.metrics.upstream_errors.add(1);
            }
            let mut flights = filler.flights.lock();
            for key in &keys {
                flights.remove(key);
            }
            outcome
        });
        async move {
            task.await.unwrap_or_else(|e| {
                Err(Arc::new(RemoteError::Protocol(format!("the fill task failed: {e}"))))
            })
        }
        .boxed()
        .shared()
    }

    /// Caches the answers of a fill that started at epoch `since`, except those a change
    /// since then may have made stale; returns every answer.
    fn settle(&self, keys: &[RangeKey], since: u64, output: &proto::SnapshotReadOutput) -> Vec<Answer> {
        let now = Instant::now();
        let answers: Vec<Answer> = output.ranges.iter().map(|r| wire::answer(r, now)).collect();
        self.store.settle(keys, since, &answers);
        answers
    }
}
