//! The live table files, for tools that show the shape of the tree (`stampkv stats`), of a
//! [`Db`] or a [`super::ReadOnlyDb`].

use super::Db;
use crate::version::Version;

/// One live table file. New fields may be added.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableFileInfo {
    /// The level it is in (0 to 6).
    pub level: usize,
    /// Its file number (the file is `NNNNNN.sst`).
    pub number: u64,
    /// Its size in bytes.
    pub size: u64,
    /// Entries it holds: every version and deletion, so at least the keys it holds.
    pub entries: u64,
    /// Its smallest user key.
    pub smallest_key: Vec<u8>,
    /// Its largest user key.
    pub largest_key: Vec<u8>,
}

impl Db {
    /// The live table files, level by level (level 0 newest first, deeper levels in key
    /// order), as of now.
    pub fn table_files(&self) -> Vec<TableFileInfo> {
        let (_, state) = self.inner.read_view();
        table_files_of(&state.version)
    }
}

/// The table files of `version`, level by level.
pub(super) fn table_files_of(version: &Version) -> Vec<TableFileInfo> {
    version
        .all_files()
        .map(|(level, file)| TableFileInfo {
            level,
            number: file.desc.number,
            size: file.desc.size,
            entries: file.desc.entry_count,
            smallest_key: file.desc.smallest_key.clone(),
            largest_key: file.desc.largest_key.clone(),
        })
        .collect()
}
