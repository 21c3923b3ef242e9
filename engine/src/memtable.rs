//! The mutable in-memory table: a skiplist of internal keys plus bookkeeping.

use crate::batch::BatchEntry;
use crate::chunk_pool::ChunkPool;
use crate::invariants::invariant;
use crate::key;
use crate::memtable_bloom::{hash_key, MemtableBloom};
use crate::skiplist::{Cursor, SkipList};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// A memtable. Shared by `Arc` between the writer, readers, iterators and the flusher.
pub(crate) struct Memtable {
    list: SkipList,
    bloom: MemtableBloom,
    /// Number of the first WAL segment holding this memtable's commits.
    wal_segment: u64,
    /// Largest sequence number inserted.
    max_seq: AtomicU64,
    /// Last sequence number assigned before this memtable started receiving commits.
    base_seq: u64,
    /// Last sequence number assigned when this memtable was frozen (covers empty commits,
    /// which use a sequence number but insert nothing).
    sealed_seq: AtomicU64,
    /// Seeks charged since the memtable last grew ([`Memtable::charge_idle_seek`]).
    idle_seeks: AtomicU64,
    /// The entry count when `idle_seeks` last restarted from zero.
    idle_since_len: AtomicUsize,
}

/// The newest version of a key visible at a snapshot, as found in one source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    /// The entry's trailer (sequence number and kind).
    pub trailer: u64,
    /// The stored value (with the expiry prefix for `PutExpiring`).
    pub value: Vec<u8>,
}

impl Memtable {
    /// An empty memtable whose commits start in WAL segment `wal_segment`, after
    /// sequence number `base_seq`, expected to hold about `capacity_bytes`.
    pub(crate) fn new(wal_segment: u64, capacity_bytes: usize, base_seq: u64) -> Self {
        Self::with_pool(wal_segment, capacity_bytes, base_seq, None)
    }

    /// The arena chunk size of a memtable of `capacity_bytes` (what its pool should keep).
    pub(crate) fn chunk_bytes(capacity_bytes: usize) -> usize {
        crate::skiplist::arena_chunk_bytes(capacity_bytes / 8)
    }

    /// [`Memtable::new`], with arena chunks from (and, once dropped, back to) `pool`.
    pub(crate) fn with_pool(
        wal_segment: u64,
        capacity_bytes: usize,
        base_seq: u64,
        pool: Option<Arc<ChunkPool>>,
    ) -> Self {
        Memtable {
            // One point-index slot per 128 memtable bytes (1/16 of its size): room for
            // 100-byte values with three quarters of the slots in use.
            list: SkipList::with_pool(capacity_bytes / 8, capacity_bytes / 128, pool),
            // One filter bit per 4 memtable bytes: 15 to 40 bits per typical entry, so
            // false positives are rare; 1/32 of the memtable's size in memory.
            bloom: MemtableBloom::new(capacity_bytes / 4),
            wal_segment,
            max_seq: AtomicU64::new(0),
            base_seq,
            sealed_seq: AtomicU64::new(base_seq),
            idle_seeks: AtomicU64::new(0),
            idle_since_len: AtomicUsize::new(0),
        }
    }

    /// Records the last sequence number assigned when the memtable is frozen.
    pub(crate) fn seal(&self, last_seq: u64) {
        self.sealed_seq.store(last_seq, Ordering::Release);
    }

    /// Last sequence number assigned when the memtable was frozen.
    pub(crate) fn sealed_seq(&self) -> u64 {
        self.sealed_seq.load(Ordering::Acquire)
    }

    /// Last sequence number assigned before this memtable started.
    pub(crate) fn base_seq(&self) -> u64 {
        self.base_seq
    }

    /// Inserts the entries of one commit. Callers serialize inserts, and keys are unique
    /// within `entries` (see [`crate::batch`]).
    pub(crate) fn apply<'a>(&self, seq: u64, entries: impl IntoIterator<Item = BatchEntry<'a>>) {
        invariant!(
            seq > self.max_seq() && seq > self.base_seq,
            "commit sequence {seq} is not above the memtable's last {} (base {})",
            self.max_seq(),
            self.base_seq
        );
        for entry in entries {
            // The filter's cache line loads while the skiplist is searched.
            let hash = hash_key(entry.key);
            self.bloom.prefetch(hash);
            self.list.insert_hashed(entry.key, hash, key::trailer(seq, entry.kind), entry.value);
            self.bloom.insert(hash);
        }
        self.max_seq.fetch_max(seq, Ordering::Release);
    }

    /// The newest version of `user_key` with a sequence number <= `seq`.
    pub(crate) fn get(&self, user_key: &[u8], seq: u64) -> Option<Found> {
        let hash = hash_key(user_key);
        if !self.bloom.may_contain(hash) {
            return None;
        }
        let mut cursor = self.list.cursor();
        cursor.seek_for_get_hashed(user_key, hash, key::seek_trailer(seq));
        if cursor.valid() && cursor.user_key() == user_key {
            return Some(Found { trailer: cursor.trailer(), value: cursor.value().to_vec() });
        }
        None
    }

    /// Arena bytes used (the flush trigger compares this with the write buffer size).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.list.memory_bytes()
    }

    /// Bytes of the memtable's bloom filter and point index.
    pub(crate) fn filter_bytes(&self) -> usize {
        self.bloom.memory_bytes() + self.list.index_bytes()
    }

    /// Number of entries (versions) inserted.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// Counts a seek that positioned this memtable beside an older run: true for the
    /// `allowance`-th such seek in a row with no insert in between (once per idle spell;
    /// an insert starts the count again). Counts from several readers may race and lose
    /// a few charges, which only delays the answer.
    pub(crate) fn charge_idle_seek(&self, allowance: u64) -> bool {
        let len = self.len();
        if self.idle_since_len.load(Ordering::Relaxed) != len {
            self.idle_since_len.store(len, Ordering::Relaxed);
            self.idle_seeks.store(0, Ordering::Relaxed);
        } else if self.idle_seeks.load(Ordering::Relaxed) >= allowance {
            // Answered already: readers on other cores stop writing the count's line.
            return false;
        }
        self.idle_seeks.fetch_add(1, Ordering::Relaxed) + 1 == allowance
    }

    /// Whether there are no entries.
    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// First WAL segment of this memtable.
    pub(crate) fn wal_segment(&self) -> u64 {
        self.wal_segment
    }

    /// Largest sequence number inserted (0 if none).
    pub(crate) fn max_seq(&self) -> u64 {
        self.max_seq.load(Ordering::Acquire)
    }
}

/// An iterator over a memtable that keeps it alive.
pub(crate) struct MemtableIter {
    // Field order matters: `cursor` borrows from `table` and must drop first.
    cursor: Cursor<'static>,
    _table: Arc<Memtable>,
}

impl MemtableIter {
    /// An unpositioned iterator over `table`.
    #[allow(
        unsafe_code,
        reason = "a cursor that borrows from the memtable it keeps alive (a self-referential struct)"
    )]
    pub(crate) fn new(table: Arc<Memtable>) -> Self {
        // SAFETY: the cursor borrows the skiplist inside `table`, which this struct keeps
        // alive through its own `Arc` for at least as long as the cursor (the cursor is
        // dropped first, and the `Arc` target never moves). The 'static lifetime never
        // escapes: every accessor below shortens it to a borrow of `self`.
        let list: &'static SkipList = unsafe { &*std::ptr::from_ref(&table.list) };
        MemtableIter { cursor: list.cursor(), _table: table }
    }
}

impl crate::iter::InternalIterator for MemtableIter {
    fn valid(&self) -> bool {
        self.cursor.valid()
    }
    fn seek(&mut self, user_key: &[u8], trailer: u64) -> crate::Result<()> {
        self.cursor.seek(user_key, trailer);
        Ok(())
    }
    fn seek_for_prev(&mut self, user_key: &[u8], trailer: u64) -> crate::Result<()> {
        self.cursor.seek_for_prev(user_key, trailer);
        Ok(())
    }
    fn seek_to_first(&mut self) -> crate::Result<()> {
        self.cursor.seek_to_first();
        Ok(())
    }
    fn seek_to_last(&mut self) -> crate::Result<()> {
        self.cursor.seek_to_last();
        Ok(())
    }
    fn next(&mut self) -> crate::Result<()> {
        self.cursor.next();
        Ok(())
    }
    fn prev(&mut self) -> crate::Result<()> {
        self.cursor.prev();
        Ok(())
    }
    fn user_key(&self) -> &[u8] {
        self.cursor.user_key()
    }
    fn trailer(&self) -> u64 {
        self.cursor.trailer()
    }
    fn value(&self) -> &[u8] {
        self.cursor.value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::WriteBatch;
    use crate::iter::InternalIterator;

    #[test]
    fn idle_seeks_are_counted_from_the_last_insert_and_answered_once() {
        let mem = Memtable::new(1, 64 << 10, 0);
        let put = |seq: u64, key: &[u8]| {
            let mut batch = WriteBatch::new();
            batch.put(key, b"v");
            mem.apply(seq, batch.iter());
        };
        put(1, b"a");
        assert!((0..4).all(|_| !mem.charge_idle_seek(5)));
        put(2, b"b"); // the count starts again
        assert!((0..4).all(|_| !mem.charge_idle_seek(5)));
        assert!(mem.charge_idle_seek(5), "the fifth idle seek in a row");
        assert!((0..20).all(|_| !mem.charge_idle_seek(5)), "answered once per idle spell");
        assert_eq!(mem.idle_seeks.load(Ordering::Relaxed), 5, "no count past the answer");
        put(3, b"c");
        assert!((0..4).all(|_| !mem.charge_idle_seek(5)));
        assert!(mem.charge_idle_seek(5), "a new spell after an insert");
    }

    #[test]
    fn an_iterator_keeps_its_memtable_alive_and_sees_every_version() {
        let mem = Arc::new(Memtable::new(1, 64 << 10, 0));
        let mut batch = WriteBatch::new();
        batch.put(b"b", b"2").put(b"a", b"1");
        let entries: Vec<_> = batch.iter().collect();
        mem.apply(1, entries);
        let mut batch = WriteBatch::new();
        batch.delete(b"a");
        mem.apply(2, batch.iter());
        let mut iter = MemtableIter::new(mem.clone());
        drop(mem);
        iter.seek_to_first().unwrap();
        let mut seen = Vec::new();
        while iter.valid() {
            seen.push((iter.user_key().to_vec(), key::trailer_seq(iter.trailer()), iter.value().to_vec()));
            iter.next().unwrap();
        }
        let expected = vec![
            (b"a".to_vec(), 2, Vec::new()),
            (b"a".to_vec(), 1, b"1".to_vec()),
            (b"b".to_vec(), 1, b"2".to_vec()),
        ];
        assert_eq!(seen, expected);
    }

    #[test]
    fn get_finds_the_newest_version_at_a_sequence_and_skips_absent_keys() {
        let mem = Memtable::new(1, 64 << 10, 0);
        for seq in 1..=3u64 {
            let mut batch = WriteBatch::new();
            batch.put(b"k", &seq.to_le_bytes());
            mem.apply(seq, batch.iter());
        }
        assert_eq!(mem.get(b"k", 2).map(|f| f.value), Some(2u64.to_le_bytes().to_vec()));
        assert_eq!(mem.get(b"k", 0), None);
        assert_eq!(mem.get(b"other", 3), None);
        assert_eq!(mem.max_seq(), 3);
    }
}
