//! Iterates over the files of one sorted level as if they were one table.

use super::{InternalIterator, TableSource};
use crate::key;
use crate::version::{TableFile, Version};
use crate::Result;
use std::cmp::Ordering;
use std::sync::Arc;

/// The sorted, disjoint files a [`LevelIter`] walks.
pub(crate) enum LevelFiles {
    /// A list of its own, such as a compaction's inputs.
    Listed(Vec<Arc<TableFile>>),
    /// One file (a level-0 table).
    One(Arc<TableFile>),
    /// Level `.1` of a version, shared instead of copied: a cursor over a level of
    /// hundreds of files would otherwise take and drop a reference to each.
    Level(Arc<Version>, usize),
}

impl LevelFiles {
    fn as_slice(&self) -> &[Arc<TableFile>] {
        match self {
            LevelFiles::Listed(files) => files,
            LevelFiles::One(file) => std::slice::from_ref(file),
            LevelFiles::Level(version, level) => version.files(*level),
        }
    }
}

/// Concatenation of a sorted level's files, opening each file's iterator on demand. Only
/// the current file's table is held (open) at a time.
pub(crate) struct LevelIter {
    files: LevelFiles,
    index: usize,
    current: Option<TableSource>,
    /// Whether data blocks read from the files go into the block cache.
    fill_cache: bool,
}

impl LevelIter {
    /// Iterates `files`, which must be sorted and disjoint.
    pub(crate) fn new(files: LevelFiles) -> Self {
        LevelIter { files, index: 0, current: None, fill_cache: true }
    }

    /// Like [`LevelIter::new`], for one pass (a compaction): blocks read from the files
    /// are not added to the block cache, so that the pass does not evict what readers use.
    pub(crate) fn without_caching(files: Vec<Arc<TableFile>>) -> Self {
        LevelIter { fill_cache: false, ..LevelIter::new(LevelFiles::Listed(files)) }
    }

    /// Positions on file `index` (unpositioned inside it); `None` past the last file.
    fn open(&mut self, index: usize) -> Result<Option<&mut TableSource>> {
        let Some(file) = self.files.as_slice().get(index) else {
            return Ok(None);
        };
        self.index = index;
        // Release the previous table before opening the next one.
        self.current = None;
        let table = file.table()?;
        let iter = if self.fill_cache { table.iter() } else { table.iter_without_caching() };
        self.current = Some(TableSource(iter));
        Ok(self.current.as_mut())
    }

    /// Moves forward over files until positioned at an entry or past the last file.
    fn skip_empty_forward(&mut self) -> Result<()> {
        while !self.current.as_ref().is_some_and(|c| c.valid()) {
            let next = self.index + 1;
            match self.open(next)? {
                Some(source) => source.seek_to_first()?,
                None => {
                    self.current = None;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Moves backward over files until positioned at an entry or before the first file.
    fn skip_empty_backward(&mut self) -> Result<()> {
        while !self.current.as_ref().is_some_and(|c| c.valid()) {
            if self.index == 0 {
                self.current = None;
                return Ok(());
            }
            let prev = self.index - 1;
            if let Some(source) = self.open(prev)? {
                source.seek_to_last()?;
            }
        }
        Ok(())
    }

    #[allow(
        clippy::expect_used,
        reason = "only the methods that require `valid()` (the `InternalIterator` contract) call this"
    )]
    fn source(&self) -> &TableSource {
        self.current.as_ref().expect("level iterator used while invalid")
    }
}

impl InternalIterator for LevelIter {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }
    fn seek(&mut self, user_key: &[u8], trailer: u64) -> Result<()> {
        // First file whose largest key is >= the target.
        let index = self.files.as_slice().partition_point(|f| {
            key::compare(&f.desc.largest_key, f.desc.largest_trailer, user_key, trailer) == Ordering::Less
        });
        match self.open(index)? {
            Some(source) => source.seek(user_key, trailer)?,
            None => {
                self.current = None;
                return Ok(());
            }
        }
        self.skip_empty_forward()
    }
    fn seek_for_prev(&mut self, user_key: &[u8], trailer: u64) -> Result<()> {
        // Last file whose smallest key is <= the target.
        let count = self.files.as_slice().partition_point(|f| {
            key::compare(&f.desc.smallest_key, f.desc.smallest_trailer, user_key, trailer)
                != Ordering::Greater
        });
        if count == 0 {
            self.current = None;
            return Ok(());
        }
        if let Some(source) = self.open(count - 1)? {
            source.seek_for_prev(user_key, trailer)?;
        }
        self.skip_empty_backward()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        match self.open(0)? {
            Some(source) => source.seek_to_first()?,
            None => {
                self.current = None;
                return Ok(());
            }
        }
        self.skip_empty_forward()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        let Some(last) = self.files.as_slice().len().checked_sub(1) else {
            self.current = None;
            return Ok(());
        };
        if let Some(source) = self.open(last)? {
            source.seek_to_last()?;
        }
        self.skip_empty_backward()
    }
    fn next(&mut self) -> Result<()> {
        if let Some(source) = self.current.as_mut() {
            source.next()?;
        }
        self.skip_empty_forward()
    }
    #[inline]
    fn next_key(&mut self) -> Result<Option<(&[u8], u64)>> {
        // A step within the current file checks its validity once, not three times.
        let stepped_within = match self.current.as_mut() {
            Some(source) => {
                source.next()?;
                source.valid()
            }
            None => false,
        };
        if !stepped_within {
            self.skip_empty_forward()?;
        }
        Ok(self.current.as_ref().filter(|source| source.valid()).map(|source| source.key()))
    }
    fn prev(&mut self) -> Result<()> {
        if let Some(source) = self.current.as_mut() {
            source.prev()?;
        }
        self.skip_empty_backward()
    }
    fn user_key(&self) -> &[u8] {
        self.source().user_key()
    }
    fn trailer(&self) -> u64 {
        self.source().trailer()
    }
    fn value(&self) -> &[u8] {
        self.source().value()
    }
    fn key(&self) -> (&[u8], u64) {
        self.source().key()
    }
}
