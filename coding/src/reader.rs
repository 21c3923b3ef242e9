//! A checked cursor over untrusted bytes.

use crate::varint::{get_varint32, get_varint64};

/// A cursor over untrusted bytes. Every read is checked: on short or malformed input it
/// returns `None` (the cursor's position is then unspecified) and never panics.
///
/// ```
/// use stampkv_coding::{put_length_prefixed, put_varint64, Reader};
/// let mut buf = Vec::new();
/// put_varint64(&mut buf, 1 << 40);
/// put_length_prefixed(&mut buf, b"key");
/// let mut r = Reader::new(&buf);
/// assert_eq!(r.varint(), Some(1 << 40));
/// assert_eq!(r.length_prefixed(), Some(&b"key"[..]));
/// assert!(r.is_empty());
/// assert_eq!(r.u8(), None);
/// ```
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Reads from the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.data.len()
    }

    /// Whether everything was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// One byte.
    pub fn u8(&mut self) -> Option<u8> {
        let (&first, rest) = self.data.split_first()?;
        self.data = rest;
        Some(first)
    }

    /// `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.data.split_at_checked(n)?;
        self.data = rest;
        Some(head)
    }

    /// A little-endian u32.
    pub fn u32_le(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.bytes(4)?.try_into().ok()?))
    }

    /// A little-endian u64.
    pub fn u64_le(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.bytes(8)?.try_into().ok()?))
    }

    /// A `u64` varint (see [`get_varint64`](crate::get_varint64) for what is refused).
    pub fn varint(&mut self) -> Option<u64> {
        let (value, n) = get_varint64(self.data)?;
        self.data = self.data.get(n..)?;
        Some(value)
    }

    /// A `u32` varint (see [`get_varint32`](crate::get_varint32) for what is refused).
    pub fn varint32(&mut self) -> Option<u32> {
        let (value, n) = get_varint32(self.data)?;
        self.data = self.data.get(n..)?;
        Some(value)
    }

    /// A varint length followed by that many bytes.
    pub fn length_prefixed(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.varint()?).ok()?;
        self.bytes(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{put_length_prefixed, put_varint32, put_varint64};
    use stampkv_testkit::SplitMix64;

    #[test]
    fn varints_round_trip_and_reject_overlong_input() {
        let values = [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX];
        let mut out = Vec::new();
        for v in values {
            put_varint64(&mut out, v);
        }
        let mut r = Reader::new(&out);
        for v in values {
            assert_eq!(r.varint(), Some(v));
        }
        assert!(r.is_empty());
        assert_eq!(Reader::new(&[0xFF; 11]).varint(), None);
        assert_eq!(Reader::new(&[0x80]).varint(), None);
        let mut too_big = vec![0xFF; 9];
        too_big.push(0x02);
        assert_eq!(Reader::new(&too_big).varint(), None);
        assert_eq!(Reader::new(&[0xFF, 0xFF, 0xFF, 0xFF, 0x10]).varint32(), None);
        assert_eq!(Reader::new(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]).varint32(), None);
    }

    #[test]
    fn length_prefixed_rejects_lengths_past_the_end() {
        let mut out = Vec::new();
        put_length_prefixed(&mut out, b"abc");
        assert_eq!(Reader::new(&out).length_prefixed(), Some(&b"abc"[..]));
        assert_eq!(Reader::new(&out[..3]).length_prefixed(), None);
        // A length that does not fit in memory.
        let mut huge = Vec::new();
        put_varint64(&mut huge, u64::MAX);
        huge.push(0);
        assert_eq!(Reader::new(&huge).length_prefixed(), None);
    }

    #[test]
    fn fixed_width_reads_are_bounded() {
        let data = [1u8, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9];
        let mut r = Reader::new(&data);
        assert_eq!(r.u32_le(), Some(1));
        assert_eq!(r.u64_le(), Some(2));
        assert_eq!(r.remaining(), 1);
        assert_eq!(r.u32_le(), None);
        assert_eq!(r.clone().u8(), Some(9));
        assert_eq!(r.bytes(2), None);
        assert_eq!(r.bytes(1), Some(&[9u8][..]));
        assert_eq!(r.u64_le(), None);
        assert_eq!(r.bytes(0), Some(&[][..]));
    }

    #[test]
    fn random_records_round_trip() {
        let mut rng = SplitMix64::new(0x7265_6164);
        for _ in 0..500 {
            let mut out = Vec::new();
            let mut expected = Vec::new();
            for _ in 0..rng.index(20) {
                let v = rng.next_u64() >> rng.below(64);
                let small = v as u32;
                let len = rng.index(200);
                let bytes = rng.bytes(len);
                put_varint64(&mut out, v);
                put_varint32(&mut out, small);
                put_length_prefixed(&mut out, &bytes);
                expected.push((v, small, bytes));
            }
            let mut r = Reader::new(&out);
            for (v, small, bytes) in &expected {
                assert_eq!(r.varint(), Some(*v));
                assert_eq!(r.varint32(), Some(*small));
                assert_eq!(r.length_prefixed(), Some(&bytes[..]));
            }
            assert!(r.is_empty());
        }
    }
}
