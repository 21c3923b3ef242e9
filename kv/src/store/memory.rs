//! [`MemoryStore`]: a deliberately simple optimistic store, kept in memory. It is the
//! reference model the kv test suite runs against beside the engine, and it proves that a
//! store which learns about conflicts only at commit time fits the seam.
//!
//! Every key keeps all its versions (a `BTreeMap` from key to versions, oldest first), so a
//! snapshot is just a version number and a read time. A commit runs `build` against a
//! snapshot without any lock held, then takes the write lock and applies the write set only
//! if no other commit was applied since that snapshot; otherwise it runs `build` again on a
//! newer snapshot. (Validating against every commit, not only against the keys `build`
//! read, is what keeps [`Transaction::commit_version`] true: the version a write set was
//! built for is the one it gets.)

use super::seam::{Abort, CommitOptions, Store, StoreCursor, StoreSnapshot, StoredEntry, Transaction};
use crate::{KvError, StorageError, StorageErrorKind};
use parking_lot::RwLock;
use stampkv_engine::{Clock, SystemClock};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// How often one commit may be rebuilt before it gives up with
/// [`StorageErrorKind::Unavailable`] (every rebuild means another commit was applied).
const MAX_ATTEMPTS: u32 = 100_000;

/// One version of a key: a value (with its expiry) or a deletion.
#[derive(Debug, Clone)]
struct Version {
    version: u64,
    value: Option<Vec<u8>>,
    expires_at_ms: Option<u64>,
}

impl Version {
    fn visible(&self, now_ms: u64) -> Option<StoredEntry> {
        let value = self.value.as_ref()?;
        if self.expires_at_ms.is_some_and(|at| at <= now_ms) {
            return None;
        }
        Some(StoredEntry { value: value.clone(), version: self.version, expires_at_ms: self.expires_at_ms })
    }
}

#[derive(Debug, Default)]
struct State {
    /// The version of the last applied commit.
    version: u64,
    keys: BTreeMap<Vec<u8>, Vec<Version>>,
}

impl State {
    /// The entry of `key` at `version`, expiry evaluated at `now_ms`.
    fn entry_at(&self, key: &[u8], version: u64, now_ms: u64) -> Option<StoredEntry> {
        latest_at(self.keys.get(key)?, version)?.visible(now_ms)
    }
}

/// The newest of `versions` (oldest first) written at or before `version`.
fn latest_at(versions: &[Version], version: u64) -> Option<&Version> {
    versions.iter().rev().find(|v| v.version <= version)
}

#[derive(Debug)]
struct Shared {
    state: RwLock<State>,
    closed: AtomicBool,
    /// Commits rebuilt because another commit came first (for tests).
    rebuilds: AtomicU64,
}

impl Shared {
    fn check_open(&self) -> Result<(), KvError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(KvError::Closed);
        }
        Ok(())
    }
}

/// An optimistic in-memory store; see the module documentation.
#[derive(Clone)]
pub struct MemoryStore {
    shared: Arc<Shared>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore").field("version", &self.shared.state.read().version).finish()
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new(Arc::new(SystemClock))
    }
}

impl MemoryStore {
    /// An empty store whose expiry runs on `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        let shared =
            Shared { state: RwLock::default(), closed: AtomicBool::new(false), rebuilds: AtomicU64::new(0) };
        MemoryStore { shared: Arc::new(shared), clock }
    }

    /// How many times a commit's write set was built again because another commit was
    /// applied first.
    pub fn rebuilds(&self) -> u64 {
        self.shared.rebuilds.load(Ordering::Relaxed)
    }

    fn snapshot_now(&self) -> MemorySnapshot {
        let version = self.shared.state.read().version;
        MemorySnapshot { shared: self.shared.clone(), version, read_time_ms: self.clock.now_ms() }
    }
}

/// One write of a commit: a value (with its expiry) or, with `None`, a deletion.
type Write = (Vec<u8>, Option<Vec<u8>>, Option<u64>);

/// A commit being built: the snapshot it reads and the writes it collects.
struct MemoryTransaction<'a> {
    snapshot: &'a MemorySnapshot,
    writes: Vec<Write>,
}

impl Transaction for MemoryTransaction<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<StoredEntry>, KvError> {
        self.snapshot.get(key)
    }

    fn commit_version(&self) -> u64 {
        self.snapshot.version + 1
    }

    fn now_ms(&self) -> u64 {
        self.snapshot.read_time_ms
    }

    fn put(&mut self, key: &[u8], value: &[u8], expires_at_ms: Option<u64>) {
        self.writes.push((key.to_vec(), Some(value.to_vec()), expires_at_ms));
    }

    fn delete(&mut self, key: &[u8]) {
        self.writes.push((key.to_vec(), None, None));
    }
}

impl Store for MemoryStore {
    type Snapshot = MemorySnapshot;

    fn snapshot(&self) -> MemorySnapshot {
        self.snapshot_now()
    }

    fn commit<T>(
        &self,
        _options: CommitOptions,
        mut build: impl FnMut(&mut dyn Transaction) -> Result<T, Abort>,
    ) -> Result<(u64, T), Abort> {
        for _ in 0..MAX_ATTEMPTS {
            self.shared.check_open()?;
            let snapshot = self.snapshot_now();
            let mut transaction = MemoryTransaction { snapshot: &snapshot, writes: Vec::new() };
            let extra = build(&mut transaction)?;
            let writes = transaction.writes;
            let mut state = self.shared.state.write();
            // Conflict detection: the writes are valid only for the state they were built on.
            if state.version != snapshot.version {
                drop(state);
                self.shared.rebuilds.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let version = state.version + 1;
            for (key, value, expires_at_ms) in writes {
                let versions = state.keys.entry(key).or_default();
                // A later write of the same key in one commit replaces the earlier one.
                if versions.last().is_some_and(|v| v.version == version) {
                    versions.pop();
                }
                versions.push(Version { version, value, expires_at_ms });
            }
            state.version = version;
            return Ok((version, extra));
        }
        Err(Abort::Failed(KvError::Storage(StorageError::new(
            StorageErrorKind::Unavailable,
            format!("a commit was built {MAX_ATTEMPTS} times and another commit always came first"),
        ))))
    }

    fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    fn close(&self) -> Result<(), KvError> {
        self.shared.closed.store(true, Ordering::Release);
        Ok(())
    }
}

/// A snapshot of a [`MemoryStore`]: a version and a read time.
#[derive(Debug)]
pub struct MemorySnapshot {
    shared: Arc<Shared>,
    version: u64,
    read_time_ms: u64,
}

impl StoreSnapshot for MemorySnapshot {
    type Cursor = MemoryCursor;

    fn version(&self) -> u64 {
        self.version
    }

    fn read_time_ms(&self) -> u64 {
        self.read_time_ms
    }

    fn get(&self, key: &[u8]) -> Result<Option<StoredEntry>, KvError> {
        self.shared.check_open()?;
        Ok(self.shared.state.read().entry_at(key, self.version, self.read_time_ms))
    }

    fn cursor(&self, start: &[u8], end: &[u8], reverse: bool) -> MemoryCursor {
        MemoryCursor {
            shared: self.shared.clone(),
            version: self.version,
            read_time_ms: self.read_time_ms,
            start: start.to_vec(),
            end: end.to_vec(),
            reverse,
            current: None,
            done: start >= end,
        }
    }
}

/// A cursor over a [`MemorySnapshot`]: each step looks up the next visible key after the
/// current one.
#[derive(Debug)]
pub struct MemoryCursor {
    shared: Arc<Shared>,
    version: u64,
    read_time_ms: u64,
    start: Vec<u8>,
    end: Vec<u8>,
    reverse: bool,
    current: Option<(Vec<u8>, StoredEntry)>,
    done: bool,
}

impl StoreCursor for MemoryCursor {
    fn advance(&mut self) -> Result<bool, KvError> {
        if self.done {
            return Ok(false);
        }
        self.shared.check_open()?;
        let state = self.shared.state.read();
        let position = self.current.as_ref().map(|(key, _)| key.as_slice());
        let visible = |(key, versions): (&Vec<u8>, &Vec<Version>)| {
            let entry = latest_at(versions, self.version)?.visible(self.read_time_ms)?;
            Some((key.clone(), entry))
        };
        let found = if self.reverse {
            let upper = position.map_or(Bound::Excluded(self.end.as_slice()), Bound::Excluded);
            state
                .keys
                .range::<[u8], _>((Bound::Included(self.start.as_slice()), upper))
                .rev()
                .find_map(visible)
        } else {
            let lower = position.map_or(Bound::Included(self.start.as_slice()), Bound::Excluded);
            state.keys.range::<[u8], _>((lower, Bound::Excluded(self.end.as_slice()))).find_map(visible)
        };
        drop(state);
        self.done = found.is_none();
        self.current = found;
        Ok(!self.done)
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(key, _)| key)
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(_, entry)| &entry.value)
    }

    fn version(&self) -> u64 {
        self.current.as_ref().map_or(0, |(_, entry)| entry.version)
    }

    fn expires_at_ms(&self) -> Option<u64> {
        self.current.as_ref().and_then(|(_, entry)| entry.expires_at_ms)
    }
}
