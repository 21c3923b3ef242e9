//! `backup` and `restore`: consistent point-in-time copies of a live database.
//!
//! `backup` works on a database that another process (`stampkv serve`, an application)
//! has open and is writing: it takes no lock, hard-links the immutable tables the manifest
//! lists, copies the write-ahead log up to its last complete record, and starts over if a
//! compaction or flush removed a file under it (see the engine's `checkpoint`). The copy
//! holds every commit acknowledged before the backup began, and exactly the commits up to
//! the sequence number it prints. `restore` copies a complete backup into a new directory
//! and verifies it.

use crate::engine_error::{count, engine_error, ByteProgress};
use crate::error::CliError;
use crate::output::out;
use indicatif::HumanBytes;
use stampkv::engine::{checkpoint, fs::StdFs, restore as restore_checkpoint, CheckpointInfo};
use std::path::PathBuf;

/// Arguments of `stampkv backup`.
#[derive(Debug, clap::Args)]
pub struct BackupArgs {
    /// The database directory (it may be open and written by another process).
    #[arg(long)]
    path: PathBuf,
    /// The backup directory to create (it must not exist, or be empty). It is a database
    /// directory of its own, plus a BACKUP file naming its sequence number and files.
    dest: PathBuf,
}

/// Runs `stampkv backup`.
pub fn backup(args: BackupArgs) -> Result<(), CliError> {
    let mut progress = ByteProgress::new("backup");
    let result = checkpoint(&args.path, &args.dest, &mut |done, total| progress.update(done, total));
    progress.finish();
    let info = result.map_err(|e| engine_error(&args.path, &e))?;
    out!(
        "backed up {} into {} at commit {}: {}{}",
        args.path.display(),
        args.dest.display(),
        info.sequence,
        describe(&info),
        if info.attempts > 1 {
            format!(" ({} attempts: the database changed meanwhile)", info.attempts)
        } else {
            String::new()
        }
    );
    Ok(())
}

/// Arguments of `stampkv restore`.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// The database directory to create from the backup (it must not exist, or be empty).
    #[arg(long)]
    path: PathBuf,
    /// The backup directory, as written by `stampkv backup`.
    backup: PathBuf,
}

/// Runs `stampkv restore`.
pub fn restore(args: RestoreArgs) -> Result<(), CliError> {
    let mut progress = ByteProgress::new("restore");
    let result = restore_checkpoint(&StdFs, &args.backup, &args.path, &mut |done, total| {
        progress.update(done, total);
    });
    progress.finish();
    let info = result.map_err(|e| engine_error(&args.backup, &e))?;
    out!(
        "restored {} into {} at commit {}: {}; verified",
        args.backup.display(),
        args.path.display(),
        info.sequence,
        describe(&info)
    );
    Ok(())
}

fn describe(info: &CheckpointInfo) -> String {
    let linked =
        if info.linked > 0 { format!(", {} hard-linked", count(info.linked, "file")) } else { String::new() };
    let (tables, logs) = (count(info.tables, "table"), count(info.log_segments, "log segment"));
    format!("{tables}, {logs}, {}{linked}", HumanBytes(info.bytes))
}
