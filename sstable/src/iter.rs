//! The table iterator: a two-level iterator (index block -> data blocks).

use std::cmp::Ordering;
use std::sync::Arc;

use crate::block::{Block, BlockIter};
use crate::error::TableError;
use crate::format::BlockHandle;
use crate::index::IndexBlock;
use crate::key::{compare_stored, split_stored_key};
use crate::readahead::Readahead;
use crate::table::Table;

/// Forward steps into a new data block after which a walk counts as a scan (and the next
/// block is looked up ahead). Two: a short range read (a seek and a few dozen entries,
/// as a `list` with a limit) that crosses one block boundary does not pay the look-ahead's
/// two extra cache lookups; a scan loses the look-ahead for its second block only.
const SCAN_AFTER_BLOCKS: u32 = 2;

/// Bidirectional iterator over a table.
///
/// Unpositioned (invalid) when created. Moving calls return an error if a block cannot
/// be read or decoded; the iterator is then invalid. `next` / `prev` on an invalid
/// iterator do nothing. Keys and values borrow from the iterator.
///
/// A table whose index is in the block cache has it looked up (or read) at the
/// iterator's first seek; the iterator then holds it until it is dropped.
pub struct TableIter {
    table: Arc<Table>,
    /// The index block `index` iterates; `None` until a seek loads it.
    index_block: Option<Arc<IndexBlock>>,
    /// Positioned at the index entry of the block in `data` (when that is valid).
    index: BlockIter<Arc<Block>>,
    data: BlockIter<Arc<Block>>,
    /// File offset of the block loaded into `data`, if any.
    data_offset: Option<u64>,
    /// Whether data blocks read from the file are put in the block cache.
    fill_cache: bool,
    /// Reads windows of the file ahead once blocks are read in file order.
    readahead: Readahead,
    /// Data blocks entered by stepping forward off the end of the previous one since the
    /// last seek: from the first such step on, the walk is taken to be a scan.
    blocks_stepped: u32,
    /// The block after `data` in file order (its offset), looked up in the block cache
    /// while `data` is walked and asked into the processor's caches.
    ahead: Option<(u64, Arc<Block>)>,
}

impl TableIter {
    pub(crate) fn new(table: Arc<Table>, fill_cache: bool) -> Self {
        let index_block = table.pinned_index().cloned();
        let index_source = index_block.as_ref().map_or_else(|| table.empty_block(), |i| i.block());
        let index = BlockIter::new(Arc::clone(index_source), true);
        let data = BlockIter::new(Arc::clone(table.empty_block()), true);
        TableIter {
            table,
            index_block,
            index,
            data,
            data_offset: None,
            fill_cache,
            readahead: Readahead::default(),
            blocks_stepped: 0,
            ahead: None,
        }
    }

    /// Loads the index block if this iterator has not yet. Errors leave it invalid.
    fn load_index(&mut self) -> Result<(), TableError> {
        if self.index_block.is_none() {
            let index = self.table.index().inspect_err(|_| self.data.invalidate())?;
            self.index.reset(Arc::clone(index.block()));
            self.index_block = Some(index);
        }
        Ok(())
    }

    /// Whether positioned at an entry.
    #[inline]
    pub fn valid(&self) -> bool {
        self.data.valid()
    }

    /// First entry >= (user_key, trailer) in table order.
    pub fn seek(&mut self, user_key: &[u8], trailer: u64) -> Result<(), TableError> {
        self.forget_walk();
        self.load_index()?;
        if let Some(index) = &self.index_block {
            index.seek(&mut self.index, user_key, trailer);
        }
        if self.load_data_block()? {
            self.data.seek(user_key, trailer);
        }
        self.skip_empty_forward()
    }

    /// Last entry <= (user_key, trailer) in table order.
    pub fn seek_for_prev(&mut self, user_key: &[u8], trailer: u64) -> Result<(), TableError> {
        self.seek(user_key, trailer)?;
        if !self.valid() {
            // Every entry sorts before the target.
            return self.seek_to_last();
        }
        if compare_stored(self.data.key(), user_key, trailer) == Ordering::Greater {
            self.prev()?;
        }
        Ok(())
    }

    /// Positions at the first entry (invalid if the table is empty).
    pub fn seek_to_first(&mut self) -> Result<(), TableError> {
        self.forget_walk();
        self.load_index()?;
        self.index.seek_to_first();
        if self.load_data_block()? {
            self.data.seek_to_first();
        }
        self.skip_empty_forward()
    }

    /// Positions at the last entry (invalid if the table is empty).
    pub fn seek_to_last(&mut self) -> Result<(), TableError> {
        self.forget_walk();
        self.load_index()?;
        self.index.seek_to_last();
        if self.load_data_block()? {
            self.data.seek_to_last();
        }
        self.skip_empty_backward()
    }

    /// Moves to the next entry; invalid after the last one.
    // Not `Iterator::next`: moving is fallible and entries borrow from the iterator.
    #[allow(clippy::should_implement_trait)]
    #[inline]
    pub fn next(&mut self) -> Result<(), TableError> {
        if !self.data.valid() {
            return Ok(());
        }
        self.data.next();
        if self.data.valid() {
            return Ok(());
        }
        self.skip_empty_forward()
    }

    /// Moves to the previous entry; invalid before the first one.
    pub fn prev(&mut self) -> Result<(), TableError> {
        if !self.data.valid() {
            return Ok(());
        }
        self.forget_walk();
        self.data.prev();
        self.skip_empty_backward()
    }

    /// The current entry's user key (empty unless `valid()`).
    #[inline]
    pub fn user_key(&self) -> &[u8] {
        split_stored_key(self.data.key()).map_or(&[], |(user, _)| user)
    }

    /// The current entry's trailer (0 unless `valid()`).
    #[inline]
    pub fn trailer(&self) -> u64 {
        split_stored_key(self.data.key()).map_or(0, |(_, trailer)| trailer)
    }

    /// The current entry's user key and trailer (empty and 0 unless `valid()`).
    #[inline]
    pub fn key(&self) -> (&[u8], u64) {
        split_stored_key(self.data.key()).unwrap_or((&[], 0))
    }

    /// The current entry's value (empty unless `valid()`).
    #[inline]
    pub fn value(&self) -> &[u8] {
        if self.data.valid() {
            self.data.value()
        } else {
            &[]
        }
    }

    /// The table being iterated.
    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// Loads the block the index iterator points at into `data` (unpositioned).
    /// `Ok(false)` if the index iterator is exhausted. Errors leave `data` invalid.
    fn load_data_block(&mut self) -> Result<bool, TableError> {
        if self.index.is_corrupt() {
            self.data.invalidate();
            return Err(self.table.index_corruption());
        }
        if !self.index.valid() {
            self.data.invalidate();
            return Ok(false);
        }
        let loaded = self.table.decode_handle(self.index.value()).and_then(|handle| {
            if self.data_offset == Some(handle.offset) {
                return Ok(None); // already loaded: keep it (and the cache untouched)
            }
            if let Some((_, block)) = self.ahead.take().filter(|(offset, _)| *offset == handle.offset) {
                return Ok(Some((handle.offset, block)));
            }
            self.table
                .load_block_via(handle, self.fill_cache, Some(&mut self.readahead))
                .map(|b| Some((handle.offset, b)))
        });
        match loaded {
            Ok(Some((offset, block))) => {
                self.data.reset(block);
                self.data_offset = Some(offset);
                Ok(true)
            }
            Ok(None) => Ok(true),
            Err(e) => {
                self.data.invalidate();
                Err(e)
            }
        }
    }

    /// Turns a malformed data block into an error.
    fn check_data(&mut self) -> Result<(), TableError> {
        if self.data.is_corrupt() {
            self.data.invalidate();
            return Err(self.table.data_corruption(self.data_offset.unwrap_or(0)));
        }
        Ok(())
    }

    /// While `data` is exhausted, moves to the first entry of the next block.
    fn skip_empty_forward(&mut self) -> Result<(), TableError> {
        loop {
            self.check_data()?;
            if self.data.valid() || !self.index.valid() {
                return Ok(());
            }
            self.index.next();
            if !self.load_data_block()? {
                return Ok(());
            }
            self.blocks_stepped = self.blocks_stepped.saturating_add(1);
            if self.blocks_stepped >= SCAN_AFTER_BLOCKS {
                self.look_ahead();
            }
            self.data.seek_to_first();
        }
    }

    /// A seek or a step back: the walk so far says nothing about the next blocks.
    fn forget_walk(&mut self) {
        self.blocks_stepped = 0;
        self.ahead = None;
    }

    /// During a scan, finds the block after the current one in the block cache and asks
    /// the processor to load its entries, so that their cache misses overlap the walk of
    /// this block instead of stalling the step into it; and asks it to load the header of
    /// the block after that, so that the same lookup one block later does not stall on
    /// it either. A block not in the cache is left to the readahead; an index entry that
    /// does not decode is left for the step that reaches it.
    fn look_ahead(&mut self) {
        let [next, after_next] = self.index.peek_next_values::<2>().map(|v| v.and_then(BlockHandle::decode));
        self.ahead =
            next.and_then(|handle| Some((handle.offset, self.table.cached_data_block_ahead(handle.offset)?)));
        if let Some((_, block)) = &self.ahead {
            block.prefetch_entries();
        }
        if let Some(handle) = after_next {
            self.table.prefetch_cached_data_block(handle.offset);
        }
    }

    /// While `data` is exhausted, moves to the last entry of the previous block.
    fn skip_empty_backward(&mut self) -> Result<(), TableError> {
        loop {
            self.check_data()?;
            if self.data.valid() || !self.index.valid() {
                return Ok(());
            }
            self.index.prev();
            if !self.load_data_block()? {
                return Ok(());
            }
            self.data.seek_to_last();
        }
    }
}

impl std::fmt::Debug for TableIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableIter")
            .field("table", &self.table.name())
            .field("valid", &self.valid())
            .field("block_offset", &self.data_offset)
            .finish()
    }
}
