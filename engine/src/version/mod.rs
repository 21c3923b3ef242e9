//! Versions: the set of live table files per level, and the edits that change it.

mod edit;
mod file;
pub(crate) mod set;

pub(crate) use edit::VersionEdit;
pub(crate) use file::{FileDesc, TableFile, BYTES_PER_ALLOWED_SEEK, EARLIEST_EXPIRY_PROPERTY};
pub(crate) use set::{read_current, recover_manifest, VersionSet};

use crate::iter::{InternalIterator, LevelFiles, LevelIter};
use crate::key;
use crate::Result;
use std::sync::Arc;

/// Number of levels (level 0 plus six sorted levels).
pub(crate) const NUM_LEVELS: usize = 7;

/// An immutable snapshot of the table files. Level 0 is ordered newest first (files may
/// overlap); deeper levels are ordered by key and their files' user-key ranges are disjoint
/// (a user key's versions never span two files of one level).
#[derive(Clone, Default)]
pub(crate) struct Version {
    levels: [Vec<Arc<TableFile>>; NUM_LEVELS],
}

/// What [`Version::charge_read`] found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadCharge {
    /// Some table covers the key: a read starting there positions a table.
    pub(crate) covered: bool,
    /// The charge used up a table's allowance: a compaction should be asked for
    /// ([`TableFile::charge_seek`]).
    pub(crate) compaction_due: bool,
}

impl Version {
    /// Builds a version from per-level file lists, sorting them into their level order.
    /// Fails, naming the two files, if the files of a level >= 1 overlap.
    pub(crate) fn from_levels(mut levels: [Vec<Arc<TableFile>>; NUM_LEVELS]) -> Result<Self, String> {
        levels[0].sort_by_key(|f| std::cmp::Reverse(f.desc.number));
        for level in levels.iter_mut().skip(1) {
            level.sort_by(|a, b| a.desc.smallest_key.cmp(&b.desc.smallest_key));
        }
        let version = Version { levels };
        version.check_disjoint_levels()?;
        Ok(version)
    }

    /// Files of `level` (none if `level >= NUM_LEVELS`).
    pub(crate) fn files(&self, level: usize) -> &[Arc<TableFile>] {
        self.levels.get(level).map_or(&[], Vec::as_slice)
    }

    /// Total bytes of the files of `level`.
    pub(crate) fn level_bytes(&self, level: usize) -> u64 {
        self.files(level).iter().map(|f| f.desc.size).sum()
    }

    /// Total bytes of all files.
    pub(crate) fn total_bytes(&self) -> u64 {
        (0..NUM_LEVELS).map(|l| self.level_bytes(l)).sum()
    }

    /// All files with their level.
    pub(crate) fn all_files(&self) -> impl Iterator<Item = (usize, &Arc<TableFile>)> {
        self.levels.iter().enumerate().flat_map(|(l, files)| files.iter().map(move |f| (l, f)))
    }

    /// Verifies the sorted-level invariant: the files of each level >= 1 are in key order
    /// and their user-key ranges are disjoint.
    fn check_disjoint_levels(&self) -> Result<(), String> {
        for (level, files) in self.levels.iter().enumerate().skip(1) {
            for pair in files.windows(2) {
                if let [a, b] = pair {
                    if a.desc.largest_key >= b.desc.smallest_key {
                        return Err(format!(
                            "level {level}: files {} and {} overlap",
                            a.desc.number, b.desc.number
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The newest version of `user_key` with sequence <= `seq` in the tables, as
    /// (trailer, stored value).
    pub(crate) fn get(&self, user_key: &[u8], seq: u64) -> Result<Option<(u64, Vec<u8>)>> {
        let target = key::seek_trailer(seq);
        for file in &self.levels[0] {
            if file.desc.contains_user_key(user_key) {
                if let Some(found) = file.table()?.get(user_key, target)? {
                    return Ok(Some(found));
                }
            }
        }
        for files in self.levels.iter().skip(1) {
            let index = files.partition_point(|f| f.desc.largest_key.as_slice() < user_key);
            if let Some(file) = files.get(index) {
                if file.desc.smallest_key.as_slice() <= user_key {
                    if let Some(found) = file.table()?.get(user_key, target)? {
                        return Ok(Some(found));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Charges a read that starts at `user_key` to the newest table covering the key when
    /// an older run covers it too (the read positions both; a compaction merging them would
    /// spare later reads that).
    pub(crate) fn charge_read(&self, user_key: &[u8]) -> ReadCharge {
        let level0 = self.levels[0].iter().filter(|f| f.desc.contains_user_key(user_key));
        let deeper = self.levels.iter().skip(1).filter_map(|files| {
            let index = files.partition_point(|f| f.desc.largest_key.as_slice() < user_key);
            files.get(index).filter(|f| f.desc.smallest_key.as_slice() <= user_key)
        });
        let mut covering = level0.chain(deeper);
        match (covering.next(), covering.next()) {
            (Some(newest), Some(_)) => ReadCharge { covered: true, compaction_due: newest.charge_seek() },
            (Some(_), None) => ReadCharge { covered: true, compaction_due: false },
            (None, _) => ReadCharge { covered: false, compaction_due: false },
        }
    }

    /// The newest file whose seeks are used up (level 0 first, then by level), if any.
    pub(crate) fn seek_exhausted_file(&self) -> Option<(usize, &Arc<TableFile>)> {
        self.all_files().find(|(_, f)| f.seeks_exhausted())
    }

    /// Files of `level` whose user-key range meets [lo, hi] (inclusive).
    pub(crate) fn overlapping(&self, level: usize, lo: &[u8], hi: &[u8]) -> Vec<Arc<TableFile>> {
        self.files(level)
            .iter()
            .filter(|f| f.desc.smallest_key.as_slice() <= hi && f.desc.largest_key.as_slice() >= lo)
            .cloned()
            .collect()
    }

    /// Internal iterators over every table: one per level-0 file, one per deeper level.
    /// Each opens its current table when positioned and holds only that one.
    pub(crate) fn iterators(self: &Arc<Self>, out: &mut Vec<Box<dyn InternalIterator>>) {
        for file in &self.levels[0] {
            out.push(Box::new(LevelIter::new(LevelFiles::One(file.clone()))));
        }
        for (level, files) in self.levels.iter().enumerate().skip(1) {
            if !files.is_empty() {
                out.push(Box::new(LevelIter::new(LevelFiles::Level(self.clone(), level))));
            }
        }
    }
}
