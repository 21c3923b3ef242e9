//! The edge's counters for `GET /metrics`, in Prometheus' text format.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the staleness histogram's buckets, in seconds.
const AGE_BUCKETS: [f64; 12] = [0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];

/// A monotonically increasing count.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// The count so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// What the edge counts.
#[derive(Debug, Default)]
pub struct EdgeMetrics {
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    /// Eventual ranges answered from a fresh cached entry that found something.
    pub hits: Counter,
    /// Eventual ranges answered from a fresh cached entry that found nothing.
    pub negative_hits: Counter,
    /// Eventual ranges with no fresh cached entry.
    pub misses: Counter,
    /// Misses that joined an upstream read already in flight instead of sending their own.
    pub coalesced: Counter,
    /// Expired entries served because the upstream could not be reached.
    pub stale_served: Counter,
    /// Background refreshes started for entries read again near their expiry.
    pub refreshes: Counter,
    /// `snapshot_read` requests sent upstream (fills, refreshes and strong reads).
    pub upstream_reads: Counter,
    /// Upstream reads that failed.
    pub upstream_errors: Counter,
    /// `atomic_write` requests forwarded upstream.
    pub upstream_writes: Counter,
    /// Watch streams opened upstream (client fan-out and push subscriptions).
    pub upstream_watches: Counter,
    /// Cached entries dropped because their keys changed.
    pub invalidations: Counter,
    /// Cached keys updated by a pushed change.
    pub push_updates: Counter,
    /// Client watch streams served.
    pub client_watches: Counter,
    ages: [Counter; AGE_BUCKETS.len()],
    age_count: Counter,
    age_micros: Counter,
}

/// Gauges read when the metrics are rendered.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gauges {
    /// Bytes the cache holds.
    pub bytes_held: usize,
    /// Entries the cache holds.
    pub entries: usize,
    /// Entries evicted for room so far.
    pub evictions: u64,
    /// Keys under push subscriptions.
    pub pushed_keys: usize,
    /// Upstream watches shared by client watch streams.
    pub shared_watches: usize,
}

impl EdgeMetrics {
    /// Counts one request of `kind` answered with `status`.
    pub fn request(&self, kind: &'static str, status: u16) {
        *self.requests.lock().entry((kind, status)).or_insert(0) += 1;
    }

    /// Records the age of a cached answer when it was served.
    pub fn served_age(&self, age: Duration) {
        let seconds = age.as_secs_f64();
        for (bucket, bound) in self.ages.iter().zip(AGE_BUCKETS) {
            if seconds <= bound {
                bucket.add(1);
            }
        }
        self.age_count.add(1);
        self.age_micros.add(u64::try_from(age.as_micros()).unwrap_or(u64::MAX));
    }

    /// The Prometheus text of the counters and `gauges`.
    pub fn render(&self, gauges: Gauges) -> String {
        let mut out = String::new();
        out.push_str("# HELP stampkv_edge_requests_total Requests by kind and HTTP status.\n");
        out.push_str("# TYPE stampkv_edge_requests_total counter\n");
        for ((kind, status), count) in self.requests.lock().iter() {
            let _ =
                writeln!(out, "stampkv_edge_requests_total{{kind=\"{kind}\",status=\"{status}\"}} {count}");
        }
        let counters: [(&str, &str, &Counter); 13] = [
            ("hits", "Eventual ranges answered from a fresh cached entry holding data.", &self.hits),
            (
                "negative_hits",
                "Eventual ranges answered from a fresh cached 'not found'.",
                &self.negative_hits,
            ),
            ("misses", "Eventual ranges without a fresh cached entry.", &self.misses),
            ("coalesced", "Misses that joined an upstream read already in flight.", &self.coalesced),
            (
                "stale_served",
                "Expired entries served while the upstream was unreachable.",
                &self.stale_served,
            ),
            ("refreshes", "Background refreshes of entries read near their expiry.", &self.refreshes),
            ("upstream_reads", "snapshot_read requests sent upstream.", &self.upstream_reads),
            ("upstream_errors", "Upstream reads that failed.", &self.upstream_errors),
            ("upstream_writes", "atomic_write requests forwarded upstream.", &self.upstream_writes),
            ("upstream_watches", "Watch streams opened upstream.", &self.upstream_watches),
            ("invalidations", "Cached entries dropped because their keys changed.", &self.invalidations),
            ("push_updates", "Cached keys updated by a pushed change.", &self.push_updates),
            ("client_watches", "Client watch streams served.", &self.client_watches),
        ];
        for (name, help, counter) in counters {
            let _ = writeln!(
                out,
                "# HELP stampkv_edge_{name}_total {help}\n# TYPE stampkv_edge_{name}_total counter\nstampkv_edge_{name}_total {}",
                counter.get()
            );
        }
        out.push_str(
            "# HELP stampkv_edge_served_age_seconds Age of cached answers when served (staleness).\n",
        );
        out.push_str("# TYPE stampkv_edge_served_age_seconds histogram\n");
        for (bucket, bound) in self.ages.iter().zip(AGE_BUCKETS) {
            let _ =
                writeln!(out, "stampkv_edge_served_age_seconds_bucket{{le=\"{bound}\"}} {}", bucket.get());
        }
        let count = self.age_count.get();
        let _ = writeln!(out, "stampkv_edge_served_age_seconds_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "stampkv_edge_served_age_seconds_sum {}", self.age_micros.get() as f64 / 1e6);
        let _ = writeln!(out, "stampkv_edge_served_age_seconds_count {count}");
        let gauges: [(&str, u64); 5] = [
            ("bytes_held", gauges.bytes_held as u64),
            ("entries", gauges.entries as u64),
            ("evictions", gauges.evictions),
            ("pushed_keys", gauges.pushed_keys as u64),
            ("shared_watches", gauges.shared_watches as u64),
        ];
        for (name, value) in gauges {
            let _ = writeln!(out, "# TYPE stampkv_edge_{name} gauge\nstampkv_edge_{name} {value}");
        }
        out
    }
}
