//! The storage seam: what a store under the Deno KV layer must provide, and nothing of
//! Deno KV itself.
//!
//! Everything Deno-specific is written once above this seam: key and value encoding, the
//! checks and limits, `sum`/`min`/`max`, versionstamped keys, the queue's records and rules,
//! watch semantics. A store only keeps bytes:
//!
//! - **Snapshot reads** ([`Store::snapshot`]): point and range reads, forward and reverse,
//!   of one consistent state, each entry with the version of the commit that wrote it and
//!   its expiry. A store hides an entry whose expiry is at or before the snapshot's read
//!   time ([`StoreSnapshot::read_time_ms`]), as if it were deleted.
//! - **Atomic conditional commits** ([`Store::commit`]): the layer above passes a `build`
//!   function that reads the latest state through a [`Transaction`] and makes its writes
//!   there, or returns an [`Abort`]. The store applies the writes atomically and returns the
//!   commit's version, which must be greater than every version before it.
//!   [`Transaction::commit_version`] is the version the commit will get if it is applied
//!   (the layer above writes it into versionstamped keys and values).
//! - **A clock** ([`Store::clock`]): the time expiry is evaluated at.
//! - **Durability and close** ([`CommitOptions::sync`], [`Store::close`]).
//! - **Foreign commits**, for a store shared by several servers
//!   ([`Store::subscribe_foreign_commits`]): the keys of commits made elsewhere, so that
//!   watches and queue listeners here see them; such a store says so
//!   ([`Store::is_shared`]), and the queue then claims messages in the store.
//! - **Bulk loads** ([`Store::bulk_load`], optional): a whole database written with the
//!   versions it had, for restores.
//!
//! Two shapes of store fit. A *serialising* store (the LSM engine, [`EngineStore`]) runs
//! `build` once, under its write lock, against the latest state. An *optimistic* store
//! ([`MemoryStore`]) runs `build` against a snapshot, remembers every key it read, and at
//! commit time applies the write set only if none of those keys changed since; otherwise it
//! runs `build` again on a newer snapshot.
//!
//! **Retries.** A store may call `build` any number of times, each time on a fresh
//! transaction, but applies the writes of at most one call, and only of the last. `build` must therefore have no
//! effect besides its return value (the layer above keeps what it learned in variables
//! it overwrites on every call). A store must never apply a write set twice: an outcome
//! it cannot learn (a timeout of a networked store) is an error
//! ([`crate::StorageErrorKind::Unavailable`]), never a silent retry of an applied commit.

mod engine;
mod memory;
mod read_only;
mod seam;

pub use engine::{EngineCursor, EngineStore};
pub use memory::{MemoryCursor, MemorySnapshot, MemoryStore};
pub use read_only::ReadOnlyStore;
pub use seam::{
    Abort, BulkLoad, BulkLoadSummary, CommitOptions, ForeignCommitSink, OnDurable, Store, StoreCursor,
    StoreSnapshot, StoredEntry, Transaction,
};
