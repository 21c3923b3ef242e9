//! Merges several internal iterators into one ordered stream.
//!
//! Children are few (memtables, level-0 files, one per deeper level). The merge keeps the
//! current (best) child and the runner-up (the best of the others). When the current
//! child steps, one comparison with the runner-up usually settles the next entry: the
//! current child stays ahead of it, and so of every other child. Only when it falls
//! behind does the runner-up become current and the others get compared for a new
//! runner-up (children − 2 comparisons). A scan that mostly reads one child (a compacted
//! database, a large bottom level) pays one comparison an entry; one that alternates
//! between two children about two.
//!
//! Each comparison reads a [`KeyHead`] the merge keeps per child (the first 16 bytes of
//! its key as one number, the key's length and trailer), refreshed only when that child
//! moves, so choosing the next child calls no child: a child is asked for its full key
//! only when two heads cannot tell the keys apart (keys sharing their first 16 bytes and
//! longer than that). Changing direction repositions every other child just past the
//! current key and chooses anew.

#![allow(
    clippy::expect_used,
    clippy::indexing_slicing,
    reason = "child indices are below `heads.len()`, which is `children.len()`; the methods that require `valid()` (the `InternalIterator` contract) panic without it"
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
pub(crate) const HEAD_BYTES: usize = 16;

/// What the merge knows of a child's current entry without asking the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct KeyHead {
    /// The key's first 8 bytes, big-endian, zero-padded: with `prefix_lo`, the key's
    /// prefix. If two heads' prefixes differ, so do the keys, the same way round (a zero
    /// pad sorts like the end of a shorter key, which is a prefix of the other). Kept as
    /// two words, compared one at a time: a 16-byte load of a head just written as two
    /// 8-byte stores would wait for the stores to reach the cache.
    prefix_hi: u64,
    /// The key's next 8 bytes, big-endian, zero-padded.
    prefix_lo: u64,
    /// The entry's trailer.
    trailer: u64,
    /// The user key's length, saturated at `u32::MAX` (so that a head takes 32 bytes; the
    /// length decides an order only for keys of at most [`HEAD_BYTES`]).
    len: u32,
    /// Whether the child is at an entry.
    valid: bool,
}

/// A key length as a [`KeyHead`] holds it.
#[inline]
fn head_len(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// Whether a key of `len` bytes lies whole in its head.
#[inline]
fn whole_in_head(len: u32) -> bool {
    len as usize <= HEAD_BYTES
}

impl KeyHead {
    /// The head of an exhausted child in `direction`. Its prefix is
    /// the one that sorts last that way round, so that a valid head with any other
    /// prefix wins by prefix alone (see [`MergingIter::ahead`]).
    #[inline]
    fn invalid(direction: Direction) -> KeyHead {
        let prefix = match direction {
            Direction::Forward => u128::MAX,
            Direction::Reverse => 0,
        };
        KeyHead::new(prefix, 0, 0, false)
    }

    /// A head of the given parts.
    #[inline(always)]
    fn new(prefix: u128, trailer: u64, len: u32, valid: bool) -> KeyHead {
        KeyHead { prefix_hi: (prefix >> 64) as u64, prefix_lo: prefix as u64, trailer, len, valid }
    }

    /// The key's first 16 bytes as [`head_prefix`] gives them.
    #[inline(always)]
    fn prefix(&self) -> u128 {
        (u128::from(self.prefix_hi) << 64) | u128::from(self.prefix_lo)
    }

    fn of(child: &dyn InternalIterator, direction: Direction) -> KeyHead {
        if !child.valid() {
            return KeyHead::invalid(direction);
        }
        let (user_key, trailer) = child.key();
        KeyHead::of_key(user_key, trailer)
    }

    /// The head of a child at (`user_key`, `trailer`).
    fn of_key(user_key: &[u8], trailer: u64) -> KeyHead {
        KeyHead::new(head_prefix(user_key), trailer, head_len(user_key.len()), true)
    }

    /// The internal-key order of two heads' entries, `None` when the heads cannot tell
    /// (equal prefixes and a key longer than the prefix).
    fn compare(&self, other: &KeyHead) -> Option<Ordering> {
        match self.prefix().cmp(&other.prefix()) {
            Ordering::Equal if whole_in_head(self.len) && whole_in_head(other.len) => {
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
pub(crate) fn head_prefix(user_key: &[u8]) -> u128 {
    if let Some(head) = user_key.first_chunk::<HEAD_BYTES>() {
        return u128::from_be_bytes(*head); // no variable-length copy (a `memcpy` call)
    }
    let mut bytes = [0u8; HEAD_BYTES];
    let n = user_key.len().min(HEAD_BYTES);
    bytes[..n].copy_from_slice(&user_key[..n]);
    u128::from_be_bytes(bytes)
}

/// The merge of its children, in internal-key order.
pub(crate) struct MergingIter {
    children: Vec<Box<dyn InternalIterator>>,
    /// One per child: what the merge knows of its current entry.
    heads: Vec<KeyHead>,
    /// The best child in `direction` if it is valid: the current entry's child.
    current: Option<usize>,
    /// The best child but one (valid or not; ties go to the lower index), `None` with
    /// fewer than two children. While the current child stays ahead of it, it stays ahead
    /// of every other child.
    runner_up: Option<usize>,
    direction: Direction,
}

impl MergingIter {
    /// Merges `children`.
    pub(crate) fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIter {
            heads: vec![KeyHead::invalid(Direction::Forward); children.len()],
            children,
            current: None,
            runner_up: None,
            direction: Direction::Forward,
        }
    }

    /// Whether child `a` comes before child `b` in `direction` (ties go to the lower
    /// index). An exhausted child comes before none.
    #[inline(always)]
    fn ahead(&self, a: usize, b: usize) -> bool {
        self.ahead_with_head(&self.heads[a], a, b)
    }

    /// [`MergingIter::ahead`] with child `a`'s head given (`head_a` equals `heads[a]`).
    /// A head just computed is compared as it is, not read back from `heads`: reading back
    /// 16 bytes just written as smaller stores stalls the load until they reach the cache.
    #[inline(always)]
    fn ahead_with_head(&self, head_a: &KeyHead, a: usize, b: usize) -> bool {
        let head_b = &self.heads[b];
        // The common case: keys that differ in their first 16 bytes, or a valid child
        // against an exhausted one (whose prefix sorts after every other prefix).
        let forward = self.direction == Direction::Forward;
        if head_a.prefix_hi != head_b.prefix_hi {
            return (head_a.prefix_hi < head_b.prefix_hi) == forward;
        }
        if head_a.prefix_lo != head_b.prefix_lo {
            return (head_a.prefix_lo < head_b.prefix_lo) == forward;
        }
        self.ahead_by_whole_heads(a, b)
    }

    /// [`MergingIter::ahead`] past its fast path: equal prefixes (of two valid children, or
    /// an invalid one and one whose prefix is the invalid one's).
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

    /// The best child other than `except`, `None` if there is no other.
    fn best_except(&self, except: Option<usize>) -> Option<usize> {
        let mut best: Option<usize> = None;
        for i in (0..self.heads.len()).filter(|&i| Some(i) != except) {
            if best.is_none_or(|b| self.ahead(i, b)) {
                best = Some(i);
            }
        }
        best
    }

    /// Re-reads every child's head and chooses the current child and the runner-up anew:
    /// after the children all moved.
    fn rebuild(&mut self, direction: Direction) {
        self.direction = direction;
        for (head, child) in self.heads.iter_mut().zip(&self.children) {
            *head = KeyHead::of(&**child, direction);
        }
        let best = self.best_except(None);
        self.current = best.filter(|&b| self.heads[b].valid);
        self.runner_up = self.best_except(best);
        self.check_choice();
    }

    /// Re-reads the current child's head after it moved, and chooses anew.
    fn replay(&mut self, leaf: usize) {
        let head = KeyHead::of(&*self.children[leaf], self.direction);
        self.choose_after_move(leaf, head);
    }

    /// Steps the current child (`leaf`) forward and chooses anew with the key the step
    /// returned.
    #[inline]
    fn step_forward(&mut self, leaf: usize) -> Result<()> {
        // Each arm returns its own result: a step that worked writes `Ok(())` alone, rather
        // than copying a whole `Result` (the size of an error) through the stack.
        match self.children[leaf].next_key() {
            Ok(Some((user_key, trailer))) => {
                let head = KeyHead::of_key(user_key, trailer);
                self.choose_after_move(leaf, head);
                Ok(())
            }
            Ok(None) => {
                self.choose_after_move(leaf, KeyHead::invalid(Direction::Forward));
                Ok(())
            }
            Err(error) => {
                // Whatever the child's state after a failed step, the head follows it.
                let head = KeyHead::of(&*self.children[leaf], Direction::Forward);
                self.choose_after_move(leaf, head);
                Err(error)
            }
        }
    }

    /// Records `head` as the current child `leaf`'s after it (alone) moved, and chooses
    /// the current child. If `leaf` is still ahead of the runner-up, it stays current: one
    /// comparison. Otherwise the runner-up, ahead of it and of every other child, becomes
    /// current, and the best of the rest (the moved child included) the runner-up.
    #[inline(always)]
    fn choose_after_move(&mut self, leaf: usize, head: KeyHead) {
        self.heads[leaf] = head;
        match self.runner_up {
            None => self.current = head.valid.then_some(leaf),
            Some(runner_up) if self.ahead_with_head(&head, leaf, runner_up) => {} // `leaf` is valid: it is ahead
            Some(runner_up) => self.runner_up_takes_over(runner_up),
        }
        self.check_choice();
    }

    /// Makes the runner-up current (it is ahead of every child) and chooses the best of
    /// the others as the runner-up.
    fn runner_up_takes_over(&mut self, runner_up: usize) {
        self.current = self.heads[runner_up].valid.then_some(runner_up);
        self.runner_up = self.best_except(Some(runner_up));
    }

    /// With invariant checks on: every head matches its child, the current child is the
    /// best valid child, and the runner-up the best of the others.
    fn check_choice(&self) {
        if !invariants::ENABLED {
            return;
        }
        for (i, child) in self.children.iter().enumerate() {
            invariant!(
                self.heads[i] == KeyHead::of(&**child, self.direction),
                "merging: stale head for child {i}"
            );
        }
        let Some(current) = self.current else {
            let any_valid = self.heads.iter().any(|head| head.valid);
            invariant!(!any_valid, "merging: no current child, but a valid one");
            return;
        };
        invariant!(self.heads[current].valid, "merging: current child {current} is exhausted");
        for i in 0..self.heads.len() {
            invariant!(!self.ahead(i, current), "merging: child {i} is ahead of the current child {current}");
        }
        invariant!(
            self.runner_up == self.best_except(Some(current)),
            "merging: runner-up is not the best other child"
        );
    }

    /// Whether the merge is at an entry whose user key is `user_key` (with
    /// `prefix == head_prefix(user_key)`). Answered from the current child's head, without
    /// calling the child, unless both keys are longer than the head and agree on it.
    #[inline]
    pub(crate) fn current_user_key_is(&self, user_key: &[u8], prefix: u128) -> bool {
        debug_assert_eq!(prefix, head_prefix(user_key), "prefix of another key");
        let Some(current) = self.current else {
            return false;
        };
        let head = &self.heads[current];
        if head.prefix() != prefix || head.len != head_len(user_key.len()) {
            return false;
        }
        whole_in_head(head.len) || self.children[current].user_key() == user_key
    }

    /// What the merge holds of its current entry without calling the child: the user
    /// key's first 16 bytes as [`head_prefix`] gives them, its length (saturated at
    /// `u32::MAX`), and the trailer;
    /// `None` when the merge is exhausted.
    #[inline]
    pub(crate) fn current_head(&self) -> Option<(u128, usize, u64)> {
        let head = &self.heads[self.current?];
        Some((head.prefix(), head.len as usize, head.trailer))
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
    // Every move chooses the current child anew even when a child fails, so that the heads
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
        let head = |entry: &(Vec<u8>, u64)| {
            KeyHead::of(&VecIter { entries: vec![entry.clone()], pos: 0 }, Direction::Forward)
        };
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
