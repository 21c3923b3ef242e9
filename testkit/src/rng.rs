/// SplitMix64 (Steele, Lea and Flood): a tiny, fast, seedable generator whose sequence is
/// fixed by its seed on every platform, which is all randomised tests need. Not for
/// cryptography.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator whose sequence is fixed by `seed`.
    pub const fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0); the modulo bias is irrelevant for tests.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// An index in `0..n` (0 when `n` is 0).
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// True once in `n` times on average.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    /// One of `items`, which must not be empty.
    #[allow(clippy::indexing_slicing, reason = "panics on an empty slice, as documented; a test bug")]
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }

    /// `len` random bytes (one draw per byte).
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::SplitMix64;

    #[test]
    fn matches_the_reference_sequence() {
        // The first outputs of SplitMix64 seeded with 0 (as in the reference C code).
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn ranges_hold() {
        let mut rng = SplitMix64::new(42);
        for n in [1u64, 2, 3, 100] {
            assert!((0..1000).all(|_| rng.below(n) < n));
        }
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.index(0), 0);
        assert!((0..1000).all(|_| !rng.chance(0) && rng.chance(100)));
        let hits = (0..10_000).filter(|_| rng.one_in(4)).count();
        assert!((2000..3000).contains(&hits), "{hits}");
        assert_eq!(rng.bytes(17).len(), 17);
        assert!([1, 2, 3].contains(rng.pick(&[1, 2, 3])));
    }
}
