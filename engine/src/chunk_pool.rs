//! Memtable arena chunks kept for the next memtables instead of handed back to the OS.
//!
//! A memtable's skiplist lives in large anonymous mappings (see `skiplist.rs`). When a
//! flushed memtable is dropped, unmapping them and mapping fresh ones for the next
//! memtable makes the kernel zero every page again on first touch; on a virtual machine a
//! first touch can also make the host back the page, and a random fill spent about a fifth
//! of its time there. The pool keeps the chunks of dropped memtables (up to what one flush
//! frees, `write_buffer_size × memtables_per_flush`) and hands them to the next memtables,
//! zeroed by a `memset` in place. Memtables take from the pool before mapping new memory,
//! so pooled and live memtable memory together stay within the configured write-buffer
//! bound. Chunks unused for [`IDLE_RELEASE`] are unmapped (the compaction thread checks
//! once a second), so an idle database does not hold them.

use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// A pool that has handed out or taken back no chunk for this long is emptied.
pub(crate) const IDLE_RELEASE: Duration = Duration::from_secs(5);

/// Arena chunks of one size, kept for reuse.
pub(crate) struct ChunkPool {
    chunk_bytes: usize,
    max_chunks: usize,
    /// The chunks, and when one was last taken or given.
    chunks: Mutex<(Vec<memmap2::MmapMut>, Instant)>,
}

impl ChunkPool {
    /// A pool of chunks of exactly `chunk_bytes`, holding at most `max_bytes` of them.
    pub(crate) fn new(chunk_bytes: usize, max_bytes: usize) -> Self {
        let chunks = Mutex::new((Vec::new(), Instant::now()));
        ChunkPool { chunk_bytes, max_chunks: max_bytes / chunk_bytes.max(1), chunks }
    }

    /// The size of the chunks this pool keeps.
    pub(crate) fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// A zero-filled chunk of [`ChunkPool::chunk_bytes`] from the pool, if it has one.
    pub(crate) fn take(&self) -> Option<memmap2::MmapMut> {
        let mut chunk = {
            let mut chunks = self.chunks.lock();
            chunks.1 = Instant::now();
            chunks.0.pop()?
        };
        chunk.fill(0);
        Some(chunk)
    }

    /// Keeps `chunk` if it has the pool's size and the pool has room; otherwise unmaps it.
    pub(crate) fn give(&self, chunk: memmap2::MmapMut) {
        if chunk.len() == self.chunk_bytes {
            let mut chunks = self.chunks.lock();
            chunks.1 = Instant::now();
            if chunks.0.len() < self.max_chunks {
                chunks.0.push(chunk);
            }
        }
    }

    /// Bytes of the chunks waiting in the pool.
    pub(crate) fn pooled_bytes(&self) -> usize {
        self.chunks.lock().0.len() * self.chunk_bytes
    }

    /// Unmaps every pooled chunk if none was taken or given for `idle`; returns how many
    /// bytes that released.
    pub(crate) fn release_if_idle(&self, idle: Duration) -> usize {
        let chunks = {
            let mut chunks = self.chunks.lock();
            if chunks.1.elapsed() < idle {
                return 0;
            }
            std::mem::take(&mut chunks.0)
        };
        chunks.len() * self.chunk_bytes
    }
}

impl std::fmt::Debug for ChunkPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkPool")
            .field("chunk_bytes", &self.chunk_bytes)
            .field("max_chunks", &self.max_chunks)
            .field("pooled_bytes", &self.pooled_bytes())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_come_back_zeroed_and_the_pool_stays_within_its_bound() {
        let pool = ChunkPool::new(1 << 20, 2 << 20);
        assert!(pool.take().is_none());
        for _ in 0..3 {
            let mut chunk = memmap2::MmapMut::map_anon(1 << 20).expect("map");
            chunk.fill(0xAB);
            pool.give(chunk);
        }
        pool.give(memmap2::MmapMut::map_anon(4096).expect("map")); // another size: dropped
        assert_eq!(pool.pooled_bytes(), 2 << 20, "at most max_bytes kept");
        let chunk = pool.take().expect("pooled chunk");
        assert_eq!(chunk.len(), 1 << 20);
        assert!(chunk.iter().all(|&b| b == 0), "a reused chunk is zero-filled");
        assert_eq!(pool.release_if_idle(Duration::from_secs(3600)), 0, "just used");
        assert_eq!(pool.release_if_idle(Duration::ZERO), 1 << 20);
        assert_eq!(pool.pooled_bytes(), 0);
        assert!(pool.take().is_none());
    }
}
