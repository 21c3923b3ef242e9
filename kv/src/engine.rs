//! The storage engine under a [`Kv`](super::Kv): its options, sync modes, clocks,
//! statistics and file systems, and [`KvEngine`], a read-only and maintenance view of a
//! database's engine. The maintenance tools work on a database directory: online
//! checkpoints ([`checkpoint`], [`restore`]), which read the files of a database open
//! elsewhere, and [`verify`] and [`repair`], which need it closed.
//!
//! The engine itself ([`stampkv_engine::Db`]) is not handed out: its key space holds
//! stampkv's own records under the reserved `0xFF` prefix (queue messages and their index),
//! and a raw write there would corrupt the queue behind its back. So nothing here writes:
//!
//! ```compile_fail
//! let kv = stampkv::Kv::open_in_memory(Default::default()).unwrap();
//! kv.engine().put(&[0xFF, b'q'], b"forged");
//! ```

use crate::storage_error::from_engine;
use crate::store::EngineStore;
use crate::KvError;
use std::ops::RangeBounds;

pub use stampkv_engine::fs;
pub use stampkv_engine::{
    checkpoint, repair, restore, verify, BackgroundMode, CheckpointInfo, Clock, DbIter, Entry, Error, Loss,
    ManualClock, Options, Problem, RecoveryMode, RecoveryReport, RepairReport, Snapshot, SpaceUsage, Stats,
    SyncMode, SystemClock, TableFileInfo, TableOptions, VerifyReport, BACKUP_FILE,
};

/// Read-only and maintenance access to the engine under a [`Kv`](super::Kv): statistics,
/// flush, compaction, and raw reads of engine keys (a key's tuple encoding, or stampkv's
/// own records under `0xFF`). Returned by [`Kv::engine`](super::Kv::engine).
#[derive(Clone, Copy)]
pub struct KvEngine<'a> {
    store: &'a EngineStore,
}

impl std::fmt::Debug for KvEngine<'_> {
    /// `KvEngine { kv: Kv { store: .. } }`, as when this view held the database handle.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        /// The database handle's debug form.
        struct Kv<'s>(&'s EngineStore);
        impl std::fmt::Debug for Kv<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct("Kv").field("store", self.0).finish()
            }
        }
        f.debug_struct("KvEngine").field("kv", &Kv(self.store)).finish()
    }
}

impl<'a> KvEngine<'a> {
    pub(crate) fn new(store: &'a EngineStore) -> Self {
        KvEngine { store }
    }

    fn db(&self) -> &'a stampkv_engine::Db {
        self.store.db()
    }

    /// Statistics: bytes written, flushes, compactions, stalls, files per level.
    pub fn stats(&self) -> Stats {
        self.db().stats()
    }

    /// The live table files, level by level.
    pub fn table_files(&self) -> Vec<TableFileInfo> {
        self.db().table_files()
    }

    /// Takes a consistent point-in-time copy of the database into the directory `dest`
    /// (which must not exist, or be empty) while it stays open: see [`checkpoint`].
    pub fn checkpoint(&self, dest: impl AsRef<std::path::Path>) -> Result<CheckpointInfo, KvError> {
        self.db().checkpoint(dest).map_err(from_engine)
    }

    /// Live and total bytes by a scan of every table.
    pub fn space_usage(&self) -> Result<SpaceUsage, KvError> {
        self.db().space_usage().map_err(from_engine)
    }

    /// What recovery found when the database was opened.
    pub fn recovery_report(&self) -> &'a RecoveryReport {
        self.db().recovery_report()
    }

    /// Sequence number of the last visible commit (the versionstamp of the newest commit
    /// is this number followed by two zero bytes).
    pub fn last_sequence(&self) -> u64 {
        self.db().last_sequence()
    }

    /// Freezes the memtable and waits until it is written to a table.
    pub fn flush(&self) -> Result<(), KvError> {
        self.db().flush().map_err(from_engine)
    }

    /// Compacts every level down to the last one.
    pub fn compact(&self) -> Result<(), KvError> {
        self.db().compact().map_err(from_engine)
    }

    /// Syncs the write-ahead log (commits made without a sync become durable).
    pub fn sync_wal(&self) -> Result<(), KvError> {
        self.db().sync_wal().map_err(from_engine)
    }

    /// The entry stored under the raw engine key `key`, if it is live.
    pub fn get_entry(&self, key: &[u8]) -> Result<Option<Entry>, KvError> {
        self.db().get_entry(key).map_err(from_engine)
    }

    /// The live entries of raw engine keys in `range`, in key order (reversible).
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> DbIter {
        self.db().range(range)
    }

    /// A consistent read-only view at the current sequence number.
    pub fn snapshot(&self) -> Snapshot {
        self.db().snapshot()
    }
}
