//! Writes a table in one pass.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::Arc;

use crate::block::Block;
use crate::block_builder::BlockBuilder;
use crate::bloom::BloomBuilder;
use crate::cache::{BlockCache, Cached};
use crate::compression::{compress_block, Compression, ProbeSchedule, BLOCK_TYPE_RAW};
use crate::error::TableError;
use crate::format::{block_trailer, BlockHandle, Footer, BLOCK_TRAILER_LEN, FORMAT_VERSION};
use crate::key::{compare, push_stored_key, shortest_separator};
use crate::options::TableOptions;
use crate::properties::TableProperties;

/// Largest user key + value accepted by [`TableBuilder::add`]; with blocks capped at
/// 1 GiB this keeps every block below 4 GiB (block-internal offsets are u32).
pub const MAX_ENTRY_BYTES: usize = 1 << 30;

/// Largest index block accepted (its internal offsets are u32).
const MAX_INDEX_BYTES: usize = 1 << 31;

/// Metaindex name of the filter block.
pub(crate) const FILTER_META_NAME: &str = "filter";
/// Metaindex name of the properties block.
pub(crate) const PROPERTIES_META_NAME: &str = "properties";

/// What a finished table holds.
#[derive(Debug, Clone)]
pub struct TableSummary {
    /// Total file size in bytes.
    pub file_size: u64,
    /// Number of entries.
    pub entry_count: u64,
    /// User key of the first entry (empty for an empty table).
    pub smallest_key: Vec<u8>,
    /// Trailer of the first entry (0 for an empty table).
    pub smallest_trailer: u64,
    /// User key of the last entry (empty for an empty table).
    pub largest_key: Vec<u8>,
    /// Trailer of the last entry (0 for an empty table).
    pub largest_trailer: u64,
    /// Everything the properties block records (includes the fields above).
    pub properties: TableProperties,
}

/// The writer plus the file offset written so far.
struct Output<W: Write> {
    writer: W,
    offset: u64,
    /// Set after a failed write: the output is then in an unknown state.
    failed: bool,
}

impl<W: Write> Output<W> {
    /// Appends the trailer to `stored` (a block's bytes as stored: the block itself for
    /// type 0), writes block + trailer, returns the handle.
    fn write_block(&mut self, stored: &mut Vec<u8>, block_type: u8) -> Result<BlockHandle, TableError> {
        let handle = BlockHandle { offset: self.offset, size: stored.len() as u64 };
        let trailer = block_trailer(stored, block_type, self.offset);
        stored.extend_from_slice(&trailer);
        self.write_all(stored)?;
        Ok(handle)
    }

    /// Writes an uncompressed block (type 0).
    fn write_raw_block(&mut self, contents: &mut Vec<u8>) -> Result<BlockHandle, TableError> {
        self.write_block(contents, BLOCK_TYPE_RAW)
    }

    fn write_all(&mut self, bytes: &[u8]) -> Result<(), TableError> {
        if self.failed {
            return Err(io::Error::other("an earlier write of this table failed").into());
        }
        if let Err(e) = self.writer.write_all(bytes) {
            self.failed = true;
            return Err(e.into());
        }
        self.offset += bytes.len() as u64;
        Ok(())
    }
}

/// Writes a table to `W` in one pass.
///
/// Blocks are written with one `write_all` each; wrap files in a `BufWriter` if that is
/// too many calls. After a write error every later call fails.
pub struct TableBuilder<W: Write> {
    out: Output<W>,
    options: TableOptions,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    /// The last flushed data block. Its index entry is added when the next key arrives
    /// (or at finish), so that the index key can be a short separator.
    pending_handle: Option<BlockHandle>,
    bloom: Option<BloomBuilder>,
    /// Scratch buffer for stored keys.
    key_buf: Vec<u8>,
    /// Scratch buffer for compressed data blocks.
    compressed: Vec<u8>,
    /// Which data blocks are worth a compression attempt.
    probes: ProbeSchedule,
    last_user_key: Vec<u8>,
    last_trailer: u64,
    props: TableProperties,
    /// Where each data block goes as it is written, if anywhere (see
    /// [`TableBuilder::fill_block_cache`]): the cache, the table id it is keyed under and
    /// whether blocks may evict others.
    fill_cache: Option<(Arc<BlockCache>, u64, CacheFill)>,
}

/// How a builder's data blocks enter the block cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CacheFill {
    /// Like blocks read from the file: evicting others as needed.
    Evicting,
    /// Only into free room: blocks that do not fit are not cached.
    FreeRoomOnly,
}

impl<W: Write> TableBuilder<W> {
    /// Starts a table.
    pub fn new(writer: W, options: TableOptions) -> Self {
        let options = options.sanitized();
        let bloom = (options.bloom_bits_per_key > 0).then(|| BloomBuilder::new(options.bloom_bits_per_key));
        TableBuilder {
            out: Output { writer, offset: 0, failed: false },
            data_block: BlockBuilder::with_restart_bytes(options.restart_interval, options.restart_bytes),
            index_block: BlockBuilder::new(options.index_restart_interval),
            options,
            pending_handle: None,
            bloom,
            key_buf: Vec::new(),
            compressed: Vec::new(),
            probes: ProbeSchedule::default(),
            last_user_key: Vec::new(),
            last_trailer: 0,
            props: TableProperties { format_version: FORMAT_VERSION, ..TableProperties::default() },
            fill_cache: None,
        }
    }

    /// Puts every data block written from now on into `cache` as well, keyed as a
    /// [`Table`](crate::Table) opened with `table_id` looks it up: readers of the new table
    /// find its blocks cached instead of reading, verifying and decoding each once (what
    /// RocksDB calls prepopulating the block cache). Costs a copy of each block; the cache
    /// evicts as usual. `table_id` must be the id the finished table will be opened with.
    pub fn fill_block_cache(&mut self, cache: Arc<BlockCache>, table_id: u64) {
        self.fill_cache = Some((cache, table_id, CacheFill::Evicting));
    }

    /// Like [`TableBuilder::fill_block_cache`], but a block is cached only if it fits in
    /// the room the cache has free when it is written: it never evicts a block readers
    /// brought in. So a cache that is not yet full fills with the newest tables' blocks
    /// (with no copy made for a block that does not fit), and a full one is left alone.
    pub fn fill_block_cache_free_room(&mut self, cache: Arc<BlockCache>, table_id: u64) {
        self.fill_cache = Some((cache, table_id, CacheFill::FreeRoomOnly));
    }

    /// Adds an entry; must be strictly after the previous one in table order.
    ///
    /// Errors: [`TableError::OutOfOrder`] for an entry not after the previous one (a
    /// duplicate (user key, trailer) included); `Io(InvalidInput)` if the key plus value
    /// exceed [`MAX_ENTRY_BYTES`]; `Io` for write errors.
    pub fn add(&mut self, user_key: &[u8], trailer: u64, value: &[u8]) -> Result<(), TableError> {
        if user_key.len().saturating_add(value.len()) > MAX_ENTRY_BYTES {
            return Err(TableError::invalid_input("table entry larger than 1 GiB"));
        }
        let first = self.props.entry_count == 0;
        if !first && compare(user_key, trailer, &self.last_user_key, self.last_trailer) != Ordering::Greater {
            return Err(TableError::OutOfOrder);
        }
        if self.index_block.size_estimate() > MAX_INDEX_BYTES {
            // Offsets inside a block are u32: refuse rather than write a broken index.
            return Err(TableError::invalid_input("table has too many data blocks (index block over 2 GiB)"));
        }
        if let Some(handle) = self.pending_handle.take() {
            self.add_index_entry(handle, Some(user_key));
        }
        let new_user_key = first || user_key != self.last_user_key.as_slice();
        if new_user_key {
            if let Some(bloom) = &mut self.bloom {
                bloom.add_key(user_key);
            }
            self.last_user_key.clear();
            self.last_user_key.extend_from_slice(user_key);
        }
        self.last_trailer = trailer;
        self.key_buf.clear();
        push_stored_key(&mut self.key_buf, user_key, trailer);
        self.data_block.add(&self.key_buf, value);
        if first {
            self.props.smallest = Some((user_key.to_vec(), trailer));
        }
        self.props.entry_count += 1;
        self.props.raw_key_bytes += self.key_buf.len() as u64;
        self.props.raw_value_bytes += value.len() as u64;
        if self.data_block.size_estimate() >= self.options.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Bytes written or buffered so far (to cut output files at a target size). The block
    /// being built counts at its uncompressed size, so with compression the estimate can
    /// drop a little when that block is written.
    pub fn estimated_size(&self) -> u64 {
        let buffered =
            if self.data_block.is_empty() { 0 } else { self.data_block.size_estimate() + BLOCK_TRAILER_LEN };
        self.out.offset + buffered as u64
    }

    /// Number of entries added.
    pub fn entry_count(&self) -> u64 {
        self.props.entry_count
    }

    /// Adds the index entry of the block at `handle`, whose last key is the builder's
    /// last key. The index key is a shortened separator when `next_user_key` allows one.
    fn add_index_entry(&mut self, handle: BlockHandle, next_user_key: Option<&[u8]>) {
        self.key_buf.clear();
        match next_user_key.and_then(|next| shortest_separator(&self.last_user_key, next)) {
            // (separator, u64::MAX) sorts before every version of the separator user key.
            Some(separator) => push_stored_key(&mut self.key_buf, &separator, u64::MAX),
            None => push_stored_key(&mut self.key_buf, &self.last_user_key, self.last_trailer),
        }
        let mut value = Vec::with_capacity(20);
        handle.encode_to(&mut value);
        self.index_block.add(&self.key_buf, &value);
    }

    fn flush_data_block(&mut self) -> Result<(), TableError> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let raw = self.data_block.finish();
        self.props.uncompressed_data_bytes += (raw.len() + BLOCK_TRAILER_LEN) as u64;
        // The block as a reader decodes it (before a raw block gets its trailer below).
        let offset = self.out.offset;
        let cached = match &self.fill_cache {
            Some((cache, id, CacheFill::FreeRoomOnly))
                if !cache.has_free_room_for(*id, offset, raw.len()) =>
            {
                None
            }
            Some(_) => Some(raw.clone()),
            None => None,
        };
        let codec = self.options.compression;
        let block_type = if codec != Compression::None && self.probes.should_try() {
            let block_type = compress_block(codec, raw, &mut self.compressed);
            self.probes.record(block_type != BLOCK_TYPE_RAW);
            block_type
        } else {
            BLOCK_TYPE_RAW
        };
        let handle = if block_type == BLOCK_TYPE_RAW {
            self.out.write_block(raw, BLOCK_TYPE_RAW)?
        } else {
            self.out.write_block(&mut self.compressed, block_type)?
        };
        self.data_block.reset();
        self.props.data_block_count += 1;
        self.pending_handle = Some(handle);
        debug_assert_eq!(handle.offset, offset, "a block is written where the output stood");
        if let (Some((cache, table_id, fill)), Some(contents)) = (&self.fill_cache, cached) {
            // A block this builder made always decodes; one that did not would simply be
            // read from the file when needed.
            if let Ok(block) = Block::new(contents) {
                let block = Cached::Data(Arc::new(block));
                match fill {
                    CacheFill::Evicting => cache.insert(*table_id, handle.offset, block),
                    CacheFill::FreeRoomOnly => cache.insert_into_free_room(*table_id, handle.offset, block),
                }
            }
        }
        Ok(())
    }

    /// Writes filter, properties (with these user properties), index and footer.
    ///
    /// Returns the summary and the writer (flushed, not synced). Duplicate user property
    /// names are rejected with `Io(InvalidInput)`.
    pub fn finish(mut self, user_properties: &[(&str, &[u8])]) -> Result<(TableSummary, W), TableError> {
        let mut user = BTreeMap::new();
        for (name, value) in user_properties {
            if user.insert((*name).to_owned(), value.to_vec()).is_some() {
                return Err(TableError::invalid_input(format!("duplicate user property {name:?}")));
            }
        }
        self.props.user = user;
        self.flush_data_block()?;
        if let Some(handle) = self.pending_handle.take() {
            self.add_index_entry(handle, None);
        }
        if self.props.entry_count > 0 {
            self.props.largest = Some((self.last_user_key.clone(), self.last_trailer));
        }
        self.props.data_bytes = self.out.offset;
        let footer = self.write_meta_and_index()?;
        self.out.write_all(&footer.encode())?;
        self.out.writer.flush()?;
        let props = self.props;
        let (smallest_key, smallest_trailer) = props.smallest.clone().unwrap_or_default();
        let (largest_key, largest_trailer) = props.largest.clone().unwrap_or_default();
        let summary = TableSummary {
            file_size: self.out.offset,
            entry_count: props.entry_count,
            smallest_key,
            smallest_trailer,
            largest_key,
            largest_trailer,
            properties: props,
        };
        Ok((summary, self.out.writer))
    }

    /// Writes filter, properties, metaindex and index blocks; returns the footer.
    fn write_meta_and_index(&mut self) -> Result<Footer, TableError> {
        let filter_handle = match &self.bloom {
            Some(bloom) => Some(self.out.write_raw_block(&mut bloom.finish())?),
            None => None,
        };
        self.props.filter_bytes = filter_handle.map_or(0, |h| h.size + BLOCK_TRAILER_LEN as u64);
        // The index is complete; its size is recorded in the properties written first.
        let mut index_contents = std::mem::take(self.index_block.finish());
        self.props.index_bytes = (index_contents.len() + BLOCK_TRAILER_LEN) as u64;
        let properties_handle = self.out.write_raw_block(&mut self.props.encode())?;

        let mut metaindex = BlockBuilder::new(1);
        let mut value = Vec::new();
        // Names in sorted order: "filter" < "properties".
        if let Some(handle) = filter_handle {
            handle.encode_to(&mut value);
            metaindex.add(FILTER_META_NAME.as_bytes(), &value);
        }
        value.clear();
        properties_handle.encode_to(&mut value);
        metaindex.add(PROPERTIES_META_NAME.as_bytes(), &value);
        let metaindex_handle = self.out.write_raw_block(metaindex.finish())?;
        let index_handle = self.out.write_raw_block(&mut index_contents)?;
        Ok(Footer { metaindex: metaindex_handle, index: index_handle, version: FORMAT_VERSION })
    }
}
