//! An open table: verified footer, pinned index / filter / properties, block loading and
//! point lookups.

use std::sync::Arc;

use crate::block::{Block, BlockIter};
use crate::bloom::BloomFilter;
use crate::builder::{FILTER_META_NAME, PROPERTIES_META_NAME};
use crate::cache::BlockCache;
use crate::error::TableError;
use crate::format::{read_block, BlockHandle, Footer, BLOCK_TRAILER_LEN, FOOTER_LEN};
use crate::index::IndexBlock;
use crate::iter::TableIter;
use crate::key::split_stored_key;
use crate::properties::TableProperties;
use crate::read_at::ReadAt;

/// An open table: footer, index, filter and properties loaded and verified.
pub struct Table {
    file: Arc<dyn ReadAt>,
    id: u64,
    name: String,
    cache: Option<Arc<BlockCache>>,
    file_size: u64,
    index: IndexBlock,
    index_offset: u64,
    filter: Option<BloomFilter>,
    properties: TableProperties,
    /// End of the data region: every data block (with trailer) must end at or before it.
    data_end: u64,
    /// Shared placeholder for iterators that have no data block loaded.
    empty_block: Arc<Block>,
}

/// Handles found in the metaindex block.
pub(crate) struct MetaHandles {
    pub(crate) filter: Option<BlockHandle>,
    pub(crate) properties: BlockHandle,
}

impl Table {
    /// Opens a table. `table_id` must be unique per file (block cache key); `name` is for errors.
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
        let file_size = file.size().map_err(|e| TableError::read_error(&name, 0, e))?;
        let footer = read_footer(&*file, &name, file_size)?;
        let index_bytes = read_block(&*file, &name, footer.index, file_size)?;
        let index = Block::new(index_bytes)
            .and_then(IndexBlock::new)
            .map_err(|r| TableError::corruption(&name, footer.index.offset, r))?;
        let meta = read_metaindex(&*file, &name, footer)?;
        let meta_start = footer.metaindex.offset;
        let props_bytes = read_block(&*file, &name, meta.properties, meta_start)?;
        let props_corrupt = |r: &str| TableError::corruption(&name, meta.properties.offset, r);
        let props_block = Block::new(props_bytes).map_err(props_corrupt)?;
        let properties = TableProperties::decode(&props_block).map_err(|r| props_corrupt(&r))?;
        let filter = match meta.filter {
            Some(handle) => {
                let bytes = read_block(&*file, &name, handle, meta_start)?;
                let f = BloomFilter::decode(bytes)
                    .map_err(|r| TableError::corruption(&name, handle.offset, r))?;
                Some(f)
            }
            None => None,
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
        Ok(Arc::new(Table {
            file,
            id: table_id,
            name,
            cache,
            file_size,
            index,
            index_offset: footer.index.offset,
            filter,
            properties,
            data_end,
            empty_block: Arc::new(Block::empty()),
        }))
    }

    /// Bloom check: false means the user key is certainly absent.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain(user_key))
    }

    /// First entry at or after (`user_key`, `max_trailer`) *if* its user key equals `user_key`:
    /// i.e. the newest version whose trailer is <= `max_trailer`. Consults the bloom filter.
    pub fn get(&self, user_key: &[u8], max_trailer: u64) -> Result<Option<(u64, Vec<u8>)>, TableError> {
        if !self.may_contain(user_key) {
            return Ok(None);
        }
        let mut index = BlockIter::new(self.index.block().as_ref(), true);
        self.index.seek(&mut index, user_key, max_trailer);
        loop {
            if index.is_corrupt() {
                return Err(self.index_corruption());
            }
            if !index.valid() {
                return Ok(None);
            }
            let handle = self.decode_handle(index.value())?;
            let block = self.load_block(handle)?;
            let mut it = BlockIter::new(&*block, true);
            // Keys near the target are about as long as it: one allocation, no regrowth.
            it.reserve_key(user_key.len() + 32);
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

    /// Bytes of index and filter held in memory for this table.
    pub fn pinned_memory_bytes(&self) -> usize {
        self.index.memory_usage() + self.filter.as_ref().map_or(0, BloomFilter::memory_usage)
    }

    /// A new iterator (unpositioned).
    pub fn iter(self: &Arc<Self>) -> TableIter {
        TableIter::new(Arc::clone(self))
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
        self.filter.is_some()
    }

    pub(crate) fn index(&self) -> &IndexBlock {
        &self.index
    }

    pub(crate) fn empty_block(&self) -> &Arc<Block> {
        &self.empty_block
    }

    /// Decodes an index entry's value.
    pub(crate) fn decode_handle(&self, value: &[u8]) -> Result<BlockHandle, TableError> {
        BlockHandle::decode(value)
            .ok_or_else(|| TableError::corruption(&self.name, self.index_offset, "bad block handle in index"))
    }

    pub(crate) fn index_corruption(&self) -> TableError {
        TableError::corruption(&self.name, self.index_offset, "malformed index block")
    }

    pub(crate) fn data_corruption(&self, offset: u64) -> TableError {
        TableError::corruption(&self.name, offset, "malformed entry in data block")
    }

    /// The data block at `handle`, from the cache or read, verified, decoded and cached.
    pub(crate) fn load_block(&self, handle: BlockHandle) -> Result<Arc<Block>, TableError> {
        if let Some(cache) = &self.cache {
            if let Some(block) = cache.lookup(self.id, handle.offset) {
                return Ok(block);
            }
        }
        let bytes = read_block(&*self.file, &self.name, handle, self.data_end)?;
        let block = Block::new(bytes).map_err(|r| TableError::corruption(&self.name, handle.offset, r))?;
        let block = Arc::new(block);
        if let Some(cache) = &self.cache {
            cache.insert(self.id, handle.offset, Arc::clone(&block));
        }
        Ok(block)
    }
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
