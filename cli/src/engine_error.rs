//! What the maintenance commands share: one-line messages for the engine's errors, opening
//! an existing database (never creating one), and progress bars fed by the engine's
//! `(done, total)` callbacks.

use crate::error::CliError;
use crate::progress::Progress;
use stampkv::engine::Error;
use stampkv::{KeyPart, Kv, KvError, KvOptions};
use std::path::Path;

/// The message for an engine error met while working on the database in `path`.
pub fn engine_error(path: &Path, error: &Error) -> CliError {
    let shown = path.display();
    CliError::failed(match error {
        Error::Locked { holder, .. } => format!(
            "{shown} is open in another process ({}): stop that process first \
             (`stampkv backup` can copy a database while it is open)",
            holder_text(*holder)
        ),
        Error::InvalidArgument(message) => message.clone(),
        Error::Corruption { .. } => {
            format!("{error}; run `stampkv verify --path {shown}` to see all the damage")
        }
        other => other.to_string(),
    })
}

/// Who holds a database's lock, as far as its `LOCK` file tells.
pub fn holder_text(holder: Option<u32>) -> String {
    match holder {
        Some(pid) => format!("process {pid} holds its LOCK"),
        None => "its LOCK is held".to_owned(),
    }
}

/// The message for a database error met while working on the database in `path`.
pub fn kv_error(path: &Path, error: &KvError) -> CliError {
    match error {
        KvError::Storage(storage) => match storage.downcast_ref::<Error>() {
            Some(inner) => engine_error(path, inner),
            None => CliError::failed(format!("{}: {storage}", path.display())),
        },
        other => CliError::failed(format!("{}: {other}", path.display())),
    }
}

/// Checks that `path` is an existing database directory, without creating anything.
pub fn require_database(path: &Path) -> Result<(), CliError> {
    let shown = path.display();
    match std::fs::metadata(path) {
        Err(_) => Err(CliError::failed(format!("{shown} does not exist"))),
        Ok(meta) if !meta.is_dir() => Err(CliError::failed(format!("{shown} is not a directory"))),
        Ok(_) if !path.join("CURRENT").exists() => Err(CliError::failed(format!(
            "{shown} is not a stampkv database (it has no CURRENT file; if it was one, \
             `stampkv verify` and `stampkv repair` can look into it)"
        ))),
        Ok(_) => Ok(()),
    }
}

/// Opens the existing database in `path` (never creates one).
pub fn open_existing(path: &Path) -> Result<Kv, CliError> {
    require_database(path)?;
    let mut options = KvOptions::default();
    options.engine.create_if_missing = false;
    // A command that opens the database briefly should not grow its log file.
    options.engine.wal_preallocate_bytes = 0;
    Kv::open(path, options).map_err(|e| kv_error(path, &e))
}

/// A byte-counting progress bar, drawn once the engine says how much there is to do.
pub struct ByteProgress {
    what: &'static str,
    bar: Option<Progress>,
    shown: u64,
}

impl ByteProgress {
    /// A bar labelled `what`.
    pub fn new(what: &'static str) -> ByteProgress {
        ByteProgress { what, bar: None, shown: 0 }
    }

    /// The engine's callback: `done` of `total` bytes.
    pub fn update(&mut self, done: u64, total: u64) {
        let bar = self.bar.get_or_insert_with(|| Progress::bytes(self.what, total));
        bar.advance(done.saturating_sub(self.shown));
        self.shown = self.shown.max(done);
    }

    /// Removes the bar.
    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish();
        }
    }
}

/// An engine key as Deno writes it (`["users", 42n, true]`), or, for bytes that are not a
/// key's encoding (stampkv's own records), the bytes escaped.
pub fn show_key(bytes: &[u8]) -> String {
    let Ok(key) = stampkv::Key::decode(bytes) else {
        return format!("(internal) {}", escape(bytes));
    };
    let parts: Vec<String> = key
        .parts()
        .iter()
        .map(|part| match part {
            KeyPart::String(s) => format!("{s:?}"),
            KeyPart::Number(n) => format!("{n}"),
            KeyPart::BigInt(b) => format!("{b}n"),
            KeyPart::Bool(b) => b.to_string(),
            KeyPart::Bytes(b) => {
                let list: Vec<String> = b.iter().map(u8::to_string).collect();
                format!("new Uint8Array([{}])", list.join(", "))
            }
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

fn escape(bytes: &[u8]) -> String {
    bytes.iter().flat_map(|b| std::ascii::escape_default(*b)).map(char::from).collect()
}

/// "1 problem", "2 problems".
pub fn count(n: usize, what: &str) -> String {
    count_as(n, what, &format!("{what}s"))
}

/// "1 entry", "2 entries".
pub fn count_as(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}
