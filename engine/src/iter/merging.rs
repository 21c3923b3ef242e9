//! Merges several internal iterators into one ordered stream.
//!
//! Children are few (memtables, level-0 files, one per deeper level). They sit at the
//! leaves of a winner tree (a tournament): each inner node holds the better of its two
//! subtrees' children, the root the best of all. When the best child steps, only the
//! nodes on its path to the root are replayed: log2(children) comparisons a step, where
//! a linear scan over the children costs one per child.
//!
//! Each comparison reads a [`KeyHead`] the tree keeps per child (the first 16 bytes of its
//! key as one number, the key's length and trailer), refreshed only when that child
//! moves, so choosing the next child calls no child: a child is asked for its full key
//! only when two heads cannot tell the keys apart (keys sharing their first 16 bytes and
//! longer than that). Changing direction repositions every other child just past the
//! current key and rebuilds the tree.

#![allow(
    clippy::expect_used,
    clippy::indexing_slicing,
    reason = "child and node indices are below `heads.len()` and `tree.len()` (the tree has two slots per leaf, and leaves are padded to a power of two); the methods that require `valid()` (the `InternalIterator` contract) panic without it"
)]

use super::InternalIterator;
use crate::invariants::{self, invariant};
use crate::key;
use crate::Result;
use std::cmp::Ordering;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Bytes of a key a [`KeyHead`] holds.
const HEAD_BYTES: usize = 16;

/// What the tree knows of a child's current entry without asking the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct KeyHead {
    /// Whether the child is at an entry (padding leaves never are).
    valid: bool,
    /// The key's first 16 bytes, big-endian, zero-padded: if two heads' prefixes differ,
    /// so do the keys, the same way round (a zero pad sorts like the end of a shorter key,
    /// which is a prefix of the other).
    prefix: u128,
    /// The user key's length.
    len: usize,
    /// The entry's trailer.
    trailer: u64,
}

impl KeyHead {
    const INVALID: KeyHead = KeyHead { valid: false, prefix: 0, len: 0, trailer: 0 };

    fn of(child: &dyn InternalIterator) -> KeyHead {
        if !child.valid() {
            return KeyHead::INVALID;
        }
        let (user_key, trailer) = child.key();
        KeyHead::of_key(user_key, trailer)
    }

    /// The head of a child at (`user_key`, `trailer`).
    fn of_key(user_key: &[u8], trailer: u64) -> KeyHead {
        KeyHead { valid: true, prefix: head_prefix(user_key), len: user_key.len(), trailer }
    }

    /// The internal-key order of two heads' entries, `None` when the heads cannot tell
    /// (equal prefixes and a key longer than the prefix).
    fn compare(&self, other: &KeyHead) -> Option<Ordering> {
        match self.prefix.cmp(&other.prefix) {
            Ordering::Equal if self.len <= HEAD_BYTES && other.len <= HEAD_BYTES => {
                // Both keys are whole in their prefixes, equal up to zero padding: the
                // shorter is a prefix of the longer and sorts first; equal keys go by
                // trailer, descending.
                Some(self.len.cmp(&other.len).then_with(|| other.trailer.cmp(&self.trailer)))
            }
            Ordering::Equal => None,
            unequal => Some(unequal),
        }
    }
}

/// The first 16 bytes of `user_key`, big-endian, zero-padded: what a [`KeyHead`] holds of
/// it, and what [`MergingIter::current_user_key_is`] takes.
#[inline]
pub fn head_prefix(user_key: &[u8]) -> u128 {
    if let Some(head) = user_key.first_chunk::<HEAD_BYTES>() {
        return u128::from_be_bytes(*head); // no variable-length copy (a `memcpy` call)
    }
    let mut bytes = [0u8; HEAD_BYTES];
    let n = user_key.len().min(HEAD_BYTES);
    bytes[..n].copy_from_slice(&user_key[..n]);
    u128::from_be_bytes(bytes)
}

/// The merge of its children, in internal-key order.
pub struct MergingIter {
    children: Vec<Box<dyn InternalIterator>>,
    /// One per leaf: the children's heads, then [`KeyHead::INVALID`] padding up to a power
    /// of two.
    heads: Vec<KeyHead>,
    /// The winner tree: node 1 is the root, node `n`'s subtrees are `2n` and `2n + 1`, and
    /// leaf `i` is node `heads.len() + i`. Each node holds the leaf index of the best
    /// child below it in `direction` (ties go to the lower index); node 0 is unused.
    tree: Vec<usize>,
    /// The root's child if it is valid: the current entry's child (kept in step with the
    /// tree by `rebuild` and `replay`).
    current: Option<usize>,
    direction: Direction,
}

impl MergingIter {
    /// Merges `children`.
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        let leaves = children.len().next_power_of_two();
        let tree = (0..2 * leaves).map(|node| node.saturating_sub(leaves)).collect();
        MergingIter {
            children,
            heads: vec![KeyHead::INVALID; leaves],
            tree,
            current: None,
            direction: Direction::Forward,
        }
    }

    /// Whether leaf `a` comes before leaf `b` in `direction` (ties go to the lower index).
    #[inline]
    fn ahead(&self, a: usize, b: usize) -> bool {
        let (head_a, head_b) = (&self.heads[a], &self.heads[b]);
        // The common case: two valid children whose keys differ in their first 16 bytes.
        if head_a.valid && head_b.valid && head_a.prefix != head_b.prefix {
            return (head_a.prefix < head_b.prefix) == (self.direction == Direction::Forward);
        }
        self.ahead_by_whole_heads(a, b)
    }

    /// [`MergingIter::ahead`] past its fast path: invalid children, equal prefixes.
    fn ahead_by_whole_heads(&self, a: usize, b: usize) -> bool {
        let (head_a, head_b) = (&self.heads[a], &self.heads[b]);
        if !head_a.valid || !head_b.valid {
            return head_a.valid;
        }
        let order = head_a.compare(head_b).unwrap_or_else(|| {
            let ((x_key, x_trailer), (y_key, y_trailer)) = (self.children[a].key(), self.children[b].key());
            key::compare(x_key, x_trailer, y_key, y_trailer)
        });
        match order {
            Ordering::Equal => a < b,
            Ordering::Less => self.direction == Direction::Forward,
            Ordering::Greater => self.direction == Direction::Reverse,
        }
    }

    /// The better of node `node`'s two subtrees' winners.
    fn play(&self, node: usize) -> usize {
        let (left, right) = (self.tree[2 * node], self.tree[2 * node + 1]);
        if self.ahead(right, left) {
            right
        } else {
            left
        }
    }

    /// Re-reads every child's head and replays every match: after the children all moved.
    fn rebuild(&mut self, direction: Direction) {
        self.direction = direction;
        for (head, child) in self.heads.iter_mut().zip(&self.children) {
            *head = KeyHead::of(&**child);
        }
        for node in (1..self.heads.len()).rev() {
            self.tree[node] = self.play(node);
        }
        self.current = self.root_if_valid();
        self.check_tree();
    }

    /// Re-reads one child's head and replays the matches on its path to the root: after
    /// only that child moved.
    fn replay(&mut self, leaf: usize) {
        self.heads[leaf] = KeyHead::of(&*self.children[leaf]);
        self.replay_path(leaf);
    }

    /// Steps child `leaf` forward and replays its path with the key the step returned.
    fn step_forward(&mut self, leaf: usize) -> Result<()> {
        let (head, moved) = match self.children[leaf].next_key() {
            Ok(Some((user_key, trailer))) => (KeyHead::of_key(user_key, trailer), Ok(())),
            Ok(None) => (KeyHead::INVALID, Ok(())),
            // Whatever the child's state after a failed step, the head follows it.
            Err(error) => (KeyHead::of(&*self.children[leaf]), Err(error)),
        };
        self.heads[leaf] = head;
        self.replay_path(leaf);
        moved
    }

    /// Replays the matches on the path from `leaf` (whose head is current) to the root.
    fn replay_path(&mut self, leaf: usize) {
        let mut node = (self.heads.len() + leaf) / 2;
        while node >= 1 {
            self.tree[node] = self.play(node);
            node /= 2;
        }
        self.current = self.root_if_valid();
        self.check_tree();
    }

    /// With invariant checks on: the root holds the best valid child, and every head matches
    /// its child.
    fn check_tree(&self) {
        if !invariants::ENABLED {
            return;
        }
        for (i, child) in self.children.iter().enumerate() {
            invariant!(self.heads[i] == KeyHead::of(&**child), "merging: stale head for child {i}");
        }
        let root = self.root();
        invariant!(self.current == self.root_if_valid(), "merging: current child is not the root's");
        for i in 0..self.heads.len() {
            invariant!(!self.ahead(i, root), "merging: child {i} is ahead of the root's child {root}");
        }
    }

    /// The leaf at the root: the best child, if it is valid.
    fn root(&self) -> usize {
        // A single leaf is its own root (node 1 is then the leaf itself).
        self.tree[1]
    }

    /// The root's child, `None` when it is invalid (the merge is exhausted).
    fn root_if_valid(&self) -> Option<usize> {
        let best = self.root();
        self.heads[best].valid.then_some(best)
    }

    /// Whether the merge is at an entry whose user key is `user_key` (with
    /// `prefix == head_prefix(user_key)`). Answered from the current child's head, without
    /// calling the child, unless both keys are longer than the head and agree on it.
    #[inline]
    pub fn current_user_key_is(&self, user_key: &[u8], prefix: u128) -> bool {
        debug_assert_eq!(prefix, head_prefix(user_key), "prefix of another key");
        let Some(current) = self.current else {
            return false;
        };
        let head = &self.heads[current];
        if head.prefix != prefix || head.len != user_key.len() {
            return false;
        }
        head.len <= HEAD_BYTES || self.children[current].user_key() == user_key
    }

    /// The index of the current child, `None` when the merge is exhausted.
    #[inline]
    fn current(&self) -> Option<usize> {
        self.current
    }

    fn current_child(&self) -> &dyn InternalIterator {
        let index = self.current().expect("merging iterator used while invalid");
        &*self.children[index]
    }

    /// Puts every non-current child at the first entry after the current key.
    fn switch_to_forward(&mut self) -> Result<()> {
        let current = self.current().expect("merging iterator used while invalid");
        let (user_key, trailer) = (self.current_child().user_key().to_vec(), self.current_child().trailer());
        for (i, child) in self.children.iter_mut().enumerate() {
            if i == current {
                continue;
            }
            child.seek(&user_key, trailer)?;
            if child.valid()
                && key::compare(child.user_key(), child.trailer(), &user_key, trailer) == Ordering::Equal
            {
                child.next()?;
            }
        }
        Ok(())
    }

    /// Puts every non-current child at the last entry before the current key.
    fn switch_to_reverse(&mut self) -> Result<()> {
        let current = self.current().expect("merging iterator used while invalid");
        let (user_key, trailer) = (self.current_child().user_key().to_vec(), self.current_child().trailer());
        for (i, child) in self.children.iter_mut().enumerate() {
            if i == current {
                continue;
            }
            child.seek_for_prev(&user_key, trailer)?;
            if child.valid()
                && key::compare(child.user_key(), child.trailer(), &user_key, trailer) == Ordering::Equal
            {
                child.prev()?;
            }
        }
        Ok(())
    }
}

impl InternalIterator for MergingIter {
    fn valid(&self) -> bool {
        self.current().is_some()
    }
    // Every move rebuilds or replays the tree even when a child fails, so that the heads
    // never go stale whatever the caller does after an error.
    fn seek(&mut self, user_key: &[u8], trailer: u64) -> Result<()> {
        let moved = self.children.iter_mut().try_for_each(|child| child.seek(user_key, trailer));
        self.rebuild(Direction::Forward);
        moved
    }
    fn seek_for_prev(&mut self, user_key: &[u8], trailer: u64) -> Result<()> {
        let moved = self.children.iter_mut().try_for_each(|child| child.seek_for_prev(user_key, trailer));
        self.rebuild(Direction::Reverse);
        moved
    }
    fn seek_to_first(&mut self) -> Result<()> {
        let moved = self.children.iter_mut().try_for_each(|child| child.seek_to_first());
        self.rebuild(Direction::Forward);
        moved
    }
    fn seek_to_last(&mut self) -> Result<()> {
        let moved = self.children.iter_mut().try_for_each(|child| child.seek_to_last());
        self.rebuild(Direction::Reverse);
        moved
    }
    fn next(&mut self) -> Result<()> {
        let current = self.current().expect("next on an invalid merging iterator");
        if self.direction == Direction::Reverse {
            let moved = self.switch_to_forward().and_then(|()| self.children[current].next());
            // Every other child moved too.
            self.rebuild(Direction::Forward);
            moved
        } else {
            self.step_forward(current)
        }
    }
    fn prev(&mut self) -> Result<()> {
        let current = self.current().expect("prev on an invalid merging iterator");
        if self.direction == Direction::Forward {
            let moved = self.switch_to_reverse().and_then(|()| self.children[current].prev());
            // Every other child moved too.
            self.rebuild(Direction::Reverse);
            moved
        } else {
            let moved = self.children[current].prev();
            self.replay(current);
            moved
        }
    }
    fn user_key(&self) -> &[u8] {
        self.current_child().user_key()
    }
    fn trailer(&self) -> u64 {
        self.current_child().trailer()
    }
    fn value(&self) -> &[u8] {
        self.current_child().value()
    }
    fn key(&self) -> (&[u8], u64) {
        self.current_child().key()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampkv_testkit::SplitMix64;

    /// A sorted vector of internal keys as a child.
    struct VecIter {
        entries: Vec<(Vec<u8>, u64)>,
        /// Position; `entries.len()` (or any out-of-range value) when invalid.
        pos: usize,
    }

    impl VecIter {
        fn invalid(&self) -> usize {
            self.entries.len()
        }
    }

    impl InternalIterator for VecIter {
        fn valid(&self) -> bool {
            self.pos < self.entries.len()
        }
        fn seek(&mut self, user_key: &[u8], trailer: u64) -> Result<()> {
            self.pos = self
                .entries
                .partition_point(|(k, t)| key::compare(k, *t, user_key, trailer) == Ordering::Less);
            Ok(())
        }
        fn seek_for_prev(&mut self, user_key: &[u8], trailer: u64) -> Result<()> {
            let n = self
                .entries
                .partition_point(|(k, t)| key::compare(k, *t, user_key, trailer) != Ordering::Greater);
            self.pos = n.checked_sub(1).unwrap_or(self.invalid());
            Ok(())
        }
        fn seek_to_first(&mut self) -> Result<()> {
            self.pos = 0;
            Ok(())
        }
        fn seek_to_last(&mut self) -> Result<()> {
            self.pos = self.entries.len().checked_sub(1).unwrap_or(self.invalid());
            Ok(())
        }
        fn next(&mut self) -> Result<()> {
            self.pos += 1;
            Ok(())
        }
        fn prev(&mut self) -> Result<()> {
            self.pos = self.pos.checked_sub(1).unwrap_or(self.invalid());
            Ok(())
        }
        fn user_key(&self) -> &[u8] {
            &self.entries[self.pos].0
        }
        fn trailer(&self) -> u64 {
            self.entries[self.pos].1
        }
        fn value(&self) -> &[u8] {
            &[]
        }
    }

    /// A random key over `letters` letters: a single byte, or one followed by a zero (equal
    /// to it in a [`KeyHead`] prefix), or 16 bytes (whole in the prefix), or 18 bytes
    /// sharing their first 17 (the heads cannot tell them apart).
    fn random_key(rng: &mut SplitMix64, letters: u64) -> Vec<u8> {
        let letter = b'a' + rng.below(letters) as u8;
        match rng.below(4) {
            0 => vec![letter],
            1 => vec![letter, 0],
            2 => [&[b'q'; 15][..], &[letter]].concat(),
            _ => [&[b'p'; 17][..], &[letter]].concat(),
        }
    }

    /// Whenever two heads decide an order, it is the order of the internal keys; they
    /// leave it open only for keys longer than the prefix.
    #[test]
    fn heads_order_like_internal_keys() {
        let mut rng = SplitMix64::new(11);
        let head = |entry: &(Vec<u8>, u64)| KeyHead::of(&VecIter { entries: vec![entry.clone()], pos: 0 });
        let mut decided = 0;
        for _ in 0..20_000 {
            let a = (random_key(&mut rng, 3), rng.below(3));
            let b = (random_key(&mut rng, 3), rng.below(3));
            match head(&a).compare(&head(&b)) {
                Some(order) => {
                    assert_eq!(order, key::compare(&a.0, a.1, &b.0, b.1), "{a:?} {b:?}");
                    decided += 1;
                }
                None => assert!(a.0.len() > HEAD_BYTES || b.0.len() > HEAD_BYTES, "{a:?} {b:?}"),
            }
        }
        assert!(decided > 10_000, "heads decided only {decided} of 20000");
    }

    /// Random moves in both directions over 1–9 children (runs from one child, children
    /// exhausted at either end, direction switches) agree with the sorted union.
    #[test]
    fn random_moves_match_the_sorted_union() {
        let mut rng = SplitMix64::new(7);
        for round in 0..400 {
            let mut all: Vec<(Vec<u8>, u64)> = Vec::new();
            let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
            for _ in 0..1 + rng.below(9) {
                let mut entries: Vec<(Vec<u8>, u64)> = Vec::new();
                for _ in 0..rng.below(if round % 5 == 0 { 3 } else { 30 }) {
                    // Few distinct user keys, so children interleave and share user keys.
                    let entry = (random_key(&mut rng, 12), rng.below(1000));
                    if !all.contains(&entry) {
                        all.push(entry.clone());
                        entries.push(entry);
                    }
                }
                entries.sort_by(|a, b| key::compare(&a.0, a.1, &b.0, b.1));
                let pos = entries.len();
                children.push(Box::new(VecIter { entries, pos }));
            }
            all.sort_by(|a, b| key::compare(&a.0, a.1, &b.0, b.1));
            let mut merged = MergingIter::new(children);
            let mut model: Option<usize> = None;
            for _ in 0..300 {
                match rng.below(10) {
                    0 => {
                        merged.seek_to_first().unwrap();
                        model = (!all.is_empty()).then_some(0);
                    }
                    1 => {
                        merged.seek_to_last().unwrap();
                        model = all.len().checked_sub(1);
                    }
                    2 => {
                        let (k, t) = (random_key(&mut rng, 13), rng.below(1000));
                        merged.seek(&k, t).unwrap();
                        let n = all.partition_point(|(a, b)| key::compare(a, *b, &k, t) == Ordering::Less);
                        model = (n < all.len()).then_some(n);
                    }
                    3 => {
                        let (k, t) = (random_key(&mut rng, 13), rng.below(1000));
                        merged.seek_for_prev(&k, t).unwrap();
                        let n = all.partition_point(|(a, b)| key::compare(a, *b, &k, t) != Ordering::Greater);
                        model = n.checked_sub(1);
                    }
                    4..=6 => {
                        if let Some(m) = model {
                            merged.next().unwrap();
                            model = (m + 1 < all.len()).then_some(m + 1);
                        }
                    }
                    _ => {
                        if let Some(m) = model {
                            merged.prev().unwrap();
                            model = m.checked_sub(1);
                        }
                    }
                }
                assert_eq!(merged.valid(), model.is_some(), "round {round}");
                if let Some(m) = model {
                    assert_eq!(merged.key(), (all[m].0.as_slice(), all[m].1), "round {round}");
                    assert_eq!((merged.user_key(), merged.trailer()), merged.key());
                }
                // The head-based key test agrees with comparing keys, for the current key,
                // its neighbours' keys (often sharing a head) and a random one.
                let current = model.map(|m| all[m].0.clone());
                let neighbours =
                    model.into_iter().flat_map(|m| [m.saturating_sub(1), (m + 1).min(all.len() - 1)]);
                let mut probes: Vec<Vec<u8>> = neighbours.map(|i| all[i].0.clone()).collect();
                probes.extend(current.clone());
                probes.push(random_key(&mut rng, 13));
                for probe in &probes {
                    let expected = current.as_ref() == Some(probe);
                    assert_eq!(merged.current_user_key_is(probe, head_prefix(probe)), expected, "{probe:?}");
                }
            }
        }
    }
}
