//! Versioned keys: how they are stored in blocks and how they are ordered.
//!
//! A *stored key* is the user key followed by the 8-byte encoded trailer. The trailer is
//! encoded as the bitwise complement of the trailer in big-endian byte order, so that for
//! equal user keys a bytewise comparison of the encoded trailers orders them by trailer
//! descending. Comparisons nevertheless always split the user key from the trailer:
//! `user_key ++ trailer` does not sort correctly when user keys differ in length.

use std::cmp::Ordering;

/// Bytes of the encoded trailer at the end of every stored key.
pub(crate) const TRAILER_LEN: usize = 8;

/// The encoded form of `trailer`.
#[inline]
pub(crate) fn encode_trailer(trailer: u64) -> [u8; TRAILER_LEN] {
    (!trailer).to_be_bytes()
}

/// Appends the stored form of (`user_key`, `trailer`) to `dst`.
#[inline]
pub(crate) fn push_stored_key(dst: &mut Vec<u8>, user_key: &[u8], trailer: u64) {
    dst.extend_from_slice(user_key);
    dst.extend_from_slice(&encode_trailer(trailer));
}

/// Splits a stored key into (user key, trailer); `None` if it is shorter than a trailer.
#[inline]
pub(crate) fn split_stored_key(stored: &[u8]) -> Option<(&[u8], u64)> {
    let user_len = stored.len().checked_sub(TRAILER_LEN)?;
    let (user, enc) = stored.split_at_checked(user_len)?;
    let enc: [u8; TRAILER_LEN] = enc.try_into().ok()?;
    Some((user, !u64::from_be_bytes(enc)))
}

/// Table order: user key ascending (bytewise), then trailer descending.
#[inline]
pub(crate) fn compare(a_user: &[u8], a_trailer: u64, b_user: &[u8], b_trailer: u64) -> Ordering {
    compare_bytes(a_user, b_user).then(b_trailer.cmp(&a_trailer))
}

/// Bytewise comparison (same result as `a.cmp(b)`), eight bytes at a time: keys are
/// short, and a `memcmp` call costs more than the comparison itself.
#[inline]
pub(crate) fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        let x = u64::from_be_bytes(x.try_into().unwrap_or_default());
        let y = u64::from_be_bytes(y.try_into().unwrap_or_default());
        if x != y {
            return x.cmp(&y);
        }
    }
    // The zip stopped at the shorter input's last whole chunk: at most 7 bytes remain
    // in it (the longer one may have more).
    let done = a.len().min(b.len()) / 8 * 8;
    let a_tail = a.get(done..).unwrap_or_default();
    let b_tail = b.get(done..).unwrap_or_default();
    for (x, y) in a_tail.iter().zip(b_tail) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

/// Compares a stored key with (`user`, `trailer`) in table order. A malformed stored key
/// (shorter than a trailer) sorts by its bytes as a user key with trailer `u64::MAX`;
/// block decoding rejects such keys before they get here.
#[inline]
pub(crate) fn compare_stored(stored: &[u8], user: &[u8], trailer: u64) -> Ordering {
    match split_stored_key(stored) {
        Some((s_user, s_trailer)) => compare(s_user, s_trailer, user, trailer),
        None => compare(stored, u64::MAX, user, trailer),
    }
}

/// A short user key `s` with `last_user < s < next_user`, if one exists that is shorter
/// than `last_user`: the common prefix plus the first differing byte of `last_user`
/// incremented. Stored with trailer `u64::MAX` (which sorts first among the versions of
/// `s`), it is an index separator: >= every key of the block ending in `last_user` and
/// < every key of the next block, which starts with `next_user`.
pub(crate) fn shortest_separator(last_user: &[u8], next_user: &[u8]) -> Option<Vec<u8>> {
    let common = last_user.iter().zip(next_user).take_while(|(a, b)| a == b).count();
    let last_byte = *last_user.get(common)?;
    let next_byte = *next_user.get(common)?;
    // Incrementing must keep the byte strictly below `next_byte` (so s < next_user), and
    // the result must be strictly shorter than `last_user` to be worth it.
    let bumped = last_byte.checked_add(1)?;
    if bumped >= next_byte || common + 1 >= last_user.len() {
        return None;
    }
    let mut s = last_user.get(..common)?.to_vec();
    s.push(bumped);
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_key_round_trip_and_order() {
        let mut a = Vec::new();
        push_stored_key(&mut a, b"abc", 7);
        assert_eq!(split_stored_key(&a), Some((&b"abc"[..], 7)));
        assert_eq!(split_stored_key(b"short"), None);
        // Newer (larger) trailers first for the same user key.
        assert_eq!(compare(b"a", 9, b"a", 3), Ordering::Less);
        // Shorter prefix first, regardless of trailers.
        assert_eq!(compare(b"a", 0, b"ab", u64::MAX), Ordering::Less);
        assert_eq!(compare_stored(&a, b"abc", 8), Ordering::Greater);
        assert_eq!(compare_stored(&a, b"abc", 7), Ordering::Equal);
        assert_eq!(compare_stored(&a, b"abc", 6), Ordering::Less);
        // Encoded trailers sort bytewise in table order.
        assert!(encode_trailer(9) < encode_trailer(3));
    }

    #[test]
    fn compare_bytes_matches_slice_order() {
        let samples: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![1],
            vec![0xff],
            b"abcdefgh".to_vec(),
            b"abcdefgh\x00".to_vec(),
            b"abcdefgi".to_vec(),
            b"abcdefghijklmnop".to_vec(),
            b"abcdefghijklmnoq".to_vec(),
            b"abcdefghijklmno".to_vec(),
            b"abcdefghijklmnopq".to_vec(),
            vec![0xff; 17],
        ];
        for a in &samples {
            for b in &samples {
                assert_eq!(compare_bytes(a, b), a.cmp(b), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn separators_are_strictly_between() {
        let cases: [(&[u8], &[u8]); 6] = [
            (b"helloworld", b"hellz"),
            (b"abcdef", b"abd"),
            (b"a\xff\xffzz", b"b"),
            (b"abc", b"abd"),
            (b"ab", b"abc"),
            (b"abcxyz", b"abcxyz1"),
        ];
        for (last, next) in cases {
            if let Some(s) = shortest_separator(last, next) {
                assert!(last < &s[..] && &s[..] < next, "{last:?} {s:?} {next:?}");
                assert!(s.len() < last.len());
            }
        }
        assert_eq!(shortest_separator(b"helloworld", b"hellz"), Some(b"hellp".to_vec()));
        assert_eq!(shortest_separator(b"abc", b"abd"), None);
    }
}
