//! Counters of what a client sent: plain atomics, read with [`crate::RemoteKv::stats`].

use std::sync::atomic::{AtomicU64, Ordering};

/// HTTP requests a [`crate::RemoteKv`] (and its clones) sent so far, retries included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// `snapshot_read` requests.
    pub snapshot_reads: u64,
    /// `atomic_write` requests.
    pub atomic_writes: u64,
    /// `watch` requests.
    pub watches: u64,
    /// Metadata exchanges (the first one and every refresh).
    pub metadata_exchanges: u64,
    /// Requests sent again after a 5xx answer or a network error.
    pub retries: u64,
    /// Data path requests sent to the eventual endpoint (when the metadata lists one).
    pub eventual_requests: u64,
}

/// The kinds of request, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    SnapshotRead,
    AtomicWrite,
    Watch,
    Metadata,
}

impl Kind {
    /// The last path segment of the data path call (`""` for the metadata exchange).
    pub(crate) fn path(self) -> &'static str {
        match self {
            Kind::SnapshotRead => "snapshot_read",
            Kind::AtomicWrite => "atomic_write",
            Kind::Watch => "watch",
            Kind::Metadata => "",
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    snapshot_reads: AtomicU64,
    atomic_writes: AtomicU64,
    watches: AtomicU64,
    metadata_exchanges: AtomicU64,
    retries: AtomicU64,
    eventual_requests: AtomicU64,
}

impl Counters {
    pub(crate) fn sent(&self, kind: Kind) {
        let counter = match kind {
            Kind::SnapshotRead => &self.snapshot_reads,
            Kind::AtomicWrite => &self.atomic_writes,
            Kind::Watch => &self.watches,
            Kind::Metadata => &self.metadata_exchanges,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn retried(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn eventual(&self) {
        self.eventual_requests.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> ClientStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ClientStats {
            snapshot_reads: get(&self.snapshot_reads),
            atomic_writes: get(&self.atomic_writes),
            watches: get(&self.watches),
            metadata_exchanges: get(&self.metadata_exchanges),
            retries: get(&self.retries),
            eventual_requests: get(&self.eventual_requests),
        }
    }
}
