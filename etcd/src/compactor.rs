//! History compaction: etcd keeps every revision of every key until it is compacted, and
//! the history counts against the storage quota. Unless the cluster compacts by itself
//! (`--auto-compaction-mode`), each server compacts it: every
//! [`EtcdOptions::compaction_interval`](crate::EtcdOptions::compaction_interval) (5 minutes
//! by default) it compacts to the revision it saw one interval earlier, so a snapshot
//! younger than the interval never loses its revision (as the Kubernetes API server
//! does). A snapshot older than that fails its next read with a storage error that says
//! the revision was compacted. Compaction is cluster-wide: turn this off
//! (`compaction_interval: None`) where the cluster is shared with other users or compacts
//! by itself. Several servers compacting is harmless (a revision already compacted is
//! refused and ignored).

use crate::store::Shared;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// Starts the compactor thread of a store if the options ask for one; it ends when the
/// store is closed or dropped.
pub(crate) fn start(shared: &Arc<Shared>) -> std::io::Result<()> {
    let Some(interval) = shared.options.compaction_interval else { return Ok(()) };
    let weak = Arc::downgrade(shared);
    std::thread::Builder::new()
        .name("stampkv-etcd-compactor".into())
        .spawn(move || run(weak, interval))
        .map(|_| ())
}

/// How often the thread looks whether the store was closed.
const POLL: Duration = Duration::from_millis(200);

fn run(shared: Weak<Shared>, interval: Duration) {
    // The revision seen one interval ago: everything before it may go.
    let mut previous: Option<i64> = None;
    let mut next = Instant::now() + interval;
    loop {
        std::thread::sleep(POLL.min(interval));
        let Some(shared) = shared.upgrade() else { return };
        if shared.is_closed() {
            return;
        }
        if Instant::now() < next {
            continue;
        }
        next = Instant::now() + interval;
        let Ok((point, _)) = shared.latest() else { continue };
        if let Some(revision) = previous.filter(|r| *r > 0) {
            let mut kv = shared.kv.clone();
            let compacted = shared.bridge.run(async move { kv.compact(revision, None).await });
            match compacted {
                Some(Ok(_)) => {
                    shared.metrics.compactions.add(1);
                    tracing::debug!(revision, "etcd: history compacted");
                }
                // Already compacted (by another server or the cluster), or a passing failure.
                Some(Err(e)) => tracing::debug!(revision, error = %e, "etcd: compaction refused"),
                None => return,
            }
        }
        previous = Some(point.revision);
    }
}
