//! The seam's types and traits; the contract they carry is described in the
//! [`store`](super) module documentation.

use crate::KvError;
use stampkv_engine::Clock;
use std::sync::Arc;

/// Called with the keys of commits this process did not make (another server sharing the
/// store); see [`Store::subscribe_foreign_commits`].
pub type ForeignCommitSink = Arc<dyn Fn(&[Vec<u8>]) + Send + Sync>;

/// An entry as a store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntry {
    /// The value's bytes (the data model's stored form).
    pub value: Vec<u8>,
    /// The version of the commit that wrote it.
    pub version: u64,
    /// When it expires (milliseconds since the Unix epoch on the store's clock), if it does.
    pub expires_at_ms: Option<u64>,
}

/// Why a commit applied nothing.
#[derive(Debug)]
pub enum Abort {
    /// A condition `build` checked did not hold (a Deno KV check, or a queue record that
    /// is gone): nothing is applied, and that is not an error.
    CheckFailed,
    /// `build` or the store failed.
    Failed(KvError),
}

impl From<KvError> for Abort {
    fn from(e: KvError) -> Self {
        Abort::Failed(e)
    }
}

/// Called once a deferred commit ([`Store::commit_deferred`]) is durable and visible, or
/// with the error that kept it from becoming durable.
pub type OnDurable = Box<dyn FnOnce(Result<(), KvError>) + Send>;

/// How a commit is made durable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitOptions {
    /// `Some(false)`: the commit need not be durable before it returns (the queue's own
    /// bookkeeping); `None`: the store's configured default.
    pub sync: Option<bool>,
}

/// A commit being built: the latest state as `build` sees it, and the writes it makes.
/// Writes are applied in order (a later write of a key wins) when the commit is applied;
/// reads do not see them.
pub trait Transaction {
    /// The latest entry of `key` (expired entries are absent).
    fn get(&self, key: &[u8]) -> Result<Option<StoredEntry>, KvError>;
    /// Whether `key`'s latest entry has version `expected` (`None`: no entry) — a Deno KV
    /// check. A store may defer a check to the commit instead of reading (an optimistic
    /// store that can make the commit conditional on it): it then answers `true`, and if
    /// the condition does not hold when the commit is applied, the commit applies nothing
    /// and `build` runs again (and may then read). The default reads.
    fn check_version(&mut self, key: &[u8], expected: Option<u64>) -> Result<bool, KvError> {
        Ok(self.get(key)?.map(|entry| entry.version) == expected)
    }
    /// The version this commit gets if it is applied.
    fn commit_version(&self) -> u64;
    /// The time expiry is evaluated at for this commit.
    fn now_ms(&self) -> u64;
    /// Stores `value` under `key`, expiring at `expires_at_ms` if given.
    fn put(&mut self, key: &[u8], value: &[u8], expires_at_ms: Option<u64>);
    /// Removes `key`.
    fn delete(&mut self, key: &[u8]);
}

/// A consistent read-only view of a store at one version and one read time.
pub trait StoreSnapshot: Send + Sync + 'static {
    /// The range cursor of this snapshot.
    type Cursor: StoreCursor;
    /// The version of the last commit the snapshot sees.
    fn version(&self) -> u64;
    /// The time at which the snapshot evaluates expiry.
    fn read_time_ms(&self) -> u64;
    /// The entry of `key`.
    fn get(&self, key: &[u8]) -> Result<Option<StoredEntry>, KvError>;
    /// A cursor over the entries with keys in `start..end`, ascending, or descending when
    /// `reverse`. The cursor keeps the snapshot's state alive by itself.
    fn cursor(&self, start: &[u8], end: &[u8], reverse: bool) -> Self::Cursor;
}

/// A cursor over a range of a snapshot; [`StoreCursor::advance`] moves to the next entry.
pub trait StoreCursor: Send + 'static {
    /// Moves to the next entry: `Ok(false)` when the range is exhausted.
    fn advance(&mut self) -> Result<bool, KvError>;
    /// The current entry's key (after `advance` returned `Ok(true)`).
    fn key(&self) -> &[u8];
    /// The current entry's value.
    fn value(&self) -> &[u8];
    /// The version of the commit that wrote the current entry.
    fn version(&self) -> u64;
    /// The current entry's expiry, if it has one.
    fn expires_at_ms(&self) -> Option<u64>;
}

/// A bulk load in progress (see [`Store::bulk_load`]): entries in strictly ascending key
/// order, each with the version it is to read back with.
pub trait BulkLoad {
    /// The version of the store's last commit when the load began; `base_version() + 1`
    /// is the version the next commit would have had.
    fn base_version(&self) -> u64;
    /// Adds `key` = `value` (stored form) with `version`, expiring at `expires_at_ms` if
    /// given. Keys come in strictly ascending order; `version` is at least 1, and greater
    /// than [`BulkLoad::base_version`] unless the store held no entry when the load began.
    /// A refused entry is a [`KvError::InvalidRestore`].
    fn put(
        &mut self,
        key: &[u8],
        value: &[u8],
        version: u64,
        expires_at_ms: Option<u64>,
    ) -> Result<(), KvError>;
    /// Entries added so far.
    fn written(&self) -> u64;
    /// Makes the load visible and durable, and raises the store's last version to at least
    /// `floor` and every version put. Fails if a commit happened since the load began.
    fn finish(self: Box<Self>, floor: u64) -> Result<BulkLoadSummary, KvError>;
}

/// What a finished [`BulkLoad`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BulkLoadSummary {
    /// Entries written.
    pub entries: u64,
    /// The store's last version afterwards.
    pub last_version: u64,
}

/// A store under the Deno KV layer; see the [`store`](super) module documentation for
/// the contract.
pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    /// The snapshot type.
    type Snapshot: StoreSnapshot;

    /// A consistent view of the latest applied state.
    fn snapshot(&self) -> Self::Snapshot;

    /// A consistent view that may lag behind the latest commits (Deno's `eventual`
    /// consistency), for a store where such a read costs less than [`Store::snapshot`]
    /// (a replica answering without a quorum round). `None`, the default: every read is
    /// strong.
    fn eventual_snapshot(&self) -> Option<Self::Snapshot> {
        None
    }

    /// The latest entry of `key`.
    fn get(&self, key: &[u8]) -> Result<Option<StoredEntry>, KvError> {
        self.snapshot().get(key)
    }

    /// A cursor over `start..end` of the latest state (one consistent state, however long
    /// the cursor lives), ascending or, when `reverse`, descending.
    fn cursor(&self, start: &[u8], end: &[u8], reverse: bool) -> <Self::Snapshot as StoreSnapshot>::Cursor {
        self.snapshot().cursor(start, end, reverse)
    }

    /// Runs `build` on a [`Transaction`] over the latest state and applies its writes
    /// atomically; returns the commit's version and what the last call of `build` returned.
    /// See the [`store`](super) module documentation for how often `build` may run.
    fn commit<T>(
        &self,
        options: CommitOptions,
        build: impl FnMut(&mut dyn Transaction) -> Result<T, Abort>,
    ) -> Result<(u64, T), Abort>;

    /// [`Store::commit`] for callers that must not wait for durability on their thread (an
    /// async server): returns once the commit is applied, and `on_durable` runs when it is
    /// durable and visible to readers — on another thread, or before this returns — or with
    /// the error that kept it from becoming durable. It is never called when this returns
    /// an error, and it must not block or panic. The default commits with
    /// [`Store::commit`] and then calls `on_durable`.
    fn commit_deferred<T>(
        &self,
        options: CommitOptions,
        build: impl FnMut(&mut dyn Transaction) -> Result<T, Abort>,
        on_durable: OnDurable,
    ) -> Result<(u64, T), Abort> {
        let committed = self.commit(options, build)?;
        on_durable(Ok(()));
        Ok(committed)
    }

    /// Whether [`Store::commit_deferred`] may have to wait now (for I/O, room or the
    /// network), so that a caller that must not block commits from a thread that may.
    /// Default: `true`.
    fn deferred_commit_may_block(&self) -> bool {
        true
    }

    /// The clock expiry is evaluated on.
    fn clock(&self) -> &Arc<dyn Clock>;

    /// Makes every commit durable and stops the store; later calls fail with
    /// [`KvError::Closed`].
    fn close(&self) -> Result<(), KvError>;

    /// Registers `sink`, called with the keys of commits this process did not make (another
    /// server sharing the store). Stores that only see their own commits keep the default,
    /// which never calls it.
    ///
    /// A store calls `sink` with none of its own locks held: the sink takes the watch and
    /// queue hubs' locks, under which the layer above reads the store.
    fn subscribe_foreign_commits(&self, sink: ForeignCommitSink) {
        let _ = sink;
    }

    /// Whether other processes commit to this store too (servers sharing a cluster store).
    /// Their queue listeners then cannot see this process's in-memory leases: a worker
    /// claims a message with a commit that moves it past the visibility timeout before
    /// handing it out. Default: `false`, the store has one process.
    fn is_shared(&self) -> bool {
        false
    }

    /// Starts a bulk load: a whole database written with the versions it had (a restore).
    /// Whether the load becomes visible at once or as it goes is the store's to say; the
    /// default refuses.
    fn bulk_load(&self) -> Result<Box<dyn BulkLoad + '_>, KvError> {
        Err(KvError::InvalidRestore("this store cannot restore a database".into()))
    }

    /// The most bytes of keys and values one commit should carry; the layer above splits
    /// work it may split (dead letters) to stay under it. Default: 64 MiB.
    fn max_commit_bytes(&self) -> usize {
        64 << 20
    }

    /// The most writes one commit may carry (a networked store's per-transaction operation
    /// limit); the layer above splits what it may split. Default: no limit.
    fn max_commit_writes(&self) -> usize {
        usize::MAX
    }
}
