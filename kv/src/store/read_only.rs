//! [`ReadOnlyStore`]: a database opened to read only ([`stampkv_engine::ReadOnlyDb`]):
//! nothing is written to its directory, several readers may have it open at once, and
//! every commit fails with [`StorageErrorKind::ReadOnly`].

use super::engine::{stored, EngineCursor};
use super::seam::{Abort, CommitOptions, Store, StoreSnapshot, StoredEntry, Transaction};
use crate::storage_error::from_engine;
use crate::{KvError, StorageError, StorageErrorKind};
use stampkv_engine::{Clock, ReadOnlyDb, ReadOnlySnapshot};
use std::sync::Arc;

/// The engine's files, opened to read only.
#[derive(Debug)]
pub struct ReadOnlyStore {
    db: ReadOnlyDb,
}

impl ReadOnlyStore {
    /// The store over a database opened to read only.
    pub fn new(db: ReadOnlyDb) -> Self {
        ReadOnlyStore { db }
    }

    /// The read-only engine.
    pub fn db(&self) -> &ReadOnlyDb {
        &self.db
    }
}

impl Store for ReadOnlyStore {
    type Snapshot = ReadOnlySnapshot;

    fn snapshot(&self) -> ReadOnlySnapshot {
        self.db.snapshot()
    }

    fn commit<T>(
        &self,
        _options: CommitOptions,
        _build: impl FnMut(&mut dyn Transaction) -> Result<T, Abort>,
    ) -> Result<(u64, T), Abort> {
        Err(Abort::Failed(KvError::Storage(StorageError::new(
            StorageErrorKind::ReadOnly,
            "the database is open read-only",
        ))))
    }

    fn clock(&self) -> &Arc<dyn Clock> {
        self.db.clock()
    }

    fn close(&self) -> Result<(), KvError> {
        Ok(())
    }
}

impl StoreSnapshot for ReadOnlySnapshot {
    type Cursor = EngineCursor;

    fn version(&self) -> u64 {
        self.sequence()
    }

    fn read_time_ms(&self) -> u64 {
        ReadOnlySnapshot::read_time_ms(self)
    }

    fn get(&self, key: &[u8]) -> Result<Option<StoredEntry>, KvError> {
        Ok(self.get_entry(key).map_err(from_engine)?.map(stored))
    }

    fn cursor(&self, start: &[u8], end: &[u8], reverse: bool) -> EngineCursor {
        if reverse {
            EngineCursor::Reverse { iter: self.range(start..end), current: None }
        } else {
            EngineCursor::Forward(ReadOnlySnapshot::cursor(self, start..end))
        }
    }
}
