//! The database handle: opening, point reads, single-key writes.
//!
//! How the Deno KV data model maps onto the engine:
//! - A key is stored under its tuple encoding (which starts with a type tag 0x01..=0x27).
//!   Engine keys starting with 0xFF are reserved for stampkv's own records (the queue);
//!   no user key and no list range can reach them.
//! - A value is stored as its encoding byte (1 V8, 2 LE64, 3 bytes) followed by its data;
//!   `expire_in` becomes the engine's per-entry expiry, so expired entries are invisible
//!   to every read, list and check from the instant they expire.
//! - An entry's versionstamp is the engine's sequence number of the commit that wrote it
//!   (8 bytes big-endian) followed by two zero bytes.

use crate::engine::KvEngine;
use crate::entry::{encode_read_key, maybe_entry};
use crate::queue::{EnqueueOptions, ListenOptions, QueueListener, QueueMessage};
use crate::shared::Core;
use crate::storage_error::from_engine;
use crate::store::{EngineStore, ReadOnlyStore, Store, StoreSnapshot};
use crate::watch::Watch;
use crate::{
    AtomicOperation, FromKvValue, Key, KvEntryMaybe, KvError, Limits, SetOptions, ToKvValue, Versionstamp,
};
use stampkv_engine::{Db, Options, ReadOnlyDb};
use std::path::Path;
use std::sync::Arc;

/// Options for opening a database. New fields may be added: build them from
/// [`KvOptions::default`] or [`KvOptions::with_engine`] and set the fields that differ.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct KvOptions {
    /// Storage engine options (sync mode, memtable size, clock, ...). The default syncs
    /// every commit before it is acknowledged.
    pub engine: Options,
    /// Deno KV's limits.
    pub limits: Limits,
}

impl KvOptions {
    /// These engine options with Deno KV's default limits.
    pub fn with_engine(engine: Options) -> KvOptions {
        KvOptions { engine, limits: Limits::default() }
    }
}

/// An open database over a store `S`: the LSM engine ([`EngineStore`]) unless opened
/// with [`Kv::with_store`]. Cheap to clone; every clone uses the same database, from any
/// thread.
pub struct Kv<S: Store = EngineStore> {
    pub(crate) inner: Arc<Core<S>>,
}

impl<S: Store> Clone for Kv<S> {
    fn clone(&self) -> Self {
        Kv { inner: self.inner.clone() }
    }
}

impl<S: Store> std::fmt::Debug for Kv<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kv").field("store", &self.inner.store).finish()
    }
}

impl Kv {
    /// Opens (creating if needed) the database in directory `path`.
    pub fn open(path: impl AsRef<Path>, options: KvOptions) -> Result<Kv, KvError> {
        let db = Db::open(path, options.engine).map_err(from_engine)?;
        Ok(Self::wrap(db, options.limits))
    }

    /// Opens a new database that lives in memory only.
    pub fn open_in_memory(options: KvOptions) -> Result<Kv, KvError> {
        let db = Db::open_in_memory(options.engine).map_err(from_engine)?;
        Ok(Self::wrap(db, options.limits))
    }

    /// Opens a database on a given file system (tests use the crash-simulating one).
    pub fn open_with_fs(
        fs: Arc<dyn stampkv_engine::fs::Fs>,
        path: impl AsRef<Path>,
        options: KvOptions,
    ) -> Result<Kv, KvError> {
        let db = Db::open_with_fs(fs, path, options.engine).map_err(from_engine)?;
        Ok(Self::wrap(db, options.limits))
    }

    /// Opens the existing database in directory `path` to read only: nothing is written to
    /// the directory (no log segment, no manifest, no table), several processes may open it
    /// this way at once, and a process that has it open for writing keeps them out
    /// ([`KvError::Storage`] of kind [`crate::StorageErrorKind::Locked`]), as they keep it
    /// out. Every write fails with kind [`crate::StorageErrorKind::ReadOnly`].
    pub fn open_read_only(path: impl AsRef<Path>, options: KvOptions) -> Result<Kv<ReadOnlyStore>, KvError> {
        let db = ReadOnlyDb::open(path, options.engine).map_err(from_engine)?;
        Ok(Kv::with_store(ReadOnlyStore::new(db), options.limits))
    }

    fn wrap(db: Db, limits: Limits) -> Kv {
        Kv::with_store(EngineStore::new(db), limits)
    }

    /// Read-only and maintenance access to the storage engine (statistics, `flush`,
    /// `compact`, raw reads). It cannot write: see [`crate::engine`].
    pub fn engine(&self) -> KvEngine<'_> {
        KvEngine::new(&self.inner.store)
    }
}

impl<S: Store> Kv<S> {
    /// A database over `store` (which must hold nothing but what a `Kv` wrote to it).
    pub fn with_store(store: S, limits: Limits) -> Kv<S> {
        Kv { inner: Core::open(store, limits) }
    }

    /// The store under the database.
    pub fn store(&self) -> &S {
        &self.inner.store
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// Reads one key. The empty key is allowed: nothing can `set` it, but a dead-lettered
    /// queue message can write it (`keys_if_undelivered`), and then it is found, as in Deno.
    pub fn get<T: FromKvValue>(&self, key: &Key) -> Result<KvEntryMaybe<T>, KvError> {
        let encoded = encode_read_key(key, &self.inner.limits)?;
        let found = self.inner.store.get(&encoded)?;
        maybe_entry(key.clone(), found)
    }

    /// Reads up to `max_read_ranges` (10) keys from one consistent snapshot; the results
    /// are in argument order.
    pub fn get_many<T: FromKvValue>(&self, keys: &[Key]) -> Result<Vec<KvEntryMaybe<T>>, KvError> {
        let max = self.inner.limits.max_read_ranges;
        if keys.len() > max {
            return Err(KvError::TooManyRanges { max });
        }
        let encoded: Vec<Vec<u8>> =
            keys.iter().map(|k| encode_read_key(k, &self.inner.limits)).collect::<Result<_, _>>()?;
        let snapshot = self.inner.store.snapshot();
        keys.iter()
            .zip(encoded)
            .map(|(key, bytes)| {
                let found = snapshot.get(&bytes)?;
                maybe_entry(key.clone(), found)
            })
            .collect()
    }

    /// Sets `key` to `value` in its own atomic commit; returns the commit's versionstamp.
    pub fn set(&self, key: &Key, value: &(impl ToKvValue + ?Sized)) -> Result<Versionstamp, KvError> {
        self.set_with(key, value, SetOptions::default())
    }

    /// [`Kv::set`] with options (expiry).
    pub fn set_with(
        &self,
        key: &Key,
        value: &(impl ToKvValue + ?Sized),
        options: SetOptions,
    ) -> Result<Versionstamp, KvError> {
        let outcome = self.atomic().set_with(key, value, options).commit()?;
        outcome.versionstamp().ok_or_else(unreachable_check_failure)
    }

    /// Deletes `key` in its own atomic commit.
    pub fn delete(&self, key: &Key) -> Result<(), KvError> {
        self.atomic().delete(key).commit()?;
        Ok(())
    }

    /// Starts an atomic operation.
    pub fn atomic(&self) -> AtomicOperation<'_, S> {
        AtomicOperation::new(&self.inner)
    }

    /// Whether [`AtomicOperation::commit_then`] may block its caller now: the store waits
    /// for room (flushes or compactions behind) or commits over the network. A caller that
    /// must not block (an async server's runtime thread) then commits from a thread that may.
    pub fn commit_may_block(&self) -> bool {
        self.inner.store.deferred_commit_may_block()
    }

    /// Watches up to `max_watched_keys` (10) keys: yields their current entries at once,
    /// then again whenever a commit changes one of them or one of them expires.
    pub fn watch(&self, keys: &[Key]) -> Result<Watch<S>, KvError> {
        Watch::start(&self.inner, keys)
    }

    /// Enqueues `value` in its own atomic commit; returns the commit's versionstamp.
    pub fn enqueue(
        &self,
        value: &(impl ToKvValue + ?Sized),
        options: EnqueueOptions,
    ) -> Result<Versionstamp, KvError> {
        let result = self.atomic().enqueue(value, options).commit()?;
        result
            .versionstamp()
            .ok_or_else(|| KvError::InvalidMutation("an enqueue without checks failed a check".into()))
    }

    /// Starts `options.workers` threads delivering queued messages to `handler`. A handler
    /// returning `Err` (or panicking) has its message retried on the backoff schedule, then
    /// dead-lettered. Several listeners share the messages; each delivery goes to one.
    pub fn listen_queue<F, E>(&self, options: ListenOptions, handler: F) -> Result<QueueListener<S>, KvError>
    where
        F: Fn(QueueMessage) -> Result<(), E> + Send + Sync + 'static,
        E: std::fmt::Display,
    {
        let handler = Arc::new(move |message| handler(message).map_err(|e| e.to_string()));
        crate::queue::listen(&self.inner, options, handler)
    }

    /// Closes the database: queue workers finish their current handlers and stop, watches
    /// end, background work stops, the log is synced and sealed.
    pub fn close(self) -> Result<(), KvError> {
        self.inner.close()
    }
}

/// A check failure cannot happen in a commit without checks.
fn unreachable_check_failure() -> KvError {
    KvError::InvalidMutation("a commit without checks reported a check failure".into())
}
