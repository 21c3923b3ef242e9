//! Merges several internal iterators into one ordered stream.
//!
//! Children are few (memtables, level-0 files, one per deeper level), so the smallest or
//! largest child is found by a linear scan, as LevelDB's MergingIterator does. The scan
//! also remembers the runner-up (the best of the other children): a step moves only the
//! current child, so while it stays ahead of the runner-up, one comparison (none if it is
//! the only valid child) decides the next position, and a long run from one child costs
//! no scan. Changing direction repositions every other child just past the current key.

#![allow(
    clippy::expect_used,
    clippy::indexing_slicing,
    reason = "child indices are below `children.len()` (loop bounds, or `current`, which only the `find_*` scans set); the methods that require `valid()` (the `InternalIterator` contract) panic without it"
)]

use super::InternalIterator;
use crate::key;
use crate::Result;
use std::cmp::Ordering;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// The merge of its children, in internal-key order.
pub struct MergingIter {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
    /// The best valid child other than `current` in `direction` (`None`: there is none),
    /// as of the last scan; only `current` has moved since.
    runner_up: Option<usize>,
    direction: Direction,
}

impl MergingIter {
    /// Merges `children`.
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIter { children, current: None, runner_up: None, direction: Direction::Forward }
    }

    fn child_cmp(&self, a: usize, b: usize) -> Ordering {
        let ((x_key, x_trailer), (y_key, y_trailer)) = (self.children[a].key(), self.children[b].key());
        key::compare(x_key, x_trailer, y_key, y_trailer)
    }

    /// The ordering of a key that comes first in `direction`.
    fn wanted(&self) -> Ordering {
        match self.direction {
            Direction::Forward => Ordering::Less,
            Direction::Reverse => Ordering::Greater,
        }
    }

    /// Whether child `a` comes before child `b` in `direction` (ties go to the lower
    /// index, which the scans below visit first).
    fn ahead(&self, a: usize, b: usize) -> bool {
        self.child_cmp(a, b) == self.wanted()
    }

    /// Finds the first valid child in `direction` (the smallest going forward, the largest
    /// in reverse), and the runner-up. Reads each child's key once.
    fn find_best(&mut self) {
        let wanted = self.wanted();
        let mut best: Option<(usize, (&[u8], u64))> = None;
        let mut second: Option<(usize, (&[u8], u64))> = None;
        for (i, child) in self.children.iter().enumerate() {
            if !child.valid() {
                continue;
            }
            let (user_key, trailer) = child.key();
            let ahead_of = |other: &(usize, (&[u8], u64))| {
                let (_, (other_key, other_trailer)) = *other;
                key::compare(user_key, trailer, other_key, other_trailer) == wanted
            };
            match &best {
                Some(b) if !ahead_of(b) => {
                    if second.as_ref().is_none_or(ahead_of) {
                        second = Some((i, (user_key, trailer)));
                    }
                }
                _ => {
                    second = best;
                    best = Some((i, (user_key, trailer)));
                }
            }
        }
        self.current = best.map(|(i, _)| i);
        self.runner_up = second.map(|(i, _)| i);
    }

    /// After the current child moved: the new best child. The other children have not
    /// moved, so the runner-up is still the best of them; the current child stays best
    /// while it is strictly ahead of it (a tie goes to the lower index, so rescan).
    fn after_step(&mut self, moved: usize) {
        if self.children[moved].valid() {
            match self.runner_up {
                None => return,
                Some(r) if self.ahead(moved, r) => return,
                Some(_) => {}
            }
        }
        self.find_best();
    }

    fn find_smallest(&mut self) {
        self.direction = Direction::Forward;
        self.find_best();
    }

    fn find_largest(&mut self) {
        self.direction = Direction::Reverse;
        self.find_best();
    }

    fn current_child(&self) -> &dyn InternalIterator {
        let index = self.current.expect("merging iterator used while invalid");
        &*self.children[index]
    }

    /// Puts every non-current child at the first entry after the current key.
    fn switch_to_forward(&mut self) -> Result<()> {
        let current = self.current.expect("merging iterator used while invalid");
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
        self.direction = Direction::Forward;
        Ok(())
    }

    /// Puts every non-current child at the last entry before the current key.
    fn switch_to_reverse(&mut self) -> Result<()> {
        let current = self.current.expect("merging iterator used while invalid");
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
        self.direction = Direction::Reverse;
        Ok(())
    }
}

impl InternalIterator for MergingIter {
    fn valid(&self) -> bool {
        self.current.is_some()
    }
    fn seek(&mut self, user_key: &[u8], trailer: u64) -> Result<()> {
        for child in &mut self.children {
            child.seek(user_key, trailer)?;
        }
        self.direction = Direction::Forward;
        self.find_smallest();
        Ok(())
    }
    fn seek_for_prev(&mut self, user_key: &[u8], trailer: u64) -> Result<()> {
        for child in &mut self.children {
            child.seek_for_prev(user_key, trailer)?;
        }
        self.direction = Direction::Reverse;
        self.find_largest();
        Ok(())
    }
    fn seek_to_first(&mut self) -> Result<()> {
        for child in &mut self.children {
            child.seek_to_first()?;
        }
        self.direction = Direction::Forward;
        self.find_smallest();
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        for child in &mut self.children {
            child.seek_to_last()?;
        }
        self.direction = Direction::Reverse;
        self.find_largest();
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        let switched = self.direction == Direction::Reverse;
        if switched {
            self.switch_to_forward()?;
        }
        let current = self.current.expect("next on an invalid merging iterator");
        self.children[current].next()?;
        if switched {
            // Every other child moved: the runner-up is stale.
            self.find_best();
        } else {
            self.after_step(current);
        }
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        let switched = self.direction == Direction::Forward;
        if switched {
            self.switch_to_reverse()?;
        }
        let current = self.current.expect("prev on an invalid merging iterator");
        self.children[current].prev()?;
        if switched {
            // Every other child moved: the runner-up is stale.
            self.find_best();
        } else {
            self.after_step(current);
        }
        Ok(())
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

    /// Random moves in both directions over 1–4 children (runs from one child, children
    /// exhausted at either end, direction switches) agree with the sorted union.
    #[test]
    fn random_moves_match_the_sorted_union() {
        let mut rng = SplitMix64::new(7);
        for round in 0..200 {
            let mut all: Vec<(Vec<u8>, u64)> = Vec::new();
            let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
            for _ in 0..1 + rng.below(4) {
                let mut entries: Vec<(Vec<u8>, u64)> = Vec::new();
                for _ in 0..rng.below(if round % 5 == 0 { 3 } else { 30 }) {
                    // Few distinct user keys, so children interleave and share user keys.
                    let entry = (vec![b'a' + rng.below(12) as u8], rng.below(1000));
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
                        let (k, t) = (vec![b'a' + rng.below(13) as u8], rng.below(1000));
                        merged.seek(&k, t).unwrap();
                        let n = all.partition_point(|(a, b)| key::compare(a, *b, &k, t) == Ordering::Less);
                        model = (n < all.len()).then_some(n);
                    }
                    3 => {
                        let (k, t) = (vec![b'a' + rng.below(13) as u8], rng.below(1000));
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
            }
        }
    }
}
