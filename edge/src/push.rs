//! Push mode: the edge subscribes upstream (`watch`) to the keys it caches, in groups of up
//! to ten (the most one watch may name), and applies every change as it is committed.
//!
//! While a group's stream is live, its keys' cached answers count as fresh beyond the TTL:
//! a change would have arrived. When the stream fails the keys fall back to the TTL at once
//! and the group reconnects; the first frame after a reconnect brings every key up to date.
//! Groups whose keys have all left the cache are closed. At most `push_keys` keys are
//! subscribed; keys beyond that are served by TTL alone.

use crate::metrics::EdgeMetrics;
use crate::store::Store;
use futures_util::StreamExt;
use stampkv_client::RemoteKv;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

/// Keys per upstream watch (Deno's limit on one watch).
const GROUP_SIZE: usize = 10;
/// How often newly cached keys are picked up.
const TICK: Duration = Duration::from_millis(50);
/// Every this many ticks, groups with no cached key left are closed.
const SWEEP_EVERY: u32 = 20;

/// One upstream watch of push mode; dropping it stops the watch.
struct Group {
    keys: Vec<Vec<u8>>,
    task: AbortHandle,
}

impl Drop for Group {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Push mode's subscriptions: what they read from and write to.
#[derive(Debug)]
pub(crate) struct Pusher {
    store: Arc<Store>,
    upstream: RemoteKv,
    metrics: Arc<EdgeMetrics>,
    /// Most keys subscribed at once.
    push_keys: usize,
    /// Cancelled once shutdown began: push mode stops.
    stopping: CancellationToken,
}

impl Pusher {
    /// Push mode subscribing on `upstream` to at most `push_keys` of the keys `store` queues,
    /// counting in `metrics`, until `stopping` is cancelled.
    pub(crate) fn new(
        store: Arc<Store>,
        upstream: RemoteKv,
        metrics: Arc<EdgeMetrics>,
        push_keys: usize,
        stopping: CancellationToken,
    ) -> Pusher {
        Pusher { store, upstream, metrics, push_keys, stopping }
    }

    /// Runs push mode until the edge shuts down.
    pub(crate) async fn run(self) {
        let pusher = Arc::new(self);
        let mut groups: Vec<Group> = Vec::new();
        let mut subscribed: HashSet<Vec<u8>> = HashSet::new();
        let mut ticks = 0u32;
        let mut interval = tokio::time::interval(TICK);
        while !pusher.stopping.is_cancelled() {
            interval.tick().await;
            let queued = pusher.store.take_push_queue();
            let mut batch: Vec<Vec<u8>> = Vec::new();
            for key in queued {
                if subscribed.len() >= pusher.push_keys {
                    break;
                }
                if subscribed.insert(key.clone()) {
                    batch.push(key);
                }
                if batch.len() == GROUP_SIZE {
                    groups.push(start_group(&pusher, std::mem::take(&mut batch)));
                }
            }
            if !batch.is_empty() {
                groups.push(start_group(&pusher, batch));
            }
            ticks += 1;
            if ticks.is_multiple_of(SWEEP_EVERY) {
                close_idle_groups(&pusher.store, &mut groups, &mut subscribed);
            }
        }
    }
}

/// Starts following the upstream watch of `keys`.
fn start_group(pusher: &Arc<Pusher>, keys: Vec<Vec<u8>>) -> Group {
    let task = tokio::spawn(follow_group(pusher.clone(), keys.clone()));
    Group { keys, task: task.abort_handle() }
}

/// Closes the groups none of whose keys is cached any more.
fn close_idle_groups(store: &Store, groups: &mut Vec<Group>, subscribed: &mut HashSet<Vec<u8>>) {
    let mut live = store.release_uncached(groups.iter().map(|group| group.keys.as_slice())).into_iter();
    groups.retain(|group| {
        let live = live.next().unwrap_or(true);
        if !live {
            for key in &group.keys {
                subscribed.remove(key);
            }
        }
        live
    });
}

/// Follows one group's upstream watch, reconnecting with a growing delay.
async fn follow_group(pusher: Arc<Pusher>, keys: Vec<Vec<u8>>) {
    let mut delay = Duration::from_millis(100);
    loop {
        if let Ok(mut stream) = pusher.upstream.watch_raw(keys.clone()).await {
            pusher.metrics.upstream_watches.add(1);
            while let Some(Ok(output)) = stream.next().await {
                if output.status != stampkv_kvconnect::SR_SUCCESS || output.keys.len() != keys.len() {
                    continue;
                }
                delay = Duration::from_millis(100);
                for (key, update) in keys.iter().zip(output.keys) {
                    if update.changed {
                        pusher.store.apply_change(key, update.entry_if_changed, true);
                    }
                }
            }
            // The stream ended: changes may be missed from now on, so the TTL rules again.
            pusher.store.unmark_pushed(&keys);
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}
