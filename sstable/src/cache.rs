//! A sharded block cache with CLOCK (second chance) eviction.
//!
//! Keys are (table id, block offset); values are decoded blocks behind an `Arc`, so a
//! block evicted while an iterator still uses it stays alive until that iterator drops
//! it (it just stops being counted). Each shard is a mutex around a hash map holding the
//! entries and a ring of their keys swept by the clock hand.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::block::Block;

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

struct Entry {
    block: Arc<Block>,
    charge: usize,
    /// Second-chance bit: set on every hit, cleared when the clock hand passes.
    referenced: bool,
}

#[derive(Default)]
struct Shard {
    map: HashMap<CacheKey, Entry, BuildHasherDefault<KeyHasher>>,
    /// The clock: every cached key once, in no particular order; `hand` indexes it.
    ring: Vec<CacheKey>,
    hand: usize,
    usage: usize,
    capacity: usize,
    hits: u64,
    misses: u64,
}

impl Shard {
    fn lookup(&mut self, key: CacheKey) -> Option<Arc<Block>> {
        match self.map.get_mut(&key) {
            Some(entry) => {
                entry.referenced = true;
                self.hits += 1;
                Some(Arc::clone(&entry.block))
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    fn insert(&mut self, key: CacheKey, block: Arc<Block>, charge: usize) {
        if charge > self.capacity || self.map.contains_key(&key) {
            return; // too big to cache at all, or another reader inserted it first
        }
        self.evict_until_fits(charge);
        let entry = Entry { block, charge, referenced: false };
        self.map.insert(key, entry);
        self.ring.push(key);
        self.usage += charge;
    }

    /// Sweeps the clock hand, evicting unreferenced entries, until `charge` more bytes
    /// fit. Two full sweeps always suffice (the first clears every reference bit).
    fn evict_until_fits(&mut self, charge: usize) {
        let mut budget = 2 * self.ring.len() + 1;
        while self.usage + charge > self.capacity && budget > 0 && !self.ring.is_empty() {
            budget -= 1;
            self.hand %= self.ring.len();
            let Some(&key) = self.ring.get(self.hand) else {
                break;
            };
            if let Some(entry) = self.map.get_mut(&key) {
                if entry.referenced {
                    entry.referenced = false;
                    self.hand += 1;
                    continue;
                }
                self.usage -= entry.charge;
                self.map.remove(&key);
            }
            // The last key moves into the hand's position and is examined next.
            self.ring.swap_remove(self.hand);
        }
    }
}

/// A shared cache of decoded data blocks, keyed by (table id, block offset).
///
/// Sharded (up to 16 mutex-protected shards, chosen by key hash); each shard evicts with
/// CLOCK (second chance). A block larger than a shard's capacity is not cached. Usage
/// counts each block's heap size plus a small per-entry overhead and never exceeds the
/// capacity.
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

    /// (hits, misses).
    pub fn hit_stats(&self) -> (u64, u64) {
        self.shards.iter().fold((0, 0), |(h, m), s| {
            let s = s.lock();
            (h + s.hits, m + s.misses)
        })
    }

    /// Number of cached blocks.
    pub fn entry_count(&self) -> usize {
        self.shards.iter().map(|s| s.lock().map.len()).sum()
    }

    fn shard(&self, key: CacheKey) -> Option<&Mutex<Shard>> {
        // High hash bits pick the shard; the map inside uses the full hash.
        let index = (key_hash(key) >> 32) as usize % self.shards.len().max(1);
        self.shards.get(index)
    }

    /// The cached block, counting a hit or a miss.
    pub(crate) fn lookup(&self, table_id: u64, offset: u64) -> Option<Arc<Block>> {
        self.shard((table_id, offset))?.lock().lookup((table_id, offset))
    }

    /// Caches a block (if it fits), evicting others as needed.
    pub(crate) fn insert(&self, table_id: u64, offset: u64, block: Arc<Block>) {
        let charge = block.memory_usage() + ENTRY_OVERHEAD;
        if let Some(shard) = self.shard((table_id, offset)) {
            shard.lock().insert((table_id, offset), block, charge);
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
    fn block() -> Arc<Block> {
        let mut data = Vec::with_capacity(1008);
        data.resize(1000, 0);
        data.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0]);
        Arc::new(Block::new(data).unwrap())
    }

    #[test]
    fn hit_miss_and_capacity() {
        let cache = BlockCache::new(10_000);
        assert!(cache.lookup(1, 0).is_none());
        cache.insert(1, 0, block());
        assert!(cache.lookup(1, 0).is_some());
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
        let charge = block().memory_usage() + ENTRY_OVERHEAD;
        let fits = 100_000 / charge;
        for off in 0..fits as u64 {
            cache.insert(1, off, block());
        }
        // Touch entry 0, then insert one more: entry 0 must survive the sweep.
        assert!(cache.lookup(1, 0).is_some());
        cache.insert(1, 10_000, block());
        assert!(cache.lookup(1, 0).is_some());
        assert!(cache.lookup(1, 10_000).is_some());
        assert!(cache.usage_bytes() <= 100_000);
    }
}
