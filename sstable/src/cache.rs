//! A sharded block cache with CLOCK (second chance) eviction.
//!
//! Keys are (table id, block offset); values are decoded blocks behind an `Arc`: data
//! blocks, and index and filter blocks of tables opened with
//! [`IndexFilterPlacement::BlockCache`](crate::IndexFilterPlacement::BlockCache). A block
//! evicted while a reader still uses it stays alive until that reader drops it (it just
//! stops being counted). Each shard is a mutex around a hash map holding the entries and
//! the clock: a ring of their keys in insertion order, its front under the clock hand.
//! New keys join at the back, so a new entry is examined last (after every older one).
//!
//! Index and filter blocks have a higher priority: each entry carries a small number of
//! "chances", cleared one per pass of the clock hand, and an index or filter block gets
//! one more than a data block (inserted: 1 instead of 0; on a hit: 2 instead of 1). They
//! still compete with data blocks for the same byte budget; there is no reserved pool.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::block::Block;
use crate::bloom::BloomFilter;
use crate::index::IndexBlock;

/// Most shards used; fewer for small caches so that a shard holds a few blocks.
const MAX_SHARDS: usize = 16;
/// Smallest per-shard capacity worth sharding for.
const MIN_SHARD_CAPACITY: usize = 256 * 1024;
/// Bookkeeping bytes charged per entry on top of the block itself.
const ENTRY_OVERHEAD: usize = 64;

type CacheKey = (u64, u64);

/// Multiplicative mixing of the (table id, offset) pair; SipHash would dominate lookups.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 32;
        h = h.wrapping_mul(0xd6e8_feb8_6659_fd93);
        h ^ (h >> 32)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(23) ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

fn key_hash(key: CacheKey) -> u64 {
    let mut h = KeyHasher::default();
    h.write_u64(key.0);
    h.write_u64(key.1);
    h.finish()
}

/// The kinds of block the cache holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockKind {
    /// A data block.
    Data,
    /// A table's index block (with its search accelerator).
    Index,
    /// A table's bloom filter block.
    Filter,
}

impl BlockKind {
    /// Position in the per-kind counter arrays.
    fn slot(self) -> usize {
        match self {
            BlockKind::Data => 0,
            BlockKind::Index => 1,
            BlockKind::Filter => 2,
        }
    }

    /// Chances a new entry starts with (clock passes it survives unreferenced).
    fn inserted_chances(self) -> u8 {
        match self {
            BlockKind::Data => 0,
            BlockKind::Index | BlockKind::Filter => 1,
        }
    }

    /// Chances an entry has after a hit.
    fn hit_chances(self) -> u8 {
        self.inserted_chances() + 1
    }
}

/// Most chances an entry can have: the clock needs this many passes plus one to evict it.
const MAX_CHANCES: usize = 2;

/// A cached value.
#[derive(Clone)]
pub(crate) enum Cached {
    /// A decoded data block.
    Data(Arc<Block>),
    /// A table's index block.
    Index(Arc<IndexBlock>),
    /// A table's bloom filter.
    Filter(Arc<BloomFilter>),
}

impl Cached {
    fn kind(&self) -> BlockKind {
        match self {
            Cached::Data(_) => BlockKind::Data,
            Cached::Index(_) => BlockKind::Index,
            Cached::Filter(_) => BlockKind::Filter,
        }
    }

    /// Heap bytes held (charged to the cache, plus [`ENTRY_OVERHEAD`]).
    fn memory_usage(&self) -> usize {
        match self {
            Cached::Data(block) => block.memory_usage(),
            Cached::Index(index) => index.memory_usage() + std::mem::size_of::<IndexBlock>(),
            Cached::Filter(filter) => filter.memory_usage() + std::mem::size_of::<BloomFilter>(),
        }
    }
}

struct Entry {
    value: Cached,
    /// For a data block, where its restart array lies ([`Block::restart_array_span`]): a
    /// lookup asks the processor for those lines while it takes the block's reference, so
    /// that the search after it does not wait for two misses one after the other. Zero
    /// for other kinds. Only ever used as a prefetch address.
    restarts_hint: (usize, usize),
    charge: usize,
    /// Passes of the clock hand the entry survives unreferenced: raised on a hit,
    /// lowered by one each time the hand passes, evicted at zero.
    chances: u8,
}

impl Entry {
    fn new(value: Cached, charge: usize) -> Entry {
        let restarts_hint = match &value {
            Cached::Data(block) => block.restart_array_span(),
            Cached::Index(_) | Cached::Filter(_) => (0, 0),
        };
        let chances = value.kind().inserted_chances();
        Entry { value, restarts_hint, charge, chances }
    }
}

/// Hits and misses of a block cache, by kind of block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheCounters {
    /// Data block lookups that found the block.
    pub data_hits: u64,
    /// Data block lookups that had to read it.
    pub data_misses: u64,
    /// Index block lookups that found the block.
    pub index_hits: u64,
    /// Index block lookups that had to read it.
    pub index_misses: u64,
    /// Filter block lookups that found the block.
    pub filter_hits: u64,
    /// Filter block lookups that had to read it.
    pub filter_misses: u64,
}

#[derive(Default)]
struct Shard {
    map: HashMap<CacheKey, Entry, BuildHasherDefault<KeyHasher>>,
    /// The clock: every cached key once; the hand is at the front, new keys join the back.
    ring: VecDeque<CacheKey>,
    usage: usize,
    capacity: usize,
    /// Per [`BlockKind::slot`].
    hits: [u64; 3],
    /// Per [`BlockKind::slot`].
    misses: [u64; 3],
}

impl Shard {
    /// The entry under `key` if it holds a block of `kind` (a block of another kind under
    /// that key, which only a damaged handle can ask for, is a miss). The lookup counts as
    /// a hit, or as a miss if `count_miss`.
    fn lookup(&mut self, key: CacheKey, kind: BlockKind, count_miss: bool) -> Option<Cached> {
        let found = self.map.get_mut(&key).filter(|entry| entry.value.kind() == kind);
        let counters = match (found.is_some(), count_miss) {
            (true, _) => Some(&mut self.hits),
            (false, true) => Some(&mut self.misses),
            (false, false) => None,
        };
        if let Some(count) = counters.and_then(|c| c.get_mut(kind.slot())) {
            *count += 1;
        }
        let entry = found?;
        let (first, last) = entry.restarts_hint;
        if first != 0 {
            crate::prefetch::prefetch_line(first as *const u8);
            crate::prefetch::prefetch_line(last as *const u8);
        }
        entry.chances = entry.chances.max(kind.hit_chances());
        Some(entry.value.clone())
    }

    /// Whether `charge` more bytes fit without evicting anything.
    fn has_room(&self, charge: usize) -> bool {
        self.usage.saturating_add(charge) <= self.capacity
    }

    /// Removes the entry under `key`, if any. Its key stays in the ring until the hand
    /// passes it, which then drops it (a key without an entry is skipped).
    fn remove(&mut self, key: CacheKey) {
        if let Some(entry) = self.map.remove(&key) {
            self.usage -= entry.charge;
        }
    }

    fn insert(&mut self, key: CacheKey, value: Cached, charge: usize) {
        if charge > self.capacity || self.map.contains_key(&key) {
            return; // too big to cache at all, or another reader inserted it first
        }
        self.evict_until_fits(charge);
        self.map.insert(key, Entry::new(value, charge));
        self.ring.push_back(key);
        self.usage += charge;
    }

    /// Sweeps the clock hand, evicting entries without chances left, until `charge` more
    /// bytes fit. `MAX_CHANCES + 1` full sweeps always suffice (each pass lowers every
    /// entry's chances by one).
    fn evict_until_fits(&mut self, charge: usize) {
        let mut budget = (MAX_CHANCES + 1) * self.ring.len() + 1;
        while self.usage + charge > self.capacity && budget > 0 {
            budget -= 1;
            let Some(key) = self.ring.pop_front() else {
                break;
            };
            if let Some(entry) = self.map.get_mut(&key) {
                if entry.chances > 0 {
                    // Passed by the hand: one chance fewer, examined again after the others.
                    entry.chances -= 1;
                    self.ring.push_back(key);
                    continue;
                }
                self.usage -= entry.charge;
                self.map.remove(&key);
            }
        }
    }
}

/// A shared cache of decoded blocks, keyed by (table id, block offset).
///
/// Holds data blocks, and the index and filter blocks of tables opened with
/// [`IndexFilterPlacement::BlockCache`](crate::IndexFilterPlacement::BlockCache).
/// Sharded (up to 16 mutex-protected shards, chosen by key hash); each shard evicts with
/// CLOCK (second chance; index and filter blocks get one more chance than data blocks).
/// A block larger than a shard's capacity is not cached (a shard holds at least 256 KiB
/// once the cache is 512 KiB or more, 2 MiB for a 32 MiB cache). Usage counts each
/// block's heap size plus a small per-entry overhead and never exceeds the capacity.
pub struct BlockCache {
    shards: Box<[Mutex<Shard>]>,
    capacity: usize,
}

impl BlockCache {
    /// A cache holding at most about `capacity_bytes`.
    pub fn new(capacity_bytes: usize) -> Self {
        let mut num_shards = MAX_SHARDS;
        while num_shards > 1 && capacity_bytes / num_shards < MIN_SHARD_CAPACITY {
            num_shards /= 2;
        }
        let per_shard = capacity_bytes / num_shards;
        let shards =
            (0..num_shards).map(|_| Mutex::new(Shard { capacity: per_shard, ..Shard::default() })).collect();
        BlockCache { shards, capacity: capacity_bytes }
    }

    /// The configured capacity in bytes.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity
    }

    /// Bytes currently held.
    pub fn usage_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().usage).sum()
    }

    /// (hits, misses) over every kind of block.
    pub fn hit_stats(&self) -> (u64, u64) {
        self.shards.iter().fold((0, 0), |(h, m), s| {
            let s = s.lock();
            (h + s.hits.iter().sum::<u64>(), m + s.misses.iter().sum::<u64>())
        })
    }

    /// Hits and misses by kind of block.
    pub fn counters(&self) -> CacheCounters {
        let mut hits = [0u64; 3];
        let mut misses = [0u64; 3];
        for shard in self.shards.iter() {
            let shard = shard.lock();
            for (total, n) in hits.iter_mut().zip(shard.hits) {
                *total += n;
            }
            for (total, n) in misses.iter_mut().zip(shard.misses) {
                *total += n;
            }
        }
        let [data_hits, index_hits, filter_hits] = hits;
        let [data_misses, index_misses, filter_misses] = misses;
        CacheCounters { data_hits, data_misses, index_hits, index_misses, filter_hits, filter_misses }
    }

    /// Number of cached blocks.
    pub fn entry_count(&self) -> usize {
        self.shards.iter().map(|s| s.lock().map.len()).sum()
    }

    /// Number of cached blocks of one kind.
    pub fn entry_count_of(&self, kind: BlockKind) -> usize {
        self.shards.iter().map(|s| s.lock().map.values().filter(|e| e.value.kind() == kind).count()).sum()
    }

    fn shard(&self, key: CacheKey) -> Option<&Mutex<Shard>> {
        // High hash bits pick the shard; the map inside uses the full hash.
        let index = (key_hash(key) >> 32) as usize % self.shards.len().max(1);
        self.shards.get(index)
    }

    /// The cached block of `kind` at (`table_id`, `offset`), counting a hit or a miss.
    pub(crate) fn lookup(&self, table_id: u64, offset: u64, kind: BlockKind) -> Option<Cached> {
        self.shard((table_id, offset))?.lock().lookup((table_id, offset), kind, true)
    }

    /// Caches a block (if it fits), evicting others as needed.
    pub(crate) fn insert(&self, table_id: u64, offset: u64, value: Cached) {
        let charge = value.memory_usage() + ENTRY_OVERHEAD;
        if let Some(shard) = self.shard((table_id, offset)) {
            shard.lock().insert((table_id, offset), value, charge);
        }
    }

    /// Caches a block only if it fits in the room the cache has free: never evicts for it.
    /// For blocks nobody asked for yet (a new table's, as it is written).
    pub(crate) fn insert_into_free_room(&self, table_id: u64, offset: u64, value: Cached) {
        let charge = value.memory_usage() + ENTRY_OVERHEAD;
        if let Some(shard) = self.shard((table_id, offset)) {
            let mut shard = shard.lock();
            if shard.has_room(charge) {
                shard.insert((table_id, offset), value, charge);
            }
        }
    }

    /// Whether a block of about `bytes` at (`table_id`, `offset`) would fit in the free room
    /// now (a hint: [`BlockCache::insert_into_free_room`] checks again).
    pub(crate) fn has_free_room_for(&self, table_id: u64, offset: u64, bytes: usize) -> bool {
        let charge = bytes.saturating_add(ENTRY_OVERHEAD);
        self.shard((table_id, offset)).is_some_and(|shard| shard.lock().has_room(charge))
    }

    /// Drops the block at (`table_id`, `offset`), of any kind, if the cache holds it.
    pub(crate) fn remove(&self, table_id: u64, offset: u64) {
        if let Some(shard) = self.shard((table_id, offset)) {
            shard.lock().remove((table_id, offset));
        }
    }

    /// The cached index block at (`table_id`, `offset`), counting nothing and giving it no
    /// extra chance.
    pub(crate) fn peek_index(&self, table_id: u64, offset: u64) -> Option<Arc<IndexBlock>> {
        match &self.shard((table_id, offset))?.lock().map.get(&(table_id, offset))?.value {
            Cached::Index(index) => Some(Arc::clone(index)),
            Cached::Data(_) | Cached::Filter(_) => None,
        }
    }

    /// The cached data block at (`table_id`, `offset`).
    pub(crate) fn lookup_data(&self, table_id: u64, offset: u64) -> Option<Arc<Block>> {
        match self.lookup(table_id, offset, BlockKind::Data)? {
            Cached::Data(block) => Some(block),
            Cached::Index(_) | Cached::Filter(_) => None,
        }
    }

    /// If the cache holds the data block at (`table_id`, `offset`), asks the processor to
    /// load the block's header (its reference count and where its bytes are), so that a
    /// lookup of it a little later does not wait for that line. Counts nothing, takes no
    /// reference.
    pub(crate) fn prefetch_data(&self, table_id: u64, offset: u64) {
        let key = (table_id, offset);
        if let Some(shard) = self.shard(key) {
            if let Some(Cached::Data(block)) = shard.lock().map.get(&key).map(|entry| &entry.value) {
                // The reference counts sit just before the block in the same allocation.
                let header = Arc::as_ptr(block).cast::<u8>();
                crate::prefetch::prefetch_line(header.wrapping_sub(2 * std::mem::size_of::<usize>()));
                crate::prefetch::prefetch_line(header.wrapping_add(std::mem::size_of::<Block>() - 1));
            }
        }
    }

    /// Like [`BlockCache::lookup_data`], but a miss is not counted: for a scan looking a
    /// block ahead, whose miss the read that follows counts.
    pub(crate) fn lookup_data_ahead(&self, table_id: u64, offset: u64) -> Option<Arc<Block>> {
        let key = (table_id, offset);
        match self.shard(key)?.lock().lookup(key, BlockKind::Data, false)? {
            Cached::Data(block) => Some(block),
            Cached::Index(_) | Cached::Filter(_) => None,
        }
    }
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity)
            .field("usage", &self.usage_bytes())
            .field("shards", &self.shards.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid block of about 1 KiB (restart array: one point at 0).
    fn raw_block() -> Block {
        let mut data = Vec::with_capacity(1008);
        data.resize(1000, 0);
        data.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0]);
        Block::new(data).unwrap()
    }

    fn block() -> Cached {
        Cached::Data(Arc::new(raw_block()))
    }

    fn lookup(cache: &BlockCache, table_id: u64, offset: u64) -> Option<Arc<Block>> {
        cache.lookup_data(table_id, offset)
    }

    #[test]
    fn hit_miss_and_capacity() {
        let cache = BlockCache::new(10_000);
        assert!(lookup(&cache, 1, 0).is_none());
        cache.insert(1, 0, block());
        assert!(lookup(&cache, 1, 0).is_some());
        assert_eq!(cache.hit_stats(), (1, 1));
        for off in 0..1000 {
            cache.insert(2, off, block());
            assert!(cache.usage_bytes() <= cache.capacity_bytes());
        }
        assert!(cache.entry_count() > 1);
    }

    #[test]
    fn clock_keeps_referenced_entries() {
        let cache = BlockCache::new(100_000);
        let charge = raw_block().memory_usage() + ENTRY_OVERHEAD;
        let fits = 100_000 / charge;
        for off in 0..fits as u64 {
            cache.insert(1, off, block());
        }
        // Touch entry 0, then insert one more: entry 0 must survive the sweep.
        assert!(lookup(&cache, 1, 0).is_some());
        cache.insert(1, 10_000, block());
        assert!(lookup(&cache, 1, 0).is_some());
        assert!(lookup(&cache, 1, 10_000).is_some());
        assert!(cache.usage_bytes() <= 100_000);
    }
}
