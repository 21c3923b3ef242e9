//! `watch`: a blocking iterator over the states of a few keys.
//!
//! A watch registers its encoded keys with the database's hub before its first read, so no
//! change can slip between that read and the registration. Every successful commit marks
//! the watches of the keys it wrote; a marked watch re-reads all its keys (one snapshot)
//! and yields them if any versionstamp differs from what it yielded last (so rapid
//! changes coalesce, a commit that touches none of the keys yields nothing, and neither
//! does deleting a key that was already absent). Expiry is a change too: while a watched
//! entry has an expiry time, the watch also wakes when that time comes on the engine's
//! clock.

use crate::db::Kv;
use crate::store::{EngineStore, Store, StoreSnapshot};
use crate::{Key, KvEntryMaybe, KvError, KvValue, Versionstamp};
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

/// A callback run when a watch is marked (see [`Watch::set_waker`]).
type Waker = Arc<dyn Fn() + Send + Sync>;

/// What a watch waits on.
#[derive(Default)]
struct Waiter {
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
}

/// What [`Watch::poll`] found.
#[derive(Debug)]
pub enum WatchPoll {
    /// The keys' states (one snapshot, in the order of the keys) differ from the last ones
    /// returned, or this is the first poll.
    Changed(Vec<KvEntryMaybe<KvValue>>),
    /// Nothing new: wait for the waker or for [`Watch::next_expiry_in`].
    Pending,
    /// The database closed: the watch has ended.
    Closed,
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
    fn register(&self, keys: Vec<Vec<u8>>) -> (u64, Arc<Waiter>) {
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

    fn unregister(&self, id: u64) {
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

/// A running watch; see [`Kv::watch`]. Dropping it stops watching.
pub struct Watch<S: Store = EngineStore> {
    kv: Kv<S>,
    keys: Vec<Key>,
    encoded: Vec<Vec<u8>>,
    id: u64,
    waiter: Arc<Waiter>,
    /// Versionstamps last yielded; `None` before the first yield.
    last: Option<Vec<Option<Versionstamp>>>,
    /// Earliest expiry among the entries last read.
    next_expiry_ms: Option<u64>,
}

impl<S: Store> Watch<S> {
    pub(crate) fn start(kv: &Kv<S>, keys: &[Key]) -> Result<Watch<S>, KvError> {
        let limits = kv.limits();
        if keys.len() > limits.max_watched_keys {
            return Err(KvError::TooManyWatchedKeys { max: limits.max_watched_keys });
        }
        // Deno checks a watched key against the read limit itself (2049 bytes), where a point
        // read needs one byte more for the end of its range.
        let encoded: Vec<Vec<u8>> = keys
            .iter()
            .map(|k| {
                let encoded = k.encode()?;
                if encoded.len() > limits.max_read_key_bytes {
                    return Err(KvError::KeyTooLargeForRead { max: limits.max_read_key_bytes });
                }
                Ok(encoded)
            })
            .collect::<Result<_, KvError>>()?;
        let (id, waiter) = kv.inner.watch.register(encoded.clone());
        Ok(Watch {
            kv: kv.clone(),
            keys: keys.to_vec(),
            encoded,
            id,
            waiter,
            last: None,
            next_expiry_ms: None,
        })
    }

    /// Reads every watched key from one snapshot.
    fn read(&mut self) -> Result<Vec<KvEntryMaybe<KvValue>>, KvError> {
        let snapshot = self.kv.inner.store.snapshot();
        let mut entries = Vec::with_capacity(self.keys.len());
        self.next_expiry_ms = None;
        for (key, encoded) in self.keys.iter().zip(&self.encoded) {
            let found = snapshot.get(encoded)?;
            if let Some(at) = found.as_ref().and_then(|e| e.expires_at_ms) {
                self.next_expiry_ms = Some(self.next_expiry_ms.map_or(at, |t| t.min(at)));
            }
            entries.push(crate::db::maybe_entry(key.clone(), found)?);
        }
        Ok(entries)
    }

    /// Waits until marked, closed, an expiry is due, or `deadline`; true if closed.
    fn wait(&self, deadline: Option<Instant>) -> Option<bool> {
        let clock = self.kv.inner.store.clock();
        let mut signal = self.waiter.signal.lock();
        loop {
            if signal.closed {
                return Some(true);
            }
            if std::mem::take(&mut signal.dirty) {
                return Some(false);
            }
            if self.next_expiry_ms.is_some_and(|at| clock.now_ms() >= at) {
                return Some(false);
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return None;
            }
            let mut until = deadline;
            if self.next_expiry_ms.is_some() {
                let poll = now + EXPIRY_POLL;
                until = Some(until.map_or(poll, |d| d.min(poll)));
            }
            match until {
                Some(until) => {
                    self.waiter.cv.wait_until(&mut signal, until);
                }
                None => self.waiter.cv.wait(&mut signal),
            }
        }
    }

    /// Registers `waker`, called every time a commit writes one of the watched keys or the
    /// database closes, on the thread that did it: it must be quick and must not block (an
    /// async runtime's notify, for example). Then [`Watch::poll`] tells what changed. A mark
    /// that came before the waker was set is not lost: the next poll sees it.
    pub fn set_waker(&self, waker: impl Fn() + Send + Sync + 'static) {
        *self.waiter.waker.lock() = Some(Arc::new(waker));
    }

    /// Looks without blocking for waiting: the first poll reads every key; later ones read
    /// again only after a mark (a commit to one of the keys) or when an expiry came due, and
    /// report [`WatchPoll::Changed`] only if a versionstamp differs from the last report.
    /// A read is a blocking engine call (a few point lookups from one snapshot).
    pub fn poll(&mut self) -> Result<WatchPoll, KvError> {
        let marked = {
            let mut signal = self.waiter.signal.lock();
            if signal.closed {
                return Ok(WatchPoll::Closed);
            }
            std::mem::take(&mut signal.dirty)
        };
        let due = self.next_expiry_ms.is_some_and(|at| self.kv.inner.store.clock().now_ms() >= at);
        if self.last.is_some() && !marked && !due {
            return Ok(WatchPoll::Pending);
        }
        let entries = self.read()?;
        let stamps: Vec<Option<Versionstamp>> = entries.iter().map(|e| e.versionstamp).collect();
        if self.last.as_ref() == Some(&stamps) {
            return Ok(WatchPoll::Pending);
        }
        self.last = Some(stamps);
        Ok(WatchPoll::Changed(entries))
    }

    /// How long until the earliest expiry among the entries last read comes due on the
    /// database's clock (zero if it is due), or `None` if none of them expires.
    pub fn next_expiry_in(&self) -> Option<Duration> {
        let at = self.next_expiry_ms?;
        Some(Duration::from_millis(at.saturating_sub(self.kv.inner.store.clock().now_ms())))
    }

    /// The next state, waiting at most `timeout`; `None` on timeout or when the database
    /// closed.
    pub fn next_timeout(&mut self, timeout: Duration) -> Option<Result<Vec<KvEntryMaybe<KvValue>>, KvError>> {
        self.next_until(Some(Instant::now() + timeout))
    }

    fn next_until(
        &mut self,
        deadline: Option<Instant>,
    ) -> Option<Result<Vec<KvEntryMaybe<KvValue>>, KvError>> {
        loop {
            if self.last.is_some() {
                match self.wait(deadline) {
                    None | Some(true) => return None,
                    Some(false) => {}
                }
            }
            let entries = match self.read() {
                Ok(entries) => entries,
                Err(e) => return Some(Err(e)),
            };
            let stamps: Vec<Option<Versionstamp>> = entries.iter().map(|e| e.versionstamp).collect();
            if self.last.as_ref() != Some(&stamps) {
                self.last = Some(stamps);
                return Some(Ok(entries));
            }
        }
    }
}

impl<S: Store> Iterator for Watch<S> {
    type Item = Result<Vec<KvEntryMaybe<KvValue>>, KvError>;

    /// Blocks until the watched keys change; `None` once the database is closed.
    fn next(&mut self) -> Option<Self::Item> {
        self.next_until(None)
    }
}

impl<S: Store> Drop for Watch<S> {
    fn drop(&mut self) {
        self.kv.inner.watch.unregister(self.id);
    }
}
