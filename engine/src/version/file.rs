//! Table files: their persisted description, and their table through the table cache.

use crate::file_remover::FileRemover;
use crate::fs::Fs;
use crate::table_cache::TableCache;
use crate::Result;
use stampkv_sstable::Table;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

/// What the manifest records about a table file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileDesc {
    /// File number (the file is `{number:06}.sst`).
    pub number: u64,
    /// Size in bytes.
    pub size: u64,
    /// Number of entries.
    pub entry_count: u64,
    /// Smallest user key.
    pub smallest_key: Vec<u8>,
    /// Trailer of the smallest entry.
    pub smallest_trailer: u64,
    /// Largest user key.
    pub largest_key: Vec<u8>,
    /// Trailer of the largest entry.
    pub largest_trailer: u64,
}

impl FileDesc {
    /// Whether `user_key` lies within the file's key range.
    pub(crate) fn contains_user_key(&self, user_key: &[u8]) -> bool {
        self.smallest_key.as_slice() <= user_key && user_key <= self.largest_key.as_slice()
    }
}

/// A live table file. Its open [`Table`] comes from the table cache, which may close it
/// while no reader uses it and opens it again on demand. When a compaction replaces the
/// file, it is marked obsolete and removed once the last version (or iterator) holding it
/// lets go.
pub(crate) struct TableFile {
    /// The persisted description.
    pub desc: FileDesc,
    cache: Arc<TableCache>,
    path: PathBuf,
    fs: Arc<dyn Fs>,
    /// Removes the file once obsolete and unused (on its own thread while the database's
    /// background threads run).
    remover: Arc<FileRemover>,
    obsolete: AtomicBool,
    /// The earliest expiry time of an expiring value in the table, if any.
    earliest_expiry_ms: Option<u64>,
    /// The file's size had its data blocks been stored uncompressed.
    uncompressed_size: u64,
    /// Seeks this file may still absorb, as the newest of several runs covering the sought
    /// key, before a compaction is asked for it ([`TableFile::charge_seek`]).
    allowed_seeks: SeekAllowance,
}

/// A count of seeks still allowed, shared by every reader: charged with one atomic
/// subtraction while seeks are left, and only read once they are used up, so that
/// readers on many cores stop writing its cache line after that.
struct SeekAllowance(AtomicI64);

impl SeekAllowance {
    fn new(seeks: i64) -> Self {
        SeekAllowance(AtomicI64::new(seeks))
    }

    /// Charges one seek: true for the one that uses up the allowance (exactly once).
    fn charge(&self) -> bool {
        if self.exhausted() {
            return false;
        }
        self.0.fetch_sub(1, Ordering::Relaxed) == 1
    }

    fn exhausted(&self) -> bool {
        self.0.load(Ordering::Relaxed) <= 0
    }
}

/// Table bytes per seek a file absorbs before it is compacted: LevelDB's estimate is that
/// one seek costs about what compacting 40 KB does; 16 KiB is on the safe side.
pub(crate) const BYTES_PER_ALLOWED_SEEK: u64 = 16 << 10;
/// The fewest seeks a file absorbs before it is compacted (small files).
const MIN_ALLOWED_SEEKS: i64 = 100;

/// Name of the table property holding the earliest expiry time (u64 LE, milliseconds).
pub(crate) const EARLIEST_EXPIRY_PROPERTY: &str = "stampkv.earliest-expiry-ms";

impl TableFile {
    /// A live file whose table `table` was just opened through `cache`.
    pub(crate) fn new(
        desc: FileDesc,
        table: &Table,
        cache: Arc<TableCache>,
        path: PathBuf,
        fs: Arc<dyn Fs>,
        remover: Arc<FileRemover>,
    ) -> Self {
        let earliest_expiry_ms = table
            .user_property(EARLIEST_EXPIRY_PROPERTY)
            .and_then(|bytes| bytes.try_into().ok())
            .map(u64::from_le_bytes);
        let uncompressed_size = table.uncompressed_size();
        let desc_size = desc.size;
        TableFile {
            desc,
            cache,
            path,
            fs,
            remover,
            obsolete: AtomicBool::new(false),
            earliest_expiry_ms,
            uncompressed_size,
            allowed_seeks: SeekAllowance::new(
                i64::try_from(desc_size / BYTES_PER_ALLOWED_SEEK).unwrap_or(i64::MAX).max(MIN_ALLOWED_SEEKS),
            ),
        }
    }

    /// Charges one seek that positioned this file and an older run as well: true for the
    /// charge that uses up the file's allowance (exactly once per file).
    pub(crate) fn charge_seek(&self) -> bool {
        self.allowed_seeks.charge()
    }

    /// Whether seeks used up the file's allowance: a compaction would spare later seeks.
    pub(crate) fn seeks_exhausted(&self) -> bool {
        self.allowed_seeks.exhausted()
    }

    /// The file's size had its data blocks been stored uncompressed (known without
    /// opening the table again).
    pub(crate) fn uncompressed_size(&self) -> u64 {
        self.uncompressed_size
    }

    /// The open table, from the table cache or opened now (reading and verifying its
    /// footer, index and filter). Hold it only while using it.
    #[inline]
    pub(crate) fn table(&self) -> Result<Arc<Table>> {
        self.cache.get(self.desc.number)
    }

    /// The earliest expiry time of an expiring value in the table, if any: once it has
    /// passed, compacting the table reclaims space.
    pub(crate) fn earliest_expiry_ms(&self) -> Option<u64> {
        self.earliest_expiry_ms
    }

    /// Marks the file for removal when its last handle drops. Call only after the manifest
    /// edit that removed it from the live version is durable.
    pub(crate) fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }
}

impl Drop for TableFile {
    fn drop(&mut self) {
        // No version refers to the file any more: nothing will ask the cache for it.
        let table = self.cache.evict(self.desc.number);
        if self.obsolete.load(Ordering::Acquire) {
            // Not on this thread if it can be helped: an unlink can take long (see
            // `FileRemover`). A failure leaves an orphan that the next open removes.
            self.remover.remove_table(&self.fs, &self.path, table);
        }
    }
}

impl std::fmt::Debug for TableFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableFile").field("desc", &self.desc).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seek_allowance_answers_once_and_stops_counting_when_used_up() {
        let allowance = SeekAllowance::new(3);
        assert!(!allowance.charge() && !allowance.charge() && !allowance.exhausted());
        assert!(allowance.charge(), "the third seek uses it up");
        assert!(allowance.exhausted());
        assert!((0..100).all(|_| !allowance.charge()), "answered once");
        assert_eq!(allowance.0.load(Ordering::Relaxed), 0, "no charge written after it was used up");
    }
}
