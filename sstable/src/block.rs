//! A decoded block and its bidirectional iterator.
//!
//! Decoding never trusts the bytes: every offset and length read from a block is
//! bounds-checked, and a malformed entry makes the iterator invalid with its `corrupt`
//! flag set (the table layer turns that into [`TableError::Corruption`]).
//!
//! [`TableError::Corruption`]: crate::TableError::Corruption

use std::cmp::Ordering;
use std::ops::Deref;

use crate::key::{compare_stored, TRAILER_LEN};
use crate::key_buf::{KeyBuf, SUFFIX_WINDOW};

/// Most restart points [`Block::touch_restart_entries`] reads ahead of a search.
const TOUCHED_RESTARTS: usize = 32;
/// Bytes of entries a seek in a data block asks the processor for, from the restart
/// point its walk starts at: about a restart interval of 100-byte entries and a short
/// read after it. Measured in `benches/README.md` ("A seek prefetches the entries it
/// walks").
const SEEK_PREFETCH_BYTES: usize = 2048;
use stampkv_coding::{get_u32_le, get_varint32};

/// A block's bytes (trailer removed) plus the location of its restart array.
///
/// Invariants established by [`Block::new`]: `restarts_offset + 4 * num_restarts + 4 ==
/// data.len()`, `num_restarts >= 1`, the first restart point is 0, restart points are
/// strictly increasing and each is `< restarts_offset` (except the single restart point 0
/// of an empty block).
#[derive(Debug)]
pub(crate) struct Block {
    data: Vec<u8>,
    restarts_offset: usize,
    num_restarts: usize,
}

impl Block {
    /// Validates the restart array of `data` (the block without its trailer).
    pub(crate) fn new(data: Vec<u8>) -> Result<Block, &'static str> {
        let count_pos = data.len().checked_sub(4).ok_or("block shorter than its restart count")?;
        let num_restarts = get_u32_le(&data, count_pos).ok_or("block too short")? as usize;
        if num_restarts == 0 {
            return Err("block has no restart points");
        }
        let array_len = num_restarts
            .checked_mul(4)
            .filter(|&len| len <= count_pos)
            .ok_or("restart count larger than the block")?;
        let restarts_offset = count_pos - array_len;
        let array = data.get(restarts_offset..count_pos).unwrap_or_default();
        let mut prev: Option<usize> = None;
        for chunk in array.chunks_exact(4) {
            let point = get_u32_le(chunk, 0).ok_or("block too short")? as usize;
            let ordered = match prev {
                None => point == 0,
                Some(p) => point > p,
            };
            if !ordered {
                return Err("restart points not increasing from 0");
            }
            if point >= restarts_offset && !(restarts_offset == 0 && num_restarts == 1) {
                return Err("restart point beyond the entries");
            }
            prev = Some(point);
        }
        Ok(Block { data, restarts_offset, num_restarts })
    }

    /// A valid block with no entries.
    pub(crate) fn empty() -> Block {
        Block { data: vec![0, 0, 0, 0, 1, 0, 0, 0], restarts_offset: 0, num_restarts: 1 }
    }

    /// Whether the block has no entries.
    pub(crate) fn is_empty(&self) -> bool {
        self.restarts_offset == 0
    }

    /// Number of restart points (>= 1).
    pub(crate) fn num_restarts(&self) -> usize {
        self.num_restarts
    }

    /// The key stored at restart point `index`, read in place; `None` if malformed
    /// (restart entries must not share a prefix; `versioned` keys need a trailer).
    #[inline]
    pub(crate) fn restart_key(&self, index: usize, versioned: bool) -> Option<&[u8]> {
        let entries = self.entries();
        let pos = self.restart_point(index);
        let (shared, unshared, _, header_len) = decode_header(entries, pos)?;
        if shared != 0 || (versioned && unshared < TRAILER_LEN) {
            return None;
        }
        let start = pos.checked_add(header_len)?;
        entries.get(start..start.checked_add(unshared)?)
    }

    /// Reads the first byte of every restart entry of a block with at most
    /// [`TOUCHED_RESTARTS`] of them, before a binary search visits a few: the loads are
    /// independent, so the processor fetches their cache lines together instead of one
    /// after another as each search step decides the next. A data block that is not in
    /// the processor's caches then costs about one memory latency to search instead of
    /// one per step (four with sixteen restart points).
    #[inline]
    pub(crate) fn touch_restart_entries(&self) {
        if self.num_restarts > TOUCHED_RESTARTS {
            return;
        }
        let entries = self.entries();
        let mut sum = 0u8;
        for i in 0..self.num_restarts {
            sum ^= entries.get(self.restart_point(i)).copied().unwrap_or_default();
        }
        std::hint::black_box(sum);
    }

    /// Where the block's restart array and count lie in memory (the first and the last
    /// byte): what a search reads first. An address for prefetch hints only.
    pub(crate) fn restart_array_span(&self) -> (usize, usize) {
        let start = self.data.as_ptr() as usize;
        (start.wrapping_add(self.restarts_offset), start.wrapping_add(self.data.len().saturating_sub(1)))
    }

    /// Asks the processor to load the block's entries into its caches (a hint: a scan
    /// about to walk the block then finds them there instead of missing line by line).
    pub(crate) fn prefetch_entries(&self) {
        self.prefetch_entries_from(0, usize::MAX);
    }

    /// Asks the processor to load up to `len` bytes of entries from offset `start` (a
    /// hint: the walk from a restart point to a seek's target, and the entries a short
    /// read takes after it, then miss together instead of line by line).
    #[inline]
    pub(crate) fn prefetch_entries_from(&self, start: usize, len: usize) {
        let entries = self.entries();
        let end = start.saturating_add(len).min(entries.len());
        if let Some(span) = entries.get(start..end) {
            crate::prefetch::prefetch_bytes(span);
        }
    }

    /// Approximate heap bytes held (for cache accounting and pinned-memory reporting).
    pub(crate) fn memory_usage(&self) -> usize {
        self.data.capacity() + std::mem::size_of::<Block>()
    }

    /// The entries region.
    #[inline]
    fn entries(&self) -> &[u8] {
        self.data.get(..self.restarts_offset).unwrap_or_default()
    }

    /// Offset of restart point `i`; `restarts_offset` (i.e. "end") if out of range.
    #[inline]
    fn restart_point(&self, i: usize) -> usize {
        if i >= self.num_restarts {
            return self.restarts_offset;
        }
        i.checked_mul(4)
            .and_then(|rel| self.restarts_offset.checked_add(rel))
            .and_then(|pos| get_u32_le(&self.data, pos))
            .map_or(self.restarts_offset, |p| p as usize)
    }
}

/// Entry header: (shared, unshared, value_len, header bytes).
#[inline(always)]
fn decode_header(entries: &[u8], pos: usize) -> Option<(usize, usize, usize, usize)> {
    let p = entries.get(pos..)?;
    // Fast path: all three lengths below 128 take one byte each.
    if let [a, b, c, ..] = *p {
        if (a | b | c) < 0x80 {
            return Some((usize::from(a), usize::from(b), usize::from(c), 3));
        }
    }
    let (shared, n1) = get_varint32(p)?;
    let (unshared, n2) = get_varint32(p.get(n1..)?)?;
    let (value_len, n3) = get_varint32(p.get(n1 + n2..)?)?;
    Some((shared as usize, unshared as usize, value_len as usize, n1 + n2 + n3))
}

/// The value of the entry at `pos` of `entries` and where the entry after it starts, if the
/// entry decodes (its key is not looked at).
fn value_at(entries: &[u8], pos: usize) -> Option<(&[u8], usize)> {
    let (_, unshared, value_len, header_len) = decode_header(entries, pos)?;
    let value_start = pos.checked_add(header_len)?.checked_add(unshared)?;
    let value_end = value_start.checked_add(value_len)?;
    Some((entries.get(value_start..value_end)?, value_end))
}

/// A cursor over the entries of a block. `B` is `&Block` (point lookups) or
/// `Arc<Block>` (table iterators).
///
/// The current key is either borrowed from the block (entries with `shared == 0`, e.g.
/// every restart entry) or reconstructed in `key_buf`, which is reused across entries and
/// holds short keys without a heap allocation.
pub(crate) struct BlockIter<B: Deref<Target = Block>> {
    block: B,
    /// Keys must hold a trailer (data and index blocks) rather than plain names.
    versioned: bool,
    /// Offset of the current entry; `restarts_offset` when invalid.
    current: usize,
    /// Offset just past the current entry (where the next one starts).
    next: usize,
    key_buf: KeyBuf,
    /// When true the key is `block.entries()[key_start..key_end]`, not `key_buf`.
    key_borrowed: bool,
    key_start: usize,
    key_end: usize,
    value_start: usize,
    value_end: usize,
    valid: bool,
    corrupt: bool,
}

impl<B: Deref<Target = Block>> BlockIter<B> {
    /// An unpositioned iterator. `versioned` blocks reject keys shorter than a trailer.
    pub(crate) fn new(block: B, versioned: bool) -> Self {
        let end = block.restarts_offset;
        BlockIter {
            block,
            versioned,
            current: end,
            next: end,
            key_buf: KeyBuf::default(),
            key_borrowed: false,
            key_start: 0,
            key_end: 0,
            value_start: 0,
            value_end: 0,
            valid: false,
            corrupt: false,
        }
    }

    /// Switches to another block (unpositioned), keeping the key buffer's allocation.
    pub(crate) fn reset(&mut self, block: B) {
        self.block = block;
        self.corrupt = false;
        self.mark_end();
    }

    /// Whether positioned at an entry.
    #[inline]
    pub(crate) fn valid(&self) -> bool {
        self.valid
    }

    /// Whether the last move hit a malformed entry (the iterator is then invalid).
    #[inline]
    pub(crate) fn is_corrupt(&self) -> bool {
        self.corrupt
    }

    /// The current key (stored form). Meaningless unless `valid()`.
    #[inline]
    pub(crate) fn key(&self) -> &[u8] {
        if self.key_borrowed {
            self.block.entries().get(self.key_start..self.key_end).unwrap_or_default()
        } else {
            self.key_buf.as_slice()
        }
    }

    /// The current value. Meaningless unless `valid()`.
    #[inline]
    pub(crate) fn value(&self) -> &[u8] {
        self.block.entries().get(self.value_start..self.value_end).unwrap_or_default()
    }

    /// Makes the iterator invalid (not corrupt).
    pub(crate) fn invalidate(&mut self) {
        self.mark_end();
    }

    fn mark_end(&mut self) {
        self.valid = false;
        self.current = self.block.restarts_offset;
        self.next = self.current;
    }

    fn mark_corrupt(&mut self) {
        self.corrupt = true;
        self.mark_end();
    }

    /// Positions before the entry at restart point `index` (call `parse_next` next).
    fn seek_to_restart(&mut self, index: usize) {
        self.key_buf.clear();
        self.key_borrowed = false;
        self.next = self.block.restart_point(index);
        self.valid = false;
    }

    /// Decodes the entry at `self.next` and makes it current.
    #[inline]
    fn parse_next(&mut self) {
        self.current = self.next;
        let block = &*self.block;
        let entries = block.entries();
        if self.current >= entries.len() {
            self.mark_end();
            return;
        }
        let Some((shared, unshared, value_len, header_len)) = decode_header(entries, self.current) else {
            return self.mark_corrupt();
        };
        let key_start = self.current + header_len;
        let key_end = key_start.checked_add(unshared);
        let value_end = key_end.and_then(|k| k.checked_add(value_len));
        let (Some(key_end), Some(value_end)) = (key_end, value_end) else {
            return self.mark_corrupt();
        };
        let current_len = if self.key_borrowed { self.key_end - self.key_start } else { self.key_buf.len() };
        let too_short = self.versioned && shared.saturating_add(unshared) < TRAILER_LEN;
        let Some(delta) = entries.get(key_start..key_end) else {
            return self.mark_corrupt();
        };
        if value_end > entries.len() || shared > current_len || too_short {
            return self.mark_corrupt();
        }
        // The delta and the bytes after it (its value, the next entries): the buffer
        // may copy a fixed-size window of them.
        let rest = entries.get(key_start..).unwrap_or(delta);
        if shared == 0 && unshared > SUFFIX_WINDOW {
            // A long whole key (a restart entry's) is read in place.
            self.key_borrowed = true;
            self.key_start = key_start;
            self.key_end = key_end;
        } else {
            if self.key_borrowed {
                // Materialise the borrowed previous key before extending it.
                let prev = entries.get(self.key_start..self.key_end).unwrap_or_default();
                self.key_buf.clear();
                self.key_buf.extend_from_slice(prev.get(..shared).unwrap_or(prev));
                self.key_borrowed = false;
            }
            // A short whole key is copied too (one fixed-size move), so that the next
            // entry, which shares a prefix with it, needs no copy of it.
            self.key_buf.replace_suffix(shared, rest, unshared);
        }
        self.value_start = key_end;
        self.value_end = value_end;
        self.next = value_end;
        self.valid = true;
    }

    /// Positions at the first entry.
    pub(crate) fn seek_to_first(&mut self) {
        self.corrupt = false;
        self.seek_to_restart(0);
        self.block.prefetch_entries_from(0, SEEK_PREFETCH_BYTES);
        self.parse_next();
    }

    /// Positions at the last entry.
    pub(crate) fn seek_to_last(&mut self) {
        self.corrupt = false;
        self.seek_to_restart(self.block.num_restarts.saturating_sub(1));
        self.block.prefetch_entries_from(self.next, self.block.restarts_offset.saturating_sub(self.next));
        self.parse_next();
        while self.valid && self.next < self.block.restarts_offset {
            self.parse_next();
        }
    }

    /// The values of the next `N` entries after the current one, without moving (`None`
    /// past the last entry, or from an entry that does not decode on: moving there then
    /// reports what is wrong).
    pub(crate) fn peek_next_values<const N: usize>(&self) -> [Option<&[u8]>; N] {
        let mut values = [None; N];
        if !self.valid {
            return values;
        }
        let entries = self.block.entries();
        let mut pos = self.next;
        for value in &mut values {
            let Some((found, next)) = value_at(entries, pos) else {
                break;
            };
            *value = Some(found);
            pos = next;
        }
        values
    }

    /// Moves to the next entry (invalid past the last one). No-op when invalid.
    #[inline]
    pub(crate) fn next(&mut self) {
        if self.valid {
            self.parse_next();
        }
    }

    /// Moves to the previous entry (invalid before the first one). No-op when invalid.
    ///
    /// Entries can only be decoded forwards, so this rescans from the last restart point
    /// before the current entry: O(log restarts + restart interval). (The restart group
    /// is found by binary search rather than tracked on every forward step, which keeps
    /// `next` cheap. Recording a walk's entries for the steps back after it measured no
    /// faster: the rescan reads lines the walk before it brought into the processor's
    /// caches.)
    pub(crate) fn prev(&mut self) {
        if !self.valid {
            return;
        }
        let original = self.current;
        // Number of restart points < original; restart point 0 is 0, so if it is 0 the
        // current entry is the first one.
        let before = self.restart_points_below(original);
        let Some(index) = before.checked_sub(1) else {
            return self.mark_end();
        };
        self.seek_to_restart(index);
        if self.block.restart_point(before) == original {
            // The current entry opens its restart interval: the walk enters the one
            // before it, whose entries no step has read yet.
            self.block.prefetch_entries_from(self.next, original.saturating_sub(self.next));
        }
        loop {
            self.parse_next();
            // `>=` rather than `==` so that a malformed block cannot loop forever.
            if !self.valid || self.next >= original {
                return;
            }
        }
    }

    /// How many restart points are `< offset` (restart points are increasing).
    fn restart_points_below(&self, offset: usize) -> usize {
        let (mut lo, mut hi) = (0, self.block.num_restarts);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.block.restart_point(mid) < offset {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Positions at the first entry >= (`user_key`, `trailer`) in table order (versioned
    /// blocks only): binary search over the restart points, then a linear scan.
    pub(crate) fn seek(&mut self, user_key: &[u8], trailer: u64) {
        let last = self.block.num_restarts.saturating_sub(1);
        self.block.touch_restart_entries();
        self.seek_within(user_key, trailer, 0, last, SEEK_PREFETCH_BYTES);
    }

    /// Like [`seek`](Self::seek), given that the last restart point whose key is <
    /// target (or restart 0 if there is none) lies in `left..=right`. Asks the processor
    /// for `prefetch_bytes` of entries from that restart point before walking them.
    pub(crate) fn seek_within(
        &mut self,
        user_key: &[u8],
        trailer: u64,
        left: usize,
        right: usize,
        prefetch_bytes: usize,
    ) {
        self.corrupt = false;
        let mut right = right.min(self.block.num_restarts.saturating_sub(1));
        let mut left = left.min(right);
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            let Some(key) = self.block.restart_key(mid, self.versioned) else {
                return self.mark_corrupt();
            };
            if compare_stored(key, user_key, trailer) == Ordering::Less {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        self.seek_to_restart(left);
        self.block.prefetch_entries_from(self.next, prefetch_bytes);
        loop {
            self.parse_next();
            if !self.valid || compare_stored(self.key(), user_key, trailer) != Ordering::Less {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block_builder::BlockBuilder;
    use crate::key::{push_stored_key, split_stored_key};

    fn build(entries: &[(Vec<u8>, u64, Vec<u8>)], interval: usize) -> Block {
        let mut b = BlockBuilder::new(interval);
        let mut key = Vec::new();
        for (user, trailer, value) in entries {
            key.clear();
            push_stored_key(&mut key, user, *trailer);
            b.add(&key, value);
        }
        Block::new(b.finish().clone()).unwrap()
    }

    fn sample() -> Vec<(Vec<u8>, u64, Vec<u8>)> {
        let mut v = Vec::new();
        for i in 0..50u64 {
            // Every fourth user key is long: its whole key is read in place, the others'
            // are copied in a fixed-size window.
            let long = if (i / 3) % 4 == 3 { "-long".repeat(8) } else { String::new() };
            let user = format!("key{:03}{long}", i / 3).into_bytes();
            let trailer = 100 - (i % 3) * 10;
            v.push((user, trailer, vec![i as u8; (i % 5) as usize]));
        }
        v
    }

    fn current(it: &BlockIter<&Block>) -> (Vec<u8>, u64, Vec<u8>) {
        let (u, t) = split_stored_key(it.key()).unwrap();
        (u.to_vec(), t, it.value().to_vec())
    }

    #[test]
    fn forward_backward_and_seek() {
        let entries = sample();
        for interval in [1, 2, 16, 100] {
            let block = build(&entries, interval);
            let mut it = BlockIter::new(&block, true);
            assert_eq!(it.peek_next_values::<2>(), [None, None], "unpositioned");
            it.seek_to_first();
            for (i, e) in entries.iter().enumerate() {
                assert!(it.valid());
                assert_eq!(&current(&it), e);
                let value = |j: usize| entries.get(j).map(|(_, _, v)| v.as_slice());
                assert_eq!(it.peek_next_values::<2>(), [value(i + 1), value(i + 2)], "peek after entry {i}");
                it.next();
            }
            assert_eq!(it.peek_next_values::<1>(), [None], "past the end");
            assert!(!it.valid());
            it.seek_to_last();
            for e in entries.iter().rev() {
                assert_eq!(&current(&it), e);
                it.prev();
            }
            assert!(!it.valid() && !it.is_corrupt());
            for (i, e) in entries.iter().enumerate() {
                it.seek(&e.0, e.1);
                assert_eq!(&current(&it), e);
                // Just above this version: the next entry in table order.
                it.seek(&e.0, e.1 - 1);
                match entries.get(i + 1) {
                    Some(n) => assert_eq!(&current(&it), n),
                    None => assert!(!it.valid()),
                }
            }
        }
    }

    /// Random moves in every direction against the position they must reach: steps back
    /// across restart intervals, after forward moves and seeks, and after the iterator
    /// has moved to another block and back.
    #[test]
    fn random_moves_match_the_entries() {
        let entries = sample();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut random = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for interval in [1, 2, 3, 16, 100] {
            let block = build(&entries, interval);
            let other = build(&entries[10..], interval);
            let mut it = BlockIter::new(&block, true);
            let mut at: Option<usize> = None;
            for step in 0..4000 {
                match random(8) {
                    0 => {
                        it.seek_to_first();
                        at = Some(0);
                    }
                    1 => {
                        it.seek_to_last();
                        at = entries.len().checked_sub(1);
                    }
                    2 => {
                        let i = random(entries.len());
                        let (user, trailer, _) = &entries[i];
                        it.seek(user, *trailer);
                        at = Some(i);
                    }
                    3 | 4 => {
                        it.next();
                        at = at.map(|i| i + 1).filter(|&i| i < entries.len());
                    }
                    5 | 6 => {
                        it.prev();
                        at = at.and_then(|i| i.checked_sub(1));
                    }
                    _ => {
                        // Another block and back.
                        it.reset(&other);
                        it.seek_to_last();
                        it.prev();
                        it.reset(&block);
                        at = None;
                    }
                }
                match at {
                    Some(i) => assert_eq!(current(&it), entries[i], "interval {interval}, step {step}"),
                    None => assert!(!it.valid() && !it.is_corrupt(), "interval {interval}, step {step}"),
                }
            }
        }
    }

    #[test]
    fn prefetch_hints_accept_any_span() {
        let block = build(&sample(), 16);
        let len = block.entries().len();
        for (start, span) in [(0, 0), (0, usize::MAX), (len, 64), (len + 1, 1), (usize::MAX, usize::MAX)] {
            block.prefetch_entries_from(start, span);
        }
    }

    #[test]
    fn empty_block() {
        let block = build(&[], 16);
        let mut it = BlockIter::new(&block, true);
        it.seek_to_first();
        assert!(!it.valid());
        it.seek_to_last();
        assert!(!it.valid());
        it.seek(b"a", 0);
        assert!(!it.valid() && !it.is_corrupt());
        let empty = Block::empty();
        let mut it = BlockIter::new(&empty, true);
        it.seek_to_last();
        assert!(!it.valid());
    }

    #[test]
    fn rejects_bad_restart_arrays() {
        assert!(Block::new(vec![]).is_err());
        assert!(Block::new(vec![0, 0, 0, 0]).is_err()); // zero restarts
        assert!(Block::new(vec![0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(Block::new(vec![1, 0, 0, 0, 1, 0, 0, 0]).is_err()); // first != 0
    }

    /// Mutated and random blocks must never panic, whatever the iterator is asked to do.
    #[test]
    fn garbage_never_panics() {
        let good = build(&sample(), 4).data;
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut rnd = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..3000 {
            let mut data =
                if round % 2 == 0 { good.clone() } else { (0..(rnd() % 64)).map(|_| rnd() as u8).collect() };
            if !data.is_empty() {
                for _ in 0..1 + rnd() % 4 {
                    let pos = (rnd() as usize) % data.len();
                    data[pos] = rnd() as u8;
                }
            }
            let Ok(block) = Block::new(data) else {
                continue;
            };
            let mut it = BlockIter::new(&block, round % 3 != 0);
            it.seek_to_first();
            for _ in 0..200 {
                match rnd() % 4 {
                    0 => it.next(),
                    1 => it.prev(),
                    2 => it.seek(&[rnd() as u8 % 4 + b'k'], rnd()),
                    _ => it.seek_to_last(),
                }
                let _ = (it.key(), it.value());
            }
        }
    }
}
