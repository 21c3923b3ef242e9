//! LevelDB's masked CRC-32.
//!
//! Computing the CRC of data that itself contains embedded CRCs is problematic, so stored
//! checksums are masked: rotated right by 15 bits, then offset by a constant (wrapping).

/// Added to the rotated CRC by [`mask`].
pub const MASK_DELTA: u32 = 0xa282_ead8;

/// Masks a raw CRC for storage: `((crc >> 15) | (crc << 17)) + 0xa282ead8` (wrapping).
#[inline]
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// The raw CRC of a masked one; the inverse of [`mask`].
#[inline]
pub fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampkv_testkit::SplitMix64;

    #[test]
    #[allow(clippy::manual_rotate, reason = "the formula exactly as LevelDB writes it")]
    fn known_values() {
        assert_eq!(mask(0), 0xa282_ead8);
        assert_eq!(mask(1 << 15), 0xa282_ead9);
        // LevelDB's formula, written out.
        for crc in [0u32, 1, 0xCBF4_3926, u32::MAX, 0x8000_0000, 0x7FFF] {
            assert_eq!(mask(crc), ((crc >> 15) | (crc << 17)).wrapping_add(0xa282_ead8));
        }
    }

    #[test]
    fn mask_round_trips_and_changes_value() {
        for crc in [0u32, 1, 0xCBF4_3926, u32::MAX, 0x8000_0000] {
            assert_eq!(unmask(mask(crc)), crc);
            assert_ne!(mask(crc), crc);
        }
        let mut rng = SplitMix64::new(0x6d61_736b);
        for _ in 0..10_000 {
            let crc = rng.next_u64() as u32;
            assert_eq!(unmask(mask(crc)), crc);
            assert_eq!(mask(unmask(crc)), crc);
        }
    }
}
