//! Counters and latencies of the store's etcd calls, for `/metrics` and `stampkv stats`.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A counter.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    pub(crate) fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// Raises the counter to `n` if it is lower (a high-water mark).
    pub(crate) fn raise_to(&self, n: u64) {
        self.0.fetch_max(n, Ordering::Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Latencies of one kind of call: a count, a sum and the largest.
#[derive(Debug, Default)]
pub(crate) struct Latency(Mutex<(u64, Duration, Duration)>);

impl Latency {
    pub(crate) fn record(&self, took: Duration) {
        let mut l = self.0.lock();
        l.0 += 1;
        l.1 += took;
        l.2 = l.2.max(took);
    }

    fn summary(&self) -> LatencySummary {
        let l = self.0.lock();
        LatencySummary { calls: l.0, total: l.1, max: l.2 }
    }
}

/// The store's live counters.
#[derive(Debug, Default)]
pub(crate) struct EtcdMetrics {
    pub(crate) commits: Counter,
    pub(crate) batches: Counter,
    pub(crate) largest_batch: Counter,
    pub(crate) conflicts: Counter,
    pub(crate) retries: Counter,
    pub(crate) unknown_outcomes: Counter,
    pub(crate) fences: Counter,
    pub(crate) feed_events: Counter,
    pub(crate) expired_swept: Counter,
    pub(crate) compactions: Counter,
    pub(crate) read_latency: Latency,
    pub(crate) commit_latency: Latency,
}

impl EtcdMetrics {
    pub(crate) fn stats(&self) -> EtcdStats {
        EtcdStats {
            commits: self.commits.get(),
            batches: self.batches.get(),
            largest_batch: self.largest_batch.get(),
            conflicts: self.conflicts.get(),
            retries: self.retries.get(),
            unknown_outcomes: self.unknown_outcomes.get(),
            fences: self.fences.get(),
            feed_events: self.feed_events.get(),
            expired_swept: self.expired_swept.get(),
            compactions: self.compactions.get(),
            reads: self.read_latency.summary(),
            transactions: self.commit_latency.summary(),
        }
    }
}

/// Calls of one kind: how many, their total time and the longest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LatencySummary {
    /// Calls made.
    pub calls: u64,
    /// Their total time.
    pub total: Duration,
    /// The longest.
    pub max: Duration,
}

/// What the store did since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EtcdStats {
    /// Commits applied.
    pub commits: u64,
    /// etcd transactions that applied commits: with group commit, fewer than `commits`.
    pub batches: u64,
    /// The most commits one etcd transaction applied.
    pub largest_batch: u64,
    /// Commits built again because another server committed first.
    pub conflicts: u64,
    /// Calls retried after a failure that could pass (a lost member, an election).
    pub retries: u64,
    /// Commits whose answer was lost and that had to be settled.
    pub unknown_outcomes: u64,
    /// Settlements that fenced the lost commit off (it was not applied).
    pub fences: u64,
    /// Changed keys the change feed delivered.
    pub feed_events: u64,
    /// Expired entries the sweeper deleted.
    pub expired_swept: u64,
    /// History compactions this server made.
    pub compactions: u64,
    /// Reads (point, range and counter reads).
    pub reads: LatencySummary,
    /// Transactions (commits, fences, checks).
    pub transactions: LatencySummary,
}
