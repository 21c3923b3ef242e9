//! Reads: point lookups, snapshots and range iterators.
//!
//! A read picks a sequence number and a [`ReadState`] together, then sees exactly the
//! commits up to that number: for each user key the newest version at or below it, hidden
//! if it is a tombstone or has expired at the read's time.

use super::cursor::DbCursor;
use super::{DbInner, ReadState};
use crate::iter::{InternalIterator, MergingIter};
use crate::key::{self, EntryKind};
use crate::memtable::MemtableIter;
use crate::{Error, Result};
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A live entry as a read sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The user key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// Sequence number of the commit that wrote it.
    pub seq: u64,
    /// Expiry time in milliseconds, if the entry expires.
    pub expires_at_ms: Option<u64>,
}

/// Interprets a stored version: its user value and expiry, or `None` for tombstones and
/// values expired at `now_ms()` (asked only of a value written with an expiry).
pub(super) fn decode_visible(
    trailer: u64,
    stored: &[u8],
    now_ms: impl FnOnce() -> u64,
) -> Result<Option<(&[u8], Option<u64>)>> {
    let bad = |reason: &str| Error::corruption("(entry)", None, format!("stored entry with {reason}"));
    let kind = EntryKind::from_byte(key::trailer_kind(trailer)).ok_or_else(|| bad("an unknown kind"))?;
    match kind {
        EntryKind::Delete => Ok(None),
        EntryKind::Put => Ok(Some((stored, None))),
        EntryKind::PutExpiring => {
            let (at, value) = key::split_expiring(stored).ok_or_else(|| bad("no expiry"))?;
            Ok((now_ms() < at).then_some((value, Some(at))))
        }
    }
}

/// One iterator over every version in `state`: its memtables and its tables.
pub(super) fn merged_iter(state: &ReadState) -> MergingIter {
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    for mem in std::iter::once(&state.mem).chain(state.imms.iter()) {
        children.push(Box::new(MemtableIter::new(mem.clone())));
    }
    state.version.iterators(&mut children);
    MergingIter::new(children)
}

/// The entry a read sees for a stored version, if any.
fn resolve(user_key: &[u8], trailer: u64, stored: &[u8], now_ms: u64) -> Result<Option<Entry>> {
    Ok(decode_visible(trailer, stored, || now_ms)?.map(|(value, expires_at_ms)| Entry {
        key: user_key.to_vec(),
        value: value.to_vec(),
        seq: key::trailer_seq(trailer),
        expires_at_ms,
    }))
}

/// A live version found by a point lookup: an [`Entry`] without its key.
pub(crate) struct Visible {
    /// The value.
    pub(crate) value: Vec<u8>,
    /// Sequence number of the commit that wrote it.
    pub(crate) seq: u64,
    /// Expiry time in milliseconds, if the entry expires.
    pub(crate) expires_at_ms: Option<u64>,
}

impl Visible {
    /// The entry of `user_key` this version is.
    fn into_entry(self, user_key: &[u8]) -> Entry {
        Entry { key: user_key.to_vec(), value: self.value, seq: self.seq, expires_at_ms: self.expires_at_ms }
    }
}

/// What a read sees of a stored version the caller owns (no second copy of the value).
fn resolve_owned(trailer: u64, mut stored: Vec<u8>, now_ms: impl FnOnce() -> u64) -> Result<Option<Visible>> {
    let Some((value, expires_at_ms)) = decode_visible(trailer, &stored, now_ms)? else {
        return Ok(None);
    };
    let prefix_bytes = stored.len() - value.len();
    stored.drain(..prefix_bytes);
    Ok(Some(Visible { value: stored, seq: key::trailer_seq(trailer), expires_at_ms }))
}

/// Point lookup of `user_key` at `seq` in `state`, at the time `now_ms()` (asked only if
/// needed, as by [`lookup_in`]).
pub(crate) fn get_in(
    state: &ReadState,
    user_key: &[u8],
    seq: u64,
    now_ms: impl FnOnce() -> u64,
) -> Result<Option<Entry>> {
    Ok(lookup_in(state, user_key, seq, now_ms)?.map(|found| found.into_entry(user_key)))
}

/// [`get_in`] without copying the key into the answer; the time is asked of `now_ms` only
/// if the version found was written with an expiry (reading the clock costs about as much
/// as a memtable lookup).
pub(crate) fn lookup_in(
    state: &ReadState,
    user_key: &[u8],
    seq: u64,
    now_ms: impl FnOnce() -> u64,
) -> Result<Option<Visible>> {
    for mem in std::iter::once(&state.mem).chain(state.imms.iter()) {
        if let Some(found) = mem.get(user_key, seq) {
            return resolve_owned(found.trailer, found.value, now_ms);
        }
    }
    match state.version.get(user_key, seq)? {
        Some((trailer, value)) => resolve_owned(trailer, value, now_ms),
        None => Ok(None),
    }
}

/// The latest state, including commits applied but not yet visible, as seen by a
/// [`crate::Db::write_with`] builder.
pub struct LatestView<'a> {
    state: &'a ReadState,
    seq: u64,
    commit_seq: u64,
    now_ms: u64,
}

impl<'a> LatestView<'a> {
    /// A view of `state` at the last applied sequence `seq`, for building the commit that
    /// the engine numbers `commit_seq`.
    pub(crate) fn new(state: &'a ReadState, seq: u64, commit_seq: u64, now_ms: u64) -> Self {
        LatestView { state, seq, commit_seq, now_ms }
    }

    /// The latest entry of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Entry>> {
        get_in(self.state, key, self.seq, || self.now_ms)
    }

    /// Sequence number of the last applied commit.
    pub fn last_sequence(&self) -> u64 {
        self.seq
    }

    /// The sequence number the engine assigns to the commit being built: the batch the
    /// builder returns is written with exactly this number (Deno KV's versionstamp).
    pub fn commit_sequence(&self) -> u64 {
        self.commit_seq
    }

    /// The time expiry is evaluated at.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }
}

/// A consistent, read-only view of the database at one sequence number and one time.
pub struct Snapshot {
    inner: Arc<DbInner>,
    id: u64,
    seq: u64,
    read_time_ms: u64,
}

impl Snapshot {
    pub(crate) fn new(inner: &Arc<DbInner>) -> Snapshot {
        let mut list = inner.snapshots.lock();
        let seq = inner.visible_seq.load(Ordering::Acquire);
        let read_time_ms = inner.clock.now_ms();
        list.next_id += 1;
        let id = list.next_id;
        list.live.insert(id, (seq, read_time_ms));
        Snapshot { inner: inner.clone(), id, seq, read_time_ms }
    }

    /// The snapshot's sequence number.
    pub fn sequence(&self) -> u64 {
        self.seq
    }

    /// The time at which the snapshot evaluates expiry.
    pub fn read_time_ms(&self) -> u64 {
        self.read_time_ms
    }

    /// The value of `key` in this snapshot.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.get_entry(key)?.map(|e| e.value))
    }

    /// The entry of `key` in this snapshot.
    pub fn get_entry(&self, key: &[u8]) -> Result<Option<Entry>> {
        let state = self.inner.read_state.read().clone();
        get_in(&state, key, self.seq, || self.read_time_ms)
    }

    /// Entries with keys in `range` in this snapshot.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> DbIter {
        let state = self.inner.read_state.read().clone();
        self.inner.charge_read(&state, &range);
        DbIter::new(state, self.seq, self.read_time_ms, &range)
    }

    /// A cursor over the entries with keys in `range` in this snapshot (see [`DbCursor`]).
    pub fn cursor<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> DbCursor {
        let state = self.inner.read_state.read().clone();
        self.inner.charge_read(&state, &range);
        DbCursor::new(&state, self.seq, self.read_time_ms, &range)
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.inner.snapshots.lock().live.remove(&self.id);
    }
}

impl super::SnapshotList {
    /// The oldest sequence number and earliest read time of live snapshots.
    pub(crate) fn horizon(&self) -> Option<(u64, u64)> {
        let seq = self.live.values().map(|v| v.0).min()?;
        let time = self.live.values().map(|v| v.1).min()?;
        Some((seq, time))
    }
}

/// Iterator over the live entries of a key range at one snapshot, forward with `next`
/// and backward with `next_back`. Yields `Err` once and then ends if the data is damaged.
pub struct DbIter {
    state: Arc<ReadState>,
    seq: u64,
    now_ms: u64,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    front: Option<MergingIter>,
    back: Option<MergingIter>,
    /// Last key returned from the front / back; the two ends never cross.
    front_last: Option<Vec<u8>>,
    back_last: Option<Vec<u8>>,
    done: bool,
}

fn owned<K: AsRef<[u8]>>(bound: Bound<&K>) -> Bound<Vec<u8>> {
    match bound {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl DbIter {
    pub(crate) fn new<K: AsRef<[u8]>, R: RangeBounds<K> + ?Sized>(
        state: Arc<ReadState>,
        seq: u64,
        now_ms: u64,
        range: &R,
    ) -> DbIter {
        DbIter {
            state,
            seq,
            now_ms,
            lower: owned(range.start_bound()),
            upper: owned(range.end_bound()),
            front: None,
            back: None,
            front_last: None,
            back_last: None,
            done: false,
        }
    }

    fn merged(&self) -> MergingIter {
        merged_iter(&self.state)
    }

    fn above_upper(&self, user_key: &[u8]) -> bool {
        match &self.upper {
            Bound::Included(u) => user_key > u.as_slice(),
            Bound::Excluded(u) => user_key >= u.as_slice(),
            Bound::Unbounded => false,
        }
    }

    fn below_lower(&self, user_key: &[u8]) -> bool {
        match &self.lower {
            Bound::Included(l) => user_key < l.as_slice(),
            Bound::Excluded(l) => user_key <= l.as_slice(),
            Bound::Unbounded => false,
        }
    }

    fn start_front(&mut self) -> Result<MergingIter> {
        let mut iter = self.merged();
        match &self.lower {
            Bound::Included(k) => iter.seek(k, key::seek_trailer(self.seq))?,
            // Every version of `k` sorts before (k, 0).
            Bound::Excluded(k) => iter.seek(k, 0)?,
            Bound::Unbounded => iter.seek_to_first()?,
        }
        Ok(iter)
    }

    fn start_back(&mut self) -> Result<MergingIter> {
        let mut iter = self.merged();
        match &self.upper {
            Bound::Included(k) => iter.seek_for_prev(k, 0)?,
            // (k, u64::MAX) sorts before every real version of `k`.
            Bound::Excluded(k) => iter.seek_for_prev(k, u64::MAX)?,
            Bound::Unbounded => iter.seek_to_last()?,
        }
        Ok(iter)
    }

    /// The next live entry going forward.
    fn step_forward(&mut self, iter: &mut MergingIter) -> Result<Option<Entry>> {
        while iter.valid() {
            let (user_key, trailer) = iter.key();
            if self.above_upper(user_key) {
                return Ok(None);
            }
            if key::trailer_seq(trailer) > self.seq {
                iter.next()?;
                continue;
            }
            let user_key = user_key.to_vec();
            let visible = decode_visible(trailer, iter.value(), || self.now_ms)?;
            let visible = visible.map(|(value, expires_at_ms)| (value.to_vec(), expires_at_ms));
            // Skip the older versions of this key.
            iter.next()?;
            while iter.valid() && iter.user_key() == user_key.as_slice() {
                iter.next()?;
            }
            if let Some((value, expires_at_ms)) = visible {
                let seq = key::trailer_seq(trailer);
                return Ok(Some(Entry { key: user_key, value, seq, expires_at_ms }));
            }
        }
        Ok(None)
    }

    /// The next live entry going backward: versions of a key arrive oldest first, so the
    /// last one at or below the snapshot before the key changes is the visible one.
    fn step_backward(&mut self, iter: &mut MergingIter) -> Result<Option<Entry>> {
        while iter.valid() {
            if self.below_lower(iter.user_key()) {
                return Ok(None);
            }
            let user_key = iter.user_key().to_vec();
            let mut newest: Option<(u64, Vec<u8>)> = None;
            while iter.valid() && iter.user_key() == user_key.as_slice() {
                if key::trailer_seq(iter.trailer()) <= self.seq {
                    newest = Some((iter.trailer(), iter.value().to_vec()));
                }
                iter.prev()?;
            }
            if let Some((trailer, value)) = newest {
                if let Some(entry) = resolve(&user_key, trailer, &value, self.now_ms)? {
                    return Ok(Some(entry));
                }
            }
        }
        Ok(None)
    }

    fn next_front(&mut self) -> Result<Option<Entry>> {
        let mut iter = match self.front.take() {
            Some(iter) => iter,
            None => self.start_front()?,
        };
        let entry = self.step_forward(&mut iter);
        self.front = Some(iter);
        let entry = entry?;
        Ok(entry.filter(|e| self.back_last.as_ref().is_none_or(|b| e.key < *b)))
    }

    fn next_back_entry(&mut self) -> Result<Option<Entry>> {
        let mut iter = match self.back.take() {
            Some(iter) => iter,
            None => self.start_back()?,
        };
        let entry = self.step_backward(&mut iter);
        self.back = Some(iter);
        let entry = entry?;
        Ok(entry.filter(|e| self.front_last.as_ref().is_none_or(|f| e.key > *f)))
    }
}

impl DbIter {
    /// Turns one step's outcome into an iterator item: remembers the key an end reached,
    /// and ends the iteration at the meeting point or after an error.
    fn item(&mut self, step: Result<Option<Entry>>, from_front: bool) -> Option<Result<Entry>> {
        match step {
            Ok(Some(entry)) => {
                let last = if from_front { &mut self.front_last } else { &mut self.back_last };
                // Reuses the buffer: no allocation per entry once it is large enough.
                match last {
                    Some(buf) => {
                        buf.clear();
                        buf.extend_from_slice(&entry.key);
                    }
                    None => *last = Some(entry.key.clone()),
                }
                Some(Ok(entry))
            }
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl Iterator for DbIter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let step = self.next_front();
        self.item(step, true)
    }
}

impl DoubleEndedIterator for DbIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let step = self.next_back_entry();
        self.item(step, false)
    }
}
