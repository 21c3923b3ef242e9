//! Opening the database a transfer reads or writes (a directory, or a prefix on an etcd
//! cluster), with one clear line for every way a directory can be wrong, and starting a
//! restore into it.

use crate::error::CliError;
use stampkv::store::{ReadOnlyStore, Store};
use stampkv::{Kv, KvError, KvOptions, Limits, Restore};
use stampkv_etcd::{EtcdOptions, EtcdStore};
use std::path::{Path, PathBuf};

/// Where a command's database is (flattened into its arguments): a directory, or a
/// database on an etcd cluster.
#[derive(Debug, clap::Args)]
pub struct Location {
    /// The database directory.
    #[arg(long, required_unless_present = "etcd", conflicts_with = "etcd")]
    pub path: Option<PathBuf>,
    /// The database on this etcd cluster instead of a directory: its client URLs,
    /// comma-separated (as `stampkv serve --etcd` takes them).
    #[arg(long, value_name = "URL[,URL...]")]
    pub etcd: Option<String>,
    /// The key prefix of the database in etcd.
    #[arg(long, requires = "etcd", default_value = stampkv_etcd::DEFAULT_PREFIX)]
    pub etcd_prefix: String,
}

impl Location {
    /// The database as messages name it: its directory, or `etcd URLS prefix P`.
    pub fn name(&self) -> String {
        match (&self.path, &self.etcd) {
            (Some(path), _) => path.display().to_string(),
            (None, Some(endpoints)) => format!("etcd {endpoints} prefix {}", self.etcd_prefix),
            (None, None) => "the database".into(),
        }
    }

    /// The directory, when the database is one (clap requires `--path` or `--etcd`).
    fn dir(&self) -> Result<Option<&Path>, CliError> {
        match (&self.path, &self.etcd) {
            (Some(path), _) => Ok(Some(path)),
            (None, Some(_)) => Ok(None),
            (None, None) => Err(CliError::failed("give --path DIR or --etcd URL[,URL...]")),
        }
    }

    /// Opens the database on etcd.
    fn open_etcd(&self) -> Result<Kv<EtcdStore>, CliError> {
        let endpoints = self.etcd.as_deref().unwrap_or_default();
        let options = EtcdOptions::from_endpoint_list(endpoints).with_prefix(&self.etcd_prefix);
        let store = EtcdStore::open(options)
            .map_err(|e| CliError::failed(format!("cannot open the database on {}: {e}", self.name())))?;
        Ok(Kv::with_store(store, Limits::default()))
    }

    /// Opens the database to read it: a directory read-only (nothing is written to it;
    /// other readers may have it open too), or the database on etcd.
    pub fn open_to_read(&self) -> Result<Source, CliError> {
        match self.dir()? {
            Some(path) => Ok(Source::Dir(open_existing(path)?)),
            None => Ok(Source::Etcd(self.open_etcd()?)),
        }
    }

    /// Opens the database a load or import writes to: see [`open_for_writing`] for a
    /// directory; on etcd, the database under the prefix (created by the first open).
    pub fn open_to_write(&self) -> Result<Sink, CliError> {
        match self.dir()? {
            Some(path) => Ok(Sink::Dir(open_for_writing(path)?)),
            None => Ok(Sink::Etcd(self.open_etcd()?)),
        }
    }
}

/// A database opened to read.
#[derive(Debug)]
pub enum Source {
    /// A directory, opened read-only.
    Dir(Kv<ReadOnlyStore>),
    /// A database on etcd.
    Etcd(Kv<EtcdStore>),
}

/// A database opened to write.
#[derive(Debug)]
pub enum Sink {
    /// A directory.
    Dir(Kv),
    /// A database on etcd.
    Etcd(Kv<EtcdStore>),
}

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
    let mut engine = stampkv::engine::Options::default();
    engine.create_if_missing = create;
    let options = KvOptions::with_engine(engine);
    Kv::open(path, options)
        .map_err(|e| CliError::failed(format!("cannot open the database {}: {e}", path.display())))
}

/// Opens an existing database to read it, read-only (nothing is written to it; other
/// readers may have it open too); refuses anything else.
fn open_existing(path: &Path) -> Result<Kv<ReadOnlyStore>, CliError> {
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
fn open_for_writing(path: &Path) -> Result<Kv, CliError> {
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

/// Starts a restore into `kv` (named `name` in messages). A database that holds entries
/// or queued messages is refused unless `force`.
pub fn start_restore<'a, S: Store>(
    kv: &'a Kv<S>,
    name: &str,
    force: bool,
) -> Result<Restore<'a, S>, CliError> {
    let failed = |e: KvError| CliError::failed(format!("{name}: {e}"));
    let empty = kv.bulk_snapshot().is_empty().map_err(failed)?;
    if !empty && !force {
        return Err(CliError::failed(format!(
            "{name} already holds data: pass --force to add to it (recorded versionstamps must then be newer than its last commit, or use --new-versionstamps)"
        )));
    }
    kv.restore().map_err(failed)
}

/// Closes the database, reporting a failure.
pub fn close<S: Store>(kv: Kv<S>, name: &str) -> Result<(), CliError> {
    kv.close().map_err(|e| CliError::failed(format!("closing the database {name}: {e}")))
}

/// The one line for a restore that `finish` refused; `atomic`: whether the store makes a
/// restore visible all at once (else the error itself says what was written).
pub fn finish_error(name: &str, error: KvError, atomic: bool) -> CliError {
    let hint = match &error {
        KvError::InvalidRestore(text) if text.contains("not newer") => {
            " (use --new-versionstamps to give the loaded entries a new versionstamp)"
        }
        _ => "",
    };
    let unchanged = if atomic { "nothing was written: " } else { "" };
    CliError::failed(format!("{name}: {unchanged}{error}{hint}"))
}
