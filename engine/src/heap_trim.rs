//! Handing memory that the allocator keeps after it was freed back to the OS
//! (`Options::release_freed_memory`).
//!
//! The block cache frees and allocates blocks all the time (4 KiB data blocks, index and
//! filter blocks of a few hundred KiB), on reader threads and on the compaction thread.
//! glibc's malloc keeps an arena per thread and returns freed memory to the OS only from
//! the top of each heap, so the holes this churn leaves stay resident: at 10 M keys with a
//! 256 MiB cache, about 90 MiB beyond the live heap. `malloc_trim(0)` releases the free
//! pages of every arena (`madvise(MADV_DONTNEED)`). The compaction thread calls it at most
//! once per [`TRIM_INTERVAL`], and only if blocks came and went since the last call (block
//! cache misses or compactions). Other allocators and platforms: nothing to do.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Least time between two trims. A quarter second: at 100 M keys with fills at half a
/// million puts a second, trimming at most once a second let RSS peak at 616 MiB (273 MiB
/// beyond the engine's own account); four times a second, 488 MiB (146 MiB beyond), for
/// 1.6 ms per trim on the compaction thread.
pub(crate) const TRIM_INTERVAL: Duration = Duration::from_millis(250);

/// Rate-limits `malloc_trim` and counts the calls and the time they took.
#[derive(Debug)]
pub(crate) struct HeapTrimmer {
    /// When the last trim ran, and the churn count it saw then.
    last: Mutex<(Instant, u64)>,
    trims: AtomicU64,
    trim_micros: AtomicU64,
}

impl HeapTrimmer {
    pub(crate) fn new() -> Self {
        HeapTrimmer {
            last: Mutex::new((Instant::now(), 0)),
            trims: AtomicU64::new(0),
            trim_micros: AtomicU64::new(0),
        }
    }

    /// Trims if [`TRIM_INTERVAL`] has passed since the last trim and `churn` (a count that
    /// grows as memory is freed: block cache misses plus compactions) has changed.
    /// Returns whether it trimmed.
    pub(crate) fn trim_if_due(&self, churn: u64) -> bool {
        let start = Instant::now();
        {
            let mut last = self.last.lock();
            if start.duration_since(last.0) < TRIM_INTERVAL || last.1 == churn {
                return false;
            }
            *last = (start, churn);
        }
        if !release_free_heap_pages() {
            return false;
        }
        self.trims.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.trim_micros.fetch_add(micros, Ordering::Relaxed);
        true
    }

    /// Trims done, and the microseconds they took in all.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (self.trims.load(Ordering::Relaxed), self.trim_micros.load(Ordering::Relaxed))
    }
}

/// Asks the allocator to return free pages to the OS; false where there is no such call.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_free_heap_pages() -> bool {
    #[allow(unsafe_code, reason = "FFI call into the C library")]
    // SAFETY: `malloc_trim` takes a plain integer, touches only the allocator's own state
    // under its own locks, and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
    true
}

/// Asks the allocator to return free pages to the OS; false where there is no such call.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_heap_pages() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_at_most_once_per_interval_and_only_after_churn() {
        let trimmer = HeapTrimmer::new();
        // Just created: the interval has not passed.
        assert!(!trimmer.trim_if_due(5));
        *trimmer.last.lock() = (Instant::now() - TRIM_INTERVAL, 5);
        // Interval passed, but nothing was freed since.
        assert!(!trimmer.trim_if_due(5));
        let trims = cfg!(all(target_os = "linux", target_env = "gnu"));
        assert_eq!(trimmer.trim_if_due(6), trims);
        assert!(!trimmer.trim_if_due(7), "a second trim within the interval");
        assert_eq!(trimmer.counts().0, u64::from(trims));
    }
}
