//! XXH64, the 64-bit xxHash of Yann Collet (one-shot form), used by the bloom filter.
//!
//! Written from the algorithm description; checked against the reference implementation's
//! sanity-test vectors (see the tests below). The bloom filter always uses seed 0.

const PRIME64_1: u64 = 0x9E37_79B1_85EB_CA87;
const PRIME64_2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const PRIME64_3: u64 = 0x1656_67B1_9E37_79F9;
const PRIME64_4: u64 = 0x85EB_CA77_C2B2_AE63;
const PRIME64_5: u64 = 0x27D4_EB2F_1656_67C5;

#[inline]
fn round(acc: u64, lane: u64) -> u64 {
    acc.wrapping_add(lane.wrapping_mul(PRIME64_2)).rotate_left(31).wrapping_mul(PRIME64_1)
}

#[inline]
fn merge_round(acc: u64, val: u64) -> u64 {
    (acc ^ round(0, val)).wrapping_mul(PRIME64_1).wrapping_add(PRIME64_4)
}

#[inline]
fn read_u64(chunk: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(chunk.get(..8).unwrap_or(&[0; 8]));
    u64::from_le_bytes(bytes)
}

#[inline]
fn read_u32(chunk: &[u8]) -> u64 {
    let mut bytes = [0u8; 4];
    bytes.copy_from_slice(chunk.get(..4).unwrap_or(&[0; 4]));
    u64::from(u32::from_le_bytes(bytes))
}

/// Folds the 32-byte stripes of `input` into the accumulator; returns it and the tail.
fn stripes(input: &[u8], seed: u64) -> (u64, &[u8]) {
    let mut v = [
        seed.wrapping_add(PRIME64_1).wrapping_add(PRIME64_2),
        seed.wrapping_add(PRIME64_2),
        seed,
        seed.wrapping_sub(PRIME64_1),
    ];
    let mut chunks = input.chunks_exact(32);
    for stripe in &mut chunks {
        for (acc, lane) in v.iter_mut().zip(stripe.chunks_exact(8)) {
            *acc = round(*acc, read_u64(lane));
        }
    }
    let [v1, v2, v3, v4] = v;
    let mut h = v1
        .rotate_left(1)
        .wrapping_add(v2.rotate_left(7))
        .wrapping_add(v3.rotate_left(12))
        .wrapping_add(v4.rotate_left(18));
    for acc in v {
        h = merge_round(h, acc);
    }
    (h, chunks.remainder())
}

/// XXH64 of `input` with `seed`.
pub fn xxh64(input: &[u8], seed: u64) -> u64 {
    let (mut h, mut tail) =
        if input.len() >= 32 { stripes(input, seed) } else { (seed.wrapping_add(PRIME64_5), input) };
    h = h.wrapping_add(input.len() as u64);
    while tail.len() >= 8 {
        h ^= round(0, read_u64(tail));
        h = h.rotate_left(27).wrapping_mul(PRIME64_1).wrapping_add(PRIME64_4);
        tail = tail.get(8..).unwrap_or_default();
    }
    if tail.len() >= 4 {
        h ^= read_u32(tail).wrapping_mul(PRIME64_1);
        h = h.rotate_left(23).wrapping_mul(PRIME64_2).wrapping_add(PRIME64_3);
        tail = tail.get(4..).unwrap_or_default();
    }
    for &byte in tail {
        h ^= u64::from(byte).wrapping_mul(PRIME64_5);
        h = h.rotate_left(11).wrapping_mul(PRIME64_1);
    }
    avalanche(h)
}

#[inline]
fn avalanche(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(PRIME64_2);
    h ^= h >> 29;
    h = h.wrapping_mul(PRIME64_3);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::xxh64;

    const PRIME32: u64 = 2_654_435_761;
    const PRIME64: u64 = 11_400_714_785_074_694_797;

    /// The reference sanity-test buffer (xxHash `XSUM_fillTestBuffer`).
    fn sanity_buffer(len: usize) -> Vec<u8> {
        let mut gen = PRIME32;
        (0..len)
            .map(|_| {
                let b = (gen >> 56) as u8;
                gen = gen.wrapping_mul(PRIME64);
                b
            })
            .collect()
    }

    #[test]
    fn reference_sanity_vectors() {
        // (length, seed, expected) from xxHash's cli/xsum_sanity_check.c.
        let vectors: [(usize, u64, u64); 9] = [
            (0, 0, 0xEF46_DB37_51D8_E999),
            (0, PRIME32, 0xAC75_FDA2_929B_17EF),
            (1, 0, 0xE934_A84A_DB05_2768),
            (1, PRIME32, 0x5014_6076_43A9_B4C3),
            (4, 0, 0x9136_A0DC_A574_57EE),
            (14, 0, 0x8282_DCC4_994E_35C8),
            (14, PRIME32, 0xC3BD_6BF6_3DEB_6DF0),
            (222, 0, 0xB641_AE8C_B691_C174),
            (222, PRIME32, 0x20CB_8AB7_AE10_C14A),
        ];
        let buf = sanity_buffer(222);
        for (len, seed, expected) in vectors {
            assert_eq!(xxh64(&buf[..len], seed), expected, "len {len} seed {seed}");
        }
    }

    #[test]
    fn string_vectors() {
        assert_eq!(xxh64(b"", 0), 0xEF46_DB37_51D8_E999);
        assert_eq!(xxh64(b"a", 0), 15_154_266_338_359_012_955);
        assert_eq!(xxh64(b"abc", 0), 0x44BC_2CF5_AD77_0999);
        assert_eq!(xxh64(b"ABC", 0), 0xE66A_E735_4FCF_EE98);
        assert_eq!(xxh64(b"xxhash", 0), 0x32DD_3895_2C4B_C720);
    }
}
