//! `import-deno` and `export-deno`: Deno KV's own SQLite file (what `Deno.openKv(path)`
//! keeps) in and out, with keys, values, versionstamps, expiry and pending queue messages.

use super::dump::report;
use crate::error::CliError;
use crate::progress::Progress;
use crate::transfer::deno_sqlite::{self, ImportCounts, ImportOptions};
use crate::transfer::target;
use rusqlite::Connection;
use stampkv::store::Store;
use stampkv::{Kv, RestoreSummary};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// Arguments of `stampkv import-deno`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The Deno KV SQLite file to read (it is not changed).
    file: PathBuf,
    /// The database: a directory (created if missing or empty), or a prefix on etcd.
    #[command(flatten)]
    location: target::Location,
    #[command(flatten)]
    write: target::WriteOptions,
}

/// Arguments of `stampkv export-deno`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The Deno KV SQLite file to write.
    file: PathBuf,
    #[command(flatten)]
    location: target::Location,
    /// Replace the file if it exists.
    #[arg(long)]
    force: bool,
}

/// Runs `stampkv import-deno`.
pub fn import(args: ImportArgs) -> Result<(), CliError> {
    let conn = deno_sqlite::open(&args.file).map_err(CliError::failed)?;
    let total = deno_sqlite::count_rows(&conn).map_err(CliError::failed)?;
    let (summary, counts) = match args.location.open_to_write()? {
        target::Sink::Dir(kv) => import_and_close(kv, &conn, total, &args, true)?,
        target::Sink::Etcd(kv) => import_and_close(kv, &conn, total, &args, false)?,
    };
    report(&format!(
        "imported {} entries and {} queued messages ({} expired entries left out)",
        summary.entries, summary.messages, counts.expired
    ));
    Ok(())
}

/// Imports the file into `kv` and closes it; `atomic`: whether the store makes the import
/// visible all at once.
fn import_and_close<S: Store>(
    kv: Kv<S>,
    conn: &Connection,
    total: u64,
    args: &ImportArgs,
    atomic: bool,
) -> Result<(RestoreSummary, ImportCounts), CliError> {
    let name = args.location.name();
    let result = (|| {
        let mut restore = target::start_restore(&kv, &name, args.write.force)?;
        let options = ImportOptions {
            new_versionstamps: args.write.new_versionstamps,
            no_expiry: args.write.no_expiry,
            no_queue: args.write.no_queue,
        };
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let progress = Progress::new("importing", Some(total));
        let imported = deno_sqlite::import(conn, &mut restore, options, now_ms, |n| progress.advance(n));
        progress.finish();
        let counts = imported.map_err(|e| CliError::failed(format!("{}: {e}", args.file.display())))?;
        let last = (!args.write.new_versionstamps)
            .then(|| stampkv::Versionstamp::from_sequence(counts.data_version));
        let summary = restore.finish(last).map_err(|e| target::finish_error(&name, e, atomic))?;
        Ok::<_, CliError>((summary, counts))
    })();
    let closed = target::close(kv, &name);
    let done = result?;
    closed?;
    Ok(done)
}

/// Runs `stampkv export-deno`.
pub fn export(args: ExportArgs) -> Result<(), CliError> {
    match args.location.open_to_read()? {
        target::Source::Dir(kv) => export_from(kv, &args),
        target::Source::Etcd(kv) => export_from(kv, &args),
    }
}

fn export_from<S: Store>(kv: Kv<S>, args: &ExportArgs) -> Result<(), CliError> {
    let snapshot = kv.bulk_snapshot();
    let progress = Progress::new("exporting", None);
    let result = deno_sqlite::export(&snapshot, &args.file, args.force, |n| progress.advance(n));
    progress.finish();
    drop(snapshot);
    let closed = target::close(kv, &args.location.name());
    let counts = result.map_err(CliError::failed)?;
    closed?;
    report(&format!("exported {} entries and {} queued messages", counts.entries, counts.messages));
    Ok(())
}
