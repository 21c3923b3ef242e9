//! A table as an internal-iterator source.

use super::InternalIterator;
use crate::Result;
use stampkv_sstable::TableIter;

/// Adapts a table iterator to [`InternalIterator`].
pub(crate) struct TableSource(pub TableIter);

impl InternalIterator for TableSource {
    fn valid(&self) -> bool {
        self.0.valid()
    }
    fn seek(&mut self, user_key: &[u8], trailer: u64) -> Result<()> {
        Ok(self.0.seek(user_key, trailer)?)
    }
    fn seek_for_prev(&mut self, user_key: &[u8], trailer: u64) -> Result<()> {
        Ok(self.0.seek_for_prev(user_key, trailer)?)
    }
    fn seek_to_first(&mut self) -> Result<()> {
        Ok(self.0.seek_to_first()?)
    }
    fn seek_to_last(&mut self) -> Result<()> {
        Ok(self.0.seek_to_last()?)
    }
    fn next(&mut self) -> Result<()> {
        Ok(self.0.next()?)
    }
    fn prev(&mut self) -> Result<()> {
        Ok(self.0.prev()?)
    }
    fn user_key(&self) -> &[u8] {
        self.0.user_key()
    }
    fn trailer(&self) -> u64 {
        self.0.trailer()
    }
    fn value(&self) -> &[u8] {
        self.0.value()
    }
    #[inline]
    fn key(&self) -> (&[u8], u64) {
        self.0.key()
    }
}
