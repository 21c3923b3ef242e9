//! Criterion version of the queue workloads (see `examples/queue_bench.rs`, whose
//! [`QueueBench`] implementations it uses): stampkv and Deno KV's own SQLite backend
//! (`denokv_sqlite`, as the Deno CLI drives it) side by side.
//!
//! `cargo bench -p stampkv-benches --bench queue`. Throughput is in messages:
//! - `queue_enqueue_1_client`: one durable single-message enqueue;
//! - `queue_enqueue_8_clients`: 400 durable single-message enqueues from 8 clients;
//! - `queue_enqueue_then_deliver`: `STAMPKV_QUEUE_BENCH_N` (default 3000) messages enqueued
//!   1000 per atomic commit into a fresh database, then delivered to a listener whose
//!   handler only counts, until all are acknowledged and the database is closed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "benchmark driver: a failed operation aborts the measurement"
)]

mod common;

#[allow(dead_code)]
#[path = "../examples/queue_bench.rs"]
mod queue_bench;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use queue_bench::{check_drained, open_queue, BATCH, CLIENTS};
use std::time::{Duration, Instant};

const ENGINES: [&str; 2] = ["stampkv", "denokv"];
/// Enqueues per measured iteration of the 8-client workload.
const CONCURRENT_BATCH: u64 = 400;

fn messages() -> u64 {
    std::env::var("STAMPKV_QUEUE_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(3000)
}

/// Warm-up and measurement time of every group.
const WARM_UP: Duration = Duration::from_millis(500);
const MEASUREMENT: Duration = Duration::from_secs(5);

fn configure<'a>(
    c: &'a mut Criterion,
    name: &str,
    elements: u64,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    common::configure(c, name, elements, WARM_UP, MEASUREMENT)
}

/// Durable single-message enqueues from 1 and from 8 clients.
fn enqueues(c: &mut Criterion) {
    let mut group = configure(c, "queue_enqueue_1_client", 1);
    for engine in ENGINES {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open_queue(engine, dir.path());
        let mut next = 0;
        group.bench_function(BenchmarkId::from_parameter(engine), |b| {
            b.iter(|| {
                db.enqueue(next);
                next += 1;
            })
        });
        db.close();
    }
    group.finish();
    let mut group = configure(c, "queue_enqueue_8_clients", CONCURRENT_BATCH);
    for engine in ENGINES {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open_queue(engine, dir.path());
        let mut next = 0;
        group.bench_function(BenchmarkId::from_parameter(engine), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    db.enqueue_concurrent(next, CONCURRENT_BATCH, CLIENTS);
                    next += CONCURRENT_BATCH;
                }
                start.elapsed()
            })
        });
        db.close();
    }
    group.finish();
}

/// Enqueue `n` messages in batches, deliver them all, close; a fresh database each time.
fn enqueue_then_deliver(c: &mut Criterion) {
    let n = messages();
    let mut group = configure(c, "queue_enqueue_then_deliver", n);
    for engine in ENGINES {
        group.bench_function(BenchmarkId::from_parameter(engine), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let dir = tempfile::tempdir().expect("tempdir");
                    let db = open_queue(engine, dir.path());
                    let start = Instant::now();
                    for first in (0..n).step_by(BATCH as usize) {
                        db.enqueue_batch(first, BATCH.min(n - first));
                    }
                    db.deliver_and_close(n);
                    total += start.elapsed();
                    check_drained(engine, dir.path());
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, enqueues, enqueue_then_deliver);
criterion_main!(benches);
