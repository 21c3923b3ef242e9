//! The change feed: one etcd watch on the data range, from the revision the store opened
//! at, so watches and queue listeners in this process see commits made through other
//! servers.

use crate::store::Shared;
use etcd_client::WatchOptions;
use parking_lot::Mutex;
use stampkv::store::ForeignCommitSink;
use std::sync::Arc;
use std::time::Duration;

/// The running feed; [`Feed::stop`] ends it.
pub(crate) struct Feed {
    sinks: Arc<Mutex<Vec<ForeignCommitSink>>>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Feed {
    /// Starts watching the data range after `revision`.
    pub(crate) fn start(shared: Arc<Shared>, revision: i64) -> Feed {
        let sinks: Arc<Mutex<Vec<ForeignCommitSink>>> = Arc::default();
        let task =
            shared.bridge.handle().map(|handle| handle.spawn(run(shared.clone(), sinks.clone(), revision)));
        Feed { sinks, task: Mutex::new(task) }
    }

    /// Adds a sink called with the keys of every commit the feed sees.
    pub(crate) fn subscribe(&self, sink: ForeignCommitSink) {
        self.sinks.lock().push(sink);
    }

    /// Stops the feed.
    pub(crate) fn stop(&self) {
        if let Some(task) = self.task.lock().take() {
            task.abort();
        }
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Watches from `after + 1`, reconnecting after failures; on a compaction it resumes at
/// the compaction revision (the events in between are lost to watches, which re-read
/// their keys on their next wake-up).
async fn run(shared: Arc<Shared>, sinks: Arc<Mutex<Vec<ForeignCommitSink>>>, mut after: i64) {
    let (start, end) = shared.layout.data_range(b"", b"");
    loop {
        let mut client = shared.feed_client.watch_client();
        let options = WatchOptions::new().with_range(end.clone()).with_start_revision(after + 1);
        let mut stream = match client.watch(start.clone(), Some(options)).await {
            Ok(stream) => stream,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        while let Ok(Some(response)) = stream.message().await {
            if response.canceled() {
                if response.compact_revision() > after {
                    after = response.compact_revision() - 1;
                }
                break;
            }
            let mut keys = Vec::with_capacity(response.events().len());
            // The events of one transaction share its revision: decided once.
            let mut decided: Option<(i64, bool)> = None;
            for event in response.events() {
                if let Some(kv) = event.kv() {
                    let revision = kv.mod_revision();
                    after = after.max(revision);
                    let own = match decided {
                        Some((at, own)) if at == revision => own,
                        _ => is_own(&shared, revision).await,
                    };
                    decided = Some((revision, own));
                    if own {
                        continue;
                    }
                    if let Some(key) = shared.layout.entry_key(kv.key()) {
                        keys.push(key.to_vec());
                    }
                }
            }
            if !keys.is_empty() {
                shared.metrics.feed_events.add(keys.len() as u64);
                let sinks: Vec<ForeignCommitSink> = sinks.lock().clone();
                for sink in sinks {
                    sink(&keys);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether the commit at `revision` was made by this process (waiting while one of its
/// commits is in flight, whose revision is not known yet).
async fn is_own(shared: &Shared, revision: i64) -> bool {
    loop {
        // Registered before the check, so a flight ending in between is not missed.
        let flight_done = shared.flight_done.notified();
        tokio::pin!(flight_done);
        flight_done.as_mut().enable();
        {
            let own = shared.own.lock();
            if own.revisions.contains(&revision) {
                return true;
            }
            if !own.in_flight {
                return false;
            }
        }
        flight_done.await;
    }
}
