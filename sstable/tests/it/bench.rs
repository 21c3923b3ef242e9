//! Micro benchmarks (ignored by default). Run with
//! `cargo test --release -p stampkv-sstable --test it -- --ignored --nocapture bench`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use stampkv_sstable::{BlockCache, TableOptions};

use crate::common::{build, fixed_entries, open, Entry, Rng};

/// Cached point gets of present keys (keys read from a contiguous probe array).
fn bench_gets(table: &stampkv_sstable::Table, entries: &[Entry], rng: &mut Rng, label: &str) {
    let probes: Vec<([u8; 16], u64)> = (0..1_000_000)
        .map(|_| {
            let (user, trailer, _) = &entries[rng.below(entries.len())];
            (user[..16].try_into().unwrap(), *trailer)
        })
        .collect();
    let start = Instant::now();
    for (user, trailer) in &probes {
        black_box(table.get(user, *trailer).unwrap());
    }
    let per_get = start.elapsed().as_nanos() as f64 / probes.len() as f64;
    println!("{label}: cached get (present): {per_get:.0} ns/op");
    let absent: Vec<[u8; 16]> =
        (0..1_000_000u64).map(|i| format!("absent-{i:09}").into_bytes().try_into().unwrap()).collect();
    let start = Instant::now();
    for user in &absent {
        black_box(table.get(user, u64::MAX).unwrap());
    }
    let per_absent = start.elapsed().as_nanos() as f64 / absent.len() as f64;
    println!("{label}: get (absent): {per_absent:.0} ns/op");
}

fn bench_scans(table: &Arc<stampkv_sstable::Table>, label: &str) {
    for _ in 0..3 {
        let start = Instant::now();
        let mut it = table.iter();
        it.seek_to_first().unwrap();
        let mut count = 0usize;
        while it.valid() {
            black_box((it.user_key(), it.trailer(), it.value()));
            count += 1;
            it.next().unwrap();
        }
        let secs = start.elapsed().as_secs_f64();
        println!("{label}: forward scan: {:.1} M entries/s", count as f64 / secs / 1e6);
    }
    let start = Instant::now();
    let mut it = table.iter();
    it.seek_to_last().unwrap();
    let mut count = 0usize;
    while it.valid() {
        black_box((it.user_key(), it.value()));
        count += 1;
        it.prev().unwrap();
    }
    let rate = count as f64 / start.elapsed().as_secs_f64() / 1e6;
    println!("{label}: reverse scan: {rate:.1} M entries/s");
}

#[test]
#[ignore]
fn bench_cached_get_and_scan() {
    let mut rng = Rng::new(7);
    // BENCH_N=<entries> runs one size only (for profiling).
    let sizes = match std::env::var("BENCH_N").ok().and_then(|v| v.parse().ok()) {
        Some(n) => vec![n],
        None => vec![20_000, 200_000],
    };
    for n in sizes {
        let entries = fixed_entries(n, 100);
        // BENCH_RESTART=<n> overrides the restart interval (default 16).
        let restart_interval = std::env::var("BENCH_RESTART").ok().and_then(|v| v.parse().ok()).unwrap_or(16);
        let options = TableOptions { restart_interval, ..TableOptions::default() };
        let bytes = build(&entries, options);
        let cache = Arc::new(BlockCache::new(256 << 20));
        let table = open(bytes, 1, Some(cache.clone()));
        let label = format!("{n} entries");
        bench_scans(&table, &label); // the first scan also warms the cache
        bench_gets(&table, &entries, &mut rng, &label);
        let (hits, misses) = cache.hit_stats();
        println!("{label}: cache hits {hits}, misses {misses}");
    }
}
