//! Builds one block: prefix-compressed entries, then the restart array.

use stampkv_coding::put_varint32;

/// Builds a block in memory.
///
/// Invariant: the caller keeps every block below 4 GiB (the table builder limits block
/// size and entry size), so offsets and lengths fit the `u32` / varint32 fields.
pub(crate) struct BlockBuilder {
    /// Entries so far; after `finish`, the whole block.
    buf: Vec<u8>,
    /// Offsets of the restart entries (the first is always 0).
    restarts: Vec<u32>,
    /// Entries added since the last restart point.
    counter: usize,
    /// Most entries between restart points (>= 1).
    interval: usize,
    /// Entry bytes after which the next entry starts a restart point (0: no byte bound).
    restart_bytes: usize,
    /// The previous key (for prefix compression).
    last_key: Vec<u8>,
    /// Entries in the block.
    entries: usize,
}

impl BlockBuilder {
    /// An empty block with a restart point every `interval` entries (clamped to >= 1).
    pub(crate) fn new(interval: usize) -> Self {
        Self::with_restart_bytes(interval, 0)
    }

    /// An empty block with a restart point every `interval` entries, or sooner: at the
    /// first entry that starts `restart_bytes` or more after the last restart point (0: no
    /// byte bound). A lookup's linear scan after its binary search over restart points then
    /// reads at most about `restart_bytes` plus one entry, however large the values.
    pub(crate) fn with_restart_bytes(interval: usize, restart_bytes: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            counter: 0,
            interval: interval.max(1),
            restart_bytes,
            last_key: Vec::new(),
            entries: 0,
        }
    }

    /// Appends an entry. Keys must be added in increasing order (checked by the caller).
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) {
        let last_restart = self.restarts.last().map_or(0, |&r| r as usize);
        let within_bytes =
            self.restart_bytes == 0 || self.buf.len().saturating_sub(last_restart) < self.restart_bytes;
        let shared = if self.counter < self.interval && within_bytes {
            key.iter().zip(&self.last_key).take_while(|(a, b)| a == b).count()
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
            0
        };
        let unshared = key.get(shared..).unwrap_or_default();
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, unshared.len() as u32);
        put_varint32(&mut self.buf, value.len() as u32);
        self.buf.extend_from_slice(unshared);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(unshared);
        self.counter += 1;
        self.entries += 1;
    }

    /// Whether no entry was added since the last reset.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The block size if it were finished now.
    pub(crate) fn size_estimate(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Appends the restart array and count and returns the finished block buffer. The
    /// caller may append to it (the block trailer) before writing; call `reset` next.
    pub(crate) fn finish(&mut self) -> &mut Vec<u8> {
        for &r in &self.restarts {
            self.buf.extend_from_slice(&r.to_le_bytes());
        }
        self.buf.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        &mut self.buf
    }

    /// Clears the builder for the next block (keeping its allocations).
    pub(crate) fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.last_key.clear();
        self.entries = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::BlockBuilder;
    use crate::key::push_stored_key;

    /// The worked example in FORMAT.md ("Keys: versioned keys and their order").
    #[test]
    fn format_doc_example() {
        let mut b = BlockBuilder::new(16);
        let mut key = Vec::new();
        push_stored_key(&mut key, b"ab", 0x0102);
        b.add(&key, b"x");
        let expected: &[u8] = &[
            0x00, 0x0A, 0x01, 0x61, 0x62, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0xFD, 0x78, 0x00, 0x00,
            0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
        ];
        assert_eq!(b.finish().as_slice(), expected);
        b.reset();
        assert_eq!(b.finish().as_slice(), &[0, 0, 0, 0, 1, 0, 0, 0]);
    }

    #[test]
    fn prefix_compression_and_restarts() {
        let mut b = BlockBuilder::new(2);
        b.add(b"apple", b"1");
        b.add(b"apply", b"2");
        b.add(b"apricot", b"3");
        let block = b.finish().clone();
        assert_eq!(&block[..9], &[0, 5, 1, b'a', b'p', b'p', b'l', b'e', b'1']);
        // Second entry shares "appl"; third is a restart point (full key).
        assert_eq!(&block[9..15], &[4, 1, 1, b'y', b'2', 0]);
        let restarts = &block[block.len() - 12..];
        assert_eq!(restarts, &[0, 0, 0, 0, 14, 0, 0, 0, 2, 0, 0, 0]);
    }

    /// The byte bound starts a restart point before the entry count does.
    #[test]
    fn restart_points_by_bytes() {
        // A restart entry is 3 + 5 + 6 = 14 bytes (three one-byte varints, key, value), a
        // delta entry after it 3 + 1 + 6 = 10 (it shares "key-").
        let keys = [b"key-a", b"key-b", b"key-c", b"key-d", b"key-e"];
        let restart_offsets = |restart_bytes: usize| {
            let mut b = BlockBuilder::with_restart_bytes(16, restart_bytes);
            for key in keys {
                b.add(key, b"value!");
            }
            let block = b.finish().clone();
            let count = u32::from_le_bytes(block[block.len() - 4..].try_into().unwrap()) as usize;
            let array = &block[block.len() - 4 - 4 * count..block.len() - 4];
            array.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect::<Vec<_>>()
        };
        assert_eq!(restart_offsets(0), vec![0]);
        // 20 bytes: the entry at 24 (24 past restart 0) and the one at 48 (24 past 24) restart.
        assert_eq!(restart_offsets(20), vec![0, 24, 48]);
        // 29 bytes: entries at 14 and 24 stay deltas, 34 restarts, 48 (14 past it) does not.
        assert_eq!(restart_offsets(29), vec![0, 34]);
    }
}
