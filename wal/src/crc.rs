//! Masked CRC-32 (IEEE) chunk checksums.
//!
//! The mask is LevelDB's ([`stampkv_coding::crc::mask`]): computing the CRC of a string
//! that itself contains embedded CRCs is problematic, so stored checksums are rotated and
//! offset.

use stampkv_coding::crc::mask;

/// The stored checksum of a chunk: masked CRC-32 over the segment number
/// (u64 LE, not stored in the chunk), header bytes 4..11 and the payload.
pub(crate) fn chunk_checksum(segment: u64, header_tail: &[u8; 7], payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&segment.to_le_bytes());
    hasher.update(header_tail);
    hasher.update(payload);
    mask(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_ieee_known_answer() {
        // The standard CRC-32/IEEE check value.
        assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn checksum_binds_segment_number() {
        let tail = [3, 0, 1, 0, 0, 0, 0];
        assert_ne!(chunk_checksum(1, &tail, b"abc"), chunk_checksum(2, &tail, b"abc"));
        let mut h = crc32fast::Hasher::new();
        h.update(&7u64.to_le_bytes());
        h.update(&tail);
        h.update(b"abc");
        assert_eq!(chunk_checksum(7, &tail, b"abc"), mask(h.finalize()));
    }
}
