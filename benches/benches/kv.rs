//! Criterion version of the Deno KV workloads (see `examples/kv_bench.rs`): stampkv and
//! Deno KV's own SQLite backend (`denokv_sqlite`) side by side, the same requests through
//! both (`peers/denokv_peer.rs`).
//!
//! `cargo bench -p stampkv-benches --bench kv` (reads and lists on 100,000 entries, short
//! lists on another 100,000; set `STAMPKV_KV_BENCH_N` for another size). Throughput is in
//! elements: commits, reads, keys listed, sums.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "benchmark driver: a failed operation aborts the measurement"
)]

mod common;

#[path = "../peers/denokv_peer.rs"]
mod denokv_peer;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use denokv_peer::{check_key_encodings, open_kv, KvBench};
use stampkv_benches::{value, value_pool, Rng};
use std::sync::Arc;
use std::time::Duration;

const ENGINES: [&str; 2] = ["stampkv", "denokv"];
/// Commits per measured iteration of the 8-client workload.
const CONCURRENT_BATCH: u64 = 400;
const LIST_BATCH: usize = 1000;

fn entries() -> u64 {
    std::env::var("STAMPKV_KV_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000)
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

/// Durable check(absent) + set commits of new keys, from 1 and from 8 clients.
fn commits(c: &mut Criterion) {
    check_key_encodings();
    let pool = Arc::new(value_pool(42));
    let mut group = configure(c, "kv_commit_1_client", 1);
    for engine in ENGINES {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open_kv(engine, dir.path());
        let mut next = 0;
        group.bench_function(BenchmarkId::from_parameter(engine), |b| {
            b.iter(|| {
                assert!(db.commit_new(next, value(&pool, next)));
                next += 1;
            })
        });
        db.close();
    }
    group.finish();
    let mut group = configure(c, "kv_commit_8_clients", CONCURRENT_BATCH);
    for engine in ENGINES {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open_kv(engine, dir.path());
        let mut next = 0;
        group.bench_function(BenchmarkId::from_parameter(engine), |b| {
            b.iter_custom(|iters| {
                let start = std::time::Instant::now();
                for _ in 0..iters {
                    db.commit_new_concurrent(next, CONCURRENT_BATCH, 8, &pool);
                    next += CONCURRENT_BATCH;
                }
                start.elapsed()
            })
        });
        db.close();
    }
    group.finish();
}

/// Random point reads, lists of 1000 and durable sums on a loaded database.
fn reads_and_sums(c: &mut Criterion) {
    let n = entries();
    assert!(n >= LIST_BATCH as u64, "STAMPKV_KV_BENCH_N must be at least {LIST_BATCH}");
    let pool = value_pool(42);
    let loaded: Vec<(&str, tempfile::TempDir, Box<dyn KvBench>)> = ENGINES
        .iter()
        .map(|&engine| {
            let dir = tempfile::tempdir().expect("tempdir");
            let db = open_kv(engine, dir.path());
            db.load(n, &pool);
            db.settle();
            (engine, dir, db)
        })
        .collect();
    let mut group = configure(c, "kv_get", 1);
    for (engine, _, db) in &loaded {
        let mut rng = Rng::new(3);
        group.bench_function(BenchmarkId::from_parameter(engine), |b| {
            b.iter(|| assert!(db.get(rng.next_u64() % n)))
        });
    }
    group.finish();
    let mut group = configure(c, "kv_list_1000", LIST_BATCH as u64);
    for (engine, _, db) in &loaded {
        let mut j = 0;
        group.bench_function(BenchmarkId::from_parameter(engine), |b| {
            b.iter(|| {
                j += 1;
                let start = (j * LIST_BATCH as u64 * 7) % (n - LIST_BATCH as u64 + 1);
                assert_eq!(db.list(start, LIST_BATCH), LIST_BATCH);
            })
        });
    }
    group.finish();
    let mut group = configure(c, "kv_sum_100_counters", 1);
    for (engine, _, db) in &loaded {
        let mut i = 0;
        group.bench_function(BenchmarkId::from_parameter(engine), |b| {
            b.iter(|| {
                db.sum(i % 100);
                i += 1;
            })
        });
    }
    group.finish();
    for (_, _dir, db) in loaded {
        db.close();
    }
}

/// Short lists (`prefix: ["posts", u]`, limit 20) on a database of `["posts", u, j]` keys,
/// 50 per user.
fn short_lists(c: &mut Criterion) {
    const PER_USER: u64 = 50;
    const PAGE: usize = 20;
    let users = (entries() / PER_USER).max(1);
    let pool = value_pool(42);
    let mut group = configure(c, "kv_short_list_20", PAGE as u64);
    for engine in ENGINES {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open_kv(engine, dir.path());
        db.load_posts(users, PER_USER, &pool);
        db.settle();
        let mut rng = Rng::new(5);
        group.bench_function(BenchmarkId::from_parameter(engine), |b| {
            b.iter(|| assert_eq!(db.list_posts(rng.next_u64() % users, PAGE), PAGE))
        });
        db.close();
    }
    group.finish();
}

criterion_group!(benches, commits, reads_and_sums, short_lists);
criterion_main!(benches);
