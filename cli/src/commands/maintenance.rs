//! `verify`, `repair`, `stats`, `compact`: the health and shape of a database's files.
//!
//! `verify` and `repair` work on a closed database (they take its lock): `verify` reads
//! every file and checks every checksum, printing each problem as `FILE at offset N: what`
//! on standard output; its exit status is 0 when nothing was found, 3
//! ([`CliError::PROBLEMS_FOUND`]) when problems were, 1 when it could not check. `repair`
//! salvages what is readable into a consistent database, prints what was lost, and keeps
//! the files it replaced in a `repair-NNNNNN` subdirectory. `stats` opens the database to
//! read only (it writes nothing to the directory; other readers may have it open at once,
//! a writer may not); `compact` opens it for writing (so it must not be open elsewhere).

use crate::engine_error::{
    count, count_as, engine_error, kv_error, open_existing, require_database, show_key, ByteProgress,
};
use crate::error::CliError;
use crate::output::out;
use crate::transfer::target::{Location, Source};
use indicatif::HumanBytes;
use stampkv::engine::{
    fs::StdFs, repair as repair_database, verify as verify_database, Loss, Options, Problem,
};
use stampkv::store::ReadOnlyStore;
use stampkv::{Kv, KvOptions};
use stampkv_etcd::EtcdStore;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Number of levels of the tree.
const LEVELS: usize = 7;

/// Arguments of `stampkv verify`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Each problem is printed as `FILE at offset N: what`. Exit status: 0 no problem, \
3 problems found, 1 the database could not be checked (not a database, open in another process, ...).")]
pub struct VerifyArgs {
    /// The database directory (it must not be open in another process).
    #[arg(long)]
    path: PathBuf,
}

/// A problem as printed: the file's path, the offset, what is wrong.
fn located(dir: &Path, problem: &Problem) -> String {
    let file = dir.join(&problem.file);
    match problem.offset {
        Some(offset) => format!("{} at offset {offset}: {}", file.display(), problem.what),
        None => format!("{}: {}", file.display(), problem.what),
    }
}

/// Runs `stampkv verify`.
pub fn verify(args: VerifyArgs) -> Result<(), CliError> {
    let mut progress = ByteProgress::new("verify");
    let result = verify_database(&StdFs, &args.path, &mut |done, total| progress.update(done, total));
    progress.finish();
    let report = result.map_err(|e| engine_error(&args.path, &e))?;
    for problem in &report.problems {
        out!("{}", located(&args.path, problem));
    }
    for note in &report.notes {
        out!("note: {note}");
    }
    let summary = format!(
        "checked {} ({}), {} ({}), {}",
        count(report.tables, "table"),
        count_as(report.table_entries as usize, "entry", "entries"),
        count(report.log_segments, "log segment"),
        count(report.log_records as usize, "commit"),
        HumanBytes(report.bytes_checked)
    );
    if report.is_clean() {
        out!("{summary}: no problems");
        return Ok(());
    }
    let problems = count(report.problems.len(), "problem");
    out!("{summary}: {problems}");
    Err(CliError {
        message: format!(
            "{problems} found in {} (`stampkv repair --path {}` salvages what is readable)",
            args.path.display(),
            args.path.display()
        ),
        exit_code: CliError::PROBLEMS_FOUND,
    })
}

/// Arguments of `stampkv repair`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Nothing is changed unless `verify` finds a problem. The files the repair replaces are \
moved into a `repair-NNNNNN` subdirectory of the database, not deleted; it prints what could not be salvaged."
)]
pub struct RepairArgs {
    /// The database directory (it must not be open in another process).
    #[arg(long)]
    path: PathBuf,
}

/// Runs `stampkv repair`.
pub fn repair(args: RepairArgs) -> Result<(), CliError> {
    let dir = &args.path;
    let mut progress = ByteProgress::new("repair");
    let result = repair_database(Arc::new(StdFs), dir, &Options::default(), &mut |done, total| {
        progress.update(done, total);
    });
    progress.finish();
    let report = result.map_err(|e| engine_error(dir, &e))?;
    if !report.repaired {
        out!("no problems found in {}: nothing to repair", dir.display());
        return Ok(());
    }
    out!("found {}:", count(report.problems.len(), "problem"));
    for problem in &report.problems {
        out!("  {}", located(dir, problem));
    }
    if report.lost.is_empty() {
        out!("lost: nothing (every entry and commit was read back)");
    } else {
        out!("lost:");
        for loss in &report.lost {
            out!("  {}", show_loss(dir, loss));
        }
    }
    for note in &report.notes {
        out!("note: {note}");
    }
    out!(
        "repaired {}: {} in {} ({} read back from the log); it continues after commit {}",
        dir.display(),
        count_as(report.entries as usize, "entry", "entries"),
        count(report.tables_written, "table"),
        count(report.commits_replayed as usize, "commit"),
        report.last_sequence
    );
    if let Some(aside) = &report.moved_to {
        out!("the files it replaced are in {} (remove it once satisfied)", dir.join(aside).display());
    }
    match report.problems_after.first() {
        None => Ok(()),
        Some(problem) => Err(CliError::failed(format!(
            "the repaired database still fails verification: {}",
            located(dir, problem)
        ))),
    }
}

/// A loss as printed, keys in Deno's notation.
fn show_loss(dir: &Path, loss: &Loss) -> String {
    match loss {
        Loss::TableEntries { file, offset, end, after, before } => {
            let keys = match (after.as_deref().map(show_key), before.as_deref().map(show_key)) {
                (Some(a), Some(b)) => format!("entries with keys from {a} to {b}"),
                (Some(a), None) => format!("entries with keys from {a} on"),
                (None, Some(b)) => format!("entries with keys up to {b}"),
                (None, None) => "all of its entries".to_owned(),
            };
            format!("{} bytes {offset}..{end}: {keys}", dir.join(file).display())
        }
        Loss::Table { file, smallest, largest, why } => format!(
            "{}: the whole table, keys {} to {} ({why})",
            dir.join(file).display(),
            show_key(smallest),
            show_key(largest)
        ),
        Loss::Commits { file, offset, after, before } => {
            let which = match before {
                Some(before) if before - after == 2 => format!("commit {}", after + 1),
                Some(before) => format!("commits {} to {}", after + 1, before - 1),
                None => format!("any commits after {after} (the damage reaches the end of the log)"),
            };
            format!("{} at offset {offset}: {which}", dir.join(file).display())
        }
    }
}

/// Arguments of `stampkv stats`.
#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// The database: a directory (other readers may have it open; a writer may not), or a
    /// prefix on etcd.
    #[command(flatten)]
    location: Location,
}

/// Runs `stampkv stats`: opens the database to read only (writing nothing to its
/// directory), prints the shape of its tree and a full scan's count of live data.
pub fn stats(args: StatsArgs) -> Result<(), CliError> {
    let Some(path) = &args.location.path else {
        return match args.location.open_to_read()? {
            Source::Etcd(kv) => print_etcd_stats(kv, &args.location.name()),
            Source::Dir(_) => Err(CliError::failed("give --path DIR or --etcd URL[,URL...]")),
        };
    };
    require_database(path)?;
    let kv = Kv::open_read_only(path, KvOptions::default()).map_err(|e| kv_error(path, &e))?;
    print_stats(kv.store(), path)
}

/// `stats` of a database on etcd: its identity, a full scan's count of its live data,
/// and each member's status.
fn print_etcd_stats(kv: Kv<EtcdStore>, name: &str) -> Result<(), CliError> {
    let failed = |e: stampkv::KvError| CliError::failed(format!("{name}: {e}"));
    let snapshot = kv.bulk_snapshot();
    let (mut entries, mut bytes, mut messages) = (0u64, 0u64, 0u64);
    for entry in snapshot.entries() {
        let entry = entry.map_err(failed)?;
        entries += 1;
        bytes += (entry.key.encode().map_or(0, |k| k.len()) + entry.value.encode_stored().len()) as u64;
    }
    for message in snapshot.messages() {
        message.map_err(failed)?;
        messages += 1;
    }
    let store = kv.store();
    out!("database: {} (id {})", name, store.database_id());
    out!("last versionstamp: {}", snapshot.last_versionstamp());
    out!("live data (full scan): {entries} keys, {}; {messages} queued messages", HumanBytes(bytes));
    out!(
        "{:<28} {:>18} {:>8} {:>12} {:>8} {:>12}  errors",
        "member",
        "id",
        "version",
        "db size",
        "leader",
        "raft index"
    );
    for (endpoint, status) in store.member_statuses() {
        match status {
            Ok(status) => out!(
                "{:<28} {:>18x} {:>8} {:>12} {:>8} {:>12}  {}",
                endpoint,
                status.member_id,
                status.version,
                HumanBytes(status.db_size.max(0) as u64).to_string(),
                if status.is_leader { "yes" } else { "no" },
                status.raft_index,
                if status.errors.is_empty() { "-".to_string() } else { status.errors.join("; ") }
            ),
            Err(e) => out!("{endpoint:<28} does not answer: {e}"),
        }
    }
    let alarms = store.alarms().map_err(failed)?;
    if alarms.is_empty() {
        out!("alarms: none");
    } else {
        for (member, alarm) in alarms {
            out!("alarm: {alarm} on member {member:x}");
        }
    }
    drop(snapshot);
    kv.close().map_err(failed)
}

fn print_stats(store: &ReadOnlyStore, path: &Path) -> Result<(), CliError> {
    let engine = store.db();
    let files = engine.table_files();
    let stats = engine.stats();
    let usage = engine.space_usage().map_err(|e| engine_error(path, &e))?;
    out!("{:<6} {:>6} {:>12} {:>12} {:>12}", "level", "files", "bytes", "target", "entries");
    let base_level =
        (1..LEVELS).find(|&l| stats.level_target_bytes.get(l).is_some_and(|&t| t > 0)).unwrap_or(1);
    let mut entries_total = 0;
    let mut weighted = 0u128;
    for level in 0..LEVELS {
        let of_level: Vec<_> = files.iter().filter(|f| f.level == level).collect();
        let bytes: u64 = of_level.iter().map(|f| f.size).sum();
        let entries: u64 = of_level.iter().map(|f| f.entries).sum();
        entries_total += entries;
        // Logged, flushed, then written once into each level from the base level down.
        weighted += u128::from(bytes) * (level + 2 - base_level.min(level).saturating_sub(1)) as u128;
        let target = match stats.level_target_bytes.get(level) {
            Some(&target) if target > 0 => HumanBytes(target).to_string(),
            _ => "-".into(),
        };
        out!(
            "{:<6} {:>6} {:>12} {:>12} {:>12}",
            level,
            of_level.len(),
            HumanBytes(bytes).to_string(),
            target,
            entries
        );
    }
    out!(
        "{:<6} {:>6} {:>12} {:>12} {:>12}",
        "total",
        files.len(),
        HumanBytes(stats.table_bytes).to_string(),
        "",
        entries_total
    );
    if stats.table_bytes_uncompressed > 0 {
        out!(
            "tables uncompressed: {} (compression ratio {:.2})",
            HumanBytes(stats.table_bytes_uncompressed),
            stats.table_bytes as f64 / stats.table_bytes_uncompressed as f64
        );
    }
    out!("write-ahead log on disk: {}", HumanBytes(stats.wal_bytes_on_disk));
    out!("live data (full scan): {} keys, {}", usage.live_entries, HumanBytes(usage.live_bytes));
    out!("key count estimate: {entries_total} (table entries: old versions and deletions count too)");
    let memory = engine.stats();
    out!(
        "memory: {} (memtables {}, pooled for the next memtables {}, block cache {}, held by {} open tables {})",
        HumanBytes(memory.memory_bytes()),
        HumanBytes(memory.memtable_bytes),
        HumanBytes(memory.pooled_memtable_bytes),
        HumanBytes(memory.block_cache_bytes),
        memory.open_tables,
        HumanBytes(memory.pinned_table_bytes)
    );
    if usage.live_bytes == 0 {
        out!("space amplification: n/a (no live data)");
    } else {
        out!("space amplification: {:.2} (bytes on disk / live bytes)", usage.space_amplification());
    }
    if stats.table_bytes == 0 {
        out!("write amplification: n/a (no tables)");
    } else {
        out!(
            "write amplification: {:.2} (estimate: every table byte was written to the log, flushed, \
             and rewritten once per level from the base level down to its own; `stampkv serve` reports \
             measured figures in /metrics)",
            weighted as f64 / stats.table_bytes as f64
        );
    }
    Ok(())
}

/// Arguments of `stampkv compact`.
#[derive(Debug, clap::Args)]
pub struct CompactArgs {
    /// The database directory (it must not be open in another process).
    #[arg(long)]
    path: PathBuf,
}

/// Runs `stampkv compact`: flushes and compacts every level into the last one, dropping
/// every old version, deletion and expired entry.
pub fn compact(args: CompactArgs) -> Result<(), CliError> {
    let kv = open_existing(&args.path)?;
    let engine = kv.engine();
    let before = engine.table_files();
    let start = Instant::now();
    let result = engine.compact().map_err(|e| kv_error(&args.path, &e));
    let after = engine.table_files();
    let stats = engine.stats();
    close(kv, &args.path)?;
    result?;
    let bytes = |files: &[stampkv::engine::TableFileInfo]| HumanBytes(files.iter().map(|f| f.size).sum());
    out!(
        "compacted {} in {:.2} s: {} tables ({}) became {} ({}); read {}, wrote {}",
        args.path.display(),
        start.elapsed().as_secs_f64(),
        before.len(),
        bytes(&before),
        after.len(),
        bytes(&after),
        HumanBytes(stats.compaction_bytes_read),
        HumanBytes(stats.compaction_bytes_written + stats.flush_bytes_written)
    );
    Ok(())
}

fn close(kv: Kv, path: &Path) -> Result<(), CliError> {
    kv.close().map_err(|e| kv_error(path, &e))
}
