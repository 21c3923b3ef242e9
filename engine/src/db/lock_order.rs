//! The engine's one lock order, and the wrappers that check it.
//!
//! Every lock of [`super::DbInner`] has a rank; a thread may only take a lock of a higher
//! rank than every lock it already holds. This is the order in both background modes —
//! threaded (flush and compaction threads) and inline (the same work run by the thread
//! that commits, under the commit lock):
//!
//! 1. `commit` — the writer side: sequence numbers, the active memtable, memtable switches.
//! 2. `compaction` — held by whoever runs a compaction (background or manual).
//! 3. `versions` — the version set and manifest.
//! 4. `read_state` — the memtables and version readers use.
//! 5. `publish` — group commit's pending syncs and the applied sequence.
//! 6. `parked_syncs` — WAL positions commits wait for.
//! 7. `snapshots` — live snapshots.
//! 8. `wal_segments` — live WAL segment numbers.
//! 9. `work` — requests to the background threads.
//! 10. `poison_reason` — the first failure.
//! 11. `file_lock` — the directory's lock file.
//!
//! The WAL's own locks (`active`, then `sync`) and the block cache's come after all of
//! these. Condition-variable waits release and retake a lock in place; they do not change
//! the order.
//!
//! With invariant checks on ([`crate::invariants`]), [`OrderedMutex`] and
//! [`OrderedRwLock`] keep the ranks a thread holds in a thread-local bit set and panic on
//! a lock taken out of order — also one taken twice (a second read lock of a `RwLock` can
//! deadlock behind a waiting writer) — so every test exercises the order in the modes it
//! runs. Without the checks they are plain `parking_lot` locks.

use crate::invariants::{invariant, ENABLED};
use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::cell::Cell;
use std::ops::{Deref, DerefMut};

/// A lock's place in the order (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum LockRank {
    Commit = 1,
    Compaction = 2,
    Versions = 3,
    ReadState = 4,
    Publish = 5,
    ParkedSyncs = 6,
    Snapshots = 7,
    WalSegments = 8,
    Work = 9,
    PoisonReason = 10,
    FileLock = 11,
}

thread_local! {
    /// Bit `r` is set while this thread holds a lock of rank `r`.
    static HELD: Cell<u32> = const { Cell::new(0) };
}

/// Records that this thread takes a lock of `rank`, checking the order first.
fn acquire(rank: LockRank) {
    if !ENABLED {
        return;
    }
    let bit = 1u32 << rank as u32;
    let held = HELD.with(Cell::get);
    // Every held rank must be lower: no bit at or above `rank`'s.
    invariant!(held & !(bit - 1) == 0, "lock order: taking {rank:?} while holding {:?}", held_ranks(held));
    HELD.with(|h| h.set(held | bit));
}

/// Records that this thread released its lock of `rank`.
fn release(rank: LockRank) {
    if ENABLED {
        HELD.with(|h| h.set(h.get() & !(1u32 << rank as u32)));
    }
}

fn held_ranks(held: u32) -> Vec<u32> {
    (0..32).filter(|r| held & (1 << r) != 0).collect()
}

/// A mutex with a rank in the lock order.
pub(crate) struct OrderedMutex<T> {
    rank: LockRank,
    inner: Mutex<T>,
}

impl<T> OrderedMutex<T> {
    /// A mutex of `rank` holding `value`.
    pub(crate) fn new(rank: LockRank, value: T) -> Self {
        OrderedMutex { rank, inner: Mutex::new(value) }
    }

    /// Takes the lock, checking the order.
    pub(crate) fn lock(&self) -> OrderedGuard<'_, T> {
        acquire(self.rank);
        OrderedGuard { guard: self.inner.lock(), rank: self.rank }
    }
}

/// A held [`OrderedMutex`].
pub(crate) struct OrderedGuard<'a, T> {
    guard: MutexGuard<'a, T>,
    rank: LockRank,
}

impl<'a, T> OrderedGuard<'a, T> {
    /// The underlying guard, for condition-variable waits and `MutexGuard::unlocked`.
    pub(crate) fn raw(&mut self) -> &mut MutexGuard<'a, T> {
        &mut self.guard
    }
}

impl<T> Deref for OrderedGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for OrderedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> Drop for OrderedGuard<'_, T> {
    fn drop(&mut self) {
        release(self.rank);
    }
}

/// A reader-writer lock with a rank in the lock order.
pub(crate) struct OrderedRwLock<T> {
    rank: LockRank,
    inner: RwLock<T>,
}

impl<T> OrderedRwLock<T> {
    /// A lock of `rank` holding `value`.
    pub(crate) fn new(rank: LockRank, value: T) -> Self {
        OrderedRwLock { rank, inner: RwLock::new(value) }
    }

    /// Takes the lock shared, checking the order.
    pub(crate) fn read(&self) -> OrderedReadGuard<'_, T> {
        acquire(self.rank);
        OrderedReadGuard { guard: self.inner.read(), rank: self.rank }
    }

    /// Takes the lock exclusively, checking the order.
    pub(crate) fn write(&self) -> OrderedWriteGuard<'_, T> {
        acquire(self.rank);
        OrderedWriteGuard { guard: self.inner.write(), rank: self.rank }
    }
}

/// A shared hold of an [`OrderedRwLock`].
pub(crate) struct OrderedReadGuard<'a, T> {
    guard: RwLockReadGuard<'a, T>,
    rank: LockRank,
}

impl<T> Deref for OrderedReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> Drop for OrderedReadGuard<'_, T> {
    fn drop(&mut self) {
        release(self.rank);
    }
}

/// An exclusive hold of an [`OrderedRwLock`].
pub(crate) struct OrderedWriteGuard<'a, T> {
    guard: RwLockWriteGuard<'a, T>,
    rank: LockRank,
}

impl<T> Deref for OrderedWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for OrderedWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> Drop for OrderedWriteGuard<'_, T> {
    fn drop(&mut self) {
        release(self.rank);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_in_order_are_accepted_and_released() {
        let commit = OrderedMutex::new(LockRank::Commit, 1);
        let state = OrderedRwLock::new(LockRank::ReadState, 2);
        let work = OrderedMutex::new(LockRank::Work, 3);
        for _ in 0..2 {
            let a = commit.lock();
            let b = state.read();
            let c = work.lock();
            assert_eq!(*a + *b + *c, 6);
        }
        // Released guards leave nothing behind: the lowest rank can be taken again.
        drop(state.write());
        drop(commit.lock());
    }

    #[test]
    #[cfg(any(feature = "invariants", debug_assertions))]
    #[should_panic(expected = "lock order: taking Commit while holding")]
    fn a_lower_rank_under_a_higher_one_panics() {
        let commit = OrderedMutex::new(LockRank::Commit, ());
        let compaction = OrderedMutex::new(LockRank::Compaction, ());
        let _held = compaction.lock();
        let _ = commit.lock();
    }

    #[test]
    #[cfg(any(feature = "invariants", debug_assertions))]
    #[should_panic(expected = "lock order: taking ReadState while holding")]
    fn a_second_read_lock_panics() {
        let state = OrderedRwLock::new(LockRank::ReadState, ());
        let _first = state.read();
        let _second = state.read();
    }
}
