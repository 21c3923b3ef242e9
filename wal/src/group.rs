//! [`Wal`]: the segmented log with group commit.
//!
//! Two locks, always taken in this order: `active` (the writer; serializes
//! appends and rotation) then `sync` (group-commit state). The fsync itself
//! runs with neither held, so appends continue while a sync is in flight.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
// The group-commit state uses the standard library's mutex and condition variable on
// purpose: `notify_all` there wakes every waiter at once, while parking_lot's requeues
// them onto the mutex and wakes them one after another, which on a VM (tens of µs per
// wake-up) serialises the followers of a group commit and halves its size.
use std::sync::{Condvar as StdCondvar, Mutex as StdMutex, MutexGuard as StdMutexGuard, PoisonError};

use crate::error::WalError;
use crate::file::SegmentDir;
use crate::invariants::invariant;
use crate::writer::{LogWriter, SegmentFile, WalOptions};

/// A position in the log: a byte count across all segments, monotonic.
///
/// The position of a byte is the sum of the lengths of the earlier segments
/// written by this [`Wal`] plus its offset in its own segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LogPosition(pub u64);

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalStats {
    /// Bytes of chunks written (headers, payloads and block padding; not preallocation).
    pub bytes_written: u64,
    /// Logical records appended.
    pub records_written: u64,
    /// `fdatasync` calls performed (group-commit syncs plus seals).
    pub syncs: u64,
    /// Zero bytes written ahead by preallocation.
    pub preallocated_bytes: u64,
    /// Write-back requests made ([`crate::WalOptions::writeback_bytes`]).
    pub writeback_requests: u64,
}

impl WalStats {
    /// Field-wise sum.
    pub(crate) fn plus(self, o: WalStats) -> WalStats {
        WalStats {
            bytes_written: self.bytes_written + o.bytes_written,
            records_written: self.records_written + o.records_written,
            syncs: self.syncs + o.syncs,
            preallocated_bytes: self.preallocated_bytes + o.preallocated_bytes,
            writeback_requests: self.writeback_requests + o.writeback_requests,
        }
    }
}

/// The segment being written.
struct Active<F: crate::LogFile> {
    writer: LogWriter<F>,
    /// Log position of offset 0 of the current segment.
    base: u64,
    closed: bool,
    /// Counters of the segments before the current one.
    earlier: WalStats,
}

/// Group-commit state. Invariant: `synced <= written <= appended`, all only grow.
struct SyncState<F> {
    /// End of the accepted records (written or deferred).
    appended: u64,
    /// End of the data handed to the OS.
    written: u64,
    /// End of the data known durable.
    synced: u64,
    /// A thread is in `fdatasync` right now (with this lock released).
    in_progress: bool,
    /// The current segment and its `base`, captured by the syncer.
    segment: Arc<SegmentFile<F>>,
    base: u64,
}

impl<F> SyncState<F> {
    /// Moves the positions to new values, which never lie behind the old ones.
    fn advance(&mut self, appended: u64, written: u64, synced: u64) {
        invariant!(
            appended >= self.appended && written >= self.written && synced >= self.synced,
            "log positions moved back: appended {} -> {appended}, written {} -> {written}, synced {} -> {synced}",
            self.appended,
            self.written,
            self.synced
        );
        invariant!(
            synced <= written && written <= appended,
            "log positions out of order: synced {synced}, written {written}, appended {appended}"
        );
        self.appended = appended;
        self.written = written;
        self.synced = synced;
    }
}

/// The segmented log with group commit.
pub struct Wal<D: SegmentDir> {
    dir: D,
    options: WalOptions,
    active: Mutex<Active<D::File>>,
    sync: StdMutex<SyncState<D::File>>,
    /// Signalled whenever a sync finishes (successfully or not) or `synced` moves.
    synced_cv: StdCondvar,
    /// Set after any failed write or sync; never cleared.
    poisoned: AtomicBool,
    group_syncs: AtomicU64,
}

impl<D: SegmentDir> std::fmt::Debug for Wal<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal").field("poisoned", &self.is_poisoned()).finish_non_exhaustive()
    }
}

impl<D: SegmentDir> Wal<D> {
    /// Creates segment `segment_number` and starts writing there: writes its
    /// SEGMENT_HEADER and syncs the directory. Positions start at 0.
    pub fn create(dir: D, segment_number: u64, options: WalOptions) -> Result<Self, WalError> {
        let file = dir.create_segment(segment_number)?;
        let writer = LogWriter::create(file, segment_number, options.clone())?;
        dir.sync_dir()?;
        let sync = SyncState {
            appended: writer.offset(),
            written: writer.offset(),
            synced: 0,
            in_progress: false,
            segment: writer.shared(),
            base: 0,
        };
        Ok(Wal {
            dir,
            options,
            active: Mutex::new(Active { writer, base: 0, closed: false, earlier: WalStats::default() }),
            sync: StdMutex::new(sync),
            synced_cv: StdCondvar::new(),
            poisoned: AtomicBool::new(false),
            group_syncs: AtomicU64::new(0),
        })
    }

    /// Appends one record; returns its end position. Written to the OS on return.
    ///
    /// [`WalError::RecordTooLarge`] and [`WalError::SegmentFull`] (rotate,
    /// then retry) leave the log usable; an I/O error poisons it.
    pub fn append(&self, payload: &[u8]) -> Result<LogPosition, WalError> {
        let mut active = self.lock_active()?;
        let end = active.writer.add_record(payload).map_err(|e| self.poison_on_io(e))?;
        let pos = active.base + end;
        // Still under `active`: the positions advance in append order.
        let mut st = self.lock_sync();
        let synced = st.synced;
        st.advance(pos, pos, synced);
        Ok(LogPosition(pos))
    }

    /// Appends one record without writing it yet; returns its end position. It reaches
    /// the OS with the next sync (which writes everything deferred with one write), the
    /// next [`Wal::append`], a rotation or `close`. Meant for records whose caller will
    /// wait in [`Wal::sync_to`] anyway: the syncer then writes them in one go.
    pub fn append_deferred(&self, payload: &[u8]) -> Result<LogPosition, WalError> {
        let mut active = self.lock_active()?;
        let end = active.writer.add_record_deferred(payload).map_err(|e| self.poison_on_io(e))?;
        let pos = active.base + end;
        let mut st = self.lock_sync();
        let (written, synced) = (st.written, st.synced);
        st.advance(pos, written, synced);
        Ok(LogPosition(pos))
    }

    /// Returns once everything up to `pos` is durable; concurrent callers share fsyncs.
    ///
    /// If no sync is running, the caller syncs everything written so far
    /// (covering other callers' records too); otherwise it waits for the
    /// running sync and re-checks. Fails with [`WalError::Poisoned`] once any
    /// write or sync has failed (even for positions synced before), and with
    /// an `InvalidInput` I/O error for a position beyond the written data.
    pub fn sync_to(&self, pos: LogPosition) -> Result<(), WalError> {
        self.sync_to_gathering(pos, || {})
    }

    /// [`Wal::sync_to`], calling `gather` (with no lock held) each time this caller is
    /// about to start an `fdatasync`: the caller can wait there briefly for records it
    /// knows are about to be appended, so that the sync covers them too.
    pub fn sync_to_gathering(&self, pos: LogPosition, mut gather: impl FnMut()) -> Result<(), WalError> {
        let mut st = self.lock_sync();
        loop {
            self.check_poisoned()?;
            if st.synced >= pos.0 {
                return Ok(());
            }
            if pos.0 > st.appended {
                return Err(WalError::Io(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "sync_to a position beyond the written data",
                )));
            }
            if st.in_progress {
                // The running sync may not cover `pos`; re-check when it ends.
                st = self.synced_cv.wait(st).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            drop(st);
            gather();
            st = self.lock_sync();
            if st.in_progress || st.synced >= pos.0 {
                // Another caller started (or finished) a sync meanwhile.
                continue;
            }
            st = self.run_sync(st)?;
        }
    }

    /// Becomes the syncer: writes the deferred records, syncs everything written so
    /// far with the lock released, then publishes the result to all waiters.
    fn run_sync<'a>(
        &'a self,
        mut st: StdMutexGuard<'a, SyncState<D::File>>,
    ) -> Result<StdMutexGuard<'a, SyncState<D::File>>, WalError> {
        st.in_progress = true;
        if st.written < st.appended {
            // Write the deferred records first (lock order: `active`, then `sync`).
            drop(st);
            let flushed = self.flush_deferred();
            st = self.lock_sync();
            match flushed {
                Ok(written) => {
                    let (appended, synced) = (st.appended, st.synced);
                    let written = st.written.max(written);
                    st.advance(appended, written, synced);
                }
                Err(e) => {
                    st.in_progress = false;
                    drop(st);
                    self.synced_cv.notify_all();
                    return Err(e);
                }
            }
        }
        let target = st.written;
        let segment = Arc::clone(&st.segment);
        // `written >= base` always holds: `base` is where `written` started
        // for this segment.
        let segment_target = target - st.base;
        drop(st);
        let result = segment.sync_through(segment_target);
        let mut st = self.lock_sync();
        st.in_progress = false;
        let outcome = match result {
            Ok(()) => {
                let (appended, written) = (st.appended, st.written);
                let synced = st.synced.max(target);
                st.advance(appended, written, synced);
                self.group_syncs.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                // Never retry: after a failed fsync the page cache may have
                // dropped the dirty data, so a later "successful" fsync would lie.
                self.poisoned.store(true, Ordering::SeqCst);
                Err(WalError::Io(e))
            }
        };
        // Waiters re-check `synced` / poisoning.
        self.synced_cv.notify_all();
        outcome.map(|()| st)
    }

    /// The group-commit state; a panic elsewhere while holding it leaves it consistent
    /// (every update is a single assignment), so a poisoned lock is simply taken over.
    fn lock_sync(&self) -> StdMutexGuard<'_, SyncState<D::File>> {
        self.sync.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes the deferred records of the current segment; returns the written position.
    fn flush_deferred(&self) -> Result<u64, WalError> {
        let mut active = self.active.lock();
        active.writer.flush().map_err(|e| self.poison_on_io(e))?;
        Ok(active.base + active.writer.offset())
    }

    /// Seals and syncs the current segment, then continues in a new one.
    pub fn rotate(&self, new_segment_number: u64) -> Result<(), WalError> {
        let mut active = self.lock_active()?;
        active.writer.seal().map_err(|e| self.poison_on_io(e))?;
        let old_end = active.base + active.writer.offset();
        let file = self.dir.create_segment(new_segment_number).map_err(|e| self.poison_on_io(e.into()))?;
        let writer = LogWriter::create(file, new_segment_number, self.options.clone())
            .map_err(|e| self.poison_on_io(e))?;
        self.dir.sync_dir().map_err(|e| self.poison_on_io(e.into()))?;
        let old = std::mem::replace(&mut active.writer, writer);
        active.earlier = active.earlier.plus(old.stats());
        active.base = old_end;
        let mut st = self.lock_sync();
        // The seal synced the whole old segment.
        let synced = st.synced.max(old_end);
        let written = old_end + active.writer.offset();
        st.advance(written, written, synced);
        st.segment = active.writer.shared();
        st.base = old_end;
        self.synced_cv.notify_all();
        Ok(())
    }

    /// Seals and syncs the current segment. Later appends fail with
    /// [`WalError::Closed`]; closing twice does nothing. Dropping a `Wal`
    /// without closing leaves the segment unsealed (like a crash).
    pub fn close(&self) -> Result<(), WalError> {
        self.check_poisoned()?;
        let mut active = self.active.lock();
        if active.closed {
            return Ok(());
        }
        active.writer.seal().map_err(|e| self.poison_on_io(e))?;
        active.closed = true;
        let end = active.base + active.writer.offset();
        let mut st = self.lock_sync();
        let synced = st.synced.max(end);
        st.advance(end, end, synced);
        self.synced_cv.notify_all();
        Ok(())
    }

    /// Number of the segment being written.
    pub fn current_segment(&self) -> u64 {
        self.active.lock().writer.segment_number()
    }

    /// End of the appended records (deferred ones included): `sync_to` this position
    /// makes everything appended so far durable.
    pub fn written_position(&self) -> LogPosition {
        LogPosition(self.lock_sync().appended)
    }

    /// End of the data known to be durable.
    pub fn synced_position(&self) -> LogPosition {
        LogPosition(self.lock_sync().synced)
    }

    /// Whether a failed write or sync poisoned the log.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::SeqCst)
    }

    /// Counters.
    pub fn stats(&self) -> WalStats {
        let active = self.active.lock();
        let mut stats = active.earlier.plus(active.writer.stats());
        stats.syncs += self.group_syncs.load(Ordering::Relaxed);
        stats
    }

    /// Locks the writer of an open, unpoisoned log.
    fn lock_active(&self) -> Result<MutexGuard<'_, Active<D::File>>, WalError> {
        self.check_poisoned()?;
        let active = self.active.lock();
        // A syncer may have failed while we waited for the lock.
        self.check_poisoned()?;
        if active.closed {
            return Err(WalError::Closed);
        }
        Ok(active)
    }

    fn check_poisoned(&self) -> Result<(), WalError> {
        if self.is_poisoned() {
            return Err(WalError::Poisoned);
        }
        Ok(())
    }

    /// I/O failures (and a poisoned writer) poison the log; argument errors
    /// such as `RecordTooLarge` or `SegmentFull` do not.
    fn poison_on_io(&self, e: WalError) -> WalError {
        if matches!(e, WalError::Io(_) | WalError::Poisoned) {
            self.poisoned.store(true, Ordering::SeqCst);
        }
        e
    }
}
