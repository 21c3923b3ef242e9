//! Deferred commits waiting for their WAL sync ([`crate::Db::write_with_deferred`]): a
//! queue that commits join under the commit lock and that the durability thread drains,
//! syncing once for everything it took.

use crate::Result;
use parking_lot::{Condvar, Mutex};
use stampkv_wal::LogPosition;

/// Called once a deferred commit is durable and visible, or with the error that stopped it.
pub type DurableCallback = Box<dyn FnOnce(Result<()>) + Send>;

/// A commit applied and waiting for its sync.
pub(crate) struct Deferred {
    /// Its sequence number.
    pub seq: u64,
    /// Where its WAL record ends.
    pub end: LogPosition,
    /// What to call when it is durable.
    pub on_durable: DurableCallback,
}

#[derive(Default)]
struct State {
    queued: Vec<Deferred>,
    shutdown: bool,
}

/// The queue of deferred commits. Its lock is a leaf: nothing else is taken under it.
#[derive(Default)]
pub(crate) struct DurableQueue {
    state: Mutex<State>,
    ready: Condvar,
}

impl DurableQueue {
    /// Queues a commit (called under the commit lock, in sequence order).
    pub(crate) fn push(&self, seq: u64, end: LogPosition, on_durable: DurableCallback) {
        let mut state = self.state.lock();
        // The durability thread stops only after the database stopped taking commits.
        debug_assert!(!state.shutdown, "deferred commit {seq} queued after shutdown");
        state.queued.push(Deferred { seq, end, on_durable });
        drop(state);
        self.ready.notify_one();
    }

    /// Waits for queued commits and takes them all; `None` once shut down with none left.
    pub(crate) fn take(&self) -> Option<Vec<Deferred>> {
        let mut state = self.state.lock();
        loop {
            if !state.queued.is_empty() {
                return Some(std::mem::take(&mut state.queued));
            }
            if state.shutdown {
                return None;
            }
            self.ready.wait(&mut state);
        }
    }

    /// Asks the durability thread to stop once the queue is empty.
    pub(crate) fn shut_down(&self) {
        self.state.lock().shutdown = true;
        self.ready.notify_all();
    }
}
