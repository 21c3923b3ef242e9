//! `import-deno` and `export-deno`: Deno KV's own SQLite file (what `Deno.openKv(path)`
//! keeps) in and out, with keys, values, versionstamps, expiry and pending queue messages.

use super::dump::report;
use crate::error::CliError;
use crate::progress::Progress;
use crate::transfer::deno_sqlite::{self, ImportOptions};
use crate::transfer::target;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// Arguments of `stampkv import-deno`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The Deno KV SQLite file to read (it is not changed).
    file: PathBuf,
    /// The database directory (created if missing or empty).
    #[arg(long)]
    path: PathBuf,
    #[command(flatten)]
    write: target::WriteOptions,
}

/// Arguments of `stampkv export-deno`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The Deno KV SQLite file to write.
    file: PathBuf,
    /// The database directory.
    #[arg(long)]
    path: PathBuf,
    /// Replace the file if it exists.
    #[arg(long)]
    force: bool,
}

/// Runs `stampkv import-deno`.
pub fn import(args: ImportArgs) -> Result<(), CliError> {
    let conn = deno_sqlite::open(&args.file).map_err(CliError::failed)?;
    let total = deno_sqlite::count_rows(&conn).map_err(CliError::failed)?;
    let kv = target::open_for_writing(&args.path)?;
    let result = (|| {
        let mut restore = target::start_restore(&kv, &args.path, args.write.force)?;
        let options = ImportOptions {
            new_versionstamps: args.write.new_versionstamps,
            no_expiry: args.write.no_expiry,
            no_queue: args.write.no_queue,
        };
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let progress = Progress::new("importing", Some(total));
        let imported = deno_sqlite::import(&conn, &mut restore, options, now_ms, |n| progress.advance(n));
        progress.finish();
        let counts = imported.map_err(|e| CliError::failed(format!("{}: {e}", args.file.display())))?;
        let last = (!args.write.new_versionstamps)
            .then(|| stampkv::Versionstamp::from_sequence(counts.data_version));
        let summary = restore.finish(last).map_err(|e| target::finish_error(&args.path, e))?;
        Ok::<_, CliError>((summary, counts))
    })();
    let closed = target::close(kv, &args.path);
    let (summary, counts) = result?;
    closed?;
    report(&format!(
        "imported {} entries and {} queued messages ({} expired entries left out)",
        summary.entries, summary.messages, counts.expired
    ));
    Ok(())
}

/// Runs `stampkv export-deno`.
pub fn export(args: ExportArgs) -> Result<(), CliError> {
    let kv = target::open_existing(&args.path)?;
    let snapshot = kv.bulk_snapshot();
    let progress = Progress::new("exporting", None);
    let result = deno_sqlite::export(&snapshot, &args.file, args.force, |n| progress.advance(n));
    progress.finish();
    drop(snapshot);
    let closed = target::close(kv, &args.path);
    let counts = result.map_err(CliError::failed)?;
    closed?;
    report(&format!("exported {} entries and {} queued messages", counts.entries, counts.messages));
    Ok(())
}
