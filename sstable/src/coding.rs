//! Varint and fixed-width integer encoding.
//!
//! Varints are LevelDB's / protobuf's base-128 little-endian encoding: seven value bits
//! per byte, the high bit set on every byte except the last. Decoders never panic: they
//! return `None` on truncated input, on over-long encodings and on values that overflow.

/// Longest encoding of a `u32` varint.
pub(crate) const MAX_VARINT32_LEN: usize = 5;
/// Longest encoding of a `u64` varint.
pub(crate) const MAX_VARINT64_LEN: usize = 10;

/// Appends `v` as a varint.
pub(crate) fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Appends `v` as a varint (same encoding as [`put_varint64`]).
pub(crate) fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, u64::from(v));
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
#[inline]
pub(crate) fn get_varint32(src: &[u8]) -> Option<(u32, usize)> {
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
#[inline]
pub(crate) fn get_varint64(src: &[u8]) -> Option<(u64, usize)> {
    get_varint(src, MAX_VARINT64_LEN, u64::MAX)
}

/// Reads a little-endian `u32` at `pos`.
#[inline]
pub(crate) fn get_u32_le(src: &[u8], pos: usize) -> Option<u32> {
    let end = pos.checked_add(4)?;
    let bytes: [u8; 4] = src.get(pos..end)?.try_into().ok()?;
    Some(u32::from_le_bytes(bytes))
}

/// Reads a little-endian `u64` at `pos`.
#[inline]
pub(crate) fn get_u64_le(src: &[u8], pos: usize) -> Option<u64> {
    let end = pos.checked_add(8)?;
    let bytes: [u8; 8] = src.get(pos..end)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip() {
        let mut values: Vec<u64> = vec![0, 1, 127, 128, 255, 300, 16383, 16384];
        for shift in 0..64 {
            let v = 1u64 << shift;
            values.extend([v - 1, v, v + 1]);
        }
        values.push(u64::MAX);
        for &v in &values {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            assert!(buf.len() <= MAX_VARINT64_LEN);
            assert_eq!(get_varint64(&buf), Some((v, buf.len())), "value {v}");
            if let Ok(v32) = u32::try_from(v) {
                assert_eq!(get_varint32(&buf), Some((v32, buf.len())));
            } else {
                assert_eq!(get_varint32(&buf), None, "value {v} does not fit u32");
            }
            // Every strict prefix is truncated.
            for cut in 0..buf.len() {
                assert_eq!(get_varint64(&buf[..cut]), None);
            }
        }
    }

    #[test]
    fn varint_rejects_overlong_and_overflow() {
        // 11 continuation bytes: longer than any u64.
        assert_eq!(get_varint64(&[0x80; 11]), None);
        // Tenth byte carrying more than the one remaining bit.
        let mut buf = vec![0xff; 9];
        buf.push(0x02);
        assert_eq!(get_varint64(&buf), None);
        let mut ok = vec![0xff; 9];
        ok.push(0x01);
        assert_eq!(get_varint64(&ok), Some((u64::MAX, 10)));
        // u32: fifth byte above 0x0f overflows.
        assert_eq!(get_varint32(&[0xff, 0xff, 0xff, 0xff, 0x1f]), None);
        assert_eq!(get_varint32(&[0xff, 0xff, 0xff, 0xff, 0x0f]), Some((u32::MAX, 5)));
    }

    #[test]
    fn fixed_width_bounds() {
        let buf = [1u8, 0, 0, 0, 2, 0, 0, 0, 3];
        assert_eq!(get_u32_le(&buf, 0), Some(1));
        assert_eq!(get_u32_le(&buf, 4), Some(2));
        assert_eq!(get_u32_le(&buf, 6), None);
        assert_eq!(get_u32_le(&buf, usize::MAX), None);
        assert_eq!(get_u64_le(&buf, 1), Some(0x0300_0000_0200_0000));
        assert_eq!(get_u64_le(&buf, 2), None);
    }
}
