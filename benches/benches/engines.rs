//! Criterion version of the db_bench workloads, stampkv and fjall side by side.
//!
//! `cargo bench -p stampkv-benches --bench engines` (1,000,000 entries; set
//! `STAMPKV_BENCH_N` for another size). Each measurement runs a whole workload, so the
//! reported throughput (elements/s) is directly comparable between the two engines.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "benchmark driver: a failed operation aborts the measurement"
)]

mod common;

#[path = "../peers/fjall_peer.rs"]
mod fjall_peer;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use stampkv_benches::{fill, fill_sync, read, read_seq, shuffled, value_pool, BenchEngine, StampkvEngine};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const ENGINES: [&str; 2] = ["stampkv", "fjall"];

fn entries() -> u64 {
    std::env::var("STAMPKV_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000)
}

fn open(engine: &str, dir: &Path) -> Arc<dyn BenchEngine> {
    match engine {
        "stampkv" => Arc::new(StampkvEngine::open(dir)),
        _ => Arc::new(fjall_peer::FjallEngine::open(dir)),
    }
}

/// Warm-up and measurement time of every group.
const WARM_UP: Duration = Duration::from_millis(1);
const MEASUREMENT: Duration = Duration::from_secs(20);

fn configure<'a>(
    c: &'a mut Criterion,
    name: &str,
    elements: u64,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    common::configure(c, name, elements, WARM_UP, MEASUREMENT)
}

/// fillseq, fillrandom and overwrite: every measured iteration fills a fresh database.
fn fills(c: &mut Criterion) {
    let n = entries();
    let pool = value_pool(42);
    let sequential: Vec<u64> = (0..n).collect();
    let random = shuffled(n, 1);
    for (name, order) in [("fillseq", &sequential), ("fillrandom", &random)] {
        let mut group = configure(c, name, n);
        for engine in ENGINES {
            group.bench_function(BenchmarkId::from_parameter(engine), |b| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| {
                            let dir = tempfile::tempdir().expect("tempdir");
                            let db = open(engine, dir.path());
                            fill(&*db, order, &pool)
                        })
                        .sum()
                })
            });
        }
        group.finish();
    }
    let mut group = configure(c, "overwrite", n);
    for engine in ENGINES {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(engine, dir.path());
        fill(&*db, &random, &pool);
        let mut seed = 2;
        group.bench_function(BenchmarkId::from_parameter(engine), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        seed += 1;
                        fill(&*db, &shuffled(n, seed), &pool)
                    })
                    .sum()
            })
        });
    }
    group.finish();
}

/// readrandom and readseq on a database filled in random order.
fn reads(c: &mut Criterion) {
    let n = entries();
    let pool = value_pool(42);
    let loaded: Vec<_> = ENGINES
        .iter()
        .map(|engine| {
            let dir = tempfile::tempdir().expect("tempdir");
            let db = open(engine, dir.path());
            fill(&*db, &shuffled(n, 1), &pool);
            (engine, dir, db)
        })
        .collect();
    let order = shuffled(n, 3);
    let mut group = configure(c, "readrandom", n);
    for (engine, _, db) in &loaded {
        group.bench_function(BenchmarkId::from_parameter(engine), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| read(&**db, &order)).sum())
        });
    }
    group.finish();
    let mut group = configure(c, "readseq", n);
    for (engine, _, db) in &loaded {
        group.bench_function(BenchmarkId::from_parameter(engine), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| read_seq(&**db, n as usize)).sum())
        });
    }
    group.finish();
}

/// fillsync: durable single-key commits from 1 and from 8 writer threads.
fn fillsync(c: &mut Criterion) {
    let total = 5_000;
    let pool = Arc::new(value_pool(42));
    for threads in [1u64, 8] {
        let mut group = configure(c, &format!("fillsync_{threads}_writers"), total);
        for engine in ENGINES {
            group.bench_function(BenchmarkId::from_parameter(engine), |b| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| {
                            let dir = tempfile::tempdir().expect("tempdir");
                            let db = open(engine, dir.path());
                            fill_sync(&db, total, threads, &pool)
                        })
                        .sum()
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, fills, reads, fillsync);
criterion_main!(benches);
