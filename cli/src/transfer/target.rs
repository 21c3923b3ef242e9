//! Opening the database a transfer reads or writes, with one clear line for every way a
//! directory can be wrong, and starting a restore into it.

use crate::error::CliError;
use stampkv::store::{ReadOnlyStore, Store};
use stampkv::{Kv, KvError, KvOptions, Restore};
use std::path::Path;

/// How `load` and `import-deno` write into their database (flattened into both commands'
/// arguments).
#[derive(Debug, clap::Args)]
pub struct WriteOptions {
    /// Write into a database that already holds data.
    #[arg(long)]
    pub force: bool,
    /// Give every entry this load's own new versionstamp instead of the recorded one.
    #[arg(long)]
    pub new_versionstamps: bool,
    /// Write the entries without their expiry times.
    #[arg(long)]
    pub no_expiry: bool,
    /// Leave the queued messages out.
    #[arg(long)]
    pub no_queue: bool,
}

/// The file every stampkv database directory has (it names the live manifest).
const CURRENT: &str = "CURRENT";

fn open(path: &Path, create: bool) -> Result<Kv, CliError> {
    let options =
        KvOptions::with_engine(stampkv::engine::Options { create_if_missing: create, ..Default::default() });
    Kv::open(path, options)
        .map_err(|e| CliError::failed(format!("cannot open the database {}: {e}", path.display())))
}

/// Opens an existing database to read it, read-only (nothing is written to it; other
/// readers may have it open too); refuses anything else.
pub fn open_existing(path: &Path) -> Result<Kv<ReadOnlyStore>, CliError> {
    let shown = path.display();
    if !path.exists() {
        return Err(CliError::failed(format!("{shown} does not exist")));
    }
    if !path.is_dir() {
        return Err(CliError::failed(format!(
            "{shown} is not a directory (--path names a database directory)"
        )));
    }
    if !path.join(CURRENT).is_file() {
        return Err(CliError::failed(format!(
            "{shown} is not a stampkv database (it has no {CURRENT} file)"
        )));
    }
    Kv::open_read_only(path, KvOptions::default())
        .map_err(|e| CliError::failed(format!("cannot open the database {}: {e}", path.display())))
}

/// Opens the database a load or import writes to: an existing database, or a new one in
/// a directory that is missing or empty. A directory holding anything else is refused.
pub fn open_for_writing(path: &Path) -> Result<Kv, CliError> {
    let shown = path.display();
    if path.exists() {
        if !path.is_dir() {
            return Err(CliError::failed(format!(
                "{shown} is not a directory (--path names a database directory)"
            )));
        }
        let is_database = path.join(CURRENT).is_file();
        let is_empty = std::fs::read_dir(path)
            .map_err(|e| CliError::failed(format!("cannot read the directory {shown}: {e}")))?
            .next()
            .is_none();
        if !is_database && !is_empty {
            return Err(CliError::failed(format!(
                "{shown} is not a stampkv database and not empty: refusing to write a database into it"
            )));
        }
    }
    open(path, true)
}

/// Starts a restore into `kv`. A database that holds entries or queued messages is
/// refused unless `force`; one that holds none but still has tables (everything was
/// deleted) is compacted first, so that recorded versionstamps can be kept.
pub fn start_restore<'a>(kv: &'a Kv, path: &Path, force: bool) -> Result<Restore<'a>, CliError> {
    let failed = |e: KvError| CliError::failed(format!("{}: {e}", path.display()));
    let empty = kv.bulk_snapshot().is_empty().map_err(failed)?;
    if !empty && !force {
        return Err(CliError::failed(format!(
            "{} already holds data: pass --force to add to it (recorded versionstamps must then be newer than its last commit, or use --new-versionstamps)",
            path.display()
        )));
    }
    if empty && kv.engine().stats().files_per_level.iter().any(|files| *files > 0) {
        kv.engine().compact().map_err(failed)?;
    }
    kv.restore().map_err(failed)
}

/// Closes the database, reporting a failure.
pub fn close<S: Store>(kv: Kv<S>, path: &Path) -> Result<(), CliError> {
    kv.close().map_err(|e| CliError::failed(format!("closing the database {}: {e}", path.display())))
}

/// The one line for a restore that `finish` refused.
pub fn finish_error(path: &Path, error: KvError) -> CliError {
    let hint = match &error {
        KvError::InvalidRestore(text) if text.contains("not newer") => {
            " (use --new-versionstamps to give the loaded entries a new versionstamp)"
        }
        _ => "",
    };
    CliError::failed(format!("{}: nothing was written: {error}{hint}", path.display()))
}
