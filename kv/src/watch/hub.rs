//! The watch registry: which watch waits on which keys, and how a watch is woken.
//!
//! [`WatchHub`] maps encoded keys to the [`Waiter`]s registered for them; a commit (local or
//! foreign) marks the waiters of the keys it wrote, closing the database marks them all
//! closed. A [`Waiter`] keeps its mark, its condition variable and its waker to itself:
//! the watch only takes the mark or waits for it.

use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest sleep between two looks at the clock while an expiry is pending (the clock may
/// be a test clock that jumps).
const EXPIRY_POLL: Duration = Duration::from_millis(20);

#[derive(Default)]
struct Signal {
    dirty: bool,
    closed: bool,
}

/// A callback run when a watch is marked (see [`Watch::set_waker`](super::Watch::set_waker)).
pub(crate) type Waker = Arc<dyn Fn() + Send + Sync>;

/// What a waiter's mark says, once taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// The database closed.
    Closed,
    /// A commit wrote one of the keys since the last look.
    Changed,
    /// Nothing since the last look.
    Unchanged,
}

/// What a watch waits on.
#[derive(Default)]
pub(crate) struct Waiter {
    signal: Mutex<Signal>,
    cv: Condvar,
    waker: Mutex<Option<Waker>>,
}

impl Waiter {
    fn mark(&self, close: bool) {
        {
            let mut signal = self.signal.lock();
            signal.dirty = true;
            signal.closed |= close;
            self.cv.notify_all();
        }
        let waker = self.waker.lock().clone();
        if let Some(waker) = waker {
            waker();
        }
    }

    /// Sets the callback run on every later mark.
    pub(crate) fn set_waker(&self, waker: Waker) {
        *self.waker.lock() = Some(waker);
    }

    /// Takes the mark without waiting: closed wins over changed.
    pub(crate) fn take(&self) -> Mark {
        let mut signal = self.signal.lock();
        if signal.closed {
            Mark::Closed
        } else if std::mem::take(&mut signal.dirty) {
            Mark::Changed
        } else {
            Mark::Unchanged
        }
    }

    /// Waits until marked, closed, `next_expiry_ms` comes due by `now_ms`, or `deadline`;
    /// `Some(true)` if closed, `Some(false)` if marked or due, `None` on the deadline.
    pub(crate) fn wait(
        &self,
        deadline: Option<Instant>,
        next_expiry_ms: Option<u64>,
        now_ms: impl Fn() -> u64,
    ) -> Option<bool> {
        let mut signal = self.signal.lock();
        loop {
            if signal.closed {
                return Some(true);
            }
            if std::mem::take(&mut signal.dirty) {
                return Some(false);
            }
            if next_expiry_ms.is_some_and(|at| now_ms() >= at) {
                return Some(false);
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return None;
            }
            let mut until = deadline;
            if next_expiry_ms.is_some() {
                let poll = now + EXPIRY_POLL;
                until = Some(until.map_or(poll, |d| d.min(poll)));
            }
            match until {
                Some(until) => {
                    self.cv.wait_until(&mut signal, until);
                }
                None => self.cv.wait(&mut signal),
            }
        }
    }
}

#[derive(Default)]
struct HubState {
    next_id: u64,
    waiters: HashMap<u64, (Vec<Vec<u8>>, Arc<Waiter>)>,
    by_key: HashMap<Vec<u8>, Vec<u64>>,
    closed: bool,
}

/// The database's registry of watches.
#[derive(Default)]
pub(crate) struct WatchHub {
    state: Mutex<HubState>,
}

impl WatchHub {
    /// Registers a watch of `keys` (encoded); returns its id and what it waits on (already
    /// marked closed if the database is closed).
    pub(crate) fn register(&self, keys: Vec<Vec<u8>>) -> (u64, Arc<Waiter>) {
        let mut state = self.state.lock();
        state.next_id += 1;
        let id = state.next_id;
        let waiter = Arc::new(Waiter::default());
        if state.closed {
            waiter.mark(true);
        }
        for key in &keys {
            state.by_key.entry(key.clone()).or_default().push(id);
        }
        state.waiters.insert(id, (keys, waiter.clone()));
        (id, waiter)
    }

    /// Forgets the watch `id`.
    pub(crate) fn unregister(&self, id: u64) {
        let mut state = self.state.lock();
        if let Some((keys, _)) = state.waiters.remove(&id) {
            for key in keys {
                if let Some(ids) = state.by_key.get_mut(&key) {
                    ids.retain(|i| *i != id);
                    if ids.is_empty() {
                        state.by_key.remove(&key);
                    }
                }
            }
        }
    }

    /// Marks the watches of `keys` (encoded) as changed.
    pub(crate) fn notify(&self, keys: &[Vec<u8>]) {
        let state = self.state.lock();
        if state.by_key.is_empty() {
            return;
        }
        for key in keys {
            for id in state.by_key.get(key).into_iter().flatten() {
                if let Some((_, waiter)) = state.waiters.get(id) {
                    waiter.mark(false);
                }
            }
        }
    }

    /// Marks every watch as changed (a restore wrote without commits): each re-reads its
    /// keys and yields only if a versionstamp differs.
    pub(crate) fn notify_all(&self) {
        let state = self.state.lock();
        for (_, waiter) in state.waiters.values() {
            waiter.mark(false);
        }
    }

    /// Ends every watch (the database is closing).
    pub(crate) fn close(&self) {
        let mut state = self.state.lock();
        state.closed = true;
        for (_, waiter) in state.waiters.values() {
            waiter.mark(true);
        }
    }
}
