//! Internal keys: a user key plus a trailer `seq << 8 | kind`.
//!
//! Entries are ordered by user key ascending (bytewise), then trailer descending, so the
//! newest version of a key comes first. One commit (a [`crate::WriteBatch`]) has one
//! sequence number shared by all its entries.

use std::cmp::Ordering;

/// Largest usable sequence number (56 bits).
pub(crate) const MAX_SEQUENCE: u64 = (1 << 56) - 1;

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum EntryKind {
    /// A deletion marker.
    Delete = 0,
    /// A value.
    Put = 1,
    /// A value with an expiry time: the stored value starts with `expires_at_ms: u64 LE`.
    PutExpiring = 2,
}

impl EntryKind {
    /// The kind for a stored byte, `None` if unknown (corrupt data).
    pub fn from_byte(byte: u8) -> Option<EntryKind> {
        match byte {
            0 => Some(EntryKind::Delete),
            1 => Some(EntryKind::Put),
            2 => Some(EntryKind::PutExpiring),
            _ => None,
        }
    }
}

/// Builds a trailer.
#[inline]
pub(crate) fn trailer(seq: u64, kind: EntryKind) -> u64 {
    debug_assert!(seq <= MAX_SEQUENCE);
    (seq << 8) | kind as u64
}

/// The sequence number of a trailer.
#[inline]
pub(crate) fn trailer_seq(trailer: u64) -> u64 {
    trailer >> 8
}

/// The kind byte of a trailer.
#[inline]
pub(crate) fn trailer_kind(trailer: u64) -> u8 {
    (trailer & 0xFF) as u8
}

/// The largest trailer whose sequence is `seq`: seeking to `(key, seek_trailer(s))` lands on
/// the newest version of `key` visible at snapshot `s`.
#[inline]
pub(crate) fn seek_trailer(seq: u64) -> u64 {
    (seq << 8) | 0xFF
}

/// Orders two internal keys: user key ascending, then trailer descending.
#[inline]
pub(crate) fn compare(a_key: &[u8], a_trailer: u64, b_key: &[u8], b_trailer: u64) -> Ordering {
    compare_bytes(a_key, b_key).then_with(|| b_trailer.cmp(&a_trailer))
}

/// Bytewise order of two keys, eight bytes at a time (short keys are the common case, and
/// this avoids a call into `memcmp` on the memtable's hot path).
#[inline]
pub(crate) fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let mut a_words = a.chunks_exact(8);
    let mut b_words = b.chunks_exact(8);
    for (x, y) in (&mut a_words).zip(&mut b_words) {
        let x = u64::from_be_bytes(x.try_into().unwrap_or([0; 8]));
        let y = u64::from_be_bytes(y.try_into().unwrap_or([0; 8]));
        if x != y {
            return x.cmp(&y);
        }
    }
    let done = a.len().min(b.len()) / 8 * 8;
    // `done` is at most the shorter length, so both tails exist.
    a.get(done..).cmp(&b.get(done..))
}

/// Splits a stored value of kind `PutExpiring` into (expires_at_ms, value).
pub(crate) fn split_expiring(stored: &[u8]) -> Option<(u64, &[u8])> {
    let (head, value) = stored.split_at_checked(8)?;
    let expires_at = u64::from_le_bytes(head.try_into().ok()?);
    Some((expires_at, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_versions_sort_first_and_user_keys_dominate() {
        let t5 = trailer(5, EntryKind::Put);
        let t9 = trailer(9, EntryKind::Delete);
        assert_eq!(compare(b"a", t9, b"a", t5), Ordering::Less);
        assert_eq!(compare(b"a", t5, b"ab", t9), Ordering::Less);
        assert_eq!(compare(b"b", t9, b"ab", t5), Ordering::Greater);
        assert!(seek_trailer(5) > t5 && seek_trailer(5) < trailer(6, EntryKind::Delete));
        assert_eq!(trailer_seq(t9), 9);
        assert_eq!(trailer_kind(t9), 0);
    }

    #[test]
    fn word_wise_comparison_equals_slice_comparison() {
        let keys: Vec<&[u8]> = vec![
            b"",
            b"\0",
            b"a",
            b"ab",
            b"abcdefg",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefgi",
            b"abcdefghij",
            b"abcdefghijklmnop",
            b"abcdefghijklmnoq",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\x00",
        ];
        for a in &keys {
            for b in &keys {
                assert_eq!(compare_bytes(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn expiring_values_split_and_reject_short_input() {
        let mut stored = 77u64.to_le_bytes().to_vec();
        stored.extend_from_slice(b"v");
        assert_eq!(split_expiring(&stored), Some((77, &b"v"[..])));
        assert_eq!(split_expiring(b"short"), None);
    }
}
