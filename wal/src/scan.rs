//! The torn-tail test: after damage at offset `p`, is there evidence that
//! data at or after `r` (the start of the record in progress) had been synced?

use crate::format::{in_trailer, next_block_start, parse_chunk, Parsed, BLOCK_SIZE, HEADER_SIZE};

/// What the data after a damaged chunk shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Evidence {
    /// No chunk after the damage verifies.
    Nothing,
    /// Some chunks verify, but none has `synced_to > r`.
    Unsynced,
    /// A verified chunk at `at` says the first `synced_to` (> r) bytes had
    /// been synced: the damage lies in durable data.
    Synced {
        /// Offset of the proving chunk.
        at: usize,
        /// Its `synced_to`.
        synced_to: u64,
    },
}

/// Collects the evidence after damage at `p` in segment `segment`.
///
/// 1. The rest of `p`'s own block is searched byte by byte for a verified
///    chunk with `synced_to > r` (the damaged chunk's length cannot be
///    trusted, so later chunks of that block can start anywhere).
/// 2. Every later block is parsed chunk by chunk from its start (a block
///    always starts with a chunk), stopping at the block's first invalid chunk.
///
/// With `stop_at_any` the search ends at the first verified chunk of step 2.
pub(crate) fn evidence_after(data: &[u8], segment: u64, p: usize, r: usize, stop_at_any: bool) -> Evidence {
    if let Some(proof) = search_own_block(data, segment, p, r) {
        return proof;
    }
    let mut found = false;
    let mut block = next_block_start(p);
    while block < data.len() {
        let block_end = block.saturating_add(BLOCK_SIZE);
        let mut q = block;
        while q < block_end && !in_trailer(q) {
            let Parsed::Chunk(c) = parse_chunk(data, q, segment) else {
                break;
            };
            if c.synced_to > r as u64 {
                return Evidence::Synced { at: q, synced_to: c.synced_to };
            }
            if stop_at_any {
                return Evidence::Unsynced;
            }
            found = true;
            q = c.end;
        }
        block = block.saturating_add(BLOCK_SIZE);
    }
    if found {
        Evidence::Unsynced
    } else {
        Evidence::Nothing
    }
}

/// Step 1 of [`evidence_after`]. Cheap header checks (type, `synced_to`
/// range, length) filter candidates before the checksum is computed, so the
/// scan is linear in practice; the type test looks at 8 offsets at a time.
fn search_own_block(data: &[u8], segment: u64, p: usize, r: usize) -> Option<Evidence> {
    let first = p.checked_add(1)?;
    let block_end = next_block_start(p).min(data.len());
    let region = data.get(first..block_end)?;
    // Byte i of `type_bytes` is the type byte (header byte 6) of a chunk
    // starting at region offset i.
    let type_bytes = region.get(6..)?;
    let mut words = type_bytes.chunks_exact(8);
    for (w, word) in words.by_ref().enumerate() {
        let word = u64::from_le_bytes(word.try_into().ok()?);
        let mut hits = known_type_bytes(word);
        while hits != 0 {
            let i = w * 8 + (hits.trailing_zeros() / 8) as usize;
            hits &= hits - 1;
            if let Some(found) = try_candidate(data, segment, first + i, r, block_end) {
                return Some(found);
            }
        }
    }
    let tail_start = type_bytes.len() - words.remainder().len();
    for (j, &kind) in words.remainder().iter().enumerate() {
        if (1..=6).contains(&kind) {
            let q = first + tail_start + j;
            if let Some(found) = try_candidate(data, segment, q, r, block_end) {
                return Some(found);
            }
        }
    }
    None
}

/// Sets the high bit of every byte of `x` that is in `1..=6` (a known chunk
/// type), clears all other bits ("hasbetween" from Bit Twiddling Hacks; exact,
/// as masking to 7 bits rules out borrows and carries between bytes).
fn known_type_bytes(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOW7: u64 = ONES * 0x7f;
    const HIGH: u64 = ONES * 0x80;
    let x7 = x & LOW7;
    // Byte-wise: (134 - b7) has bit 7 set iff b7 < 7; (b7 + 127) iff b7 > 0;
    // `!x` requires bit 7 of b itself to be clear.
    (ONES * (127 + 7) - x7) & !x & (x7 + ONES * 127) & HIGH
}

/// Checks a candidate chunk at `q` whose type byte is known: returns the
/// proof if its `synced_to` exceeds `r` and it verifies.
fn try_candidate(data: &[u8], segment: u64, q: usize, r: usize, block_end: usize) -> Option<Evidence> {
    let window = data.get(q..q.checked_add(HEADER_SIZE)?)?;
    let [_, _, _, _, l0, l1, _, s0, s1, s2, s3] = <[u8; HEADER_SIZE]>::try_from(window).ok()?;
    let synced_to = u64::from(u32::from_le_bytes([s0, s1, s2, s3]));
    let end = q + HEADER_SIZE + usize::from(u16::from_le_bytes([l0, l1]));
    if synced_to <= r as u64 || synced_to > q as u64 || end > block_end {
        return None;
    }
    match parse_chunk(data, q, segment) {
        Parsed::Chunk(c) => Some(Evidence::Synced { at: q, synced_to: c.synced_to }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_type_bytes_is_exact() {
        for b in 0..=255u8 {
            for pos in 0..8 {
                // Surround the byte with neighbours that stress borrows/carries.
                for fill in [0x00u8, 0x01, 0x06, 0x07, 0x7f, 0x80, 0xff] {
                    let mut bytes = [fill; 8];
                    bytes[pos] = b;
                    let hits = known_type_bytes(u64::from_le_bytes(bytes));
                    for (i, &byte) in bytes.iter().enumerate() {
                        let hit = hits & (0x80 << (8 * i)) != 0;
                        assert_eq!(hit, (1..=6).contains(&byte), "{bytes:?}");
                    }
                    assert_eq!(hits & !0x8080_8080_8080_8080, 0);
                }
            }
        }
    }
}
