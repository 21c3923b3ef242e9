//! `stampkv-wal`: a segmented, checksummed write-ahead log with group commit,
//! the durability layer of the stampkv key-value database.
//!
//! * [`LogWriter`] writes logical records into one segment file.
//! * [`Wal`] writes a sequence of segments and shares `fdatasync`s between
//!   concurrent committers (group commit); after any failed write or sync it is
//!   poisoned and refuses further work.
//! * [`SegmentReader`] reads a segment back and classifies damage: a *torn
//!   tail* (only never-synced data was lost; dropped silently by default)
//!   versus *corruption* (synced data was lost; an error), following the
//!   [`RecoveryMode`].
//! * [`seal_recovered_segment`] finishes a recovered segment so it can be
//!   read later as a non-last segment.
//! * [`StdSegmentDir`], [`MemLogFile`] and [`MemSegmentDir`] are file/directory
//!   implementations for tools and tests.
//!
//! ```
//! use stampkv_wal::*;
//! let file = MemLogFile::new();
//! let mut w = LogWriter::create(&file, 7, WalOptions::default()).unwrap();
//! w.add_record(b"hello").unwrap();
//! w.seal().unwrap();
//! let data = file.contents();
//! let info = SegmentInfo { number: 7, name: "000007.log".into(), is_last: false };
//! let mut r = SegmentReader::new(&data, info, RecoveryMode::default());
//! assert_eq!(r.next_record().unwrap(), Some(&b"hello"[..]));
//! assert_eq!(r.next_record().unwrap(), None);
//! assert_eq!(r.summary().end, SegmentEnd::Sealed);
//! ```
//!
//! # Durability
//!
//! [`Wal::append`] hands the record to the OS (with any deferred records before
//! it); [`Wal::append_deferred`] only encodes it into the writer's buffer.
//! [`Wal::sync_to`] makes a position durable: a thread that finds no sync
//! running becomes the syncer, writes every deferred record with one positioned
//! write and `fdatasync`s everything written so far; threads arriving meanwhile
//! wait for it and then either return or start the next sync, so one
//! `fdatasync` serves many commits and nobody sleeps on a timer.
//! [`Wal::sync_to_gathering`] lets the caller wait briefly, before it starts a
//! sync, for records it knows are on their way. Once a segment has been synced,
//! it is zero-filled ahead of the write position
//! ([`WalOptions::preallocate_bytes`]) so that most durable commits overwrite
//! already allocated blocks (a segment never synced is not: that would write
//! every byte twice). [`Wal::rotate`] seals and syncs
//! the current segment before creating the next one, so every segment but the
//! newest ends with a SEAL.
//!
//! # Recovery
//!
//! A reader reads each segment with a [`SegmentReader`] (`is_last` for the
//! newest). Each chunk records how much of its segment was durable when it was
//! written, so damage that a later chunk proves had been synced is reported as
//! corruption instead of being dropped as a torn tail. Before writing after a
//! recovery, the newest segment must either be finished with
//! [`seal_recovered_segment`] (at [`SegmentSummary::valid_end`]) or be retired
//! altogether (stampkv's engine moves the recovered records into tables, then
//! starts a new segment); otherwise its torn tail would sit before later
//! segments and read as corruption.
//!
//! # Format
//!
//! The byte-level description, with the recovery rules, is in `FORMAT.md`.
//! In short (all integers little-endian):
//!
//! ```text
//! segment  := block* partial_block?          (block = 32768 bytes)
//! block    := chunk* trailer?
//! trailer  := 0x00{0..10}                     (a chunk header does not fit)
//! chunk    := checksum:u32 length:u16 type:u8 synced_to:u32 payload[length]
//! type     := 1 FULL | 2 FIRST | 3 MIDDLE | 4 LAST | 5 SEAL | 6 SEGMENT_HEADER
//! checksum := mask(crc32_ieee(segment_number:u64 ++ length ++ type ++ synced_to ++ payload))
//! mask(c)  := ((c >> 15) | (c << 17)) + 0xa282ead8   (wrapping)
//! record   := FULL | FIRST MIDDLE* LAST
//! segment contents := SEGMENT_HEADER record* SEAL? (zeros)*
//! SEGMENT_HEADER payload := "SKVWAL" version:u16(=1) checksum_kind:u8(=1) segment_number:u64
//! ```
//!
//! A chunk never crosses a block boundary. An all-zero chunk header marks
//! unwritten space. `synced_to` is the number of bytes at the start of the
//! segment known to be durable when the chunk was written (≤ the chunk's
//! offset): it lets recovery tell a torn tail from corruption.

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

mod crc;
mod error;
mod file;
mod format;
mod group;
mod invariants;
mod mem;
mod reader;
mod scan;
mod std_file;
mod writer;

pub use error::WalError;
pub use file::{LogFile, SegmentDir};
pub use format::{
    BLOCK_SIZE, CHECKSUM_CRC32_MASKED, FORMAT_VERSION, HEADER_SIZE, MAX_RECORD_SIZE, MAX_SEGMENT_SIZE,
    SEGMENT_MAGIC,
};
pub use group::{LogPosition, Wal, WalStats};
pub use mem::{MemLogFile, MemSegmentDir};
pub use reader::{RecoveryMode, SegmentEnd, SegmentInfo, SegmentReader, SegmentSummary};
pub use std_file::StdSegmentDir;
pub use writer::{
    seal_recovered_segment, LogWriter, WalOptions, DEFAULT_PREALLOCATE_BYTES, DEFAULT_WRITEBACK_BYTES,
};
