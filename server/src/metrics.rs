//! Counters for `GET /metrics`, written out in Prometheus' text format.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the commit latency histogram's buckets, in seconds.
const BUCKETS: [f64; 12] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0];

/// The server's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    commit_buckets: [AtomicU64; BUCKETS.len()],
    commit_count: AtomicU64,
    commit_micros: AtomicU64,
}

impl Metrics {
    /// Counts one request of `kind` answered with `status`.
    pub fn request(&self, kind: &'static str, status: u16) {
        *self.requests.lock().entry((kind, status)).or_insert(0) += 1;
    }

    /// Records how long one commit took (checks failed or not).
    pub fn commit(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        for (bucket, bound) in self.commit_buckets.iter().zip(BUCKETS) {
            if seconds <= bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.commit_count.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.commit_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// The Prometheus text of the counters, the open watch streams, the shared watches
    /// behind them, followed by the store's own metrics (`store_metrics`, already in the
    /// text format).
    pub fn render(&self, open_watches: usize, shared_watches: usize, store_metrics: &str) -> String {
        let mut out = String::new();
        out.push_str("# HELP stampkv_requests_total Requests by kind and HTTP status.\n");
        out.push_str("# TYPE stampkv_requests_total counter\n");
        for ((kind, status), count) in self.requests.lock().iter() {
            let _ = writeln!(out, "stampkv_requests_total{{kind=\"{kind}\",status=\"{status}\"}} {count}");
        }
        out.push_str("# HELP stampkv_commit_seconds Latency of atomic_write commits.\n");
        out.push_str("# TYPE stampkv_commit_seconds histogram\n");
        for (bucket, bound) in self.commit_buckets.iter().zip(BUCKETS) {
            let _ = writeln!(
                out,
                "stampkv_commit_seconds_bucket{{le=\"{bound}\"}} {}",
                bucket.load(Ordering::Relaxed)
            );
        }
        let count = self.commit_count.load(Ordering::Relaxed);
        let _ = writeln!(out, "stampkv_commit_seconds_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.commit_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "stampkv_commit_seconds_sum {sum}");
        let _ = writeln!(out, "stampkv_commit_seconds_count {count}");
        out.push_str("# HELP stampkv_open_watches Open watch streams.\n# TYPE stampkv_open_watches gauge\n");
        let _ = writeln!(out, "stampkv_open_watches {open_watches}");
        out.push_str(
            "# HELP stampkv_shared_watches Distinct watched key lists (one read per change each).\n\
             # TYPE stampkv_shared_watches gauge\n",
        );
        let _ = writeln!(out, "stampkv_shared_watches {shared_watches}");
        out.push_str(store_metrics);
        out
    }
}
