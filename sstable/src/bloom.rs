//! The table's bloom filter over distinct user keys.
//!
//! A *cache-local* (blocked) bloom filter: each key's `k` probes all fall into one
//! 64-byte line of the bit array, so a lookup costs one cache miss instead of `k`.
//!
//! Filter block contents: `bit array (64 * L bytes, L >= 1 lines) ++ k (u8)`. For a key,
//! with `h = XXH64(user_key, seed 0)`:
//!
//! * line `= (h * L) >> 64` (128-bit product),
//! * `g = h * 0x9E3779B97F4A7C15`, `delta = rotl64(g, 32)` (mod 2^64 arithmetic),
//! * probe `i` (0 <= i < k) tests bit `(g + i * delta) >> 55` (0..512) of the line;
//!   bit `b` of a line is `line_bytes[b / 8] & (1 << (b % 8))`.

use crate::hash::xxh64;

/// Bytes per filter line (one cache line).
const LINE_BYTES: usize = 64;
/// Bits per filter line.
const LINE_BITS: u64 = 512;
/// Largest probe count; more would only cost time.
const MAX_PROBES: u32 = 30;
/// Odd multiplier (2^64 / golden ratio) decorrelating in-line probes from line choice.
const PROBE_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// Probes per key for `bits_per_key`: round(bits * ln 2), clamped to 1..=30.
pub(crate) fn num_probes(bits_per_key: u32) -> u32 {
    let k = (f64::from(bits_per_key) * std::f64::consts::LN_2).round() as u32;
    k.clamp(1, MAX_PROBES)
}

/// The line of key hash `h` in a filter of `num_lines` lines.
#[inline]
fn line_of(h: u64, num_lines: usize) -> usize {
    ((u128::from(h) * num_lines as u128) >> 64) as usize
}

/// The in-line bit positions (0..512) probed for key hash `h`: double hashing.
#[inline]
fn probes(h: u64, k: u32) -> impl Iterator<Item = usize> {
    let g = h.wrapping_mul(PROBE_MIX);
    let delta = g.rotate_left(32);
    (0..u64::from(k)).map(move |i| (g.wrapping_add(i.wrapping_mul(delta)) >> 55) as usize)
}

/// Collects key hashes while a table is built.
pub(crate) struct BloomBuilder {
    bits_per_key: u32,
    hashes: Vec<u64>,
}

impl BloomBuilder {
    /// A builder for `bits_per_key` (> 0) bits per key.
    pub(crate) fn new(bits_per_key: u32) -> Self {
        BloomBuilder { bits_per_key, hashes: Vec::new() }
    }

    /// Adds a user key; callers add each distinct user key once.
    pub(crate) fn add_key(&mut self, user_key: &[u8]) {
        self.hashes.push(xxh64(user_key, 0));
    }

    /// The filter block contents.
    pub(crate) fn finish(&self) -> Vec<u8> {
        let wanted = (self.hashes.len() as u64).saturating_mul(u64::from(self.bits_per_key));
        let num_lines = wanted.div_ceil(LINE_BITS).max(1) as usize;
        let k = num_probes(self.bits_per_key);
        let mut out = vec![0u8; num_lines * LINE_BYTES];
        for &h in &self.hashes {
            let line_start = line_of(h, num_lines) * LINE_BYTES;
            for bit in probes(h, k) {
                if let Some(byte) = out.get_mut(line_start + bit / 8) {
                    *byte |= 1 << (bit % 8);
                }
            }
        }
        out.push(k as u8);
        out
    }
}

/// A decoded filter.
#[derive(Debug)]
pub(crate) struct BloomFilter {
    /// The bit array followed by the probe count byte.
    data: Vec<u8>,
    num_lines: usize,
    k: u32,
}

impl BloomFilter {
    /// Decodes filter block contents.
    pub(crate) fn decode(data: Vec<u8>) -> Result<BloomFilter, &'static str> {
        let (&k, bits) = data.split_last().ok_or("empty filter block")?;
        if bits.is_empty() || bits.len() % LINE_BYTES != 0 {
            return Err("filter bit array is not a whole number of lines");
        }
        let k = u32::from(k);
        if !(1..=MAX_PROBES).contains(&k) {
            return Err("filter probe count out of range");
        }
        let num_lines = bits.len() / LINE_BYTES;
        Ok(BloomFilter { data, num_lines, k })
    }

    /// False if `user_key` was certainly not added.
    #[inline]
    pub(crate) fn may_contain(&self, user_key: &[u8]) -> bool {
        let h = xxh64(user_key, 0);
        let line_start = line_of(h, self.num_lines) * LINE_BYTES;
        let Some(line) = self.data.get(line_start..line_start + LINE_BYTES) else {
            return true; // unreachable for a decoded filter; "maybe" is always safe
        };
        probes(h, self.k).all(|bit| line.get(bit / 8).is_some_and(|byte| byte & (1 << (bit % 8)) != 0))
    }

    /// Heap bytes held.
    pub(crate) fn memory_usage(&self) -> usize {
        self.data.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_counts() {
        assert_eq!(num_probes(10), 7);
        assert_eq!(num_probes(1), 1);
        assert_eq!(num_probes(100), 30);
    }

    #[test]
    fn no_false_negatives_and_low_fp_rate() {
        let mut b = BloomBuilder::new(10);
        for i in 0..10_000u32 {
            b.add_key(format!("present-{i}").as_bytes());
        }
        let f = BloomFilter::decode(b.finish()).unwrap();
        for i in 0..10_000u32 {
            assert!(f.may_contain(format!("present-{i}").as_bytes()));
        }
        let fp = (0..10_000u32).filter(|i| f.may_contain(format!("absent-{i}").as_bytes())).count();
        // Theory at 10 bits/key, k = 7: about 0.8 % (a little more for a blocked filter).
        assert!(fp < 200, "false positive rate {fp}/10000 >= 2%");
        println!("false positives: {fp} / 10000");
    }

    #[test]
    fn empty_filter_rejects_everything() {
        let f = BloomFilter::decode(BloomBuilder::new(10).finish()).unwrap();
        assert!(!f.may_contain(b"x"));
        assert!(BloomFilter::decode(vec![7]).is_err());
        assert!(BloomFilter::decode(vec![0, 0, 7]).is_err());
        let mut bad_k = vec![0; 64];
        bad_k.push(31);
        assert!(BloomFilter::decode(bad_k).is_err());
    }
}
