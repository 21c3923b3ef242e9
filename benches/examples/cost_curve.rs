//! The cost curve: how stampkv, fjall and redb hold up as the database grows from fitting in
//! every cache to far beyond them. For each size it fills a fresh database in random order,
//! then measures point reads, seeks, a full scan and overwrites on it.
//!
//! ```text
//! cargo run --release -p stampkv-benches --example cost_curve -- [--sizes 1000000,10000000]
//!     [--engines stampkv,fjall,redb] [--values random|text] [--ops 1000000] [--runs 1]
//!     [--cache-mib 256] [--dir PATH] [--results benches/results/cost-curve.tsv] [--render-only]
//! ```
//!
//! The engine `stampkv-no-read-compaction` is stampkv with `read_triggered_compaction`
//! off, for measuring what the compactions that seeks ask for change.
//!
//! Each (engine, size) runs in its own child process, so peak memory is its own, and its
//! database is deleted before the next starts (a 100 M-key database is about 12 GB).
//! With `--runs N` each size is measured N times, the engines alternating within each
//! round; the results keep per metric the median run, or for the bounds (longest put,
//! stall time, peak memory) the worst, and every run's value is printed.
//! Keys are 16 bytes, values 100 bytes (`--values text`: JSON-like text that compresses to
//! about 0.4). Every engine gets the same cache budget (`--cache-mib`): stampkv's block
//! cache, fjall's block cache, redb's page cache; each keeps its own write buffers. With
//! `--defaults` (`--cache-mib 0`) every engine is opened with its default options instead
//! (results in `benches/results/cost-curve-defaults.tsv` unless `--results` says otherwise;
//! give it after `--defaults`).
//!
//! Workloads, in this order on one database:
//! - fillrandom: every key once, in a pseudo-random order (one put per key, handed to the
//!   OS without an fsync; redb: one transaction per put with `Durability::None`), then one
//!   sync. Reported: rate, p99, the longest single put, the time spent in puts of 10 ms or
//!   more (stalls seen from outside), write amplification (bytes the process passed to
//!   `write`/`pwrite` during the fill, over the logical bytes) and space amplification
//!   (directory bytes over logical bytes, right after the fill), and the `write`-family
//!   system calls per put (`syscw` in `/proc/self/io`: at 1 or more, each put reached
//!   the OS before it returned, so it survives the process being killed);
//! - readrandom: `--ops` uniformly random existing keys;
//! - seekrandom: `--ops` seeks to a random key, reading 10 entries from there;
//! - readseq: full scans, up to [`SCAN_PASSES`] while they have taken less than
//!   [`SCAN_BUDGET`] in all (a 1 M-key database gets five, a 100 M one a single scan);
//!   reported: the median pass, and the first pass apart. At 1 M keys a pass takes well
//!   under 0.1 s, short enough for one scheduling hiccup on a shared machine to move it by
//!   a third, so a single pass says more about the machine than about the engine;
//! - overwrite: `--ops` random existing keys written again; then the write
//!   amplification of the whole run, and the space amplification once the engine has
//!   written its memtables out ([`BenchEngine::flush`]; the directory sampled until it
//!   stops changing, at most [`SETTLE_LIMIT`]): the data at rest, its last overwrites
//!   included, without the log that still held them.
//!
//! Memory: peak RSS (`VmHWM`) of the child; for an engine that accounts for its own memory
//! (stampkv's `Stats::memory_bytes`: memtables, block cache, open tables) a thread samples
//! every 50 ms its largest account and by how much resident memory exceeded it; and the
//! child's global allocator counts live heap bytes, sampled at the highest resident memory,
//! so that what the allocator keeps beyond the live heap shows apart from what is in use.
//!
//! The results are merged into the `--results` file (tab-separated; a new run replaces the
//! rows of the same values, engine and size), and from all of its rows the runner writes
//! `cost-curve-<values>.md` (tables with ratios) and `cost-curve-<values>.svg` (charts) beside it.
//! `--render-only` redraws them from the file without running anything (e.g. after
//! merging the rows of runs made on different days).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "benchmark driver: a failed operation aborts the measurement"
)]

#[allow(dead_code, reason = "the peer module is shared by several benchmark binaries")]
#[path = "../peers/fjall_peer.rs"]
mod fjall_peer;
#[path = "../peers/redb_peer.rs"]
mod redb_peer;
#[cfg(stampkv_rocksdb)]
#[path = "../peers/rocksdb_peer.rs"]
mod rocksdb_peer;

use stampkv_benches::chart::{curves, key_count_text, Panel};
use stampkv_benches::histogram::LatencyHistogram;
use stampkv_benches::report::loadavg;
use stampkv_benches::{
    dir_bytes, key, peak_rss_bytes, rss_bytes, text_value_pool, value, value_pool, BenchEngine, Permutation,
    Rng, StampkvEngine, KEY_BYTES, VALUE_BYTES,
};
use stampkv_engine::Compression;
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A put at least this long counts as a stall.
const STALL_THRESHOLD: Duration = Duration::from_millis(10);
/// Entries read after each seek.
const SEEK_ENTRIES: usize = 10;
/// At most this many full scans per database (readseq).
const SCAN_PASSES: usize = 5;
/// No further full scan starts once the scans so far have taken this long.
const SCAN_BUDGET: Duration = Duration::from_secs(5);
/// How long the end-of-run space measurement waits for the directory to stop changing.
const SETTLE_LIMIT: Duration = Duration::from_secs(5);

/// Where results accumulate, with one cache budget for all engines and with `--defaults`.
const DEFAULT_RESULTS: &str = "benches/results/cost-curve.tsv";
const DEFAULTS_RESULTS: &str = "benches/results/cost-curve-defaults.tsv";

struct Args {
    sizes: Vec<u64>,
    engines: Vec<String>,
    text_values: bool,
    ops: u64,
    runs: usize,
    cache_mib: u64,
    dir: Option<PathBuf>,
    results: PathBuf,
    child: Option<String>,
    render_only: bool,
}

fn parse_args() -> Args {
    let mut args = Args {
        sizes: vec![1_000_000, 10_000_000],
        engines: vec!["stampkv".into(), "fjall".into(), "redb".into()],
        text_values: false,
        ops: 1_000_000,
        runs: 1,
        cache_mib: 256,
        dir: None,
        results: PathBuf::from(DEFAULT_RESULTS),
        child: None,
        render_only: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--sizes" => args.sizes = value().split(',').map(|s| s.parse().expect("--sizes")).collect(),
            "--engines" => args.engines = value().split(',').map(str::to_owned).collect(),
            "--values" => {
                args.text_values = match value().as_str() {
                    "random" => false,
                    "text" => true,
                    other => panic!("--values {other}: expected random or text"),
                }
            }
            "--ops" => args.ops = value().parse().expect("--ops"),
            "--runs" => args.runs = value().parse::<usize>().expect("--runs").max(1),
            "--cache-mib" => args.cache_mib = value().parse().expect("--cache-mib"),
            "--defaults" => {
                args.cache_mib = 0;
                if args.results == Path::new(DEFAULT_RESULTS) {
                    args.results = PathBuf::from(DEFAULTS_RESULTS);
                }
            }
            "--dir" => args.dir = Some(PathBuf::from(value())),
            "--results" => args.results = PathBuf::from(value()),
            "--child" => args.child = Some(value()),
            "--render-only" => args.render_only = true,
            "--bench" => {}
            "--help" | "-h" => {
                println!(
                    "cost_curve [--sizes 1000000,10000000] [--engines stampkv,fjall,redb] \
                     [--values random|text] [--ops 1000000] [--runs 1] [--cache-mib 256 | --defaults] [--dir PATH] \
                     [--results benches/results/cost-curve.tsv] [--render-only]"
                );
                std::process::exit(0);
            }
            other => panic!("unknown argument {other} (try --help)"),
        }
    }
    args
}

fn values_name(args: &Args) -> &'static str {
    if args.text_values {
        "text"
    } else {
        "random"
    }
}

/// Opens `engine` with a cache of `cache_bytes`; 0 opens it with its default options.
fn open(engine: &str, dir: &Path, cache_bytes: u64) -> Box<dyn BenchEngine> {
    if cache_bytes == 0 {
        return match engine {
            "stampkv" => Box::new(StampkvEngine::open(dir)),
            "fjall" => Box::new(fjall_peer::FjallEngine::open(dir)),
            "redb" => Box::new(redb_peer::RedbEngine::open(dir, 0)),
            #[cfg(stampkv_rocksdb)]
            "rocksdb" => Box::new(rocksdb_peer::RocksEngine::open_defaults(dir)),
            other => panic!("unknown engine {other} for --defaults"),
        };
    }
    match engine {
        "stampkv" => Box::new(StampkvEngine::open_with(dir, Compression::default(), cache_bytes as usize)),
        // Without the compactions that seeks ask for: what they change.
        "stampkv-no-read-compaction" => Box::new(StampkvEngine::open_with_options(
            dir,
            Compression::default(),
            cache_bytes as usize,
            |o| o.read_triggered_compaction = false,
        )),
        "fjall" => Box::new(fjall_peer::FjallEngine::open_with_cache(dir, Some(cache_bytes))),
        "redb" => Box::new(redb_peer::RedbEngine::open(dir, cache_bytes as usize)),
        #[cfg(stampkv_rocksdb)]
        "rocksdb" => Box::new(rocksdb_peer::RocksEngine::open(dir, cache_bytes as usize)),
        #[cfg(not(stampkv_rocksdb))]
        "rocksdb" => panic!("this build has no RocksDB: build with RUSTFLAGS=\"--cfg stampkv_rocksdb\""),
        other => panic!("unknown engine {other}"),
    }
}

/// Bytes this process has passed to `write`-family system calls (`wchar` in `/proc/self/io`).
fn bytes_written() -> u64 {
    proc_io("wchar:")
}

/// `write`-family system calls this process has made (`syscw` in `/proc/self/io`).
fn write_calls() -> u64 {
    proc_io("syscw:")
}

/// A counter of `/proc/self/io` (0 where there is none).
fn proc_io(field: &str) -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    io.lines().find_map(|l| l.strip_prefix(field)).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

fn rate(ops: u64, elapsed: Duration) -> f64 {
    ops as f64 / elapsed.as_secs_f64()
}

/// The median of `values` (the mean of the middle two for an even count); `values` is
/// left sorted.
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    match values.len() {
        0 => f64::NAN,
        len if len % 2 == 1 => values[middle],
        _ => (values[middle - 1] + values[middle]) / 2.0,
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Prints one `METRIC name value` line for the parent.
fn metric(name: &str, value: f64) {
    println!("METRIC {name} {value}");
}

/// Runs `ops` timed operations; returns the elapsed time and the latency histogram.
fn timed(ops: u64, mut op: impl FnMut(u64)) -> (Duration, LatencyHistogram) {
    let mut histogram = LatencyHistogram::default();
    let start = Instant::now();
    for i in 0..ops {
        let t = Instant::now();
        op(i);
        histogram.record(t.elapsed());
    }
    (start.elapsed(), histogram)
}

/// The system allocator, counting the bytes allocated and not yet freed, so that resident
/// memory can be split into live heap and what the allocator holds beyond it.
struct CountingAllocator;

static LIVE_HEAP_BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`'s
// contract; the counter has no effect on the memory returned.
#[allow(unsafe_code, reason = "a global allocator can only be written with unsafe code")]
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_HEAP_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller's obligations are `System::alloc`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_HEAP_BYTES.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE_HEAP_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_HEAP_BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        LIVE_HEAP_BYTES.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller's obligations are `System::realloc`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Memory peaks seen by [`sample_memory`].
#[derive(Default)]
struct MemoryPeaks {
    /// The most the engine said it held (`BenchEngine::memory_bytes`).
    engine_bytes: u64,
    /// The most resident memory exceeded the engine's account at the same moment.
    rss_beyond_engine_bytes: u64,
    /// At the sample with the most resident memory: (resident, engine, live heap) bytes.
    at_peak_rss: (u64, u64, u64),
}

/// Every 50 ms until `stop`, compares the process's resident memory with the engine's own
/// account of its memory; `None` for an engine that keeps no account.
fn sample_memory(db: &dyn BenchEngine, stop: &AtomicBool) -> Option<MemoryPeaks> {
    let mut peaks = MemoryPeaks::default();
    while !stop.load(Ordering::Relaxed) {
        let engine = db.memory_bytes()?;
        let rss = rss_bytes()?;
        peaks.engine_bytes = peaks.engine_bytes.max(engine);
        peaks.rss_beyond_engine_bytes = peaks.rss_beyond_engine_bytes.max(rss.saturating_sub(engine));
        if rss > peaks.at_peak_rss.0 {
            peaks.at_peak_rss = (rss, engine, LIVE_HEAP_BYTES.load(Ordering::Relaxed));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(peaks)
}

/// One engine at one size: every workload, printed as `METRIC` lines, with the memory the
/// process and the engine held meanwhile.
fn child(engine: &str, n: u64, args: &Args) {
    let dir = args.dir.clone().expect("--dir");
    let db = open(engine, &dir, args.cache_mib << 20);
    let stop = AtomicBool::new(false);
    let peaks = std::thread::scope(|scope| {
        let sampler = scope.spawn(|| sample_memory(&*db, &stop));
        workloads(engine, &*db, n, args);
        stop.store(true, Ordering::Relaxed);
        sampler.join().expect("memory sampler")
    });
    metric("peak_rss_mib", peak_rss_bytes().unwrap_or(0) as f64 / (1 << 20) as f64);
    if let Some(peaks) = peaks {
        metric("peak_engine_memory_mib", peaks.engine_bytes as f64 / (1 << 20) as f64);
        metric("peak_rss_beyond_engine_mib", peaks.rss_beyond_engine_bytes as f64 / (1 << 20) as f64);
        let (rss, engine, heap) = peaks.at_peak_rss;
        metric("live_heap_at_peak_rss_mib", heap as f64 / (1 << 20) as f64);
        println!(
            "INFO at the highest sampled RSS, {} MiB: engine {} MiB, live heap {} MiB",
            rss >> 20,
            engine >> 20,
            heap >> 20
        );
    }
    let report = db.report();
    if !report.is_empty() {
        println!("INFO {report}");
    }
}

/// Fill, then every measured workload, on one database.
fn workloads(engine: &str, db: &dyn BenchEngine, n: u64, args: &Args) {
    let pool = if args.text_values { text_value_pool(42) } else { value_pool(42) };
    let dir = args.dir.clone().expect("--dir");
    let logical = n * (KEY_BYTES + VALUE_BYTES) as u64;
    let written_before = bytes_written();
    let calls_before = write_calls();

    let order = Permutation::new(n, 1);
    let (elapsed, fill) = timed(n, |i| {
        let k = order.at(i);
        db.put(&key(k), value(&pool, k));
    });
    db.sync();
    let fill_written = bytes_written() - written_before;
    metric("fill_write_calls_per_put", (write_calls() - calls_before) as f64 / n as f64);
    metric("fillrandom_ops", rate(n, elapsed));
    metric("fillrandom_p99_us", micros(fill.quantile(0.99)));
    metric("fill_seconds", elapsed.as_secs_f64());
    metric("fill_max_put_ms", micros(fill.max()) / 1000.0);
    metric("fill_stall_ms", micros(fill.time_at_or_above(STALL_THRESHOLD)) / 1000.0);
    metric("fill_write_amp", fill_written as f64 / logical as f64);
    metric("space_amp", dir_bytes(&dir) as f64 / logical as f64);
    eprintln!("{engine} {n}: filled in {:.1} s", elapsed.as_secs_f64());

    let ops = args.ops;
    let mut rng = Rng::new(3);
    let (elapsed, reads) = timed(ops, |_| {
        let k = rng.next_u64() % n;
        assert!(db.get(&key(k)), "{engine}: key {k} missing");
    });
    metric("readrandom_ops", rate(ops, elapsed));
    metric("readrandom_p99_us", micros(reads.quantile(0.99)));

    let (elapsed, seeks) = timed(ops, |_| {
        let k = rng.next_u64() % n;
        let read = db.seek(&key(k), SEEK_ENTRIES);
        assert_eq!(read as u64, SEEK_ENTRIES.min((n - k) as usize) as u64, "{engine}: seek to {k}");
    });
    metric("seekrandom_ops", rate(ops, elapsed));
    metric("seekrandom_p99_us", micros(seeks.quantile(0.99)));

    let mut passes = Vec::new();
    let scans_started = Instant::now();
    while passes.len() < SCAN_PASSES && scans_started.elapsed() < SCAN_BUDGET {
        let start = Instant::now();
        assert_eq!(db.scan_all() as u64, n, "{engine}: scan count");
        passes.push(rate(n, start.elapsed()));
    }
    metric("readseq_first_ops", passes[0]);
    metric("readseq_passes", passes.len() as f64);
    metric("readseq_ops", median(&mut passes));

    let (elapsed, overwrites) = timed(ops, |_| {
        let k = rng.next_u64() % n;
        db.put(&key(k), value(&pool, k ^ 1));
    });
    db.sync();
    metric("overwrite_ops", rate(ops, elapsed));
    metric("overwrite_p99_us", micros(overwrites.quantile(0.99)));
    let all_logical = logical + ops * (KEY_BYTES + VALUE_BYTES) as u64;
    metric("write_amp_total", (bytes_written() - written_before) as f64 / all_logical as f64);
    db.flush();
    metric("space_amp_flushed", settled_dir_bytes(&dir) as f64 / logical as f64);
}

/// Directory bytes once they stop changing (obsolete logs and tables are removed in the
/// background): sampled every 100 ms until two samples agree, at most [`SETTLE_LIMIT`].
fn settled_dir_bytes(dir: &Path) -> u64 {
    let started = Instant::now();
    let mut last = dir_bytes(dir);
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = dir_bytes(dir);
        if now == last || started.elapsed() >= SETTLE_LIMIT {
            return now;
        }
        last = now;
    }
}

/// Rows of the results file: (values, engine, keys, metric) → value.
type Results = BTreeMap<(String, String, u64, String), f64>;

fn load_results(path: &Path) -> Results {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut results = Results::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let fields: Vec<&str> = line.split('\t').collect();
        if let [values, engine, keys, metric, value] = fields.as_slice() {
            results.insert(
                ((*values).into(), (*engine).into(), keys.parse().expect("keys"), (*metric).into()),
                value.parse().expect("value"),
            );
        }
    }
    results
}

fn save_results(path: &Path, results: &Results) {
    let mut text =
        String::from("# values\tengine\tkeys\tmetric\tvalue (written by examples/cost_curve.rs)\n");
    for ((values, engine, keys, metric), value) in results {
        text.push_str(&format!("{values}\t{engine}\t{keys}\t{metric}\t{value}\n"));
    }
    std::fs::write(path, text).expect("write results");
}

/// The metrics in the tables and charts: (key, label, unit, higher is better).
const METRICS: [(&str, &str, &str, bool); 23] = [
    ("fillrandom_ops", "fillrandom", "ops/s", true),
    ("fillrandom_p99_us", "fillrandom p99", "µs", false),
    ("fill_max_put_ms", "longest put during fill", "ms", false),
    ("fill_stall_ms", "time in puts ≥ 10 ms", "ms", false),
    ("fill_write_amp", "write amplification (fill)", "×", false),
    ("fill_write_calls_per_put", "write system calls per put (fill)", "calls", false),
    ("space_amp", "space amplification (after fill)", "×", false),
    ("space_amp_flushed", "space amplification (end of run, memtables flushed)", "×", false),
    ("readrandom_ops", "readrandom", "ops/s", true),
    ("readrandom_p99_us", "readrandom p99", "µs", false),
    ("seekrandom_ops", "seekrandom (seek + 10 entries)", "ops/s", true),
    ("seekrandom_p99_us", "seekrandom p99", "µs", false),
    ("readseq_ops", "readseq (full scan, median pass)", "keys/s", true),
    ("readseq_first_ops", "readseq, first pass", "keys/s", true),
    ("readseq_passes", "readseq passes", "scans", false),
    ("overwrite_ops", "overwrite", "ops/s", true),
    ("overwrite_p99_us", "overwrite p99", "µs", false),
    ("write_amp_total", "write amplification (whole run)", "×", false),
    ("peak_rss_mib", "peak RSS", "MiB", false),
    ("peak_engine_memory_mib", "peak engine-accounted memory", "MiB", false),
    ("peak_rss_beyond_engine_mib", "peak RSS beyond the engine's account", "MiB", false),
    ("live_heap_at_peak_rss_mib", "live heap at peak RSS", "MiB", false),
    ("fill_seconds", "fill time", "s", false),
];

fn value_text(value: f64) -> String {
    if value >= 1e6 {
        format!("{:.2} M", value / 1e6)
    } else if value >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

/// The engines' caches, for captions.
fn cache_text(cache_mib: u64) -> String {
    if cache_mib == 0 {
        "every engine with its default options (caches: stampkv's sized to the machine, redb 1 GiB, fjall 32 MiB)".into()
    } else {
        format!("every engine had a {cache_mib} MiB cache")
    }
}

/// Markdown tables, one per size, with each engine's value and stampkv's ratio to it.
fn write_markdown(path: &Path, values: &str, results: &Results, cache_mib: u64) {
    let engines: Vec<String> = ["stampkv", "stampkv-no-read-compaction", "fjall", "redb", "rocksdb"]
        .into_iter()
        .filter(|e| results.keys().any(|(v, en, _, _)| v == values && en == e))
        .map(str::to_owned)
        .collect();
    let mut sizes: Vec<u64> =
        results.keys().filter(|(v, _, _, _)| v == values).map(|(_, _, keys, _)| *keys).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut text = format!(
        "# Cost curve: {values} values\n\nWritten by `examples/cost_curve.rs` (see its header for the method). \
         16-byte keys, 100-byte {values} values; {}. \
         Ratios are stampkv's value over the peer's (for rates higher is better; for latency, \
         amplification and memory lower is better).\n",
        cache_text(cache_mib)
    );
    for keys in sizes {
        text.push_str(&format!("\n## {} keys\n\n| metric |", key_count_text(keys as f64)));
        let present: Vec<&String> = engines
            .iter()
            .filter(|e| results.keys().any(|(v, en, k, _)| v == values && en == *e && *k == keys))
            .collect();
        for engine in &present {
            text.push_str(&format!(" {engine} |"));
        }
        let has_stampkv = present.iter().any(|e| e.as_str() == "stampkv");
        let peers: Vec<&String> =
            present.iter().copied().filter(|e| has_stampkv && e.as_str() != "stampkv").collect();
        for engine in &peers {
            text.push_str(&format!(" stampkv / {engine} |"));
        }
        text.push_str("\n|---|");
        for _ in 0..present.len() + peers.len() {
            text.push_str("---:|");
        }
        text.push('\n');
        for (metric, label, unit, _) in METRICS {
            let get =
                |engine: &str| results.get(&(values.into(), engine.into(), keys, metric.into())).copied();
            text.push_str(&format!("| {label} ({unit}) |"));
            for engine in &present {
                text.push_str(&format!(" {} |", get(engine).map_or("–".into(), value_text)));
            }
            for engine in &peers {
                let ratio = match (get("stampkv"), get(engine)) {
                    (Some(ours), Some(theirs)) if theirs > 0.0 => format!("{:.2}", ours / theirs),
                    _ => "–".into(),
                };
                text.push_str(&format!(" {ratio} |"));
            }
            text.push('\n');
        }
    }
    std::fs::write(path, text).expect("write markdown");
}

fn write_chart(path: &Path, values: &str, results: &Results, cache_mib: u64) {
    let charted = [
        "fillrandom_ops",
        "readrandom_ops",
        "seekrandom_ops",
        "readseq_ops",
        "overwrite_ops",
        "readrandom_p99_us",
        "fill_write_amp",
        "space_amp",
        "peak_rss_mib",
    ];
    let panels: Vec<Panel> = charted
        .iter()
        .map(|&metric| {
            let (_, label, unit, _) = METRICS.iter().find(|m| m.0 == metric).copied().expect("metric");
            let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
            for ((v, engine, keys, m), value) in results {
                if v == values && m == metric {
                    series.entry(engine.clone()).or_default().push((*keys as f64, *value));
                }
            }
            let mut series: Vec<(String, Vec<(f64, f64)>)> = series.into_iter().collect();
            series.sort_by_key(|(engine, _)| {
                ["stampkv", "fjall", "redb", "rocksdb"].iter().position(|e| e == engine)
            });
            Panel { title: label.to_owned(), y_desc: unit.to_owned(), series }
        })
        .collect();
    let caption = format!(
        "stampkv, fjall, redb: cost by database size ({values} 100-byte values, {})",
        cache_text(cache_mib)
    );
    curves(path, &caption, &panels).expect("draw chart");
}

/// One engine at one size in a child process (run `run` of `--runs`): its metrics, printed
/// as they come.
fn run_child(exe: &Path, root: &Path, engine: &str, n: u64, run: usize, args: &Args) -> Vec<(String, f64)> {
    let values = values_name(args);
    let dir = root.join(format!("{engine}-{n}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create dir");
    eprintln!("{engine}, {n} keys, {values} values, run {run} of {} (load {})", args.runs, loadavg());
    let started = Instant::now();
    let output = Command::new(exe)
        .args(["--child", engine, "--sizes", &n.to_string(), "--ops", &args.ops.to_string()])
        .args(["--values", values, "--cache-mib", &args.cache_mib.to_string()])
        .arg("--dir")
        .arg(&dir)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run child");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(output.status.success(), "{engine} at {n} keys failed");
    let mut metrics = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let mut parts = line.splitn(3, ' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("METRIC"), Some(name), Some(value)) => {
                let value: f64 = value.parse().expect("metric value");
                println!("{engine:>8} {n:>10} {name:<20} {}", value_text(value));
                metrics.push((name.to_owned(), value));
            }
            (Some("INFO"), Some(first), Some(rest)) => println!("{engine:>8} {n:>10} {first} {rest}"),
            _ => {}
        }
    }
    eprintln!("{engine}, {n} keys: {:.0} s in all", started.elapsed().as_secs_f64());
    metrics
}

/// What the results record of a metric measured in several runs: the worst run for the
/// bounds (the longest put, stall time, peak memory), the median for everything else
/// (rates, latencies, amplification), so that one noisy run moves neither way.
fn combine_runs(name: &str, values: &[f64]) -> f64 {
    let worst_is_highest = ["max", "stall", "peak", "heap"].iter().any(|word| name.contains(word));
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if worst_is_highest {
        sorted.last().copied().unwrap_or(0.0)
    } else {
        median(&mut sorted)
    }
}

fn main() {
    let args = parse_args();
    if let Some(engine) = &args.child {
        child(engine, args.sizes[0], &args);
        return;
    }
    let exe = std::env::current_exe().expect("current exe");
    let root = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("cost-curve-{}", std::process::id())),
    };
    let mut results = load_results(&args.results);
    if let Some(parent) = args.results.parent() {
        std::fs::create_dir_all(parent).expect("results dir");
    }
    let values = values_name(&args);
    let sizes = if args.render_only { &[][..] } else { &args.sizes[..] };
    for &n in sizes {
        // Every run's value of each (engine, metric), runs alternating between engines.
        let mut runs: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
        for run in 1..=args.runs {
            for engine in &args.engines {
                for (name, value) in run_child(&exe, &root, engine, n, run, &args) {
                    runs.entry((engine.clone(), name)).or_default().push(value);
                }
            }
        }
        for ((engine, name), values_seen) in runs {
            let value = combine_runs(&name, &values_seen);
            if args.runs > 1 {
                let each: Vec<String> = values_seen.iter().map(|v| value_text(*v)).collect();
                println!(
                    "{engine:>8} {n:>10} {name:<20} {} of {} runs: {}",
                    value_text(value),
                    args.runs,
                    each.join(", ")
                );
            }
            results.insert((values.into(), engine, n, name), value);
        }
        save_results(&args.results, &results);
    }
    let _ = std::fs::remove_dir(&root);
    // cost-curve.tsv -> cost-curve-random.md, cost-curve-defaults.tsv -> cost-curve-defaults-random.md
    let stem = args.results.file_stem().map_or("cost-curve".into(), |s| s.to_string_lossy().into_owned());
    let base = args.results.with_file_name(format!("{stem}-{values}"));
    write_markdown(&base.with_extension("md"), values, &results, args.cache_mib);
    write_chart(&base.with_extension("svg"), values, &results, args.cache_mib);
    println!("wrote {} and {}", base.with_extension("md").display(), base.with_extension("svg").display());
}
