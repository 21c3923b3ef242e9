//! [`EngineStore`]: stampkv's LSM engine as a [`Store`], the default store. It serialises
//! commits: `build` runs once, under the engine's write lock, and the engine's sequence
//! number is the commit's version.

use super::seam::{
    Abort, BulkLoad, BulkLoadSummary, CommitOptions, OnDurable, Store, StoreCursor, StoreSnapshot,
    StoredEntry, Transaction,
};
use crate::storage_error::from_engine;
use crate::KvError;
use stampkv_engine::{
    Clock, Db, DbCursor, DbIter, Entry, Ingest, LatestView, Snapshot, WriteBatch, WriteOptions,
};
use std::sync::Arc;

/// The LSM engine under a database.
#[derive(Debug)]
pub struct EngineStore {
    db: Db,
}

impl EngineStore {
    /// The store over an open engine.
    pub fn new(db: Db) -> Self {
        EngineStore { db }
    }

    /// The engine itself.
    pub fn db(&self) -> &Db {
        &self.db
    }
}

/// An engine entry as the seam carries it.
pub(super) fn stored(entry: Entry) -> StoredEntry {
    StoredEntry { value: entry.value, version: entry.seq, expires_at_ms: entry.expires_at_ms }
}

/// A commit being built under the engine's write lock: its latest view, and the batch.
struct EngineTransaction<'a, 'b> {
    view: &'a LatestView<'b>,
    batch: WriteBatch,
}

impl Transaction for EngineTransaction<'_, '_> {
    fn get(&self, key: &[u8]) -> Result<Option<StoredEntry>, KvError> {
        Ok(self.view.get(key).map_err(from_engine)?.map(stored))
    }

    fn commit_version(&self) -> u64 {
        self.view.commit_sequence()
    }

    fn now_ms(&self) -> u64 {
        self.view.now_ms()
    }

    fn put(&mut self, key: &[u8], value: &[u8], expires_at_ms: Option<u64>) {
        match expires_at_ms {
            Some(at) => self.batch.put_expiring(key, value, at),
            None => self.batch.put(key, value),
        };
    }

    fn delete(&mut self, key: &[u8]) {
        self.batch.delete(key);
    }
}

impl Store for EngineStore {
    type Snapshot = Snapshot;

    fn snapshot(&self) -> Snapshot {
        self.db.snapshot()
    }

    fn get(&self, key: &[u8]) -> Result<Option<StoredEntry>, KvError> {
        Ok(self.db.get_entry(key).map_err(from_engine)?.map(stored))
    }

    fn cursor(&self, start: &[u8], end: &[u8], reverse: bool) -> EngineCursor {
        // The engine's own cursors hold the tables they started with without registering
        // a snapshot: cheaper for short lists.
        if reverse {
            EngineCursor::Reverse { iter: self.db.range(start..end), current: None }
        } else {
            EngineCursor::Forward(self.db.cursor(start..end))
        }
    }

    fn commit<T>(
        &self,
        options: CommitOptions,
        mut build: impl FnMut(&mut dyn Transaction) -> Result<T, Abort>,
    ) -> Result<(u64, T), Abort> {
        let options = WriteOptions::with_sync(options.sync);
        self.db.write_with(options, |view| {
            let mut transaction = EngineTransaction { view, batch: WriteBatch::new() };
            let result = build(&mut transaction)?;
            Ok((transaction.batch, result))
        })
    }

    /// The engine's deferred commit: the WAL sync and the acknowledgement happen on its
    /// durability thread, one sync for every commit waiting.
    fn commit_deferred<T>(
        &self,
        options: CommitOptions,
        mut build: impl FnMut(&mut dyn Transaction) -> Result<T, Abort>,
        on_durable: OnDurable,
    ) -> Result<(u64, T), Abort> {
        let options = WriteOptions::with_sync(options.sync);
        self.db.write_with_deferred(
            options,
            |view| {
                let mut transaction = EngineTransaction { view, batch: WriteBatch::new() };
                let result = build(&mut transaction)?;
                Ok((transaction.batch, result))
            },
            Box::new(move |result| on_durable(result.map_err(from_engine))),
        )
    }

    fn deferred_commit_may_block(&self) -> bool {
        self.db.under_write_pressure()
    }

    fn clock(&self) -> &Arc<dyn Clock> {
        self.db.clock()
    }

    fn close(&self) -> Result<(), KvError> {
        self.db.shutdown().map_err(from_engine)
    }

    /// The engine's ingest. A database that holds no entry but still has tables (all its
    /// data was deleted) is compacted first, so that the load goes to the deepest level and
    /// may keep any versions.
    fn bulk_load(&self) -> Result<Box<dyn BulkLoad + '_>, KvError> {
        let has_tables = self.db.stats().files_per_level.iter().any(|files| *files > 0);
        if has_tables && !self.db.cursor::<&[u8], _>(..).next().map_err(from_engine)? {
            self.db.compact().map_err(from_engine)?;
        }
        let ingest = self.db.ingest().map_err(from_ingest)?;
        Ok(Box::new(EngineBulkLoad { ingest }))
    }
}

/// The engine's bulk load: its ingest, which writes table files and installs them all at
/// once in [`BulkLoad::finish`] (nothing is visible before; dropping it changes nothing).
struct EngineBulkLoad<'a> {
    ingest: Ingest<'a>,
}

/// The engine's refusals of an ingest are the restore's.
fn from_ingest(error: stampkv_engine::Error) -> KvError {
    match error {
        stampkv_engine::Error::InvalidArgument(text) => KvError::InvalidRestore(text),
        other => from_engine(other),
    }
}

impl BulkLoad for EngineBulkLoad<'_> {
    fn base_version(&self) -> u64 {
        self.ingest.base_sequence()
    }

    fn put(
        &mut self,
        key: &[u8],
        value: &[u8],
        version: u64,
        expires_at_ms: Option<u64>,
    ) -> Result<(), KvError> {
        self.ingest.put(key, value, version, expires_at_ms).map_err(from_ingest)
    }

    fn written(&self) -> u64 {
        self.ingest.entries()
    }

    fn finish(self: Box<Self>, floor: u64) -> Result<BulkLoadSummary, KvError> {
        let summary = self.ingest.finish(floor).map_err(from_ingest)?;
        Ok(BulkLoadSummary { entries: summary.entries, last_version: summary.last_sequence })
    }
}

impl From<stampkv_engine::Error> for Abort {
    fn from(e: stampkv_engine::Error) -> Self {
        Abort::Failed(from_engine(e))
    }
}

impl StoreSnapshot for Snapshot {
    type Cursor = EngineCursor;

    fn version(&self) -> u64 {
        self.sequence()
    }

    fn read_time_ms(&self) -> u64 {
        Snapshot::read_time_ms(self)
    }

    fn get(&self, key: &[u8]) -> Result<Option<StoredEntry>, KvError> {
        Ok(self.get_entry(key).map_err(from_engine)?.map(stored))
    }

    fn cursor(&self, start: &[u8], end: &[u8], reverse: bool) -> EngineCursor {
        if reverse {
            EngineCursor::Reverse { iter: self.range(start..end), current: None }
        } else {
            EngineCursor::Forward(Snapshot::cursor(self, start..end))
        }
    }
}

/// A range of the engine: forward, a cursor that lends each entry from its block; in
/// reverse, the double-ended iterator.
pub enum EngineCursor {
    /// Ascending.
    Forward(DbCursor),
    /// Descending, with the entry last returned.
    Reverse {
        /// The iterator, read from its back.
        iter: DbIter,
        /// The current entry.
        current: Option<Entry>,
    },
}

impl StoreCursor for EngineCursor {
    #[inline]
    fn advance(&mut self) -> Result<bool, KvError> {
        match self {
            EngineCursor::Forward(cursor) => cursor.next().map_err(from_engine),
            EngineCursor::Reverse { iter, current } => match iter.next_back() {
                Some(Ok(entry)) => {
                    *current = Some(entry);
                    Ok(true)
                }
                Some(Err(e)) => Err(from_engine(e)),
                None => {
                    *current = None;
                    Ok(false)
                }
            },
        }
    }

    #[inline]
    fn key(&self) -> &[u8] {
        match self {
            EngineCursor::Forward(cursor) => cursor.key(),
            EngineCursor::Reverse { current, .. } => current.as_ref().map_or(&[], |e| &e.key),
        }
    }

    #[inline]
    fn value(&self) -> &[u8] {
        match self {
            EngineCursor::Forward(cursor) => cursor.value(),
            EngineCursor::Reverse { current, .. } => current.as_ref().map_or(&[], |e| &e.value),
        }
    }

    #[inline]
    fn version(&self) -> u64 {
        match self {
            EngineCursor::Forward(cursor) => cursor.seq(),
            EngineCursor::Reverse { current, .. } => current.as_ref().map_or(0, |e| e.seq),
        }
    }

    #[inline]
    fn expires_at_ms(&self) -> Option<u64> {
        match self {
            EngineCursor::Forward(cursor) => cursor.expires_at_ms(),
            EngineCursor::Reverse { current, .. } => current.as_ref().and_then(|e| e.expires_at_ms),
        }
    }
}
