//! Builder options.

use crate::compression::Compression;

/// Largest block size honoured; larger settings are clamped (block offsets are u32).
pub(crate) const MAX_BLOCK_SIZE: usize = 1 << 30;

/// Builder options.
#[derive(Debug, Clone)]
pub struct TableOptions {
    /// Target uncompressed data block size: a block is cut as soon as its size reaches
    /// this (so blocks exceed it by at most one entry). Clamped to 1 B ..= 1 GiB.
    /// Default 4 KiB. Larger blocks make scans cheaper (a scan pays a block cache lookup
    /// per block) and point reads that miss the block cache dearer (each reads, checksums
    /// and searches a whole block): 8 KiB blocks scanned 1 M keys about 12% faster and
    /// served about 12% fewer random gets on 10 M keys with a 32 MiB cache (DESIGN.md,
    /// "Range reads").
    pub block_size: usize,
    /// Most keys between restart points (0 is treated as 1).
    pub restart_interval: usize,
    /// A data block entry that starts this many bytes or more after the last restart
    /// point becomes a restart point itself, even before `restart_interval` keys (0: no
    /// byte bound; default 256). A point lookup scans entries linearly from a restart
    /// point, so this bounds that scan to a few cache lines when values are large, for
    /// the cost of a 4-byte restart offset and the key's shared prefix per restart.
    pub restart_bytes: usize,
    /// Index entries between restart points (0 is treated as 1; default 4). Readers keep
    /// one `u64` per index restart point in memory besides the block, and every restart
    /// point costs a 4-byte offset and an unshared key: a larger interval makes the index
    /// smaller in the block cache (per data block about 37 bytes at 1, 24 at 4, 21 at 16),
    /// for a forward scan of up to that many entries per lookup.
    pub index_restart_interval: usize,
    /// Bloom filter bits per key; 0 disables the filter.
    pub bloom_bits_per_key: u32,
    /// How data blocks are compressed (default [`Compression::Lz4`]). A block is stored
    /// compressed only if that makes it more than 1/8 smaller. Filter, index and meta
    /// blocks are never compressed.
    pub compression: Compression,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            restart_interval: 16,
            restart_bytes: 256,
            index_restart_interval: 4,
            bloom_bits_per_key: 10,
            compression: Compression::default(),
        }
    }
}

impl TableOptions {
    /// The options with out-of-range values clamped.
    pub(crate) fn sanitized(mut self) -> Self {
        self.block_size = self.block_size.clamp(1, MAX_BLOCK_SIZE);
        self.restart_interval = self.restart_interval.max(1);
        self.index_restart_interval = self.index_restart_interval.max(1);
        self
    }
}
