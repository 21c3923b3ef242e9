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

pub(crate) mod hub;

use crate::entry::maybe_entry;
use crate::shared::Core;
use crate::store::{EngineStore, Store, StoreSnapshot};
use crate::{Key, KvEntryMaybe, KvError, KvValue, Versionstamp};
use hub::{Mark, Waiter};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// A running watch; see [`Kv::watch`](super::Kv::watch). Dropping it stops watching.
pub struct Watch<S: Store = EngineStore> {
    core: Arc<Core<S>>,
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
    /// Checks the keys against the limits and registers the watch with the hub of `core`.
    pub(crate) fn start(core: &Arc<Core<S>>, keys: &[Key]) -> Result<Watch<S>, KvError> {
        let limits = &core.limits;
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
        let (id, waiter) = core.watch.register(encoded.clone());
        Ok(Watch {
            core: core.clone(),
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
        let snapshot = self.core.store.snapshot();
        let mut entries = Vec::with_capacity(self.keys.len());
        self.next_expiry_ms = None;
        for (key, encoded) in self.keys.iter().zip(&self.encoded) {
            let found = snapshot.get(encoded)?;
            if let Some(at) = found.as_ref().and_then(|e| e.expires_at_ms) {
                self.next_expiry_ms = Some(self.next_expiry_ms.map_or(at, |t| t.min(at)));
            }
            entries.push(maybe_entry(key.clone(), found)?);
        }
        Ok(entries)
    }

    /// Waits until marked, closed, an expiry is due, or `deadline`; true if closed.
    fn wait(&self, deadline: Option<Instant>) -> Option<bool> {
        let clock = self.core.store.clock();
        self.waiter.wait(deadline, self.next_expiry_ms, || clock.now_ms())
    }

    /// Registers `waker`, called every time a commit writes one of the watched keys or the
    /// database closes, on the thread that did it: it must be quick and must not block (an
    /// async runtime's notify, for example). Then [`Watch::poll`] tells what changed. A mark
    /// that came before the waker was set is not lost: the next poll sees it.
    pub fn set_waker(&self, waker: impl Fn() + Send + Sync + 'static) {
        self.waiter.set_waker(Arc::new(waker));
    }

    /// Looks without blocking for waiting: the first poll reads every key; later ones read
    /// again only after a mark (a commit to one of the keys) or when an expiry came due, and
    /// report [`WatchPoll::Changed`] only if a versionstamp differs from the last report.
    /// A read is a blocking engine call (a few point lookups from one snapshot).
    pub fn poll(&mut self) -> Result<WatchPoll, KvError> {
        let marked = match self.waiter.take() {
            Mark::Closed => return Ok(WatchPoll::Closed),
            Mark::Changed => true,
            Mark::Unchanged => false,
        };
        let due = self.next_expiry_ms.is_some_and(|at| self.core.store.clock().now_ms() >= at);
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
        Some(Duration::from_millis(at.saturating_sub(self.core.store.clock().now_ms())))
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
        self.core.watch.unregister(self.id);
    }
}
