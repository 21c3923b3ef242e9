//! Which versions a flush or compaction may drop.
//!
//! For each user key, entries arrive newest first. A version is dropped when a newer
//! version of the key is visible to every reader (its sequence number is at or below the
//! smallest live snapshot). A tombstone — or a value expired at the collection time — that
//! every reader sees is dropped too when no deeper level can hold an older version of the
//! key; otherwise an expired value is rewritten as a tombstone, which shadows the same
//! older versions with fewer bytes. The collection time is the earliest read time of any
//! live snapshot, so no reader can still see the expired value as live.

use crate::key::{self, EntryKind};

/// The outcome for one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Write it out unchanged.
    Keep,
    /// Write a tombstone with the same sequence number instead.
    KeepAsTombstone,
    /// Leave it out.
    Drop,
}

/// The horizon of what readers can still see.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GcPoint {
    /// Smallest sequence number any reader can read at.
    pub smallest_snapshot: u64,
    /// Earliest time any reader evaluates expiry at.
    pub time_ms: u64,
}

/// Stateful filter over one sorted stream of entries.
pub(crate) struct GcFilter {
    point: GcPoint,
    current_key: Vec<u8>,
    has_current: bool,
    last_seq_for_key: u64,
}

impl GcFilter {
    pub(super) fn new(point: GcPoint) -> Self {
        GcFilter { point, current_key: Vec::new(), has_current: false, last_seq_for_key: u64::MAX }
    }

    /// Decides for the next entry. `is_base_level` answers whether no deeper level can hold
    /// the key; it is only asked about droppable tombstones.
    pub(super) fn decide(
        &mut self,
        user_key: &[u8],
        trailer: u64,
        value: &[u8],
        is_base_level: impl FnOnce(&[u8]) -> bool,
    ) -> Decision {
        if !self.has_current || self.current_key != user_key {
            self.current_key.clear();
            self.current_key.extend_from_slice(user_key);
            self.has_current = true;
            self.last_seq_for_key = u64::MAX;
        }
        let seq = key::trailer_seq(trailer);
        let decision = if self.last_seq_for_key <= self.point.smallest_snapshot {
            Decision::Drop
        } else {
            let kind = EntryKind::from_byte(key::trailer_kind(trailer));
            let expired = kind == Some(EntryKind::PutExpiring)
                && key::split_expiring(value).is_some_and(|(at, _)| at <= self.point.time_ms);
            let tombstone = kind == Some(EntryKind::Delete) || expired;
            if tombstone && seq <= self.point.smallest_snapshot && is_base_level(user_key) {
                Decision::Drop
            } else if expired {
                Decision::KeepAsTombstone
            } else {
                Decision::Keep
            }
        };
        self.last_seq_for_key = seq;
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::trailer;

    fn expiring(at: u64) -> Vec<u8> {
        let mut v = at.to_le_bytes().to_vec();
        v.extend_from_slice(b"x");
        v
    }

    #[test]
    fn shadowed_versions_go_once_a_newer_one_is_visible_to_everyone() {
        let mut f = GcFilter::new(GcPoint { smallest_snapshot: 10, time_ms: 0 });
        let put = |s| trailer(s, EntryKind::Put);
        assert_eq!(f.decide(b"a", put(12), b"", |_| true), Decision::Keep);
        // Snapshot 10 still needs the newest version at or below 10.
        assert_eq!(f.decide(b"a", put(9), b"", |_| true), Decision::Keep);
        assert_eq!(f.decide(b"a", put(5), b"", |_| true), Decision::Drop);
        assert_eq!(f.decide(b"b", put(4), b"", |_| true), Decision::Keep);
    }

    #[test]
    fn tombstones_drop_only_at_the_base_level_and_below_every_snapshot() {
        let mut f = GcFilter::new(GcPoint { smallest_snapshot: 10, time_ms: 0 });
        let del = |s| trailer(s, EntryKind::Delete);
        assert_eq!(f.decide(b"a", del(8), b"", |_| false), Decision::Keep);
        assert_eq!(f.decide(b"b", del(8), b"", |_| true), Decision::Drop);
        assert_eq!(f.decide(b"b", trailer(3, EntryKind::Put), b"", |_| true), Decision::Drop);
        assert_eq!(f.decide(b"c", del(11), b"", |_| true), Decision::Keep);
    }

    #[test]
    fn expired_values_become_tombstones_or_vanish() {
        let mut f = GcFilter::new(GcPoint { smallest_snapshot: 10, time_ms: 1000 });
        let exp = |s| trailer(s, EntryKind::PutExpiring);
        assert_eq!(f.decide(b"a", exp(5), &expiring(999), |_| false), Decision::KeepAsTombstone);
        assert_eq!(f.decide(b"b", exp(5), &expiring(999), |_| true), Decision::Drop);
        assert_eq!(f.decide(b"c", exp(5), &expiring(1001), |_| true), Decision::Keep);
        assert_eq!(f.decide(b"d", exp(50), &expiring(1), |_| true), Decision::KeepAsTombstone);
    }
}
