//! The stampkv storage engine: a log-structured merge tree written from scratch.
//!
//! - Commits ([`WriteBatch`]) are atomic, get one sequence number each, and are appended
//!   to a write-ahead log ([`stampkv_wal`]) with group commit before they are applied to a
//!   lock-free skiplist memtable and made visible.
//! - Full memtables are flushed to level-0 tables ([`stampkv_sstable`]) by a background
//!   thread; a second thread runs leveled compaction, dropping versions, tombstones and
//!   expired entries no reader can see.
//! - Reads see a consistent snapshot (a sequence number); [`Db::range`] iterates forward
//!   and backward over memtables and levels merged.
//! - Every file operation goes through [`fs::Fs`]: the real file system, or an in-memory
//!   one that simulates crashes.
//! - Maintenance works on a directory: [`checkpoint`] (and [`Db::checkpoint`]) copies a
//!   database that may be open and written, even by another process, as of one commit;
//!   [`restore`] copies a checkpoint back; [`verify`] checks every byte of a closed
//!   database and reports each problem; [`repair`] salvages what is readable.
//!
//! See DESIGN.md at the repository root for the architecture, the durability contract and
//! the on-disk formats.
//!
//! The internals are private: the skiplist, memtables, internal iterators, versions and
//! internal keys cannot be reached from outside, so no safe caller can misuse their raw
//! pointers or break their invariants. Each of these fails to compile:
//!
//! ```compile_fail
//! use stampkv_engine::skiplist::SkipList;
//! ```
//! ```compile_fail
//! use stampkv_engine::memtable::Memtable;
//! ```
//! ```compile_fail
//! use stampkv_engine::iter::InternalIterator;
//! ```
//! ```compile_fail
//! use stampkv_engine::version::Version;
//! ```
//! ```compile_fail
//! use stampkv_engine::key::EntryKind;
//! ```
//! ```compile_fail
//! use stampkv_engine::filename::FileKind;
//! ```
//! ```compile_fail
//! use stampkv_engine::db::table_scan::scan_table;
//! ```
//!
//! What is public, all of it re-exported at the crate root except the file systems:
//!
//! ```
//! use stampkv_engine::fs::{CrashPolicy, FaultOp, FaultyFs, Fs, FsFile, FsLock, MemFs, StdFs};
//! use stampkv_engine::{
//!     BackgroundMode, Clock, Db, DbCursor, DbIter, Entry, Error, Ingest, IngestSummary, LatestView,
//!     ManualClock, Options, RecoveryMode, RecoveryReport, Result, Snapshot, SpaceUsage, Stats,
//!     SyncMode, SystemClock, TableOptions, WriteBatch, WriteOptions,
//! };
//! // Maintenance: online checkpoints, verification, repair, the shape of the tree.
//! use stampkv_engine::{
//!     checkpoint, checkpoint_with_fs, repair, restore, verify, CheckpointInfo, Loss, Problem,
//!     RepairReport, TableFileInfo, VerifyReport, BACKUP_FILE,
//! };
//! ```

#![warn(unreachable_pub)]

// Only `fs` is a public module (for `Fs` implementations and test file systems); every
// other public item is re-exported below. The internals (skiplist, memtable, iterators,
// versions, internal keys) are private so that no safe caller can reach their raw
// pointers or break their invariants.
mod batch;
mod chunk_pool;
mod clock;
mod db;
mod error;
mod file_remover;
mod filename;
pub mod fs;
mod heap_trim;
mod invariants;
mod iter;
mod key;
mod memtable;
mod memtable_bloom;
mod options;
mod skiplist;
mod stats;
mod table_cache;
mod version;

pub use batch::WriteBatch;
pub use clock::{Clock, ManualClock, SystemClock};
pub use db::{
    checkpoint, checkpoint_with_fs, repair, restore, verify, CheckpointInfo, Db, DbCursor, DbIter,
    DurableCallback, Entry, Ingest, IngestSummary, LatestView, Loss, Problem, ReadOnlyDb, ReadOnlySnapshot,
    RecoveryReport, RepairReport, Snapshot, TableFileInfo, VerifyReport, BACKUP_FILE,
};
pub use error::{Error, Result};
pub use options::{default_block_cache_bytes, BackgroundMode, Options, SyncMode, WriteOptions};
pub use stampkv_sstable::{Compression, TableOptions};
pub use stampkv_wal::RecoveryMode;
pub use stats::{SpaceUsage, Stats};
