//! Merges several internal iterators into one ordered stream.
//!
//! Children are few (memtables, level-0 files, one per deeper level), so the smallest or
//! largest child is found by a linear scan, as LevelDB's MergingIterator does. Changing
//! direction repositions every other child just past the current key.

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
    direction: Direction,
}

impl MergingIter {
    /// Merges `children`.
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIter { children, current: None, direction: Direction::Forward }
    }

    fn child_cmp(&self, a: usize, b: usize) -> Ordering {
        let (x, y) = (&self.children[a], &self.children[b]);
        key::compare(x.user_key(), x.trailer(), y.user_key(), y.trailer())
    }

    fn find_smallest(&mut self) {
        let mut best: Option<usize> = None;
        for i in 0..self.children.len() {
            if self.children[i].valid() && best.is_none_or(|b| self.child_cmp(i, b) == Ordering::Less) {
                best = Some(i);
            }
        }
        self.current = best;
    }

    fn find_largest(&mut self) {
        let mut best: Option<usize> = None;
        for i in 0..self.children.len() {
            if self.children[i].valid() && best.is_none_or(|b| self.child_cmp(i, b) == Ordering::Greater) {
                best = Some(i);
            }
        }
        self.current = best;
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
        if self.direction == Direction::Reverse {
            self.switch_to_forward()?;
        }
        let current = self.current.expect("next on an invalid merging iterator");
        self.children[current].next()?;
        self.find_smallest();
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        if self.direction == Direction::Forward {
            self.switch_to_reverse()?;
        }
        let current = self.current.expect("prev on an invalid merging iterator");
        self.children[current].prev()?;
        self.find_largest();
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
}
