//! Criterion settings shared by the side-by-side benchmarks (a module of each bench target,
//! not a target of its own).

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput};
use std::time::Duration;

/// A group of 10 flat samples with `elements` units of throughput per iteration: the
/// workloads are long and stateful, so few samples, each a whole measured iteration.
pub fn configure<'a>(
    c: &'a mut Criterion,
    name: &str,
    elements: u64,
    warm_up: Duration,
    measurement: Duration,
) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    group.sample_size(10).sampling_mode(SamplingMode::Flat).warm_up_time(warm_up);
    group.measurement_time(measurement).throughput(Throughput::Elements(elements));
    group
}
