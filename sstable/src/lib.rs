//! Immutable sorted tables ("SSTables") for the stampkv LSM engine.
//!
//! # Keys
//!
//! Keys in a table are *versioned keys*: a user key plus a 64-bit trailer. Entries are
//! ordered by user key ascending (bytewise; a prefix sorts first), then by trailer
//! **descending**. The table gives the trailer no meaning beyond that order (the engine
//! stores `seq << 8 | kind`, so the newest version of a key comes first). A versioned
//! key may appear at most once.
//!
//! # File format (version 2)
//!
//! LevelDB's table layout; `FORMAT.md` in this crate documents it byte by byte.
//!
//! ```text
//! [data block 1] ... [data block N] [filter block]? [properties block]
//! [metaindex block] [index block] [footer: 56 bytes]
//! ```
//!
//! * Every block is followed by a 5-byte trailer: a type byte (0 = uncompressed, 1 = LZ4:
//!   `varint32 uncompressed_len ++ LZ4 block`) and a masked CRC-32 (IEEE) over the stored
//!   bytes, the type byte and the block's file offset (u64 LE), so a valid block read from
//!   the wrong offset fails verification.
//! * Data blocks are LZ4-compressed when [`TableOptions::compression`] says so and the
//!   compressed form is more than 1/8 smaller; other blocks are never compressed. The
//!   checksum is verified before decompressing, and a declared uncompressed length above
//!   [`MAX_UNCOMPRESSED_BLOCK`] (or above what the compressed bytes could produce) is
//!   corruption. Version 1 files (no compression) read unchanged.
//! * Blocks hold prefix-compressed entries (`shared`, `unshared`, `value_len` varint32s,
//!   key delta, value) with a restart point (full key) every `restart_interval` entries,
//!   then the restart offsets (u32 LE each) and their count (u32 LE).
//! * In data and index blocks the stored key is `user_key ++ !trailer as u64 big-endian`.
//! * The index block maps, per data block, a key >= every key of the block and < every
//!   key of the next block (the block's last key, or a shorter separator with trailer
//!   `u64::MAX`) to the block's handle (varint64 offset, varint64 size).
//! * The filter block is one cache-local bloom filter over the table's distinct user
//!   keys (XXH64; double hashing inside one 64-byte line per key): bit array, then the
//!   probe count.
//! * The properties block records counts, sizes, the key range and user properties.
//! * The metaindex block maps `"filter"` and `"properties"` to their handles.
//! * The footer holds the metaindex and index handles (u64 LE pairs), the format
//!   version (u32 LE), the checksum kind (u8), padding, a masked CRC-32 of those 44
//!   bytes and the magic number `89 53 54 41 4D 50 4B 56` (`\x89STAMPKV`).
//!
//! # Reading
//!
//! [`Table::open`] verifies the footer, index, filter and properties and keeps them in
//! memory. [`Table::open_with`] and [`IndexFilterPlacement::BlockCache`] put the index and
//! filter in the [`BlockCache`] instead, charged to its capacity, evicted like data blocks
//! and read (and verified) again when next needed; the open table then holds only a small,
//! constant amount of memory. Data blocks are read with [`ReadAt::read_exact_at`], verified once, and
//! shared (decompressed) through an optional [`BlockCache`]. Decoding never panics on malformed input,
//! whatever the checksums say: every length and offset is bounds-checked.
//! [`ReadAt`] is implemented for [`std::fs::File`] (`pread`) and for `Vec<u8>` (an
//! in-memory image).
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use stampkv_sstable::{ReadAt, Table, TableBuilder, TableOptions};
//!
//! let mut builder = TableBuilder::new(Vec::new(), TableOptions::default());
//! builder.add(b"apple", 7, b"red").unwrap();
//! builder.add(b"apple", 3, b"green").unwrap();
//! builder.add(b"pear", 5, b"yellow").unwrap();
//! let (summary, bytes) = builder.finish(&[("origin", b"doc")]).unwrap();
//! assert_eq!(summary.entry_count, 3);
//!
//! let file: Arc<dyn ReadAt> = Arc::new(bytes);
//! let table = Table::open(file, 1, "example.sst".into(), None).unwrap();
//! // The newest version with trailer <= 5:
//! assert_eq!(table.get(b"apple", 5).unwrap(), Some((3, b"green".to_vec())));
//! let mut it = table.iter();
//! it.seek_to_first().unwrap();
//! assert_eq!((it.user_key(), it.trailer()), (&b"apple"[..], 7));
//! ```

#![deny(unsafe_code)]
#![warn(unreachable_pub)]

mod block;
mod block_builder;
mod bloom;
mod builder;
mod cache;
mod compression;
mod error;
mod format;
mod hash;
mod index;
mod iter;
mod key;
mod key_buf;
mod options;
pub mod prefetch;
mod properties;
mod read_at;
mod readahead;
mod table;

#[cfg(test)]
mod collision_tests;

pub use builder::{TableBuilder, TableSummary, MAX_ENTRY_BYTES};
pub use cache::{BlockCache, BlockKind, CacheCounters};
pub use compression::{decode_stored_block, is_known_block_type, Compression, MAX_UNCOMPRESSED_BLOCK};
pub use error::TableError;
pub use hash::xxh64;
pub use iter::TableIter;
pub use options::TableOptions;
pub use properties::TableProperties;
pub use read_at::ReadAt;
pub use table::{IndexFilterPlacement, Table};

/// Size in bytes of the footer at the end of every table file.
pub const FOOTER_SIZE: usize = format::FOOTER_LEN;
/// The format version written (the newest one read).
pub const FORMAT_VERSION: u32 = format::FORMAT_VERSION;
/// The oldest format version read.
pub const MIN_FORMAT_VERSION: u32 = format::MIN_FORMAT_VERSION;
