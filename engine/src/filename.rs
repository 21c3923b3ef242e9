//! Names of the files in a database directory.
//!
//! | file | name |
//! |---|---|
//! | write-ahead log segment | `000123.log` |
//! | table | `000123.sst` |
//! | manifest | `MANIFEST-000123` |
//! | name of the live manifest | `CURRENT` (text: the manifest's name and a newline) |
//! | temporary file | `000123.dbtmp` |
//! | directory lock | `LOCK` |
//!
//! All numbers come from one counter, so every file number is unique.

use std::path::{Path, PathBuf};

/// What a file in the directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// A WAL segment.
    Wal(u64),
    /// A table.
    Table(u64),
    /// A manifest.
    Manifest(u64),
    /// A temporary file.
    Temp(u64),
    /// `CURRENT`.
    Current,
    /// `LOCK`.
    Lock,
}

/// Path of WAL segment `number`.
pub(crate) fn wal_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.log"))
}

/// Path of table `number`.
pub(crate) fn table_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.sst"))
}

/// File name of manifest `number`.
pub(crate) fn manifest_name(number: u64) -> String {
    format!("MANIFEST-{number:06}")
}

/// Path of temporary file `number`.
pub(crate) fn temp_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.dbtmp"))
}

/// Path of `CURRENT`.
pub(crate) fn current_path(dir: &Path) -> PathBuf {
    dir.join("CURRENT")
}

/// Path of `LOCK`.
pub(crate) fn lock_path(dir: &Path) -> PathBuf {
    dir.join("LOCK")
}

/// Classifies a directory entry; `None` for files that are not the database's.
pub(crate) fn parse(name: &str) -> Option<FileKind> {
    match name {
        "CURRENT" => return Some(FileKind::Current),
        "LOCK" => return Some(FileKind::Lock),
        _ => {}
    }
    if let Some(number) = name.strip_prefix("MANIFEST-") {
        return parse_number(number).map(FileKind::Manifest);
    }
    let (stem, extension) = name.split_once('.')?;
    let number = parse_number(stem)?;
    match extension {
        "log" => Some(FileKind::Wal(number)),
        "sst" => Some(FileKind::Table(number)),
        "dbtmp" => Some(FileKind::Temp(number)),
        _ => None,
    }
}

fn parse_number(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_parse() {
        let dir = Path::new("/db");
        let name = |p: PathBuf| p.file_name().unwrap().to_str().unwrap().to_owned();
        assert_eq!(parse(&name(wal_path(dir, 7))), Some(FileKind::Wal(7)));
        assert_eq!(parse(&name(table_path(dir, 1_234_567))), Some(FileKind::Table(1_234_567)));
        assert_eq!(parse(&manifest_name(3)), Some(FileKind::Manifest(3)));
        assert_eq!(parse(&name(temp_path(dir, 9))), Some(FileKind::Temp(9)));
        assert_eq!(parse("CURRENT"), Some(FileKind::Current));
        for foreign in ["notes.txt", "12.log.bak", "-1.sst", "MANIFEST-", "x.log", "+5.log"] {
            assert_eq!(parse(foreign), None, "{foreign}");
        }
    }
}
