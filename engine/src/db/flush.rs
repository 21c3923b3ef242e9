//! Writing tables, and flushing frozen memtables to level 0.

use super::gc::{Decision, GcFilter, GcPoint};
use super::{DbInner, ReadState};
use crate::file_remover::FileRemover;
use crate::filename;
use crate::fs::{FileWriter, Fs};
use crate::invariants::invariant;
use crate::iter::InternalIterator;
use crate::iter::MergingIter;
use crate::key::{self, EntryKind};
use crate::memtable::{Memtable, MemtableIter};
use crate::options::compression_for_level;
use crate::stats::Counters;
use crate::table_cache::TableCache;
use crate::version::{FileDesc, TableFile, VersionEdit, EARLIEST_EXPIRY_PROPERTY};
use crate::{Error, Result};
use stampkv_sstable::{BlockCache, Compression, IndexFilterPlacement, TableBuilder, TableOptions};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A table being written.
pub(crate) struct TableOutput {
    pub number: u64,
    /// The level the table goes into.
    level: usize,
    builder: TableBuilder<FileWriter>,
    last_key: Vec<u8>,
    /// Earliest expiry of the expiring values written.
    earliest_expiry_ms: Option<u64>,
}

impl TableOutput {
    /// Puts the table's data blocks into `cache` as they are written (see
    /// [`TableBuilder::fill_block_cache`]).
    pub(crate) fn fill_block_cache(&mut self, cache: Arc<BlockCache>) {
        self.builder.fill_block_cache(cache, self.number);
    }

    /// Adds an entry according to a GC decision (dropped entries are not passed here).
    pub(crate) fn add(
        &mut self,
        user_key: &[u8],
        trailer: u64,
        value: &[u8],
        decision: Decision,
    ) -> Result<()> {
        match decision {
            Decision::Keep => {
                if key::trailer_kind(trailer) == EntryKind::PutExpiring as u8 {
                    if let Some((at, _)) = key::split_expiring(value) {
                        self.earliest_expiry_ms = Some(self.earliest_expiry_ms.map_or(at, |t| t.min(at)));
                    }
                }
                self.builder.add(user_key, trailer, value)?
            }
            Decision::KeepAsTombstone => {
                let tombstone = key::trailer(key::trailer_seq(trailer), EntryKind::Delete);
                self.builder.add(user_key, tombstone, &[])?
            }
            Decision::Drop => return Ok(()),
        }
        if self.last_key != user_key {
            self.last_key.clear();
            self.last_key.extend_from_slice(user_key);
        }
        Ok(())
    }

    /// Bytes written so far.
    pub(crate) fn size(&self) -> u64 {
        self.builder.estimated_size()
    }

    /// Whether nothing was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.builder.entry_count() == 0
    }

    /// The last user key added.
    pub(crate) fn last_key(&self) -> &[u8] {
        &self.last_key
    }
}

/// What writing and opening tables needs; shared by open-time recovery and the database.
pub(crate) struct TableEnv {
    pub fs: Arc<dyn Fs>,
    pub dir: PathBuf,
    pub options: TableOptions,
    /// See [`crate::Options::compression_per_level`].
    pub compression_per_level: Vec<Compression>,
    pub cache: Arc<BlockCache>,
    /// Open tables, at most `Options::max_open_files`.
    pub table_cache: Arc<TableCache>,
    /// Removes obsolete tables (see [`FileRemover`]).
    pub remover: Arc<FileRemover>,
    /// New tables' data blocks go into the block cache's free room as they are written
    /// (see [`crate::Options::prepopulate_block_cache`]); false unless set.
    prepopulate_block_cache: bool,
}

impl TableEnv {
    /// The environment for tables of `dir`: compressed as `compression_per_level` says
    /// (see [`crate::Options::compression_per_level`]), with a block cache of
    /// `block_cache_bytes` and at most `max_open_files` tables open (their index and filter
    /// blocks in that cache if `cache_index_and_filter_blocks`).
    pub(crate) fn new(
        fs: Arc<dyn Fs>,
        dir: &std::path::Path,
        options: TableOptions,
        compression_per_level: Vec<Compression>,
        block_cache_bytes: usize,
        max_open_files: usize,
        cache_index_and_filter_blocks: bool,
    ) -> Self {
        let cache = Arc::new(BlockCache::new(block_cache_bytes));
        let placement = if cache_index_and_filter_blocks {
            IndexFilterPlacement::BlockCache
        } else {
            IndexFilterPlacement::Pinned
        };
        let table_cache =
            Arc::new(TableCache::new(fs.clone(), dir, cache.clone(), max_open_files, placement));
        TableEnv {
            fs,
            dir: dir.to_path_buf(),
            options,
            compression_per_level,
            cache,
            table_cache,
            remover: Arc::new(FileRemover::new()),
            prepopulate_block_cache: false,
        }
    }

    /// Has new tables' data blocks go into the block cache's free room as they are written,
    /// and removed tables' blocks leave it (see [`crate::Options::prepopulate_block_cache`]).
    pub(crate) fn set_prepopulate_block_cache(&mut self, on: bool) {
        self.prepopulate_block_cache = on;
        self.remover.set_evict_blocks(on);
    }

    /// Creates table file `number`, to go into `level`, and a builder writing to it
    /// (compressing as that level is configured to).
    pub(crate) fn start(&self, number: u64, level: usize) -> Result<TableOutput> {
        let path = filename::table_path(&self.dir, number);
        let file = self.fs.create(&path).map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        let compression = compression_for_level(&self.options, &self.compression_per_level, level);
        let options = TableOptions { compression, ..self.options.clone() };
        let mut builder = TableBuilder::new(FileWriter::new(file), options);
        if self.prepopulate_block_cache {
            builder.fill_block_cache_free_room(self.cache.clone(), number);
        }
        Ok(TableOutput { number, level, builder, last_key: Vec::new(), earliest_expiry_ms: None })
    }

    /// Finishes and syncs a table and opens it; `None` (and no file) if it is empty. The
    /// caller syncs the directory before recording the file in the manifest.
    pub(crate) fn finish(&self, output: TableOutput) -> Result<Option<Arc<TableFile>>> {
        let path = filename::table_path(&self.dir, output.number);
        let name = path.display().to_string();
        if output.is_empty() {
            drop(output);
            self.fs.remove(&path).map_err(|e| Error::io(format!("removing {name}"), e))?;
            return Ok(None);
        }
        let level = output.level;
        let expiry = output.earliest_expiry_ms.map(u64::to_le_bytes);
        let properties: Vec<(&str, &[u8])> =
            expiry.as_ref().map(|bytes| (EARLIEST_EXPIRY_PROPERTY, &bytes[..])).into_iter().collect();
        let (summary, writer) = output.builder.finish(&properties)?;
        let file = writer.finish_synced().map_err(|e| Error::io(format!("writing {name}"), e))?;
        let desc = FileDesc {
            number: output.number,
            size: summary.file_size,
            entry_count: summary.entry_count,
            smallest_key: summary.smallest_key,
            smallest_trailer: summary.smallest_trailer,
            largest_key: summary.largest_key,
            largest_trailer: summary.largest_trailer,
        };
        self.open_file(desc, file, level).map(Some)
    }

    /// Opens a table the manifest lists (verifying it; the table cache keeps it open
    /// while it has room).
    pub(crate) fn open_existing(&self, desc: FileDesc) -> Result<Arc<TableFile>> {
        let table = self.table_cache.open_verified(desc.number)?;
        Ok(self.live_file(desc, &table))
    }

    /// Opens a table just written for `level`. A level-0 table keeps its index and filter
    /// itself (RocksDB's `pin_l0_filter_and_index_blocks_in_cache`): every point read
    /// consults every level-0 table, and a table holding them skips a block cache lookup
    /// each (a lock and a reference count); they are counted in `pinned_table_bytes`, and
    /// level 0 holds few tables.
    fn open_file(
        &self,
        desc: FileDesc,
        file: Arc<dyn crate::fs::FsFile>,
        level: usize,
    ) -> Result<Arc<TableFile>> {
        let table = if level == 0 {
            self.table_cache.open_with(desc.number, file, IndexFilterPlacement::Pinned)?
        } else {
            self.table_cache.open_file(desc.number, file)?
        };
        Ok(self.live_file(desc, &table))
    }

    fn live_file(&self, desc: FileDesc, table: &stampkv_sstable::Table) -> Arc<TableFile> {
        let path = filename::table_path(&self.dir, desc.number);
        Arc::new(TableFile::new(
            desc,
            table,
            self.table_cache.clone(),
            path,
            self.fs.clone(),
            self.remover.clone(),
        ))
    }

    /// Makes newly created files' directory entries durable.
    pub(crate) fn sync_dir(&self) -> Result<()> {
        self.fs.sync_dir(&self.dir).map_err(|e| Error::io("syncing the database directory", e))
    }

    /// Writes a memtable's entries to level-0 table `number`, dropping versions no reader
    /// can see.
    pub(crate) fn write_memtable(
        &self,
        mem: &Arc<Memtable>,
        point: GcPoint,
        number: u64,
    ) -> Result<Option<Arc<TableFile>>> {
        self.write_memtables(std::slice::from_ref(mem), point, number)
    }

    /// Writes the entries of several memtables, merged, to level-0 table `number`,
    /// dropping versions no reader can see.
    pub(crate) fn write_memtables(
        &self,
        mems: &[Arc<Memtable>],
        point: GcPoint,
        number: u64,
    ) -> Result<Option<Arc<TableFile>>> {
        if mems.iter().all(|mem| mem.is_empty()) {
            return Ok(None);
        }
        let mut output = self.start(number, 0)?;
        let mut filter = GcFilter::new(point);
        let mut iter = MergingIter::new(
            mems.iter()
                .map(|mem| Box::new(MemtableIter::new(mem.clone())) as Box<dyn InternalIterator>)
                .collect(),
        );
        iter.seek_to_first()?;
        while iter.valid() {
            // Tombstones stay: older versions may live in the levels below.
            let decision = filter.decide(iter.user_key(), iter.trailer(), iter.value(), |_| false);
            output.add(iter.user_key(), iter.trailer(), iter.value(), decision)?;
            iter.next()?;
        }
        self.finish(output)
    }
}

impl DbInner {
    /// The oldest sequence number and time any reader may still use.
    pub(crate) fn gc_point(&self) -> GcPoint {
        let snapshots = self.snapshots.lock();
        let visible = self.visible_seq.load(Ordering::Acquire);
        let now = self.clock.now_ms();
        match snapshots.horizon() {
            Some((seq, time)) => GcPoint { smallest_snapshot: seq.min(visible), time_ms: time.min(now) },
            None => GcPoint { smallest_snapshot: visible, time_ms: now },
        }
    }

    /// Starts a new table file, to go into `level`.
    pub(crate) fn start_table(&self, level: usize) -> Result<TableOutput> {
        self.tables.start(self.next_file.fetch_add(1, Ordering::SeqCst), level)
    }

    /// Finishes a table (see [`TableEnv::finish`]).
    pub(crate) fn finish_table(&self, output: TableOutput) -> Result<Option<Arc<TableFile>>> {
        self.tables.finish(output)
    }

    /// Makes newly created files' directory entries durable.
    pub(crate) fn sync_dir(&self) -> Result<()> {
        self.tables.sync_dir()
    }

    /// Flushes every frozen memtable, merged, into one level-0 table, once at least
    /// `memtables_per_flush` are frozen, or once any is while a [`DbInner::flush`] waits.
    /// Returns false if it flushed nothing.
    pub(crate) fn flush_frozen(&self) -> Result<bool> {
        let forced = self.forced_flushes.load(Ordering::Acquire) > 0;
        // Newest first, like `ReadState::imms`.
        let batch = self.read_state.read().imms.clone();
        if batch.is_empty() || (!forced && batch.len() < self.options.memtables_per_flush) {
            return Ok(false);
        }
        if self.is_poisoned() {
            return Err(Error::Poisoned { reason: "flush stopped after an earlier failure".into() });
        }
        let number = self.next_file.fetch_add(1, Ordering::SeqCst);
        let file = self.tables.write_memtables(&batch, self.gc_point(), number)?;
        if file.is_some() {
            self.sync_dir()?;
        }
        let newest = batch.first().ok_or(Error::Closed)?;
        let mut versions = self.versions.lock();
        let next_segment = {
            let state = self.read_state.read();
            // Only this thread removes frozen memtables, and new ones join at the front:
            // the batch is still the oldest end of the list.
            let kept = state.imms.len().checked_sub(batch.len());
            invariant!(
                kept.is_some_and(|kept| {
                    state.imms.iter().skip(kept).zip(&batch).all(|(now, flushed)| Arc::ptr_eq(now, flushed))
                }),
                "flush: the frozen memtables being flushed are no longer the oldest"
            );
            match kept.and_then(|kept| kept.checked_sub(1)).and_then(|i| state.imms.get(i)) {
                Some(next) => next.wal_segment(),
                None => state.mem.wal_segment(),
            }
        };
        let added: Vec<Arc<TableFile>> = file.into_iter().collect();
        let edit = VersionEdit {
            log_number: Some(next_segment),
            last_seq: Some(newest.sealed_seq()),
            added: added.iter().map(|f| (0, f.desc.clone())).collect(),
            ..VersionEdit::default()
        };
        let version = versions.log_and_apply(edit, &added, &self.next_file)?;
        {
            let mut state = self.read_state.write();
            let mut imms = state.imms.clone();
            imms.truncate(imms.len().saturating_sub(batch.len()));
            *state = Arc::new(ReadState { mem: state.mem.clone(), imms, version });
        }
        drop(versions);
        self.remove_wal_segments_below(next_segment);
        Counters::add(&self.counters.flushes, 1);
        Counters::add(&self.counters.flush_bytes, added.iter().map(|f| f.desc.size).sum());
        Counters::add(
            &self.counters.flush_bytes_uncompressed,
            added.iter().map(|f| f.uncompressed_size()).sum(),
        );
        Ok(true)
    }

    /// Removes WAL segments whose commits are all in tables.
    fn remove_wal_segments_below(&self, number: u64) {
        let mut obsolete = Vec::new();
        self.wal_segments.lock().retain(|&segment| {
            let keep = segment >= number;
            if !keep {
                obsolete.push(segment);
            }
            keep
        });
        // Outside the lock, which a memtable switch takes on the commit path, and through
        // the remover: an unlink can take long. A segment that cannot be removed now is
        // removed at the next open.
        for segment in obsolete {
            self.tables.remover.remove(&self.fs, &filename::wal_path(&self.dir, segment));
        }
    }
}
