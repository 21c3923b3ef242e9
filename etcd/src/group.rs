//! Group commit: the commits of one process gathered into one etcd transaction.
//!
//! Every commit writes the counter `R m seq`, so etcd applies commits one transaction at a
//! time; a process that sent one transaction per commit would pay a Raft round (a quorum's
//! disk sync) per commit. Instead, while no transaction of this process is in flight, the
//! commits that arrive join the *open group*: each is built by its own caller on the
//! group's base (the state after this process's last transaction) and on the writes of the
//! members before it, and takes the next version (base + its place in the group). Builds
//! run without the group lock, so their etcd reads overlap; a build is then checked under
//! the lock (every key it read still has the group write it saw, and its version is still
//! free if it used it) and joins, or is built again under the lock.
//! The first member leads: it waits until the callers about to join have joined (at most
//! [`MAX_GROUP_WAIT`], or until the group is full), seals the group and sends it as one
//! transaction that compares the counter once. Every member gets the group's outcome:
//! applied (each with its own version), built again (another server committed first), or
//! failed. A member whose check failed never joins, so it fails alone.

use crate::store::Write;
use parking_lot::{Condvar, Mutex, MutexGuard};
use stampkv::store::StoredEntry;
use stampkv::{KvError, StorageErrorKind};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::store::CommitBase;

/// The longest a leader waits for callers about to join its group.
pub(crate) const MAX_GROUP_WAIT: Duration = Duration::from_millis(2);
/// The most commits in one group.
const MAX_MEMBERS: u64 = 512;
/// The most etcd operations of a group's writes (the transaction adds the counter and the
/// receipt): within `--max-txn-ops`.
const MAX_GROUP_OPS: usize = crate::store::REQUIRED_TXN_OPS - 2;
/// The most bytes of keys and values in one group: etcd refuses requests over
/// `--max-request-bytes` (1.5 MiB by default).
const MAX_GROUP_BYTES: usize = 1 << 20;

/// A process's group commit state, shared by its callers.
#[derive(Default)]
pub(crate) struct Group {
    pub(crate) state: Mutex<GroupState>,
    /// Signalled when a member joined, a group was sealed or its transaction answered.
    pub(crate) changed: Condvar,
    /// Callers in `commit` that have not joined a group (nor given up): the leader waits
    /// for them.
    pub(crate) joining: AtomicUsize,
}

/// What the group lock guards.
#[derive(Default)]
pub(crate) struct GroupState {
    /// The state the next group builds on; `None`: read it first.
    pub(crate) base: Option<CommitBase>,
    /// The group being filled. There is none while a transaction is in flight.
    pub(crate) open: Option<OpenGroup>,
    /// A group's transaction is in flight.
    pub(crate) sending: bool,
    /// The number of the last group sealed.
    pub(crate) sealed: u64,
}

/// A group being filled.
pub(crate) struct OpenGroup {
    pub(crate) number: u64,
    pub(crate) opened: Instant,
    pub(crate) writes: Vec<Write>,
    /// Entry keys the members' deferred checks require to be absent when the group is
    /// applied (each becomes a compare of the group's transaction).
    pub(crate) absent: Vec<Vec<u8>>,
    /// The index in `writes` of each key's last write.
    last_write: HashMap<Vec<u8>, usize>,
    pub(crate) members: u64,
    ops: usize,
    bytes: usize,
    /// A commit did not fit: the leader sends the group at once.
    pub(crate) full: bool,
    pub(crate) outcome: Arc<Outcome>,
}

impl OpenGroup {
    pub(crate) fn new(number: u64) -> OpenGroup {
        OpenGroup {
            number,
            opened: Instant::now(),
            writes: Vec::new(),
            absent: Vec::new(),
            last_write: HashMap::new(),
            members: 0,
            ops: 0,
            bytes: 0,
            full: false,
            outcome: Arc::new(Outcome::default()),
        }
    }

    /// Whether a commit of `ops` writes and `bytes` bytes fits beside the members.
    pub(crate) fn fits(&self, ops: usize, bytes: usize) -> bool {
        self.members < MAX_MEMBERS && self.ops + ops <= MAX_GROUP_OPS && self.bytes + bytes <= MAX_GROUP_BYTES
    }

    /// Adds a member's writes, made by the commit of `version`, and the keys its deferred
    /// checks require to be absent (counted in `ops`).
    pub(crate) fn join(
        &mut self,
        writes: Vec<Write>,
        absent: Vec<Vec<u8>>,
        version: u64,
        ops: usize,
        bytes: usize,
    ) {
        self.absent.extend(absent);
        debug_assert!(
            self.writes.last().is_none_or(|w| w.version < version),
            "the members of a group take increasing versions"
        );
        for mut write in writes {
            write.version = version;
            self.last_write.insert(write.key.clone(), self.writes.len());
            self.writes.push(write);
        }
        self.members += 1;
        self.ops += ops;
        self.bytes += bytes;
    }

    /// The index in the group's writes of the last write of `key`, if a member wrote it.
    pub(crate) fn last_write_of(&self, key: &[u8]) -> Option<usize> {
        self.last_write.get(key).copied()
    }

    /// The entry of `key` after the members' writes, if one of them wrote it: `Some(None)`
    /// for a deletion or an entry expired at `now_ms`.
    pub(crate) fn latest(&self, key: &[u8], now_ms: u64) -> Option<Option<StoredEntry>> {
        let write = self.writes.get(*self.last_write.get(key)?)?;
        Some(match &write.value {
            Some(_) if write.expires_at_ms.is_some_and(|at| at <= now_ms) => None,
            Some(value) => Some(StoredEntry {
                value: value.clone(),
                version: write.version,
                expires_at_ms: write.expires_at_ms,
            }),
            None => None,
        })
    }
}

/// The etcd operations (at most) and bytes of a commit's writes.
pub(crate) fn weigh(writes: &[Write]) -> (usize, usize) {
    let bytes = writes.iter().map(|w| w.key.len() + w.value.as_ref().map_or(0, Vec::len)).sum();
    // A put that expires also writes its expiry index entry.
    let indexed = writes.iter().filter(|w| w.value.is_some() && w.expires_at_ms.is_some()).count();
    (writes.len() + indexed, bytes)
}

/// Drops the open group if no commit joined it (its opener gave up).
pub(crate) fn drop_if_empty(state: &mut GroupState) {
    if state.open.as_ref().is_some_and(|open| open.members == 0) {
        state.open = None;
    }
}

/// Waits until group `number` was sent and answered.
pub(crate) fn wait_until_sent(group: &Group, state: &mut MutexGuard<'_, GroupState>, number: u64) {
    while state.sealed < number || state.sending {
        group.changed.wait(state);
    }
}

/// What became of a group.
#[derive(Clone)]
pub(crate) enum GroupResult {
    /// Applied: every member with its version.
    Applied,
    /// Not applied (another server committed first, or a lost answer was fenced off):
    /// every member builds again.
    Rebuild,
    /// Failed: every member fails with this error.
    Failed(StorageErrorKind, String),
    /// The store closed.
    Closed,
}

impl GroupResult {
    pub(crate) fn failed(e: &KvError) -> GroupResult {
        match e {
            KvError::Storage(s) => GroupResult::Failed(s.kind(), s.to_string()),
            KvError::Closed => GroupResult::Closed,
            other => GroupResult::Failed(StorageErrorKind::Other, other.to_string()),
        }
    }
}

/// A group's outcome, set once by its leader, awaited by its members.
#[derive(Default)]
pub(crate) struct Outcome {
    result: Mutex<Option<GroupResult>>,
    done: Condvar,
}

impl Outcome {
    pub(crate) fn set(&self, result: GroupResult) {
        *self.result.lock() = Some(result);
        self.done.notify_all();
    }

    pub(crate) fn wait(&self) -> GroupResult {
        let mut result = self.result.lock();
        loop {
            if let Some(result) = result.as_ref() {
                return result.clone();
            }
            self.done.wait(&mut result);
        }
    }
}

/// A caller's place in [`Group::joining`]: counted from `new` until it joins a group or
/// gives up (dropped), and not while it waits for a group to pass.
pub(crate) struct Joining<'a> {
    group: &'a Group,
    counted: bool,
}

impl<'a> Joining<'a> {
    pub(crate) fn new(group: &'a Group) -> Joining<'a> {
        group.joining.fetch_add(1, Ordering::AcqRel);
        Joining { group, counted: true }
    }

    /// Not counted (joined, or waiting for a group to pass).
    pub(crate) fn pause(&mut self) {
        if self.counted {
            self.group.joining.fetch_sub(1, Ordering::AcqRel);
            self.counted = false;
        }
    }

    /// Counted again (about to build once more).
    pub(crate) fn resume(&mut self) {
        if !self.counted {
            self.group.joining.fetch_add(1, Ordering::AcqRel);
            self.counted = true;
        }
    }

    /// Joined a group.
    pub(crate) fn joined(&mut self) {
        self.pause();
    }
}

impl Drop for Joining<'_> {
    fn drop(&mut self) {
        self.pause();
    }
}
