//! The cached answers and what must change together with them, behind one lock: the cache,
//! the history of invalidations, which point answers came from push mode, and the keys
//! waiting for a push subscription.
//!
//! Every change the edge learns of goes through here ([`Store::invalidate`],
//! [`Store::apply_change`], [`Store::forget_written`]), and so does every answer it caches
//! ([`Store::settle`], [`Store::update_cached`]), so the invalidation rule of
//! [`crate::invalidations`] holds whichever part fetched the answer.

use crate::cache::{Answer, Cache, RangeKey};
use crate::invalidations::Invalidations;
use crate::metrics::{EdgeMetrics, Gauges};
use crate::wire;
use parking_lot::Mutex;
use stampkv_kvconnect as proto;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

/// How many invalidations the history remembers (see [`crate::invalidations`]).
const INVALIDATION_HISTORY: usize = 4096;

/// The edge's cached answers, shared by the parts that read, fill and invalidate them.
#[derive(Debug)]
pub(crate) struct Store {
    held: Mutex<Held>,
    /// Whether newly cached point answers are queued for push mode.
    push: bool,
    metrics: Arc<EdgeMetrics>,
}

/// What the lock guards.
#[derive(Debug)]
struct Held {
    cache: Cache,
    invalidations: Invalidations,
    /// Keys whose cached point answer came from a live push subscription: fresh whatever
    /// their age, until the subscription ends or a pull answer replaces it.
    pushed: HashSet<Vec<u8>>,
    /// Keys newly cached as points, waiting for a push subscription.
    push_queue: VecDeque<Vec<u8>>,
}

/// A cached answer found by [`Store::lookup`].
#[derive(Debug, Clone)]
pub(crate) struct Cached {
    /// The answer as it was cached.
    pub(crate) answer: Answer,
    /// Whether it is a point answer under a live push subscription (fresh beyond the TTL).
    pub(crate) pushed: bool,
}

impl Store {
    /// An empty store of at most `max_memory` bytes; `push`: queue newly cached point
    /// answers for push mode. Invalidations are counted in `metrics`.
    pub(crate) fn new(max_memory: usize, push: bool, metrics: Arc<EdgeMetrics>) -> Store {
        Store {
            held: Mutex::new(Held {
                cache: Cache::new(max_memory),
                invalidations: Invalidations::new(INVALIDATION_HISTORY),
                pushed: HashSet::new(),
                push_queue: VecDeque::new(),
            }),
            push,
            metrics,
        }
    }

    /// The current invalidation epoch: what an upstream read starting now notes, to hand
    /// back to [`Store::settle`] or [`Store::update_cached`].
    pub(crate) fn epoch(&self) -> u64 {
        self.held.lock().invalidations.epoch()
    }

    /// The cached answer of each of `keys` (a hit for the cache's eviction), under one lock.
    pub(crate) fn lookup(&self, keys: &[RangeKey]) -> Vec<Option<Cached>> {
        let mut held = self.held.lock();
        keys.iter()
            .map(|key| {
                let answer = held.cache.get(key)?;
                let pushed = matches!(key, RangeKey::Point(k) if held.pushed.contains(k));
                Some(Cached { answer, pushed })
            })
            .collect()
    }

    /// Caches the answers of a fill of `keys` that started at epoch `since`, except those a
    /// change since then may have made stale. A pulled point answer is governed by the TTL
    /// again; a point newly cached is queued for push mode.
    pub(crate) fn settle(&self, keys: &[RangeKey], since: u64, answers: &[Answer]) {
        let mut held = self.held.lock();
        for (key, answer) in keys.iter().zip(answers) {
            if held.invalidations.touched_since(since, key) {
                continue;
            }
            let fresh_point = matches!(key, RangeKey::Point(_)) && !held.cache.contains(key);
            if !held.cache.insert(key.clone(), answer.clone()) {
                continue;
            }
            if let RangeKey::Point(point) = key {
                // A pulled answer is governed by the TTL again, even under a subscription.
                held.pushed.remove(point);
                if fresh_point && self.push {
                    held.push_queue.push_back(point.clone());
                }
            }
        }
    }

    /// Brings the cached entries of `keys` up to date with a strong read's `ranges` (in the
    /// same order) that started at epoch `since`; ranges not cached stay uncached.
    pub(crate) fn update_cached(&self, keys: &[RangeKey], since: u64, ranges: &[proto::ReadRangeOutput]) {
        let now = Instant::now();
        let mut held = self.held.lock();
        for (key, range) in keys.iter().zip(ranges) {
            if held.cache.contains(key) && !held.invalidations.touched_since(since, key) {
                held.cache.insert(key.clone(), wire::answer(range, now));
                if let RangeKey::Point(point) = key {
                    held.pushed.remove(point);
                }
            }
        }
    }

    /// Records that encoded `key` changed: drops the cached entries that could hold it and
    /// keeps fills already in flight from caching what they fetched before. Returns whether a
    /// point entry for it was cached.
    pub(crate) fn invalidate(&self, key: &[u8]) -> bool {
        let mut held = self.held.lock();
        held.invalidations.record(key);
        let had_point = held.cache.contains(&RangeKey::Point(key.to_vec()));
        let dropped = held.cache.invalidate(key);
        self.metrics.invalidations.add(dropped as u64);
        had_point
    }

    /// Drops every cached multi-key range (a write whose key is not known in advance, such
    /// as a versionstamped key) and keeps fills in flight from caching.
    pub(crate) fn invalidate_all_ranges(&self) {
        let mut held = self.held.lock();
        held.invalidations.record_all();
        let dropped = held.cache.invalidate_ranges();
        self.metrics.invalidations.add(dropped as u64);
    }

    /// Drops what the committed `write` may have made stale here.
    pub(crate) fn forget_written(&self, write: &proto::AtomicWrite) {
        for mutation in &write.mutations {
            if mutation.mutation_type == proto::M_SET_SUFFIX_VERSIONSTAMPED_KEY {
                // The key gets a suffix chosen at commit: any cached range may now hold it.
                self.invalidate_all_ranges();
            } else {
                self.invalidate(&mutation.key);
            }
        }
    }

    /// A change of encoded `key` learned from a watch stream (`entry`: its new state, `None`
    /// if deleted). If the cached point answer already holds that versionstamp it is only
    /// renewed; otherwise the entries that could hold the key are dropped and fills in flight
    /// kept from caching. A cached point answer is replaced by the new state, and marked as
    /// pushed (fresh beyond the TTL) when it came from push mode's own subscription; a change
    /// seen on a client's shared watch leaves that mark as it was.
    pub(crate) fn apply_change(&self, key: &[u8], entry: Option<proto::KvEntry>, from_push: bool) {
        let point = RangeKey::Point(key.to_vec());
        let stamp = entry.as_ref().map(|e| e.versionstamp.clone());
        let mut held = self.held.lock();
        let cached = held.cache.peek(&point).map(wire::point_stamp);
        let unchanged = matches!(&cached, Some(Some(kept)) if *kept == stamp);
        if !unchanged {
            held.invalidations.record(key);
            let dropped = held.cache.invalidate(key);
            self.metrics.invalidations.add(dropped as u64);
        }
        if cached.is_some() {
            held.cache.insert(point, wire::point_answer(entry, Instant::now()));
            if !unchanged {
                self.metrics.push_updates.add(1);
            }
            if from_push {
                held.pushed.insert(key.to_vec());
            }
        }
    }

    /// Takes the keys newly cached as points, waiting for a push subscription.
    pub(crate) fn take_push_queue(&self) -> Vec<Vec<u8>> {
        self.held.lock().push_queue.drain(..).collect()
    }

    /// Ends the push marks of `keys` (their subscription ended): the TTL rules them again.
    pub(crate) fn unmark_pushed(&self, keys: &[Vec<u8>]) {
        let mut held = self.held.lock();
        for key in keys {
            held.pushed.remove(key);
        }
    }

    /// For each group of keys, whether any of them is cached as a point; the keys of a group
    /// with none cached lose their push marks. One lock for all the groups.
    pub(crate) fn release_uncached<'a>(&self, groups: impl IntoIterator<Item = &'a [Vec<u8>]>) -> Vec<bool> {
        let mut held = self.held.lock();
        groups
            .into_iter()
            .map(|keys| {
                let live = keys.iter().any(|k| held.cache.contains(&RangeKey::Point(k.clone())));
                if !live {
                    for key in keys {
                        held.pushed.remove(key);
                    }
                }
                live
            })
            .collect()
    }

    /// The gauges: what the store holds, with `shared_watches` from the watch registry.
    pub(crate) fn gauges(&self, shared_watches: usize) -> Gauges {
        let held = self.held.lock();
        Gauges {
            bytes_held: held.cache.bytes(),
            entries: held.cache.len(),
            evictions: held.cache.evictions(),
            pushed_keys: held.pushed.len(),
            shared_watches,
        }
    }
}
