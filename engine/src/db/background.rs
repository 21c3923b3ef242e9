//! Background threads: one flushes frozen memtables, one compacts, one removes obsolete
//! tables ([`crate::file_remover`]), one syncs the WAL for deferred commits
//! ([`crate::Db::write_with_deferred`]), and with [`SyncMode::Periodic`] one syncs the WAL on
//! a timer. A failure in any of them poisons
//! the database (writes fail from then on; reads go on working).

use super::compaction;
use super::DbInner;
use crate::options::SyncMode;
use crate::Error;
use std::sync::Arc;
use std::thread::{Builder, JoinHandle};
use std::time::Duration;

/// Starts the background threads the options ask for.
pub(crate) fn start(inner: &Arc<DbInner>) -> Vec<JoinHandle<()>> {
    let mut threads = Vec::new();
    if inner.threads_mode() {
        threads.push(spawn("stampkv-flush", inner, flush_loop));
        threads.push(spawn("stampkv-compact", inner, compaction_loop));
        threads.push(spawn("stampkv-durable", inner, |inner| while inner.complete_deferred() {}));
        // Without its thread the remover unlinks in the caller: slower, still correct.
        let _ = inner.tables.remover.start();
        inner.request_compaction();
    }
    if let SyncMode::Periodic(interval) = inner.options.sync_mode {
        threads.push(spawn("stampkv-sync", inner, move |inner| sync_loop(inner, interval)));
    }
    threads
}

#[allow(
    clippy::expect_used,
    reason = "the database cannot run without its background threads; `std::thread::spawn` panics the same way"
)]
/// Starts a background thread. A panic in it (a bug, or a failed invariant check) poisons
/// the database instead of leaving writers waiting for work that never comes.
fn spawn(name: &str, inner: &Arc<DbInner>, body: impl FnOnce(&DbInner) + Send + 'static) -> JoinHandle<()> {
    let inner = inner.clone();
    let thread_name = name.to_owned();
    Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&inner))) {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                inner.poison(Error::Poisoned { reason: format!("{thread_name} thread panicked: {message}") });
            }
        })
        .expect("cannot start a background thread")
}

/// Waits until `wanted` says there is work or shutdown is requested; false on shutdown.
fn wait_for_work(inner: &DbInner, wanted: impl Fn(&mut super::WorkState) -> bool) -> bool {
    let mut work = inner.work.lock();
    loop {
        if work.shutdown {
            return false;
        }
        if wanted(&mut work) {
            return true;
        }
        inner.work_cv.wait(work.raw());
    }
}

fn report(inner: &DbInner, result: crate::Result<()>) {
    match result {
        Ok(()) | Err(Error::Closed) => {}
        Err(e) => {
            inner.poison(e);
        }
    }
}

fn flush_loop(inner: &DbInner) {
    while wait_for_work(inner, |w| std::mem::take(&mut w.flush_pending) || w.idle_flush.is_some()) {
        let idle = inner.work.lock().idle_flush.take();
        let result = (|| {
            if let Some((segment, len)) = idle {
                let flushed = inner.flush_idle_memtable(segment, len);
                inner.idle_flush_pending.store(false, std::sync::atomic::Ordering::Release);
                inner.request_compaction();
                flushed?;
            }
            while inner.flush_frozen()? {
                inner.request_compaction();
                inner.notify_room();
            }
            Ok(())
        })();
        report(inner, result);
        inner.notify_room();
    }
}

/// While some table holds expiring values, the compaction thread also wakes this often to
/// see whether they have expired (the clock may be a test clock that jumps); and with
/// `Options::release_freed_memory`, to hand freed heap memory back (see `heap_trim`).
const EXPIRY_CHECK_INTERVAL: Duration = Duration::from_secs(1);

fn compaction_loop(inner: &DbInner) {
    loop {
        let expiring =
            inner.read_state.read().version.all_files().any(|(_, f)| f.earliest_expiry_ms().is_some());
        {
            let mut work = inner.work.lock();
            if !work.shutdown && !work.compaction_pending {
                if expiring || inner.options.release_freed_memory {
                    // While compactions run, trims also follow each one (at most one
                    // per `heap_trim::TRIM_INTERVAL`); idle, this wake-up does them.
                    inner.work_cv.wait_for(work.raw(), EXPIRY_CHECK_INTERVAL);
                } else {
                    inner.work_cv.wait(work.raw());
                }
            }
            if work.shutdown {
                return;
            }
            work.compaction_pending = false;
        }
        inner.trim_heap_if_due();
        report(inner, compaction::compact_while_needed(inner));
    }
}

fn sync_loop(inner: &DbInner, interval: Duration) {
    loop {
        let deadline = std::time::Instant::now() + interval;
        {
            let mut work = inner.work.lock();
            while !work.shutdown && std::time::Instant::now() < deadline {
                inner.work_cv.wait_until(work.raw(), deadline);
            }
            if work.shutdown {
                return;
            }
        }
        let end = inner.wal.written_position();
        if let Err(e) = inner.wal.sync_to(end) {
            inner.poison(e.into());
            return;
        }
    }
}
