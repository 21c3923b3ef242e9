//! The queue's in-memory state, shared by the listeners of one database: the index of
//! stored messages, the workers' leases, and the wake-ups.
//!
//! [`QueueHub`] keeps that state to itself. Commits tell it what they did to the stored
//! messages ([`QueueHub::enqueued`], [`QueueHub::release`], [`QueueHub::foreign_commit`]);
//! workers lease the next due message with [`QueueHub::lease_next`], which reads the store
//! for the index's first load and for the message it hands out.
//!
//! On a store that other processes share ([`Store::is_shared`]), an in-memory lease holds
//! off only this process's workers. There a lease is also *claimed* in the store: one
//! commit moves the message to the deadline `now + visibility timeout` (same sequence and
//! index, same record), which only one process can do (the commit reads the message it
//! moves). The message is then not due anywhere until the timeout passes: a listener
//! that dies (or a handler that runs too long) has it delivered again after that, by any
//! process. The handler's outcome applies to the moved message.

use super::record::{message_key, parse_message_key, MessageRecord, QUEUE_PREFIX};
use crate::store::{Abort, CommitOptions, Store, StoreCursor, StoreSnapshot};
use crate::KvError;
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A worker's hold on a message.
#[derive(Clone, Copy)]
struct Lease {
    token: u64,
    until: Instant,
}

#[derive(Default)]
struct HubState {
    /// Keys of the stored messages, in delivery order; `None` until the first listener
    /// loads it with one scan. Kept in step with every queue commit, under this lock, so
    /// workers never rescan the queue's key range (which fills with deleted entries).
    pending: Option<BTreeSet<Vec<u8>>>,
    /// Messages being handled: engine key → lease.
    leases: HashMap<Vec<u8>, Lease>,
    next_token: u64,
    /// Bumped by every enqueue commit and lease release.
    epoch: u64,
    closed: bool,
    workers: Vec<JoinHandle<()>>,
}

/// What handling a message did to its stored record.
pub(crate) enum Outcome {
    /// Deleted (handled, dead-lettered, or already gone).
    Removed,
    /// Rescheduled under a new key.
    Moved(Vec<u8>),
    /// Nothing could be written (the database closed): it stays queued as it was.
    Unchanged,
}

/// A leased message: its engine key, the lease's token and the stored record.
pub(crate) type Leased = (Vec<u8>, u64, MessageRecord);

/// The database's queue state shared by its listeners.
#[derive(Default)]
pub(crate) struct QueueHub {
    state: Mutex<HubState>,
    cv: Condvar,
}

impl QueueHub {
    /// Records committed enqueues and wakes the workers.
    pub(crate) fn enqueued(&self, keys: &[Vec<u8>]) {
        let mut state = self.state.lock();
        if let Some(pending) = state.pending.as_mut() {
            pending.extend(keys.iter().cloned());
        }
        state.epoch += 1;
        self.cv.notify_all();
    }

    /// Records a commit another server made to the shared store (its keys): if it wrote
    /// under the queue's prefix, its message keys join the index (one that was a deletion
    /// is dropped when a worker finds it gone) and the workers wake.
    pub(crate) fn foreign_commit(&self, keys: &[Vec<u8>]) {
        if !keys.iter().any(|key| key.starts_with(&QUEUE_PREFIX)) {
            return;
        }
        let messages = keys.iter().filter(|key| parse_message_key(key).is_some());
        let mut state = self.state.lock();
        if let Some(pending) = state.pending.as_mut() {
            pending.extend(messages.cloned());
        }
        state.epoch += 1;
        self.cv.notify_all();
    }

    /// Forgets the index of stored messages, so that the workers load it again with one
    /// scan (a restore wrote messages without commits), and wakes them.
    pub(crate) fn reload(&self) {
        let mut state = self.state.lock();
        state.pending = None;
        state.epoch += 1;
        self.cv.notify_all();
    }

    /// Wakes the workers (a listener stopped, or the state changed).
    pub(crate) fn notify(&self) {
        self.state.lock().epoch += 1;
        self.cv.notify_all();
    }

    /// Starts `count` workers with `spawn` (given each one's number) unless the queue is
    /// closed ([`KvError::QueueClosed`]); the hub joins them when it closes. A worker
    /// that cannot be started fails the call; those started before it keep running.
    pub(crate) fn add_workers(
        &self,
        count: usize,
        mut spawn: impl FnMut(usize) -> Result<JoinHandle<()>, KvError>,
    ) -> Result<(), KvError> {
        let mut state = self.state.lock();
        if state.closed {
            return Err(KvError::QueueClosed);
        }
        for n in 0..count {
            let worker = spawn(n)?;
            state.workers.push(worker);
        }
        Ok(())
    }

    /// Blocks until the queue is closed or `stop` is set (and the workers are woken).
    pub(crate) fn wait_closed(&self, stop: &AtomicBool) {
        let mut state = self.state.lock();
        while !state.closed && !stop.load(Ordering::SeqCst) {
            self.cv.wait(&mut state);
        }
    }

    /// Stops every worker after its current handler and waits for them (but never for the
    /// calling thread itself, should a handler close the database).
    pub(crate) fn close(&self) {
        let workers = {
            let mut state = self.state.lock();
            state.closed = true;
            std::mem::take(&mut state.workers)
        };
        self.cv.notify_all();
        let me = std::thread::current().id();
        for worker in workers {
            if worker.thread().id() != me {
                let _ = worker.join();
            }
        }
    }

    /// Leases the next deliverable message of `store` for `visibility_timeout`, waiting
    /// for one (at most `max_idle_wait` between two looks at the store's clock); `None`
    /// once `stop` is set, the queue closed, or the store failed.
    pub(crate) fn lease_next<S: Store>(
        &self,
        store: &S,
        stop: &AtomicBool,
        visibility_timeout: Duration,
        max_idle_wait: Duration,
    ) -> Option<Leased> {
        let clock = store.clock().clone();
        loop {
            let mut state = self.state.lock();
            if state.closed || stop.load(Ordering::SeqCst) {
                return None;
            }
            if state.pending.is_none() {
                match load_pending(store) {
                    Ok(pending) => state.pending = Some(pending),
                    Err(_) => return None,
                }
            }
            let epoch = state.epoch;
            let (now_ms, now) = (clock.now_ms(), Instant::now());
            state.leases.retain(|_, lease| lease.until > now);
            match take_due(&mut state, store, now_ms, now + visibility_timeout) {
                Ok(Some(taken)) if !store.is_shared() => return Some(taken),
                Ok(Some(taken)) => {
                    drop(state);
                    match self.claim(store, taken, visibility_timeout) {
                        Ok(Some(claimed)) => return Some(claimed),
                        // Another process claimed it first: look again.
                        Ok(None) => continue,
                        Err(KvError::Closed) => return None,
                        // A store failure that may pass: wait a little and look again.
                        Err(_) => {
                            std::thread::sleep(max_idle_wait.min(Duration::from_millis(100)));
                            continue;
                        }
                    }
                }
                Ok(None) => {}
                Err(_) => return None,
            }
            let mut wait = max_idle_wait;
            // Due messages left are all leased: wake for the next future deadline (or a
            // lease expiry, below), not for them.
            let next_deadline = state.pending.as_ref().and_then(|pending| {
                pending.iter().filter_map(|k| parse_message_key(k)).map(|(d, _, _)| d).find(|d| *d > now_ms)
            });
            if let Some(deadline) = next_deadline {
                wait = wait.min(Duration::from_millis(deadline - now_ms));
            }
            if let Some(first_expiry) = state.leases.values().map(|lease| lease.until).min() {
                wait = wait.min(first_expiry.saturating_duration_since(now));
            }
            if state.epoch == epoch {
                self.cv.wait_for(&mut state, wait.max(Duration::from_millis(1)));
            }
        }
    }

    /// Claims a leased message in a shared store (see the module docs): moves it to the
    /// deadline `now + visibility_timeout`, and moves the lease with it. `None` if the
    /// message is gone (another process claimed or handled it); the lease is then dropped.
    fn claim<S: Store>(
        &self,
        store: &S,
        (key, token, _as_leased): Leased,
        visibility_timeout: Duration,
    ) -> Result<Option<Leased>, KvError> {
        let Some((_, sequence, index)) = parse_message_key(&key) else { return Ok(None) };
        let timeout_ms = u64::try_from(visibility_timeout.as_millis()).unwrap_or(u64::MAX);
        // Not synced on its own, like the queue's other bookkeeping.
        let moved = store.commit(CommitOptions { sync: Some(false) }, |view| {
            let Some(entry) = view.get(&key)? else { return Err(Abort::CheckFailed) };
            let to = message_key(view.now_ms().saturating_add(timeout_ms), sequence, index);
            view.delete(&key);
            view.put(&to, &entry.value, None);
            Ok((to, MessageRecord::decode(&entry.value).map_err(Abort::Failed)?))
        });
        let mut state = self.state.lock();
        let lease = state.leases.remove(&key).filter(|lease| lease.token == token);
        let claimed = match moved {
            Ok((_, (to, current))) => {
                if let Some(lease) = lease {
                    state.leases.insert(to.clone(), lease);
                }
                if let Some(pending) = state.pending.as_mut() {
                    pending.remove(&key);
                    pending.insert(to.clone());
                }
                Ok(Some((to, token, current)))
            }
            Err(Abort::CheckFailed) => {
                if let Some(pending) = state.pending.as_mut() {
                    pending.remove(&key);
                }
                Ok(None)
            }
            Err(Abort::Failed(e)) => Err(e),
        };
        state.epoch += 1;
        self.cv.notify_all();
        claimed
    }

    /// Ends a lease (unless it ran out and the message was leased again meanwhile) and
    /// records what the handler's outcome did to the stored messages.
    pub(crate) fn release(&self, key: &[u8], token: u64, outcome: Outcome) {
        let mut state = self.state.lock();
        if state.leases.get(key).is_some_and(|lease| lease.token == token) {
            state.leases.remove(key);
        }
        if let Some(pending) = state.pending.as_mut() {
            match outcome {
                Outcome::Removed => {
                    pending.remove(key);
                }
                Outcome::Moved(to) => {
                    pending.remove(key);
                    pending.insert(to);
                }
                Outcome::Unchanged => {}
            }
        }
        state.epoch += 1;
        self.cv.notify_all();
    }
}

/// The keys of every stored message (one scan, when the first worker starts).
fn load_pending<S: Store>(store: &S) -> Result<BTreeSet<Vec<u8>>, KvError> {
    let mut end = QUEUE_PREFIX.to_vec();
    end.push(0xFF);
    let mut pending = BTreeSet::new();
    let mut cursor = store.snapshot().cursor(&QUEUE_PREFIX, &end, false);
    while cursor.advance()? {
        if parse_message_key(cursor.key()).is_some() {
            pending.insert(cursor.key().to_vec());
        }
    }
    Ok(pending)
}

/// Leases, until `lease_until`, the first due message nobody holds, if any.
fn take_due<S: Store>(
    state: &mut HubState,
    store: &S,
    now_ms: u64,
    lease_until: Instant,
) -> Result<Option<Leased>, KvError> {
    let Some(pending) = state.pending.as_ref() else { return Ok(None) };
    let mut vanished = Vec::new();
    let mut chosen = None;
    for key in pending {
        let Some((deadline, _, _)) = parse_message_key(key) else { continue };
        if deadline > now_ms {
            break;
        }
        if state.leases.contains_key(key) {
            continue;
        }
        match store.get(key)? {
            Some(entry) => {
                chosen = Some((key.clone(), MessageRecord::decode(&entry.value)?));
                break;
            }
            None => vanished.push(key.clone()),
        }
    }
    if let Some(pending) = state.pending.as_mut() {
        for key in &vanished {
            pending.remove(key);
        }
    }
    let Some((key, record)) = chosen else { return Ok(None) };
    state.next_token += 1;
    let token = state.next_token;
    state.leases.insert(key.clone(), Lease { token, until: lease_until });
    Ok(Some((key, token, record)))
}
