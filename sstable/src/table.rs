//! An open table: verified footer and properties, index and filter pinned or in the block
//! cache, block loading and point lookups.

use std::sync::Arc;

use crate::block::{Block, BlockIter};
use crate::bloom::BloomFilter;
use crate::builder::{FILTER_META_NAME, PROPERTIES_META_NAME};
use crate::cache::{BlockCache, BlockKind, Cached};
use crate::error::TableError;
use crate::format::{read_block, read_block_with, BlockHandle, Footer, BLOCK_TRAILER_LEN, FOOTER_LEN};
use crate::index::IndexBlock;
use crate::iter::TableIter;
use crate::key::split_stored_key;
use crate::properties::TableProperties;
use crate::read_at::ReadAt;
use crate::readahead::Readahead;

/// Where an open table keeps its index and filter blocks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IndexFilterPlacement {
    /// Read at open and held by the table until it is dropped: memory grows with the
    /// number of open tables (about 2% of their size), but a lookup never rereads them.
    #[default]
    Pinned,
    /// Read and verified at open, then put in the block cache like data blocks: charged
    /// to its capacity, evicted (after data blocks, see [`BlockCache`]) and read again,
    /// checksum verified, when next needed. The table itself then holds only its
    /// footer-derived handles and properties. Without a cache, the same as `Pinned`.
    BlockCache,
    /// Like `BlockCache`, but open reads neither block: each is read (checksum verified)
    /// when a lookup first needs it, or taken from the cache if an earlier open of the
    /// same table id left it there. Opening costs the footer, metaindex and properties
    /// reads only. Meant for reopening a table that an earlier `Pinned` or `BlockCache`
    /// open verified, such as one a table cache closed to stay within its file limit.
    /// Without a cache, the same as `Pinned`.
    BlockCacheOnFirstUse,
}

/// How the table holds its index and filter.
enum MetaBlocks {
    Pinned { index: Arc<IndexBlock>, filter: Option<BloomFilter> },
    Cached(Arc<BlockCache>),
}

/// An open table: footer and properties loaded and verified; index and filter verified at
/// open, then pinned or left to the block cache (see [`IndexFilterPlacement`]).
pub struct Table {
    file: Arc<dyn ReadAt>,
    id: u64,
    name: String,
    cache: Option<Arc<BlockCache>>,
    file_size: u64,
    meta: MetaBlocks,
    index_handle: BlockHandle,
    filter_handle: Option<BlockHandle>,
    /// Where the filter block must end (the metaindex block's offset).
    filter_limit: u64,
    properties: TableProperties,
    /// End of the data region: every data block (with trailer) must end at or before it.
    data_end: u64,
    /// Shared placeholder for iterators that have no block loaded.
    empty_block: Arc<Block>,
}

/// Handles found in the metaindex block.
pub(crate) struct MetaHandles {
    pub(crate) filter: Option<BlockHandle>,
    pub(crate) properties: BlockHandle,
}

impl Table {
    /// Opens a table with its index and filter pinned ([`IndexFilterPlacement::Pinned`]).
    /// `table_id` must be unique per file (block cache key); `name` is for errors.
    ///
    /// Reads and verifies the footer, metaindex, properties, filter and index blocks.
    /// Beyond checksums it requires the layout the builder writes: the index block ends
    /// at the footer, the metaindex block ends where the index starts, and the filter and
    /// properties blocks lie before the metaindex.
    pub fn open(
        file: Arc<dyn ReadAt>,
        table_id: u64,
        name: String,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<Arc<Table>, TableError> {
        Table::open_with(file, table_id, name, cache, IndexFilterPlacement::Pinned)
    }

    /// [`Table::open`] with the index and filter kept as `placement` says. With
    /// [`IndexFilterPlacement::BlockCache`] (and a cache) they are still read and verified
    /// here, then inserted into the cache instead of being kept by the table; with
    /// [`IndexFilterPlacement::BlockCacheOnFirstUse`] (and a cache) they are not read here.
    pub fn open_with(
        file: Arc<dyn ReadAt>,
        table_id: u64,
        name: String,
        cache: Option<Arc<BlockCache>>,
        placement: IndexFilterPlacement,
    ) -> Result<Arc<Table>, TableError> {
        let file_size = file.size().map_err(|e| TableError::read_error(&name, 0, e))?;
        let footer = read_footer(&*file, &name, file_size)?;
        let deferred = cache.is_some() && placement == IndexFilterPlacement::BlockCacheOnFirstUse;
        let index = if deferred { None } else { Some(read_index(&*file, &name, footer.index, file_size)?) };
        let meta = read_metaindex(&*file, &name, footer)?;
        let meta_start = footer.metaindex.offset;
        let props_bytes = read_block(&*file, &name, meta.properties, meta_start)?;
        let props_corrupt = |r: &str| TableError::corruption(&name, meta.properties.offset, r);
        let props_block = Block::new(props_bytes).map_err(props_corrupt)?;
        let properties = TableProperties::decode(&props_block).map_err(|r| props_corrupt(&r))?;
        let filter = match meta.filter {
            Some(handle) if !deferred => Some(read_filter(&*file, &name, handle, meta_start)?),
            _ => None,
        };
        let data_end = meta.filter.map_or(meta.properties.offset, |f| f.offset.min(meta.properties.offset));
        let trailer = BLOCK_TRAILER_LEN as u64;
        let consistent = properties.data_bytes == data_end
            && properties.format_version == footer.version
            && properties.uncompressed_data_bytes >= properties.data_bytes
            && properties.index_bytes == footer.index.size + trailer
            && properties.filter_bytes == meta.filter.map_or(0, |h| h.size + trailer);
        if !consistent {
            let reason = "properties disagree with the file layout";
            return Err(TableError::corruption(&name, meta.properties.offset, reason));
        }
        let meta_blocks = match (&cache, index) {
            (Some(cache), Some(index)) if placement != IndexFilterPlacement::Pinned => {
                // Verified above; cached now, since it is read anyway.
                cache.insert(table_id, footer.index.offset, Cached::Index(Arc::new(index)));
                if let (Some(handle), Some(filter)) = (meta.filter, filter) {
                    cache.insert(table_id, handle.offset, Cached::Filter(Arc::new(filter)));
                }
                MetaBlocks::Cached(Arc::clone(cache))
            }
            (_, Some(index)) => MetaBlocks::Pinned { index: Arc::new(index), filter },
            // Deferred (only ever with a cache): read on first use.
            (_, None) => match &cache {
                Some(cache) => MetaBlocks::Cached(Arc::clone(cache)),
                None => MetaBlocks::Pinned {
                    index: Arc::new(read_index(&*file, &name, footer.index, file_size)?),
                    filter: None,
                },
            },
        };
        Ok(Arc::new(Table {
            file,
            id: table_id,
            name,
            cache,
            file_size,
            meta: meta_blocks,
            index_handle: footer.index,
            filter_handle: meta.filter,
            filter_limit: meta_start,
            properties,
            data_end,
            empty_block: Arc::new(Block::empty()),
        }))
    }

    /// Bloom check: `Ok(false)` means the user key is certainly absent. Errs only when
    /// the filter has to be read again (it is in the block cache and was evicted) and
    /// that fails.
    pub fn may_contain(&self, user_key: &[u8]) -> Result<bool, TableError> {
        match &self.meta {
            MetaBlocks::Pinned { filter, .. } => Ok(filter.as_ref().is_none_or(|f| f.may_contain(user_key))),
            MetaBlocks::Cached(cache) => match self.filter_handle {
                Some(handle) => Ok(self.cached_filter(cache, handle)?.may_contain(user_key)),
                None => Ok(true),
            },
        }
    }

    /// First entry at or after (`user_key`, `max_trailer`) *if* its user key equals `user_key`:
    /// i.e. the newest version whose trailer is <= `max_trailer`. Consults the bloom filter.
    pub fn get(&self, user_key: &[u8], max_trailer: u64) -> Result<Option<(u64, Vec<u8>)>, TableError> {
        if !self.may_contain(user_key)? {
            return Ok(None);
        }
        let loaded;
        let index_block: &IndexBlock = match &self.meta {
            MetaBlocks::Pinned { index, .. } => index,
            MetaBlocks::Cached(cache) => {
                loaded = self.cached_index(cache)?;
                &loaded
            }
        };
        let mut index = BlockIter::new(index_block.block().as_ref(), true);
        index_block.seek(&mut index, user_key, max_trailer);
        loop {
            if index.is_corrupt() {
                return Err(self.index_corruption());
            }
            if !index.valid() {
                return Ok(None);
            }
            let handle = self.decode_handle(index.value())?;
            let block = self.load_block(handle, true)?;
            let mut it = BlockIter::new(&*block, true);
            it.seek(user_key, max_trailer);
            if it.is_corrupt() {
                return Err(self.data_corruption(handle.offset));
            }
            if it.valid() {
                return Ok(split_stored_key(it.key())
                    .filter(|(user, _)| *user == user_key)
                    .map(|(_, trailer)| (trailer, it.value().to_vec())));
            }
            // The target sorts after every entry of this block but not after its index
            // key (a shortened separator): the answer, if any, starts the next block.
            index.next();
        }
    }

    /// A user property written by the builder.
    pub fn user_property(&self, name: &str) -> Option<&[u8]> {
        self.properties.user.get(name).map(Vec::as_slice)
    }

    /// Entries in the table.
    pub fn entry_count(&self) -> u64 {
        self.properties.entry_count
    }

    /// Heap bytes this open table holds outside the block cache: the table itself (name,
    /// properties, handles), plus its index and filter when they are pinned.
    pub fn pinned_memory_bytes(&self) -> usize {
        let fixed = std::mem::size_of::<Table>()
            + self.name.capacity()
            + self.properties.memory_usage()
            + self.empty_block.memory_usage();
        match &self.meta {
            MetaBlocks::Pinned { index, filter } => {
                fixed + index.memory_usage() + filter.as_ref().map_or(0, BloomFilter::memory_usage)
            }
            MetaBlocks::Cached(_) => fixed,
        }
    }

    /// Where the table keeps its index and filter.
    pub fn index_filter_placement(&self) -> IndexFilterPlacement {
        match self.meta {
            MetaBlocks::Pinned { .. } => IndexFilterPlacement::Pinned,
            MetaBlocks::Cached(_) => IndexFilterPlacement::BlockCache,
        }
    }

    /// Removes this table's blocks from the block cache: for a table whose file is going
    /// away, so that the room its blocks held is free again at once instead of when the
    /// cache's clock gets round to them (free room is what new tables' blocks fill, see
    /// [`TableBuilder::fill_block_cache_free_room`](crate::TableBuilder::fill_block_cache_free_room)).
    /// Walks the index if it is pinned or cached (it reads nothing from the file); without
    /// it only the index and filter entries are removed and the data blocks age out.
    /// Returns the number of data blocks looked for. Readers holding a block keep it.
    pub fn evict_from_block_cache(&self) -> u64 {
        let Some(cache) = &self.cache else {
            return 0;
        };
        let index = match &self.meta {
            MetaBlocks::Pinned { index, .. } => Some(Arc::clone(index)),
            MetaBlocks::Cached(cache) => cache.peek_index(self.id, self.index_handle.offset),
        };
        let mut blocks = 0;
        if let Some(index) = index {
            let mut it = BlockIter::new(index.block().as_ref(), true);
            it.seek_to_first();
            while it.valid() {
                // A damaged handle names no cached block: skip it.
                if let Ok(handle) = self.decode_handle(it.value()) {
                    cache.remove(self.id, handle.offset);
                    blocks += 1;
                }
                it.next();
            }
        }
        cache.remove(self.id, self.index_handle.offset);
        if let Some(filter) = self.filter_handle {
            cache.remove(self.id, filter.offset);
        }
        blocks
    }

    /// A new iterator (unpositioned). Data blocks it reads from the file go into the block
    /// cache.
    pub fn iter(self: &Arc<Self>) -> TableIter {
        TableIter::new(Arc::clone(self), true)
    }

    /// A new iterator (unpositioned) for one pass over the table, such as a compaction's:
    /// it uses blocks already in the block cache but does not add the ones it reads, which
    /// would evict the blocks point reads keep coming back to. The index and filter are
    /// cached as by [`Table::iter`].
    pub fn iter_without_caching(self: &Arc<Self>) -> TableIter {
        TableIter::new(Arc::clone(self), false)
    }

    /// Everything the properties block records.
    pub fn properties(&self) -> &TableProperties {
        &self.properties
    }

    /// The id given to [`Table::open`].
    pub fn table_id(&self) -> u64 {
        self.id
    }

    /// The name given to [`Table::open`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// File size in bytes.
    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    /// What the file size would be with every data block stored uncompressed.
    pub fn uncompressed_size(&self) -> u64 {
        let saved = self.properties.uncompressed_data_bytes.saturating_sub(self.properties.data_bytes);
        self.file_size.saturating_add(saved)
    }

    /// The format version the file was written with (1 or 2).
    pub fn format_version(&self) -> u32 {
        self.properties.format_version
    }

    /// Whether the table has a bloom filter.
    pub fn has_filter(&self) -> bool {
        self.filter_handle.is_some()
    }

    /// The pinned index, if the table pins it.
    pub(crate) fn pinned_index(&self) -> Option<&Arc<IndexBlock>> {
        match &self.meta {
            MetaBlocks::Pinned { index, .. } => Some(index),
            MetaBlocks::Cached(_) => None,
        }
    }

    /// The index: pinned, or from the block cache, or read again (verified) and cached.
    pub(crate) fn index(&self) -> Result<Arc<IndexBlock>, TableError> {
        match &self.meta {
            MetaBlocks::Pinned { index, .. } => Ok(Arc::clone(index)),
            MetaBlocks::Cached(cache) => self.cached_index(cache),
        }
    }

    fn cached_index(&self, cache: &BlockCache) -> Result<Arc<IndexBlock>, TableError> {
        let offset = self.index_handle.offset;
        if let Some(Cached::Index(index)) = cache.lookup(self.id, offset, BlockKind::Index) {
            return Ok(index);
        }
        let index = Arc::new(read_index(&*self.file, &self.name, self.index_handle, self.file_size)?);
        cache.insert(self.id, offset, Cached::Index(Arc::clone(&index)));
        Ok(index)
    }

    fn cached_filter(&self, cache: &BlockCache, handle: BlockHandle) -> Result<Arc<BloomFilter>, TableError> {
        if let Some(Cached::Filter(filter)) = cache.lookup(self.id, handle.offset, BlockKind::Filter) {
            return Ok(filter);
        }
        let filter = Arc::new(read_filter(&*self.file, &self.name, handle, self.filter_limit)?);
        cache.insert(self.id, handle.offset, Cached::Filter(Arc::clone(&filter)));
        Ok(filter)
    }

    pub(crate) fn empty_block(&self) -> &Arc<Block> {
        &self.empty_block
    }

    /// Decodes an index entry's value.
    pub(crate) fn decode_handle(&self, value: &[u8]) -> Result<BlockHandle, TableError> {
        BlockHandle::decode(value).ok_or_else(|| {
            TableError::corruption(&self.name, self.index_handle.offset, "bad block handle in index")
        })
    }

    pub(crate) fn index_corruption(&self) -> TableError {
        TableError::corruption(&self.name, self.index_handle.offset, "malformed index block")
    }

    pub(crate) fn data_corruption(&self, offset: u64) -> TableError {
        TableError::corruption(&self.name, offset, "malformed entry in data block")
    }

    /// The data block at `handle`, from the cache or read, verified and decoded; a block
    /// read from the file is put in the cache if `fill_cache`.
    pub(crate) fn load_block(&self, handle: BlockHandle, fill_cache: bool) -> Result<Arc<Block>, TableError> {
        self.load_block_via(handle, fill_cache, None)
    }

    /// The data block at `offset` if the block cache holds it (no read otherwise), for a
    /// scan looking ahead: a miss is not counted (the read that follows counts it).
    pub(crate) fn cached_data_block_ahead(&self, offset: u64) -> Option<Arc<Block>> {
        self.cache.as_ref()?.lookup_data_ahead(self.id, offset)
    }

    /// Asks the processor to load the header of the data block at `offset` if the block
    /// cache holds it (see [`BlockCache::prefetch_data`]).
    pub(crate) fn prefetch_cached_data_block(&self, offset: u64) {
        if let Some(cache) = &self.cache {
            cache.prefetch_data(self.id, offset);
        }
    }

    /// [`Table::load_block`], reading through `readahead` (an iterator's) when the block
    /// is not in the cache.
    pub(crate) fn load_block_via(
        &self,
        handle: BlockHandle,
        fill_cache: bool,
        readahead: Option<&mut Readahead>,
    ) -> Result<Arc<Block>, TableError> {
        if let Some(cache) = &self.cache {
            if let Some(block) = cache.lookup_data(self.id, handle.offset) {
                return Ok(block);
            }
        }
        let bytes = match readahead {
            Some(ahead) => read_block_with(&self.name, handle, self.data_end, |len| {
                ahead.read(&*self.file, handle.offset, len, self.data_end)
            })?,
            None => read_block(&*self.file, &self.name, handle, self.data_end)?,
        };
        let block = Block::new(bytes).map_err(|r| TableError::corruption(&self.name, handle.offset, r))?;
        let block = Arc::new(block);
        if let Some(cache) = self.cache.as_ref().filter(|_| fill_cache) {
            cache.insert(self.id, handle.offset, Cached::Data(Arc::clone(&block)));
        }
        Ok(block)
    }
}

/// Reads, verifies and decodes the index block.
fn read_index(
    file: &dyn ReadAt,
    name: &str,
    handle: BlockHandle,
    limit: u64,
) -> Result<IndexBlock, TableError> {
    let bytes = read_block(file, name, handle, limit)?;
    Block::new(bytes).and_then(IndexBlock::new).map_err(|r| TableError::corruption(name, handle.offset, r))
}

/// Reads, verifies and decodes the filter block.
fn read_filter(
    file: &dyn ReadAt,
    name: &str,
    handle: BlockHandle,
    limit: u64,
) -> Result<BloomFilter, TableError> {
    let bytes = read_block(file, name, handle, limit)?;
    BloomFilter::decode(bytes).map_err(|r| TableError::corruption(name, handle.offset, r))
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.name)
            .field("id", &self.id)
            .field("file_size", &self.file_size)
            .field("entries", &self.properties.entry_count)
            .finish_non_exhaustive()
    }
}

/// Reads and verifies the footer and the placement of the index and metaindex blocks.
fn read_footer(file: &dyn ReadAt, name: &str, file_size: u64) -> Result<Footer, TableError> {
    let footer_offset = file_size
        .checked_sub(FOOTER_LEN as u64)
        .ok_or_else(|| TableError::corruption(name, 0, "file too short for a footer"))?;
    let mut buf = [0u8; FOOTER_LEN];
    file.read_exact_at(&mut buf, footer_offset)
        .map_err(|e| TableError::read_error(name, footer_offset, e))?;
    let footer = Footer::decode(&buf, name, footer_offset)?;
    if footer.index.end() != Some(footer_offset) {
        let reason = "index block does not end at the footer";
        return Err(TableError::corruption(name, footer_offset, reason));
    }
    if footer.metaindex.end() != Some(footer.index.offset) {
        let reason = "metaindex block does not end at the index block";
        return Err(TableError::corruption(name, footer_offset, reason));
    }
    Ok(footer)
}

/// Reads the metaindex block and extracts the filter and properties handles.
pub(crate) fn read_metaindex(
    file: &dyn ReadAt,
    name: &str,
    footer: Footer,
) -> Result<MetaHandles, TableError> {
    let offset = footer.metaindex.offset;
    let corrupt = |reason: &str| TableError::corruption(name, offset, reason);
    let bytes = read_block(file, name, footer.metaindex, footer.index.offset)?;
    let block = Block::new(bytes).map_err(corrupt)?;
    let mut filter = None;
    let mut properties = None;
    let mut it = BlockIter::new(&block, false);
    it.seek_to_first();
    while it.valid() {
        let slot = match it.key() {
            k if k == FILTER_META_NAME.as_bytes() => Some(&mut filter),
            k if k == PROPERTIES_META_NAME.as_bytes() => Some(&mut properties),
            _ => None, // unknown meta blocks are ignored
        };
        if let Some(slot) = slot {
            let handle = BlockHandle::decode(it.value());
            *slot = Some(handle.ok_or_else(|| corrupt("bad meta block handle"))?);
        }
        it.next();
    }
    if it.is_corrupt() {
        return Err(corrupt("malformed metaindex block"));
    }
    let properties = properties.ok_or_else(|| corrupt("missing properties block"))?;
    let ends_before_meta = |h: &BlockHandle| h.end().is_some_and(|end| end <= footer.metaindex.offset);
    if !ends_before_meta(&properties) || !filter.as_ref().is_none_or(ends_before_meta) {
        return Err(corrupt("meta block handle out of range"));
    }
    Ok(MetaHandles { filter, properties })
}
