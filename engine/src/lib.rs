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
//!
//! See DESIGN.md at the repository root for the architecture, the durability contract and
//! the on-disk formats.

pub mod batch;
pub mod clock;
mod db;
mod error;
pub mod filename;
pub mod fs;
pub mod iter;
pub mod key;
pub mod memtable;
mod memtable_bloom;
pub mod options;
pub mod skiplist;
pub mod stats;
pub mod version;

pub use batch::WriteBatch;
pub use clock::{Clock, ManualClock, SystemClock};
pub use db::{Db, DbIter, Entry, LatestView, RecoveryReport, Snapshot};
pub use error::{Error, Result};
pub use options::{BackgroundMode, Options, SyncMode, WriteOptions};
pub use stampkv_sstable::TableOptions;
pub use stampkv_wal::RecoveryMode;
pub use stats::{SpaceUsage, Stats};
