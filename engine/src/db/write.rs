//! The commit path.
//!
//! Under the `commit` lock a commit: waits for room if flushes or compactions are behind,
//! lets the caller build its batch from the latest state, takes the next sequence number,
//! appends the batch to the WAL (handed to the OS) and inserts it into the memtable. After
//! releasing the lock it waits for its WAL sync if it asked for one — concurrent commits
//! share one `fdatasync` (group commit) — and then publishes: the visible sequence number
//! only advances over a prefix of commits that are all applied and, where asked, synced,
//! so readers never see part of a batch or a commit that is not yet durable.

use super::durable::DurableCallback;
use super::lock_order::OrderedGuard;
use super::read::LatestView;
use super::{CommitState, DbInner, ReadState};
use crate::batch;
use crate::invariants::invariant;
use crate::key::MAX_SEQUENCE;
use crate::memtable::Memtable;
use crate::options::{SyncMode, WriteOptions};
use crate::stats::Counters;
use crate::{Error, Result, WriteBatch};
use parking_lot::MutexGuard;
use stampkv_wal::{LogPosition, WalError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest a syncing commit waits for commits on their way to join its sync.
const GROUP_GATHER_MAX: Duration = Duration::from_micros(100);

/// Counts a commit as busy while it runs, except while it waits for its WAL sync.
struct BusyCommit<'a> {
    counter: &'a AtomicUsize,
    counted: bool,
}

impl<'a> BusyCommit<'a> {
    fn enter(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::AcqRel);
        BusyCommit { counter, counted: true }
    }
    fn pause(&mut self) {
        if std::mem::replace(&mut self.counted, false) {
            self.counter.fetch_sub(1, Ordering::AcqRel);
        }
    }
    fn resume(&mut self) {
        if !std::mem::replace(&mut self.counted, true) {
            self.counter.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Drop for BusyCommit<'_> {
    fn drop(&mut self) {
        self.pause();
    }
}

/// Counts a [`DbInner::flush`] caller in `forced_flushes` for as long as it runs.
struct ForcedFlush<'a>(&'a AtomicUsize);

impl<'a> ForcedFlush<'a> {
    fn enter(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::AcqRel);
        ForcedFlush(counter)
    }
}

impl Drop for ForcedFlush<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Largest encoded batch accepted (the WAL's record limit is larger).
pub(super) const MAX_BATCH_BYTES: usize = 128 << 20;

impl DbInner {
    /// Commits the batch `build` returns; see the module docs.
    pub(crate) fn commit<T, E: From<Error>>(
        &self,
        options: WriteOptions,
        build: impl FnOnce(&LatestView<'_>) -> Result<(WriteBatch, T), E>,
    ) -> Result<(u64, T), E> {
        let needs_sync = options.sync.unwrap_or(self.options.sync_mode == SyncMode::Always);
        let mut busy = BusyCommit::enter(&self.busy_commits);
        let (seq, end, extra) = self.apply(needs_sync, build, |_, _| {})?;
        let synced_to = if needs_sync {
            busy.pause();
            self.parked_syncs.lock().push(end.0);
            let synced = self.wal.sync_to_gathering(end, || self.gather_group());
            let mut parked = self.parked_syncs.lock();
            if let Some(index) = parked.iter().position(|&p| p == end.0) {
                parked.swap_remove(index);
            }
            busy.resume();
            drop(parked);
            synced.map_err(|e| self.poison(e.into()))?;
            end
        } else {
            LogPosition(0)
        };
        self.publish(seq, synced_to)?;
        Ok((seq, extra))
    }

    /// Commits like [`DbInner::commit`] but does not wait for the WAL sync: it returns once
    /// the commit is applied, and `on_durable` runs when the commit is durable and visible
    /// (on the durability thread, or before this returns when the commit needs no sync or
    /// the database has no background threads). It is never called when this returns an
    /// error; it is called with an error when the sync fails.
    pub(crate) fn commit_deferred<T, E: From<Error>>(
        &self,
        options: WriteOptions,
        build: impl FnOnce(&LatestView<'_>) -> Result<(WriteBatch, T), E>,
        on_durable: DurableCallback,
    ) -> Result<(u64, T), E> {
        let needs_sync = options.sync.unwrap_or(self.options.sync_mode == SyncMode::Always);
        if !needs_sync || !self.threads_mode() {
            let committed = self.commit(options, build)?;
            on_durable(Ok(()));
            return Ok(committed);
        }
        let busy = BusyCommit::enter(&self.busy_commits);
        let mut on_durable = Some(on_durable);
        // Queued under the commit lock: a shutdown (which takes that lock first) then
        // always finds it queued, and the durability thread drains it before stopping.
        let (seq, _, extra) = self.apply(true, build, |seq, end| {
            if let Some(callback) = on_durable.take() {
                self.durable.push(seq, end, callback);
            }
        })?;
        drop(busy);
        Ok((seq, extra))
    }

    /// Applies the batch `build` returns under the commit lock: WAL append (deferred to the
    /// syncer when `needs_sync`) and memtable insert, not yet visible. `queued` runs under
    /// the lock with the commit's sequence number and WAL end. Returns those and `build`'s
    /// extra value.
    fn apply<T, E: From<Error>>(
        &self,
        needs_sync: bool,
        build: impl FnOnce(&LatestView<'_>) -> Result<(WriteBatch, T), E>,
        queued: impl FnOnce(u64, LogPosition),
    ) -> Result<(u64, LogPosition, T), E> {
        let mut commit = self.commit.lock();
        self.make_room(&mut commit)?;
        // The sequence number this commit gets, fixed before the builder runs so that the
        // builder can put it into the batch (Deno KV's versionstamped keys and queue ids).
        let seq = commit.last_seq + 1;
        if seq > MAX_SEQUENCE {
            return Err(Error::InvalidArgument("sequence numbers exhausted".into()).into());
        }
        let state = self.read_state.read().clone();
        let view = LatestView::new(&state, commit.last_seq, seq, self.clock.now_ms());
        let (mut batch, extra) = build(&view)?;
        // Sequence numbers strictly increase, one per commit, with no gap.
        invariant!(
            seq == commit.last_seq + 1 && seq > commit.mem.base_seq(),
            "commit sequence {seq} does not follow the last one, {}",
            commit.last_seq
        );
        let user_bytes = batch.user_bytes();
        let payload = batch.encode_with_seq(seq);
        if payload.len() > MAX_BATCH_BYTES {
            return Err(
                Error::InvalidArgument(format!("batch of {} bytes is too large", payload.len())).into()
            );
        }
        // A commit that waits for a sync leaves writing its record to the syncer, which
        // writes every waiting record with one call: a shorter critical section here.
        let end = self.append_to_wal(&mut commit, payload, needs_sync)?;
        if batch.len() <= 1 {
            commit.mem.apply(seq, batch.iter());
        } else {
            let entries: Vec<_> = batch.iter().collect();
            commit.mem.apply(seq, batch::effective_entries(&entries));
        }
        commit.last_seq = seq;
        {
            let mut publish = self.publish.lock();
            // Commits reach this point in sequence order (under the commit lock), so the
            // pending syncs queue up in sequence and log order.
            invariant!(
                seq > publish.applied_seq
                    && publish.pending_sync.back().is_none_or(|&(last, last_end)| last < seq && last_end <= end),
                "group commit: commit {seq} (ends at {end:?}) queued out of order after applied {} / pending {:?}",
                publish.applied_seq,
                publish.pending_sync.back()
            );
            if needs_sync {
                publish.pending_sync.push_back((seq, end));
            }
            publish.applied_seq = seq;
        }
        queued(seq, end);
        drop(commit);
        Counters::add(&self.counters.commits, 1);
        Counters::add(&self.counters.user_bytes, user_bytes);
        Ok((seq, end, extra))
    }

    /// The durability thread's work: syncs the WAL past every queued deferred commit (one
    /// `fdatasync` for all of them, gathering commits on their way like any syncing commit),
    /// publishes them and runs their callbacks, each apart: one that panics stops neither
    /// the thread nor the others. Returns false once shut down and drained.
    pub(crate) fn complete_deferred(&self) -> bool {
        let Some(queued) = self.durable.take() else {
            return false;
        };
        let last_seq = queued.iter().map(|d| d.seq).max().unwrap_or(0);
        let end = queued.iter().map(|d| d.end).max().unwrap_or(LogPosition(0));
        let result = self
            .wal
            .sync_to_gathering(end, || self.gather_group())
            .map_err(|e| self.poison(e.into()))
            .and_then(|()| self.publish(last_seq, end));
        for deferred in queued {
            invariant!(
                result.is_err() || self.visible_seq.load(Ordering::Acquire) >= deferred.seq,
                "deferred commit {} acknowledged before it is visible",
                deferred.seq
            );
            let outcome = match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(Error::Poisoned { reason: e.to_string() }),
            };
            // A panicking callback is its caller's bug: the panic hook reports it, and the
            // thread goes on acknowledging every other commit (the commit itself stands).
            let on_durable = deferred.on_durable;
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || on_durable(outcome)));
        }
        true
    }

    /// Appends a commit's record to the WAL (deferred to the syncer if it will wait for a
    /// sync). A full segment is rotated, with a memtable switch, and the append retried.
    /// Only an I/O failure poisons the database: a record the log cannot take is the
    /// caller's argument, reported as [`Error::InvalidArgument`] with nothing written.
    fn append_to_wal(
        &self,
        commit: &mut OrderedGuard<'_, CommitState>,
        payload: &[u8],
        needs_sync: bool,
    ) -> Result<LogPosition> {
        let append = || if needs_sync { self.wal.append_deferred(payload) } else { self.wal.append(payload) };
        match append() {
            Ok(end) => Ok(end),
            Err(WalError::SegmentFull { .. }) => {
                self.switch_memtable(commit)?;
                if !self.threads_mode() {
                    self.run_inline_work()?;
                }
                append().map_err(|e| self.wal_failure(e))
            }
            Err(e) => Err(self.wal_failure(e)),
        }
    }

    /// The error of a failed append: I/O failures poison, argument errors do not.
    fn wal_failure(&self, error: WalError) -> Error {
        match error {
            WalError::RecordTooLarge { .. } | WalError::SegmentFull { .. } => error.into(),
            other => self.poison(other.into()),
        }
    }

    /// Before starting an `fdatasync`, gives the commits that are busy — on their way to
    /// the WAL, or just released by the previous sync and about to commit again — a moment
    /// to append, so that this sync covers them too. A lone writer never waits.
    fn gather_group(&self) {
        let deadline = Instant::now() + GROUP_GATHER_MAX;
        while Instant::now() < deadline {
            // Released by the last sync but maybe not yet running again: busy too.
            let synced = self.wal.synced_position().0;
            let released = self.parked_syncs.lock().iter().filter(|&&p| p <= synced).count();
            if self.busy_commits.load(Ordering::Acquire) + released == 0 {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// Advances the visible sequence number as far as it may go, then waits until it covers
    /// `seq`. `synced_to` is a WAL position this thread knows to be durable.
    fn publish(&self, seq: u64, synced_to: LogPosition) -> Result<()> {
        let mut publish = self.publish.lock();
        while publish.pending_sync.front().is_some_and(|&(_, end)| end <= synced_to) {
            publish.pending_sync.pop_front();
        }
        let publishable = match publish.pending_sync.front() {
            Some(&(first_unsynced, _)) => first_unsynced - 1,
            None => publish.applied_seq,
        };
        // Readers never see a commit that is not applied, nor one at or after the first
        // commit still waiting for its sync.
        invariant!(
            publishable <= publish.applied_seq
                && publish.pending_sync.front().is_none_or(|&(first, first_end)| {
                    publishable < first && first_end > synced_to
                }),
            "group commit: publishing {publishable} past applied {} or unsynced {:?} (synced to {synced_to:?})",
            publish.applied_seq,
            publish.pending_sync.front()
        );
        if self.visible_seq.fetch_max(publishable, Ordering::AcqRel) < publishable {
            self.publish_cv.notify_all();
        }
        while self.visible_seq.load(Ordering::Acquire) < seq {
            if self.is_poisoned() {
                return Err(Error::Poisoned { reason: "an earlier commit failed to sync".into() });
            }
            self.publish_cv.wait_for(publish.raw(), Duration::from_millis(100));
        }
        Ok(())
    }

    /// Makes sure the memtable has room, freezing it when full; applies backpressure when
    /// flushes or level-0 compactions fall behind.
    fn make_room(&self, commit: &mut OrderedGuard<'_, CommitState>) -> Result<()> {
        let mut slowed_down = false;
        let mut stopped = false;
        let mut stalled = Duration::ZERO;
        loop {
            self.check_writable(commit)?;
            let (frozen, l0_files) = {
                let state = self.read_state.read();
                (state.imms.len(), state.version.files(0).len())
            };
            let threads = self.threads_mode();
            if threads && !slowed_down && l0_files >= self.options.l0_slowdown_trigger {
                // Spread the pain: delay this write by 1 ms instead of stopping later.
                slowed_down = true;
                let start = Instant::now();
                MutexGuard::unlocked(commit.raw(), || std::thread::sleep(Duration::from_millis(1)));
                Counters::add(&self.counters.slowdowns, 1);
                stalled += start.elapsed();
                continue;
            }
            if commit.mem.memory_bytes() < self.options.write_buffer_size {
                break;
            }
            if threads
                && (frozen >= self.options.max_immutable_memtables
                    || l0_files >= self.options.l0_stop_trigger)
            {
                let start = Instant::now();
                self.request_flush();
                self.request_compaction();
                self.room_cv.wait_for(commit.raw(), Duration::from_millis(100));
                if !std::mem::replace(&mut stopped, true) {
                    Counters::add(&self.counters.stalls, 1);
                }
                stalled += start.elapsed();
                continue;
            }
            self.switch_memtable(commit)?;
            if !threads {
                self.run_inline_work()?;
            }
        }
        if !stalled.is_zero() {
            let micros = stalled.as_micros() as u64;
            Counters::add(&self.counters.stall_micros, micros);
            Counters::max(&self.counters.max_stall_micros, micros);
        }
        Ok(())
    }

    /// Freezes the current memtable and starts a new one in a new WAL segment.
    pub(crate) fn switch_memtable(&self, commit: &mut CommitState) -> Result<()> {
        let started = Instant::now();
        let segment = self.next_file.fetch_add(1, Ordering::SeqCst);
        self.wal.rotate(segment).map_err(|e| self.poison(e.into()))?;
        let rotated = started.elapsed().as_micros() as u64;
        Counters::add(&self.counters.memtable_switches, 1);
        Counters::max(&self.counters.max_memtable_switch_micros, rotated);
        self.wal_segments.lock().push(segment);
        let fresh = Arc::new(Memtable::with_pool(
            segment,
            self.options.write_buffer_size,
            commit.last_seq,
            Some(self.chunk_pool.clone()),
        ));
        let frozen = std::mem::replace(&mut commit.mem, fresh.clone());
        frozen.seal(commit.last_seq);
        {
            let mut state = self.read_state.write();
            let mut imms = Vec::with_capacity(state.imms.len() + 1);
            imms.push(frozen);
            imms.extend(state.imms.iter().cloned());
            *state = Arc::new(ReadState { mem: fresh, imms, version: state.version.clone() });
        }
        self.request_flush();
        Ok(())
    }

    /// Freezes the memtable (if it holds anything) and waits until no frozen memtable is
    /// left unflushed.
    pub(crate) fn flush(&self) -> Result<()> {
        let mut commit = self.commit.lock();
        self.check_writable(&commit)?;
        let wal_has_commits = commit.last_seq > commit.mem.base_seq();
        if !commit.mem.is_empty() || wal_has_commits {
            self.switch_memtable(&mut commit)?;
        }
        // Counted only once the memtable is frozen: a flush thread that sees the count
        // sees that memtable too, and writes it in one table with those frozen before
        // (counted earlier, a flush thread woken meanwhile took the older ones alone).
        let _forced = ForcedFlush::enter(&self.forced_flushes);
        if !self.threads_mode() {
            return self.run_inline_work();
        }
        // Frozen memtables may be waiting for enough company to be flushed; with this
        // call counted in `forced_flushes`, the flush thread takes them now.
        if !self.read_state.read().imms.is_empty() {
            self.request_flush();
        }
        while !self.read_state.read().imms.is_empty() {
            self.check_writable(&commit)?;
            self.room_cv.wait_for(commit.raw(), Duration::from_millis(100));
        }
        Ok(())
    }

    /// Freezes the active memtable if it is still the one seeks found idle (WAL segment
    /// `segment`, `len` entries: nothing inserted since) and flushes it with every frozen
    /// one, however few: reads that positioned it beside the tables now find one source
    /// less, and read-triggered compactions then merge the new table into the levels.
    /// An empty active memtable is left as it is, and the frozen ones are flushed alone.
    pub(crate) fn flush_idle_memtable(&self, segment: u64, len: usize) -> Result<()> {
        {
            let mut commit = self.commit.lock();
            self.check_writable(&commit)?;
            if commit.mem.wal_segment() != segment || commit.mem.len() != len {
                return Ok(()); // written to since: it fills up and is flushed as usual
            }
            if !commit.mem.is_empty() {
                self.switch_memtable(&mut commit)?;
            }
        }
        if self.read_state.read().imms.is_empty() {
            return Ok(()); // flushed meanwhile
        }
        Counters::add(&self.counters.idle_flushes, 1);
        let _forced = ForcedFlush::enter(&self.forced_flushes);
        while self.flush_frozen()? {
            self.request_compaction();
            self.notify_room();
        }
        Ok(())
    }

    /// Runs all due flushes and compactions in the calling thread (inline mode). A failure
    /// poisons the database, as it would from a background thread.
    pub(crate) fn run_inline_work(&self) -> Result<()> {
        let result = (|| {
            while self.flush_frozen()? {}
            super::compaction::compact_while_needed(self)
        })();
        self.poison_on_failure(result)
    }

    /// Poisons the database if a flush or compaction failed (but not when it stopped
    /// because the database is closing).
    pub(crate) fn poison_on_failure(&self, result: Result<()>) -> Result<()> {
        match result {
            Err(e) if !matches!(e, Error::Closed | Error::Poisoned { .. }) => Err(self.poison(e)),
            other => other,
        }
    }
}
