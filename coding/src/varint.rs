//! LEB128 varints, length-prefixed byte strings and fixed-width little-endian integers.

/// Longest encoding of a `u32` varint.
pub const MAX_VARINT32_LEN: usize = 5;
/// Longest encoding of a `u64` varint.
pub const MAX_VARINT64_LEN: usize = 10;

/// Appends `v` as a varint.
#[inline]
pub fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Appends `v` as a varint (the same bytes as [`put_varint64`] writes for it).
#[inline]
pub fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, u64::from(v));
}

/// The number of bytes [`put_varint64`] writes for `v` (1 to [`MAX_VARINT64_LEN`]).
#[inline]
pub fn varint_len(mut v: u64) -> usize {
    let mut len = 1;
    while v >= 0x80 {
        len += 1;
        v >>= 7;
    }
    len
}

/// Appends a varint length followed by the bytes.
pub fn put_length_prefixed(dst: &mut Vec<u8>, bytes: &[u8]) {
    put_varint64(dst, bytes.len() as u64);
    dst.extend_from_slice(bytes);
}

/// Decodes a varint of at most `max_len` bytes whose value is at most `max_value`.
/// Returns the value and the number of bytes it took.
#[inline]
fn get_varint(src: &[u8], max_len: usize, max_value: u64) -> Option<(u64, usize)> {
    let mut result: u64 = 0;
    for (i, &byte) in src.iter().take(max_len).enumerate() {
        let shift = 7 * i as u32;
        let bits = u64::from(byte & 0x7f);
        // The tenth byte may only carry the single remaining bit of a u64.
        if shift == 63 && bits > 1 {
            return None;
        }
        result |= bits << shift;
        if byte & 0x80 == 0 {
            return (result <= max_value).then_some((result, i + 1));
        }
    }
    None
}

/// Decodes a `u32` varint from the start of `src`: (value, bytes used).
///
/// `None` if `src` ends first, if the encoding is longer than [`MAX_VARINT32_LEN`] bytes,
/// or if the value exceeds `u32::MAX`.
#[inline]
pub fn get_varint32(src: &[u8]) -> Option<(u32, usize)> {
    // Fast path: one-byte values (lengths below 128) are by far the most common.
    if let Some(&b) = src.first() {
        if b < 0x80 {
            return Some((u32::from(b), 1));
        }
    }
    let (v, n) = get_varint(src, MAX_VARINT32_LEN, u64::from(u32::MAX))?;
    Some((u32::try_from(v).ok()?, n))
}

/// Decodes a `u64` varint from the start of `src`: (value, bytes used).
///
/// `None` if `src` ends first, if the encoding is longer than [`MAX_VARINT64_LEN`] bytes,
/// or if its tenth byte carries more than the one bit a `u64` has left.
#[inline]
pub fn get_varint64(src: &[u8]) -> Option<(u64, usize)> {
    get_varint(src, MAX_VARINT64_LEN, u64::MAX)
}

/// Reads a little-endian `u32` at `pos`; `None` if it does not fit in `src`.
#[inline]
pub fn get_u32_le(src: &[u8], pos: usize) -> Option<u32> {
    let end = pos.checked_add(4)?;
    let bytes: [u8; 4] = src.get(pos..end)?.try_into().ok()?;
    Some(u32::from_le_bytes(bytes))
}

/// Reads a little-endian `u64` at `pos`; `None` if it does not fit in `src`.
#[inline]
pub fn get_u64_le(src: &[u8], pos: usize) -> Option<u64> {
    let end = pos.checked_add(8)?;
    let bytes: [u8; 8] = src.get(pos..end)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampkv_testkit::SplitMix64;

    fn encode(v: u64) -> Vec<u8> {
        let mut buf = Vec::new();
        put_varint64(&mut buf, v);
        buf
    }

    /// Every value next to a power of two: `2^k - 1`, `2^k`, `2^k + 1` for k in 0..64, and
    /// `u64::MAX`.
    fn boundary_values() -> Vec<u64> {
        let mut values = vec![0, u64::MAX, u64::MAX - 1];
        for k in 0..64 {
            let p = 1u64 << k;
            values.extend([p - 1, p, p + 1]);
        }
        values
    }

    #[test]
    fn varint_round_trip() {
        let mut values: Vec<u64> = vec![0, 1, 127, 128, 255, 300, 16383, 16384];
        values.extend(boundary_values());
        for &v in &values {
            let buf = encode(v);
            assert!(buf.len() <= MAX_VARINT64_LEN);
            assert_eq!(get_varint64(&buf), Some((v, buf.len())), "value {v}");
            if let Ok(v32) = u32::try_from(v) {
                assert_eq!(get_varint32(&buf), Some((v32, buf.len())));
                let mut buf32 = Vec::new();
                put_varint32(&mut buf32, v32);
                assert_eq!(buf32, buf);
            } else {
                assert_eq!(get_varint32(&buf), None, "value {v} does not fit u32");
            }
            // Every strict prefix is truncated.
            for cut in 0..buf.len() {
                assert_eq!(get_varint64(&buf[..cut]), None);
                assert_eq!(get_varint32(&buf[..cut]), None);
            }
            // Trailing bytes are not read.
            let mut longer = buf.clone();
            longer.extend_from_slice(&[0xff, 0x00]);
            assert_eq!(get_varint64(&longer), Some((v, buf.len())));
        }
    }

    #[test]
    fn lengths_change_exactly_at_every_seventh_power_of_two() {
        for k in 0..64u32 {
            let p = 1u64 << k;
            // A value of k + 1 significant bits takes ceil((k + 1) / 7) bytes.
            let expected = (k as usize + 1).div_ceil(7);
            assert_eq!(encode(p).len(), expected, "2^{k}");
            assert_eq!(varint_len(p), expected, "2^{k}");
            assert_eq!(varint_len(p - 1), encode(p - 1).len(), "2^{k} - 1");
            assert_eq!(varint_len(p | (p - 1)), expected, "2^({k} + 1) - 1");
        }
        assert_eq!(varint_len(0), 1);
        assert_eq!(encode(0), [0]);
        assert_eq!(varint_len(u64::MAX), MAX_VARINT64_LEN);
        assert_eq!(encode(u64::MAX), [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(encode(u64::from(u32::MAX)).len(), MAX_VARINT32_LEN);
        assert_eq!(encode(u64::from(u32::MAX)), [0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(encode(300), [0xac, 0x02]);
    }

    #[test]
    fn varint_rejects_overlong_and_overflow() {
        // 11 continuation bytes: longer than any u64.
        assert_eq!(get_varint64(&[0x80; 11]), None);
        // Ten bytes, all with the continuation bit: the eleventh is never allowed.
        let mut cont = vec![0x80; 9];
        cont.extend([0x81, 0x00]);
        assert_eq!(get_varint64(&cont), None);
        // Tenth byte carrying more than the one remaining bit.
        for tenth in 2..=0x7f {
            let mut buf = vec![0xff; 9];
            buf.push(tenth);
            assert_eq!(get_varint64(&buf), None, "tenth byte {tenth:#x}");
            let mut buf = vec![0x80; 9];
            buf.push(tenth);
            assert_eq!(get_varint64(&buf), None, "tenth byte {tenth:#x}");
        }
        let mut ok = vec![0xff; 9];
        ok.push(0x01);
        assert_eq!(get_varint64(&ok), Some((u64::MAX, 10)));
        let mut top_bit = vec![0x80; 9];
        top_bit.push(0x01);
        assert_eq!(get_varint64(&top_bit), Some((1 << 63, 10)));
        // u32: more than five bytes, even of a small value.
        assert_eq!(get_varint32(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]), None);
        // u32: a fifth byte above 0x0f overflows.
        for fifth in 0x10..=0xff {
            assert_eq!(get_varint32(&[0xff, 0xff, 0xff, 0xff, fifth]), None, "{fifth:#x}");
            assert_eq!(get_varint32(&[0x80, 0x80, 0x80, 0x80, fifth]), None, "{fifth:#x}");
        }
        assert_eq!(get_varint32(&[0xff, 0xff, 0xff, 0xff, 0x0f]), Some((u32::MAX, 5)));
        assert_eq!(get_varint32(&[0x80, 0x80, 0x80, 0x80, 0x08]), Some((1 << 31, 5)));
        // u32::MAX + 1 is a valid u64 but not a u32.
        assert_eq!(get_varint32(&encode(1 << 32)), None);
        assert_eq!(get_varint32(&[]), None);
        assert_eq!(get_varint64(&[]), None);
    }

    #[test]
    fn non_canonical_encodings_within_the_limit_are_read() {
        // LevelDB accepts a zero group with the continuation bit; so do the formats built
        // on this, which only ever write the canonical form.
        assert_eq!(get_varint64(&[0x80, 0x00]), Some((0, 2)));
        assert_eq!(get_varint32(&[0x81, 0x80, 0x80, 0x80, 0x00]), Some((1, 5)));
    }

    #[test]
    fn random_values_round_trip_in_a_stream() {
        let mut rng = SplitMix64::new(0x7661_7269_6e74);
        for _ in 0..200 {
            // Values of every bit width, so every encoded length is common.
            let values: Vec<u64> = (0..64).map(|_| rng.next_u64() >> rng.below(64)).collect();
            let mut stream = Vec::new();
            for &v in &values {
                put_varint64(&mut stream, v);
            }
            let mut rest = &stream[..];
            for &v in &values {
                let (got, n) = get_varint64(rest).unwrap();
                assert_eq!((got, n), (v, varint_len(v)));
                rest = &rest[n..];
            }
            assert!(rest.is_empty());
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_decode_consistently() {
        let mut rng = SplitMix64::new(0x6761_7262);
        for _ in 0..20_000 {
            let len = rng.index(13);
            let mut bytes = rng.bytes(len);
            // Bias towards continuation bits so long encodings are common.
            for b in &mut bytes {
                if rng.chance(70) {
                    *b |= 0x80;
                }
            }
            if let Some((v, n)) = get_varint64(&bytes) {
                assert!(n <= MAX_VARINT64_LEN && n <= bytes.len());
                assert!(varint_len(v) <= n);
                if n == 1 || bytes[n - 1] != 0 {
                    assert_eq!(encode(v), bytes[..n], "a canonical encoding re-encodes the same");
                }
            }
            if let Some((v, n)) = get_varint32(&bytes) {
                assert!(n <= MAX_VARINT32_LEN);
                assert_eq!(get_varint64(&bytes), Some((u64::from(v), n)));
            }
        }
    }

    #[test]
    fn length_prefixed_writes_length_then_bytes() {
        let mut out = Vec::new();
        put_length_prefixed(&mut out, b"abc");
        assert_eq!(out, [3, b'a', b'b', b'c']);
        let long = vec![7u8; 200];
        let mut out = Vec::new();
        put_length_prefixed(&mut out, &long);
        assert_eq!(out[..2], [0xc8, 0x01]);
        assert_eq!(out[2..], long[..]);
    }

    #[test]
    fn fixed_width_bounds() {
        let buf = [1u8, 0, 0, 0, 2, 0, 0, 0, 3];
        assert_eq!(get_u32_le(&buf, 0), Some(1));
        assert_eq!(get_u32_le(&buf, 4), Some(2));
        assert_eq!(get_u32_le(&buf, 5), Some(0x0300_0000));
        assert_eq!(get_u32_le(&buf, 6), None);
        assert_eq!(get_u32_le(&buf, usize::MAX), None);
        assert_eq!(get_u64_le(&buf, 1), Some(0x0300_0000_0200_0000));
        assert_eq!(get_u64_le(&buf, 2), None);
        assert_eq!(get_u64_le(&buf, usize::MAX - 3), None);
    }
}
