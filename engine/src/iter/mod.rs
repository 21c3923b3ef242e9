//! Internal iterators: cursors over internal keys (user key, trailer) in a source.
//!
//! Sources are memtables, tables and levels; [`MergingIter`] merges them, and
//! [`crate::DbIter`] turns the merged stream into user-visible entries at a snapshot.

mod level;
mod merging;
mod table;

pub(crate) use level::{LevelFiles, LevelIter};
pub(crate) use merging::{head_prefix, MergingIter, HEAD_BYTES};
pub(crate) use table::TableSource;

use crate::Result;

/// A cursor over internal keys in internal-key order (user key ascending, trailer
/// descending). Errors (corrupt blocks, I/O) are returned by the moving call.
pub(crate) trait InternalIterator: Send {
    /// Whether the cursor is at an entry.
    fn valid(&self) -> bool;
    /// Moves to the first entry >= (user_key, trailer).
    fn seek(&mut self, user_key: &[u8], trailer: u64) -> Result<()>;
    /// Moves to the last entry <= (user_key, trailer).
    fn seek_for_prev(&mut self, user_key: &[u8], trailer: u64) -> Result<()>;
    /// Moves to the first entry.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Moves to the last entry.
    fn seek_to_last(&mut self) -> Result<()>;
    /// Moves to the next entry. Requires `valid()`.
    fn next(&mut self) -> Result<()>;
    /// Moves to the previous entry. Requires `valid()`.
    fn prev(&mut self) -> Result<()>;
    /// User key at the cursor. Requires `valid()`.
    fn user_key(&self) -> &[u8];
    /// Trailer at the cursor. Requires `valid()`.
    fn trailer(&self) -> u64;
    /// Stored value at the cursor. Requires `valid()`.
    fn value(&self) -> &[u8];
    /// User key and trailer at the cursor, in one call. Requires `valid()`.
    #[inline]
    fn key(&self) -> (&[u8], u64) {
        (self.user_key(), self.trailer())
    }
    /// Moves to the next entry and returns its key, `None` past the last one: one call
    /// where `next`, `valid` and `key` are three through a `dyn` child. Requires `valid()`.
    #[inline]
    fn next_key(&mut self) -> Result<Option<(&[u8], u64)>> {
        self.next()?;
        Ok(if self.valid() { Some(self.key()) } else { None })
    }
}

impl<T: InternalIterator + ?Sized> InternalIterator for Box<T> {
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn seek(&mut self, user_key: &[u8], trailer: u64) -> Result<()> {
        (**self).seek(user_key, trailer)
    }
    fn seek_for_prev(&mut self, user_key: &[u8], trailer: u64) -> Result<()> {
        (**self).seek_for_prev(user_key, trailer)
    }
    fn seek_to_first(&mut self) -> Result<()> {
        (**self).seek_to_first()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        (**self).seek_to_last()
    }
    fn next(&mut self) -> Result<()> {
        (**self).next()
    }
    fn prev(&mut self) -> Result<()> {
        (**self).prev()
    }
    fn user_key(&self) -> &[u8] {
        (**self).user_key()
    }
    fn trailer(&self) -> u64 {
        (**self).trailer()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
    fn key(&self) -> (&[u8], u64) {
        (**self).key()
    }
    fn next_key(&mut self) -> Result<Option<(&[u8], u64)>> {
        (**self).next_key()
    }
}
