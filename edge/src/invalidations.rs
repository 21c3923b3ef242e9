//! A short history of which keys changed, so that an upstream answer fetched before a change
//! is not cached after it.
//!
//! A fill notes the epoch when it starts. Every invalidation (a write through this edge, a
//! pushed change) takes the next epoch and is remembered with its key. When the fill's answer
//! arrives it is cached only if no invalidation since its start touches its range; once the
//! history no longer reaches back that far, the answer is served but not cached.

use crate::cache::RangeKey;
use std::collections::VecDeque;

/// The recent invalidations, oldest first.
#[derive(Debug)]
pub struct Invalidations {
    epoch: u64,
    /// Each change with its epoch: a key, or `None` for "every multi-key range".
    recent: VecDeque<(u64, Option<Vec<u8>>)>,
    capacity: usize,
}

impl Invalidations {
    /// An empty history remembering the last `capacity` invalidations.
    pub fn new(capacity: usize) -> Invalidations {
        Invalidations { epoch: 0, recent: VecDeque::new(), capacity: capacity.max(1) }
    }

    /// The current epoch: what a fill starting now notes.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Records that encoded `key` changed; returns the new epoch.
    pub fn record(&mut self, key: &[u8]) -> u64 {
        self.push(Some(key.to_vec()))
    }

    /// Records a change that may touch any multi-key range (a key not known in advance, such
    /// as a versionstamped one); returns the new epoch.
    pub fn record_all(&mut self) -> u64 {
        self.push(None)
    }

    fn push(&mut self, change: Option<Vec<u8>>) -> u64 {
        self.epoch += 1;
        if self.recent.len() == self.capacity {
            self.recent.pop_front();
        }
        self.recent.push_back((self.epoch, change));
        self.epoch
    }

    /// Whether an answer for `range` fetched from `since` on may be stale: a recorded change
    /// after `since` touches it, or the history no longer reaches back to `since`.
    pub fn touched_since(&self, since: u64, range: &RangeKey) -> bool {
        if since == self.epoch {
            return false;
        }
        let oldest_kept = self.recent.front().map_or(self.epoch + 1, |(epoch, _)| *epoch);
        if since + 1 < oldest_kept {
            return true;
        }
        self.recent.iter().rev().take_while(|(epoch, _)| *epoch > since).any(|(_, change)| match change {
            Some(key) => range.covers(key),
            None => matches!(range, RangeKey::Range { .. }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_after_the_start_touches_only_the_ranges_around_it() {
        let mut history = Invalidations::new(4);
        let start = history.epoch();
        assert!(!history.touched_since(start, &RangeKey::Point(b"a".to_vec())));
        history.record(b"a");
        assert!(history.touched_since(start, &RangeKey::Point(b"a".to_vec())));
        assert!(!history.touched_since(start, &RangeKey::Point(b"b".to_vec())));
        assert!(history.touched_since(start, &RangeKey::of(b"0", b"z", 5, false)));
        assert!(!history.touched_since(history.epoch(), &RangeKey::Point(b"a".to_vec())));
        let before_wildcard = history.epoch();
        history.record_all();
        assert!(history.touched_since(before_wildcard, &RangeKey::of(b"p", b"q", 5, false)));
        assert!(!history.touched_since(before_wildcard, &RangeKey::Point(b"p".to_vec())));
    }

    #[test]
    fn a_fill_older_than_the_history_counts_as_touched() {
        let mut history = Invalidations::new(2);
        let start = history.epoch();
        history.record(b"x");
        history.record(b"y");
        history.record(b"z");
        // "x" fell out of the history: the fill cannot know, so it must not be cached.
        assert!(history.touched_since(start, &RangeKey::Point(b"q".to_vec())));
        let later = history.epoch() - 1;
        assert!(!history.touched_since(later, &RangeKey::Point(b"q".to_vec())));
        assert!(history.touched_since(later, &RangeKey::Point(b"z".to_vec())));
    }
}
