//! A bloom filter in front of each memtable, so that point reads of keys a memtable does
//! not hold (most reads, once data has been flushed) skip the skiplist walk — a chain of
//! ~20 dependent cache misses — for one cache line.
//!
//! Blocked layout (cache-local): a key's probes all fall in one 512-bit block chosen by
//! its hash. Bits are set by the single memtable writer (inserts are serialized by the
//! commit lock) with plain relaxed load-and-store, no locked read-modify-write; readers
//! only look for keys of commits that were published (with release/acquire ordering on
//! the visible sequence number) after the bits were set.

use std::sync::atomic::{AtomicU64, Ordering};

const WORDS_PER_BLOCK: usize = 8;
const PROBES: u32 = 4;

/// The filter.
pub(crate) struct MemtableBloom {
    words: Box<[AtomicU64]>,
    block_count: u64,
}

/// A 64-bit hash of a key (multiply-rotate over 8-byte words, then a final mix).
pub(crate) fn hash_key(key: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = 0x243F_6A88_85A3_08D3 ^ (key.len() as u64).wrapping_mul(K);
    let mut chunks = key.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        h = (h ^ word).wrapping_mul(K).rotate_left(29);
    }
    let mut tail = [0u8; 8];
    for (slot, byte) in tail.iter_mut().zip(chunks.remainder()) {
        *slot = *byte;
    }
    h = (h ^ u64::from_le_bytes(tail)).wrapping_mul(K);
    h ^= h >> 32;
    h = h.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    h ^ (h >> 32)
}

impl MemtableBloom {
    /// A filter of about `bits` bits (at least one block).
    pub(crate) fn new(bits: usize) -> Self {
        let block_count = bits.div_ceil(WORDS_PER_BLOCK * 64).max(1);
        let words = (0..block_count * WORDS_PER_BLOCK).map(|_| AtomicU64::new(0)).collect();
        MemtableBloom { words, block_count: block_count as u64 }
    }

    /// The (word index, bit mask) of each probe of `hash`. Every index is in bounds: the
    /// block is below `block_count` and `bit / 64 < 8 = WORDS_PER_BLOCK`, and `words` holds
    /// `block_count * WORDS_PER_BLOCK` words.
    fn probes(&self, hash: u64) -> impl Iterator<Item = (usize, u64)> {
        let block = ((hash >> 32) % self.block_count) as usize * WORDS_PER_BLOCK;
        (0..PROBES).map(move |i| {
            let bit = (hash >> (i * 9)) & 511;
            (block + (bit / 64) as usize, 1u64 << (bit % 64))
        })
    }

    /// Adds a key hash. Only the memtable's single writer calls this (a concurrent second
    /// writer could lose bits, which would make the filter lie).
    #[allow(clippy::indexing_slicing, reason = "probe indices are in bounds (see `probes`)")]
    pub(crate) fn insert(&self, hash: u64) {
        for (word, mask) in self.probes(hash) {
            let word = &self.words[word];
            let old = word.load(Ordering::Relaxed);
            if old & mask == 0 {
                word.store(old | mask, Ordering::Relaxed);
            }
        }
    }

    /// Starts loading the block of `hash` into the cache, so that a later `insert` or
    /// `may_contain` of the same hash does not wait for memory.
    pub(crate) fn prefetch(&self, hash: u64) {
        let block = ((hash >> 32) % self.block_count) as usize * WORDS_PER_BLOCK;
        if let Some(word) = self.words.get(block) {
            stampkv_sstable::prefetch::prefetch_line(std::ptr::from_ref(word));
        }
    }

    /// False means the key was certainly never inserted.
    #[allow(clippy::indexing_slicing, reason = "probe indices are in bounds (see `probes`)")]
    pub(crate) fn may_contain(&self, hash: u64) -> bool {
        self.probes(hash).all(|(word, mask)| self.words[word].load(Ordering::Relaxed) & mask != 0)
    }

    /// Bytes of memory used.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.words.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_few_false_positives() {
        let bloom = MemtableBloom::new(10_000 * 16);
        for i in 0..10_000u32 {
            bloom.insert(hash_key(format!("key-{i}").as_bytes()));
        }
        for i in 0..10_000u32 {
            assert!(bloom.may_contain(hash_key(format!("key-{i}").as_bytes())));
        }
        let false_positives =
            (0..10_000u32).filter(|i| bloom.may_contain(hash_key(format!("other-{i}").as_bytes()))).count();
        assert!(false_positives < 300, "{false_positives} false positives in 10000");
    }

    #[test]
    fn hashes_differ_for_keys_differing_anywhere() {
        let keys: [&[u8]; 6] = [b"", b"\0", b"a", b"ab", b"abcdefgh", b"abcdefgi"];
        let hashes: std::collections::HashSet<u64> = keys.iter().map(|k| hash_key(k)).collect();
        assert_eq!(hashes.len(), keys.len());
    }
}
