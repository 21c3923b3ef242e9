//! Workloads shared by the benchmarks: LevelDB db_bench's, with 16-byte keys and 100-byte
//! values, run against any engine behind [`BenchEngine`].

#![forbid(unsafe_code)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "benchmark driver: a failed operation aborts the measurement"
)]

pub mod chart;
pub mod histogram;
pub mod report;
pub mod servers;

use stampkv_engine::{Compression, Db, Options, SyncMode};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Key size in bytes (db_bench's default).
pub const KEY_BYTES: usize = 16;
/// Value size in bytes (db_bench's default).
pub const VALUE_BYTES: usize = 100;

/// The operations the workloads need from an engine.
pub trait BenchEngine: Send + Sync {
    /// Writes one key, handed to the OS but not synced.
    fn put(&self, key: &[u8], value: &[u8]);
    /// Writes one key durably (fdatasync before returning).
    fn put_durable(&self, key: &[u8], value: &[u8]);
    /// Reads one key; whether it was found.
    fn get(&self, key: &[u8]) -> bool;
    /// Iterates over everything in key order; the number of entries.
    fn scan_all(&self) -> usize;
    /// Positions an iterator at the first key at or after `key` and reads up to `count`
    /// entries from there; the number read.
    fn seek(&self, key: &[u8], count: usize) -> usize;
    /// Makes everything durable (end of a bulk phase).
    fn sync(&self);
    /// Writes the write buffers (memtables) out to the engine's data files and waits for
    /// that, so that a space measurement sees the data at rest rather than in the log.
    /// An engine whose commits write its data files directly (redb) keeps the default,
    /// which does nothing.
    fn flush(&self) {}
    /// Engine statistics worth printing, if any.
    fn report(&self) -> String {
        String::new()
    }
    /// The engine's own account of the memory it holds (caches, write buffers, open
    /// tables), if it keeps one.
    fn memory_bytes(&self) -> Option<u64> {
        None
    }
}

/// Key `i`: `k` followed by 15 zero-padded digits, so key order is numeric order.
pub fn key(i: u64) -> [u8; KEY_BYTES] {
    let mut key = [b'0'; KEY_BYTES];
    key[0] = b'k';
    let mut n = i;
    for byte in key[1..].iter_mut().rev() {
        *byte = b'0' + (n % 10) as u8;
        n /= 10;
    }
    key
}

/// A deterministic generator (SplitMix64).
/// The seeded generator the workloads draw keys and values from.
pub use stampkv_testkit::SplitMix64 as Rng;

/// Incompressible value bytes, cycled through by the workloads.
pub fn value_pool(seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    (0..1 << 20).map(|_| rng.next_u64() as u8).collect()
}

/// A 1 MiB pool of JSON-like text: the same field names in every record, numbers and
/// words from a small vocabulary varying. Values cut from it compress to about 0.4
/// (db_bench's `--compression_ratio 0.5` idea, with text instead of repeated bytes).
pub fn text_value_pool(seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut pool = Vec::with_capacity((1 << 20) + 256);
    while pool.len() < 1 << 20 {
        pool.extend_from_slice(stampkv_testkit::json_like_record(&mut rng).as_bytes());
        pool.push(b'\n');
    }
    pool.truncate(1 << 20);
    pool
}

/// The `i`-th value from the pool.
pub fn value(pool: &[u8], i: u64) -> &[u8] {
    let start = (i as usize * 97) % (pool.len() - VALUE_BYTES);
    &pool[start..start + VALUE_BYTES]
}

/// 0..n in a random order.
pub fn shuffled(n: u64, seed: u64) -> Vec<u64> {
    let mut order: Vec<u64> = (0..n).collect();
    let mut rng = Rng::new(seed);
    for i in (1..order.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// A pseudo-random permutation of `0..n` computed one element at a time, so that a
/// 100-million-key random fill needs no 800 MB shuffled array (which would count in the
/// engine process's peak memory). Each step is invertible modulo the next power of two;
/// values at or above `n` are walked on until they fall inside (at most two steps on
/// average).
pub struct Permutation {
    n: u64,
    bits: u32,
    seed: u64,
}

impl Permutation {
    /// The permutation of `0..n` chosen by `seed`.
    pub fn new(n: u64, seed: u64) -> Self {
        let bits = (64 - n.saturating_sub(1).leading_zeros()).max(2);
        Permutation { n, bits, seed: Rng::new(seed).next_u64() }
    }

    /// The `i`-th element (`i < n`).
    pub fn at(&self, i: u64) -> u64 {
        let mask = if self.bits >= 64 { u64::MAX } else { (1u64 << self.bits) - 1 };
        let mut x = i;
        loop {
            for round in 0..3u64 {
                x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15 | 1) & mask;
                x ^= x >> (self.bits / 2 + 1);
                x = x.wrapping_add(self.seed.rotate_left(round as u32 * 21)) & mask;
            }
            if x < self.n {
                return x;
            }
        }
    }
}

/// Inserts keys in the given order.
pub fn fill(engine: &dyn BenchEngine, order: &[u64], pool: &[u8]) -> Duration {
    let start = Instant::now();
    for &i in order {
        engine.put(&key(i), value(pool, i));
    }
    start.elapsed()
}

/// Reads keys in the given order; panics if one is missing.
pub fn read(engine: &dyn BenchEngine, order: &[u64]) -> Duration {
    let start = Instant::now();
    for &i in order {
        assert!(engine.get(&key(i)), "key {i} missing");
    }
    start.elapsed()
}

/// Scans everything; checks the count.
pub fn read_seq(engine: &dyn BenchEngine, expected: usize) -> Duration {
    let start = Instant::now();
    let count = engine.scan_all();
    let elapsed = start.elapsed();
    assert_eq!(count, expected, "scan count");
    elapsed
}

/// `total` durable single-key commits spread over `threads` writers.
pub fn fill_sync(engine: &Arc<dyn BenchEngine>, total: u64, threads: u64, pool: &Arc<Vec<u8>>) -> Duration {
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (engine, pool) = (engine.clone(), pool.clone());
            std::thread::spawn(move || {
                let mut i = t;
                while i < total {
                    engine.put_durable(&key(i), value(&pool, i));
                    i += threads;
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("writer thread");
    }
    start.elapsed()
}

/// stampkv's engine under the benchmark settings.
pub struct StampkvEngine {
    /// The database.
    pub db: Db,
}

impl StampkvEngine {
    /// Opens a database in `dir`: default options, commits handed to the OS without an
    /// fsync (like fjall's default), except `put_durable`, which syncs.
    pub fn open(dir: &Path) -> Self {
        Self::open_with_compression(dir, Compression::default())
    }

    /// [`StampkvEngine::open`] with the tables of every level compressed as given.
    pub fn open_with_compression(dir: &Path, compression: Compression) -> Self {
        Self::open_with(dir, compression, Options::default().block_cache_bytes)
    }

    /// [`StampkvEngine::open`] with the given compression and block cache size.
    pub fn open_with(dir: &Path, compression: Compression, block_cache_bytes: usize) -> Self {
        Self::open_with_options(dir, compression, block_cache_bytes, |_| {})
    }

    /// [`StampkvEngine::open_with`], with `adjust` changing the options last.
    pub fn open_with_options(
        dir: &Path,
        compression: Compression,
        block_cache_bytes: usize,
        adjust: impl FnOnce(&mut Options),
    ) -> Self {
        let mut options = Options::default();
        options.sync_mode = SyncMode::Buffered;
        options.block_cache_bytes = block_cache_bytes;
        options.table.compression = compression;
        adjust(&mut options);
        StampkvEngine { db: Db::open(dir, options).expect("open stampkv") }
    }
}

impl BenchEngine for StampkvEngine {
    fn put(&self, key: &[u8], value: &[u8]) {
        self.db.put(key, value).expect("put");
    }
    fn put_durable(&self, key: &[u8], value: &[u8]) {
        let mut batch = stampkv_engine::WriteBatch::new();
        batch.put(key, value);
        let options = stampkv_engine::WriteOptions::with_sync(Some(true));
        self.db.write_opt(batch, options).expect("put");
    }
    fn get(&self, key: &[u8]) -> bool {
        self.db.get(key).expect("get").is_some()
    }
    fn scan_all(&self) -> usize {
        let mut cursor = self.db.cursor::<&[u8], _>(..);
        let mut count = 0;
        while cursor.next().expect("scan") {
            std::hint::black_box((cursor.key(), cursor.value()));
            count += 1;
        }
        count
    }
    fn seek(&self, key: &[u8], count: usize) -> usize {
        let mut cursor = self.db.cursor(key..);
        let mut read = 0;
        while read < count && cursor.next().expect("seek") {
            std::hint::black_box((cursor.key(), cursor.value()));
            read += 1;
        }
        read
    }
    fn sync(&self) {
        self.db.sync_wal().expect("sync");
    }
    fn flush(&self) {
        self.db.flush().expect("flush");
    }
    fn memory_bytes(&self) -> Option<u64> {
        Some(self.db.stats().memory_bytes())
    }
    fn report(&self) -> String {
        let stats = self.db.stats();
        format!(
            "write-amp {:.2}, read compactions {}, idle memtable flushes {}, memtable {} KiB + {} frozen, files/level {:?}, level targets MiB {:?}, stalls {} ({} ms, longest {} ms), memtable switches {} (longest {} ms), tables {:.1} MiB ({:.1} MiB uncompressed, ratio {:.2}), open tables {} (index+filter {} KiB), index/filter cache hits/misses {:?}, heap trims {} ({} ms)",
            stats.write_amplification(),
            stats.read_compactions,
            stats.idle_flushes,
            stats.memtable_bytes >> 10,
            stats.immutable_memtables,
            stats.files_per_level,
            stats.level_target_bytes.map(|b| b >> 20),
            stats.stalls + stats.slowdowns,
            stats.stall_micros / 1000,
            stats.max_stall_micros / 1000,
            stats.memtable_switches,
            stats.max_memtable_switch_micros / 1000,
            stats.table_bytes as f64 / (1 << 20) as f64,
            stats.table_bytes_uncompressed as f64 / (1 << 20) as f64,
            stats.table_bytes as f64 / stats.table_bytes_uncompressed.max(1) as f64,
            stats.open_tables,
            stats.pinned_table_bytes >> 10,
            stats.block_cache_index_filter_hits_misses,
            stats.heap_trims,
            stats.heap_trim_micros / 1000
        )
    }
}

/// Peak resident memory of this process (VmHWM), in bytes, if the OS reports it.
pub fn peak_rss_bytes() -> Option<u64> {
    proc_status_bytes("VmHWM:")
}

/// Resident memory of this process now, in bytes (Linux; `None` elsewhere).
pub fn rss_bytes() -> Option<u64> {
    proc_status_bytes("VmRSS:")
}

/// A `kB` field of `/proc/self/status`, in bytes.
fn proc_status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Bytes of all files below `dir` (apparent sizes).
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| {
            let path = e.path();
            if path.is_dir() {
                dir_bytes(&path)
            } else {
                e.metadata().map_or(0, |m| m.len())
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_visits_every_index_once() {
        for n in [1u64, 2, 3, 17, 1000, 4096, 4097] {
            let permutation = Permutation::new(n, 7);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let x = permutation.at(i);
                assert!(x < n, "{x} out of 0..{n}");
                assert!(!seen[x as usize], "{x} twice in 0..{n}");
                seen[x as usize] = true;
            }
        }
        // Not the identity: a random fill must not be a sequential one.
        let permutation = Permutation::new(1000, 7);
        assert!((0..1000).filter(|&i| permutation.at(i) == i).count() < 20);
    }
}
