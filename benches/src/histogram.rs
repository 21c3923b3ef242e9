//! A fixed-size latency histogram: constant memory however many operations it records (a
//! 100-million-operation fill cannot keep every latency), with quantiles accurate to 1/16
//! of a power of two (about 6%).

use std::time::Duration;

/// Sub-buckets per power of two: the resolution of [`LatencyHistogram::quantile`].
const SUB_BUCKETS: usize = 16;
/// Powers of two covered: 1 ns up to 2^40 ns (about 18 minutes).
const POWERS: usize = 41;

/// Counts of latencies in logarithmic buckets, plus the exact maximum and total.
pub struct LatencyHistogram {
    counts: Vec<u64>,
    total: u64,
    max_ns: u64,
    sum_ns: u128,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram { counts: vec![0; POWERS * SUB_BUCKETS], total: 0, max_ns: 0, sum_ns: 0 }
    }
}

/// The bucket of a latency of `ns` nanoseconds.
fn bucket(ns: u64) -> usize {
    if ns < SUB_BUCKETS as u64 {
        return ns as usize;
    }
    let power = 63 - ns.leading_zeros() as usize; // >= 4
    let sub = ((ns >> (power - 4)) & (SUB_BUCKETS as u64 - 1)) as usize;
    ((power - 3) * SUB_BUCKETS + sub).min(POWERS * SUB_BUCKETS - 1)
}

/// The upper bound (ns) of the latencies counted in `index`.
fn bucket_upper_ns(index: usize) -> u64 {
    if index < SUB_BUCKETS {
        return index as u64;
    }
    let power = index / SUB_BUCKETS + 3;
    let sub = (index % SUB_BUCKETS) as u64;
    ((SUB_BUCKETS as u64 + sub + 1) << (power - 4)) - 1
}

impl LatencyHistogram {
    /// Counts one operation that took `latency`.
    pub fn record(&mut self, latency: Duration) {
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        if let Some(count) = self.counts.get_mut(bucket(ns)) {
            *count += 1;
        }
        self.total += 1;
        self.max_ns = self.max_ns.max(ns);
        self.sum_ns += u128::from(ns);
    }

    /// Operations recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The latency below which a fraction `q` (0..=1) of operations fall (bucket upper bound,
    /// never above the maximum seen).
    pub fn quantile(&self, q: f64) -> Duration {
        let rank = ((self.total as f64 * q).ceil() as u64).clamp(1, self.total.max(1));
        let mut seen = 0;
        for (index, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Duration::from_nanos(bucket_upper_ns(index).min(self.max_ns));
            }
        }
        Duration::from_nanos(self.max_ns)
    }

    /// The longest operation.
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max_ns)
    }

    /// Total time spent in operations that took at least `threshold`: the time writers
    /// stood still (stalls), seen from outside the engine. Each bucket counts at its
    /// midpoint, and a bucket counts when its midpoint is at or above `threshold`.
    pub fn time_at_or_above(&self, threshold: Duration) -> Duration {
        let threshold_ns = u64::try_from(threshold.as_nanos()).unwrap_or(u64::MAX);
        let mut ns = 0u128;
        for (index, &count) in self.counts.iter().enumerate() {
            let lower = if index == 0 { 0 } else { bucket_upper_ns(index - 1) + 1 };
            let middle = (lower + bucket_upper_ns(index)) / 2;
            if middle >= threshold_ns && count > 0 {
                ns += u128::from(count) * u128::from(middle.min(self.max_ns));
            }
        }
        Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_bounds_contain_their_values() {
        let mut previous = 0;
        for ns in (0..100_000u64).chain((20..40).map(|p| 1u64 << p)).chain([u64::MAX / 4]) {
            let index = bucket(ns);
            assert!(index >= previous, "bucket order at {ns}");
            previous = index;
            if index < POWERS * SUB_BUCKETS - 1 {
                assert!(bucket_upper_ns(index) >= ns, "upper bound of {ns}");
                assert!(bucket_upper_ns(index) as f64 <= ns as f64 * 1.07 + 1.0, "resolution at {ns}");
            }
        }
    }

    #[test]
    fn quantiles_of_a_known_distribution() {
        let mut histogram = LatencyHistogram::default();
        for us in 1..=1000u64 {
            histogram.record(Duration::from_micros(us));
        }
        let p50 = histogram.quantile(0.5).as_micros() as f64;
        let p99 = histogram.quantile(0.99).as_micros() as f64;
        assert!((500.0..=535.0).contains(&p50), "p50 {p50}");
        assert!((990.0..=1000.0).contains(&p99), "p99 {p99}");
        assert_eq!(histogram.max(), Duration::from_micros(1000));
        assert_eq!(histogram.count(), 1000);
        let slow = histogram.time_at_or_above(Duration::from_micros(500)).as_micros() as f64;
        let exact: f64 = (500..=1000).map(|x| x as f64).sum();
        assert!((slow - exact).abs() / exact < 0.05, "stall time {slow} vs {exact}");
    }
}
