//! A key buffer that holds short keys inline.
//!
//! A block iterator rebuilds each prefix-compressed key from the previous one. A point
//! lookup makes two such iterators (index block, data block) and drops them after a few
//! entries, so a heap buffer would cost an allocation, often a regrowth, and a free per
//! lookup: a fifth of an in-cache get's instructions. Keys up to [`INLINE_BYTES`] (a
//! user key of up to 56 bytes plus its 8-byte trailer) stay in the buffer itself; a
//! longer key moves to the heap, whose allocation is kept for the iterator's next keys.

/// Longest key held without a heap allocation.
pub(crate) const INLINE_BYTES: usize = 64;

/// Bytes [`KeyBuf::replace_suffix`] copies in one fixed-size move.
pub(crate) const SUFFIX_WINDOW: usize = 32;

/// A growable byte buffer, inline up to [`INLINE_BYTES`].
///
/// Invariant: when `spilled` is false the key is `inline[..len]` and `len <= INLINE_BYTES`;
/// when true it is `heap` (and `len` is unused).
#[derive(Clone)]
pub(crate) struct KeyBuf {
    inline: [u8; INLINE_BYTES],
    len: usize,
    heap: Vec<u8>,
    spilled: bool,
}

impl Default for KeyBuf {
    fn default() -> Self {
        KeyBuf { inline: [0; INLINE_BYTES], len: 0, heap: Vec::new(), spilled: false }
    }
}

impl KeyBuf {
    /// The bytes held.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        if self.spilled {
            &self.heap
        } else {
            debug_assert!(self.len <= INLINE_BYTES, "inline key length {} over {INLINE_BYTES}", self.len);
            self.inline.get(..self.len).unwrap_or_default()
        }
    }

    /// Number of bytes held.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        if self.spilled {
            self.heap.len()
        } else {
            self.len
        }
    }

    /// Empties the buffer (back to inline storage; a heap allocation is kept for reuse).
    #[inline]
    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.heap.clear();
        self.spilled = false;
    }

    /// Keeps the first `len` bytes (no-op if there are fewer).
    #[inline]
    pub(crate) fn truncate(&mut self, len: usize) {
        if self.spilled {
            self.heap.truncate(len);
        } else {
            self.len = self.len.min(len);
        }
    }

    /// Appends `bytes`, moving the key to the heap if it outgrows the inline storage.
    #[inline]
    pub(crate) fn extend_from_slice(&mut self, bytes: &[u8]) {
        if self.spilled {
            self.heap.extend_from_slice(bytes);
            return;
        }
        let end = self.len + bytes.len();
        if let Some(dst) = self.inline.get_mut(self.len..end) {
            dst.copy_from_slice(bytes);
            self.len = end;
        } else {
            self.spill(bytes);
        }
    }

    /// `truncate(shared)` then `extend_from_slice(&rest[..len])`: `rest` starts with the
    /// `len` bytes to append, and what follows them is ignored. An inline key that keeps
    /// `shared` bytes and stays inline, with at least [`SUFFIX_WINDOW`] bytes in `rest` and
    /// `len` no more than that, takes the window in one fixed-size copy, with no call to a
    /// variable-length copy (the bytes copied past the new length are not part of the key).
    /// Requires `len <= rest.len()`.
    #[inline]
    pub(crate) fn replace_suffix(&mut self, shared: usize, rest: &[u8], len: usize) {
        if !self.spilled && shared <= self.len && len <= SUFFIX_WINDOW {
            let dst = self.inline.get_mut(shared..shared + SUFFIX_WINDOW);
            if let (Some(dst), Some(window)) = (dst, rest.first_chunk::<SUFFIX_WINDOW>()) {
                dst.copy_from_slice(window);
                self.len = shared + len;
                return;
            }
        }
        debug_assert!(len <= rest.len(), "suffix of {len} bytes from {} bytes", rest.len());
        self.truncate(shared);
        self.extend_from_slice(rest.get(..len).unwrap_or(rest));
    }

    /// Moves the inline key plus `bytes` to the heap.
    #[cold]
    fn spill(&mut self, bytes: &[u8]) {
        self.heap.clear();
        self.heap.extend_from_slice(self.inline.get(..self.len).unwrap_or_default());
        self.heap.extend_from_slice(bytes);
        self.spilled = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every operation against a `Vec<u8>` model, across the inline/heap boundary.
    #[test]
    fn matches_a_vec() {
        let mut rng = stampkv_testkit::SplitMix64::new(7);
        let mut buf = KeyBuf::default();
        let mut model: Vec<u8> = Vec::new();
        for step in 0..20_000 {
            match rng.below(10) {
                0 => {
                    buf.clear();
                    model.clear();
                }
                1..=3 => {
                    let len = rng.below(model.len() as u64 + 2) as usize;
                    buf.truncate(len);
                    model.truncate(len);
                }
                _ => {
                    let bytes: Vec<u8> = (0..rng.below(40)).map(|_| rng.next_u64() as u8).collect();
                    buf.extend_from_slice(&bytes);
                    model.extend_from_slice(&bytes);
                }
            }
            assert_eq!(buf.as_slice(), model.as_slice(), "step {step}");
            assert_eq!(buf.len(), model.len(), "step {step}");
        }
    }

    /// `replace_suffix` against `truncate` + `extend_from_slice` on a `Vec<u8>` model:
    /// windows that fit inline, ones that spill, rests shorter than a window.
    #[test]
    fn replace_suffix_matches_truncate_and_extend() {
        let mut rng = stampkv_testkit::SplitMix64::new(9);
        let mut buf = KeyBuf::default();
        let mut model: Vec<u8> = Vec::new();
        for step in 0..20_000 {
            if rng.below(20) == 0 {
                buf.clear();
                model.clear();
            }
            let shared = rng.below(model.len() as u64 + 1) as usize;
            // Rests shorter and longer than the window, suffixes up to past it.
            let rest: Vec<u8> =
                (0..rng.below(2 * SUFFIX_WINDOW as u64)).map(|_| rng.next_u64() as u8).collect();
            let len = rng.below(rest.len() as u64 + 1) as usize;
            buf.replace_suffix(shared, &rest, len);
            model.truncate(shared);
            model.extend_from_slice(&rest[..len]);
            assert_eq!(buf.as_slice(), model.as_slice(), "step {step}");
            assert_eq!(buf.len(), model.len(), "step {step}");
        }
    }

    #[test]
    fn spills_exactly_past_the_inline_size() {
        let mut buf = KeyBuf::default();
        buf.extend_from_slice(&[1; INLINE_BYTES]);
        assert!(!buf.spilled);
        buf.extend_from_slice(&[2]);
        assert!(buf.spilled);
        assert_eq!(buf.len(), INLINE_BYTES + 1);
        buf.clear();
        assert!(!buf.spilled);
        assert!(buf.heap.capacity() > INLINE_BYTES, "the heap allocation is kept");
    }
}
