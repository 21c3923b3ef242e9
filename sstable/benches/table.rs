//! The table layer's own cost, without the engine, on tables held in memory:
//!
//! - `sstable_cached`: a warm block cache; point gets of present and absent keys, and full
//!   scans both ways;
//! - `sstable_build` and `sstable_uncached_get`: what block compression costs. Building a
//!   whole table, and point gets with no block cache (every get reads, checks and decodes
//!   its block), with and without LZ4, on incompressible values (random bytes: LZ4 is tried
//!   and the blocks stored as they are) and on JSON-like text (stored compressed).
//!
//! `cargo bench -p stampkv-sstable --bench table` (`STAMPKV_TABLE_BENCH_N` entries, default
//! 200,000, with 16-byte keys and 100-byte values).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "benchmark driver: a failed operation aborts the measurement"
)]

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use stampkv_sstable::{BlockCache, Compression, ReadAt, Table, TableBuilder, TableOptions};
use stampkv_testkit::SplitMix64;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

/// Point gets per measured iteration.
const GETS: usize = 10_000;

fn entries() -> usize {
    std::env::var("STAMPKV_TABLE_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(200_000)
}

/// The 16-byte user key of entry `i`.
fn key(i: usize) -> Vec<u8> {
    format!("key-{:012}", i * 7).into_bytes()
}

/// A table of `n` entries (one version each, 100-byte values) behind a 256 MiB cache,
/// scanned once so that every block is cached.
fn cached_table(n: usize) -> Arc<Table> {
    let mut builder = TableBuilder::new(Vec::new(), TableOptions::default());
    for i in 0..n {
        let value = format!("{i:08}").into_bytes().repeat(13);
        builder.add(&key(i), 100 + i as u64, &value[..100]).expect("add");
    }
    let bytes = builder.finish(&[]).expect("finish").1;
    let file: Arc<dyn ReadAt> = Arc::new(bytes);
    let cache = Arc::new(BlockCache::new(256 << 20));
    let table = Table::open(file, 1, "bench.sst".into(), Some(cache)).expect("open");
    assert_eq!(scan(&table, true), n, "the table holds every entry");
    table
}

/// Visits every entry forward or backward; how many there were.
fn scan(table: &Arc<Table>, forward: bool) -> usize {
    let mut it = table.iter();
    if forward {
        it.seek_to_first().expect("seek");
    } else {
        it.seek_to_last().expect("seek");
    }
    let mut count = 0;
    while it.valid() {
        black_box((it.user_key(), it.trailer(), it.value()));
        count += 1;
        if forward {
            it.next().expect("next");
        } else {
            it.prev().expect("prev");
        }
    }
    count
}

fn table_reads(c: &mut Criterion) {
    let n = entries();
    let table = cached_table(n);
    let mut rng = SplitMix64::new(7);
    let present: Vec<(Vec<u8>, u64)> = (0..GETS)
        .map(|_| {
            let i = rng.index(n);
            (key(i), 100 + i as u64)
        })
        .collect();
    let absent: Vec<Vec<u8>> = (0..GETS).map(|i| format!("absent-{i:09}").into_bytes()).collect();

    let mut group = c.benchmark_group("sstable_cached");
    group.sample_size(20).sampling_mode(SamplingMode::Flat).measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Elements(GETS as u64));
    group.bench_function("get_present", |b| {
        b.iter(|| {
            for (user, trailer) in &present {
                assert!(table.get(user, *trailer).expect("get").is_some());
            }
        })
    });
    group.bench_function("get_absent", |b| {
        b.iter(|| {
            for user in &absent {
                black_box(table.get(user, u64::MAX).expect("get"));
            }
        })
    });
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function("scan_forward", |b| b.iter(|| assert_eq!(scan(&table, true), n)));
    group.bench_function("scan_reverse", |b| b.iter(|| assert_eq!(scan(&table, false), n)));
    group.finish();
}

/// `n` 100-byte values: random bytes, or JSON-like records that LZ4 stores in about 0.4
/// of their size.
fn values(n: usize, text: bool) -> Vec<Vec<u8>> {
    let mut rng = SplitMix64::new(11);
    (0..n)
        .map(|_| {
            if text {
                let record = stampkv_testkit::json_like_record(&mut rng);
                let mut value = record.into_bytes();
                value.resize(100, b' ');
                value
            } else {
                (0..100).map(|_| rng.next_u64() as u8).collect()
            }
        })
        .collect()
}

/// The bytes of a table holding `key(i)` → `values[i]`, data blocks compressed as given.
fn build(values: &[Vec<u8>], compression: Compression) -> Vec<u8> {
    let mut builder = TableBuilder::new(Vec::new(), TableOptions { compression, ..TableOptions::default() });
    for (i, value) in values.iter().enumerate() {
        builder.add(&key(i), 100 + i as u64, value).expect("add");
    }
    builder.finish(&[]).expect("finish").1
}

fn compression_costs(c: &mut Criterion) {
    let n = entries();
    let mut rng = SplitMix64::new(5);
    let lookups: Vec<usize> = (0..GETS).map(|_| rng.index(n)).collect();
    for (data, text) in [("random", false), ("text", true)] {
        let values = values(n, text);
        let mut group = c.benchmark_group(format!("sstable_build_{data}"));
        group.sample_size(20).sampling_mode(SamplingMode::Flat).measurement_time(Duration::from_secs(5));
        group.throughput(Throughput::Bytes((n * (16 + 100)) as u64));
        for compression in [Compression::None, Compression::Lz4] {
            group.bench_function(compression.name(), |b| {
                b.iter(|| black_box(build(&values, compression).len()))
            });
        }
        group.finish();

        let mut group = c.benchmark_group(format!("sstable_uncached_get_{data}"));
        group.sample_size(20).sampling_mode(SamplingMode::Flat).measurement_time(Duration::from_secs(5));
        group.throughput(Throughput::Elements(GETS as u64));
        for compression in [Compression::None, Compression::Lz4] {
            let file: Arc<dyn ReadAt> = Arc::new(build(&values, compression));
            let table = Table::open(file, 1, "bench.sst".into(), None).expect("open");
            group.bench_function(compression.name(), |b| {
                b.iter(|| {
                    for &i in &lookups {
                        let (_, value) = table.get(&key(i), u64::MAX).expect("get").expect("present");
                        assert_eq!(value, values[i]);
                    }
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, table_reads, compression_costs);
criterion_main!(benches);
