//! The answer cache: read ranges to their encoded answers, bounded in bytes, evicted by SIEVE.
//!
//! SIEVE (Zhang et al., NSDI 2024) keeps one FIFO queue and a "visited" bit per entry. A hit
//! only sets the bit: no list moves, so a hit costs a hash lookup. Eviction moves a hand from
//! the oldest entry towards the newest, clearing set bits and evicting the first entry whose
//! bit is clear. Entries read again since the hand last passed survive; one-hit wonders (the
//! long tail of a Zipf workload, a scan) leave quickly without displacing the hot head. On
//! skewed web traffic it misses less than LRU and is simpler than ARC or TinyLFU.
//!
//! Invariants (checked by [`Cache::check_invariants`] in tests): the map and the queue hold
//! the same entries; `bytes` is the sum of their charges and never exceeds the budget after
//! an insert; the hand, when set, points at a live entry.

use bytes::Bytes;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// Bytes charged for an entry beyond its keys and answer: the slot, the map bucket and the
/// answer's shared buffer header, rounded up.
pub const ENTRY_OVERHEAD: usize = 160;

/// What a cached answer answers: one read range of a `snapshot_read`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RangeKey {
    /// `[key, key ++ 0x00)`, which holds `key` alone: the answer does not depend on the
    /// limit (at least 1) or the direction, so every `get` of a key shares one entry.
    Point(Vec<u8>),
    /// Any other range, with the limit and direction it was asked with.
    Range {
        /// First encoded key (included).
        start: Vec<u8>,
        /// End (excluded).
        end: Vec<u8>,
        /// Most entries returned.
        limit: i32,
        /// Read backwards from the end.
        reverse: bool,
    },
}

impl RangeKey {
    /// The cache key of a requested range.
    pub fn of(start: &[u8], end: &[u8], limit: i32, reverse: bool) -> RangeKey {
        let is_point = end.len() == start.len() + 1 && end.last() == Some(&0) && end.starts_with(start);
        if is_point {
            RangeKey::Point(start.to_vec())
        } else {
            RangeKey::Range { start: start.to_vec(), end: end.to_vec(), limit, reverse }
        }
    }

    /// Whether an entry stored under encoded `key` can appear in this range's answer.
    pub fn covers(&self, key: &[u8]) -> bool {
        match self {
            RangeKey::Point(point) => point.as_slice() == key,
            RangeKey::Range { start, end, .. } => start.as_slice() <= key && key < end.as_slice(),
        }
    }

    /// The range as KV Connect sends it (`limit` 1 for a point).
    pub fn to_proto(&self) -> stampkv_kvconnect::ReadRange {
        match self {
            RangeKey::Point(key) => {
                let mut end = key.clone();
                end.push(0);
                stampkv_kvconnect::ReadRange { start: key.clone(), end, limit: 1, reverse: false }
            }
            RangeKey::Range { start, end, limit, reverse } => stampkv_kvconnect::ReadRange {
                start: start.clone(),
                end: end.clone(),
                limit: *limit,
                reverse: *reverse,
            },
        }
    }

    /// The keys `answer` depends on, `[low, high)`: the whole range unless the answer is full
    /// (`limit` entries), in which case nothing past its last entry can change it. A
    /// `@deno/kv` `get` (the range from the key to `0xFF`, limit 1) that found its key thus
    /// depends on that key alone. `None` for a point.
    pub fn span(&self, answer: &Answer) -> Option<(Vec<u8>, Vec<u8>)> {
        let RangeKey::Range { start, end, limit, reverse } = self else { return None };
        let full = usize::try_from(*limit).is_ok_and(|limit| answer.entries >= limit);
        let last = if full { last_key(&answer.body) } else { None };
        Some(match (last, reverse) {
            (Some(mut last), false) => {
                last.push(0);
                (start.clone(), last)
            }
            (Some(last), true) => (last, end.clone()),
            (None, _) => (start.clone(), end.clone()),
        })
    }

    fn heap_bytes(&self) -> usize {
        match self {
            RangeKey::Point(key) => key.len(),
            RangeKey::Range { start, end, .. } => start.len() + end.len(),
        }
    }
}

/// The key of the last entry of an encoded `ReadRangeOutput`.
fn last_key(body: &Bytes) -> Option<Vec<u8>> {
    use prost::Message;
    let output = stampkv_kvconnect::ReadRangeOutput::decode(body.clone()).ok()?;
    output.values.last().map(|entry| entry.key.clone())
}

/// One range's answer as it was fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The encoded `ReadRangeOutput`, ready to be copied into a response.
    pub body: Bytes,
    /// How many entries it holds (0: a negative answer, nothing in the range).
    pub entries: usize,
    /// When the upstream answered it (or a push brought it).
    pub fetched_at: Instant,
}

impl Slot {
    /// Whether a change of encoded `key` could alter this answer.
    fn depends_on(&self, key: &[u8]) -> bool {
        match &self.span {
            Some((low, high)) => low.as_slice() <= key && key < high.as_slice(),
            None => self.key.covers(key),
        }
    }
}

#[derive(Debug)]
struct Slot {
    key: RangeKey,
    /// For a range, the keys its answer depends on (see [`RangeKey::span`]).
    span: Option<(Vec<u8>, Vec<u8>)>,
    answer: Answer,
    charge: usize,
    visited: bool,
    /// Towards the newest entry.
    newer: Option<usize>,
    /// Towards the oldest entry.
    older: Option<usize>,
}

/// A byte-bounded map of read ranges to answers with SIEVE eviction.
#[derive(Debug)]
pub struct Cache {
    map: HashMap<RangeKey, usize>,
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    newest: Option<usize>,
    oldest: Option<usize>,
    hand: Option<usize>,
    /// Slots holding `RangeKey::Range` entries, scanned when a key is invalidated.
    ranges: HashSet<usize>,
    bytes: usize,
    max_bytes: usize,
    evictions: u64,
}

impl Cache {
    /// An empty cache holding at most `max_bytes` of charges.
    pub fn new(max_bytes: usize) -> Cache {
        Cache {
            map: HashMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            newest: None,
            oldest: None,
            hand: None,
            ranges: HashSet::new(),
            bytes: 0,
            max_bytes,
            evictions: 0,
        }
    }

    /// What an entry of `key` with `answer` is charged.
    pub fn charge(key: &RangeKey, answer: &Answer) -> usize {
        // A range's span is two more keys at most as long as the range's own bounds.
        let span = if matches!(key, RangeKey::Range { .. }) { key.heap_bytes() } else { 0 };
        2 * key.heap_bytes() + span + answer.body.len() + ENTRY_OVERHEAD
    }

    /// The answer cached for `key`, marking it as read again.
    pub fn get(&mut self, key: &RangeKey) -> Option<Answer> {
        let index = *self.map.get(key)?;
        let slot = self.slot_mut(index)?;
        slot.visited = true;
        Some(slot.answer.clone())
    }

    /// The answer cached for `key`, without marking it as read.
    pub fn peek(&self, key: &RangeKey) -> Option<&Answer> {
        let index = *self.map.get(key)?;
        self.slot(index).map(|slot| &slot.answer)
    }

    /// Whether `key` has an entry (without marking it).
    pub fn contains(&self, key: &RangeKey) -> bool {
        self.map.contains_key(key)
    }

    /// Stores `answer` for `key`, replacing an older one and evicting until the budget holds.
    /// An answer larger than the whole budget is not stored; returns whether it was.
    pub fn insert(&mut self, key: RangeKey, answer: Answer) -> bool {
        let charge = Cache::charge(&key, &answer);
        self.remove(&key);
        if charge > self.max_bytes {
            return false;
        }
        while self.bytes + charge > self.max_bytes {
            if !self.evict_one() {
                return false;
            }
        }
        let is_range = matches!(key, RangeKey::Range { .. });
        let span = key.span(&answer);
        let slot =
            Slot { key: key.clone(), span, answer, charge, visited: false, newer: None, older: self.newest };
        let index = match self.free.pop() {
            Some(index) => {
                if let Some(place) = self.slots.get_mut(index) {
                    *place = Some(slot);
                }
                index
            }
            None => {
                self.slots.push(Some(slot));
                self.slots.len() - 1
            }
        };
        if let Some(previous) = self.newest.and_then(|n| self.slot_mut(n)) {
            previous.newer = Some(index);
        }
        self.newest = Some(index);
        if self.oldest.is_none() {
            self.oldest = Some(index);
        }
        if is_range {
            self.ranges.insert(index);
        }
        self.map.insert(key, index);
        self.bytes += charge;
        true
    }

    /// Drops the entry of `key`; returns whether there was one.
    pub fn remove(&mut self, key: &RangeKey) -> bool {
        match self.map.get(key).copied() {
            Some(index) => {
                self.unlink(index);
                true
            }
            None => false,
        }
    }

    /// Drops every entry whose answer a change of encoded `key` could alter: its point entry
    /// and every cached range whose span holds it. Returns how many were dropped.
    pub fn invalidate(&mut self, key: &[u8]) -> usize {
        let mut doomed: Vec<usize> = self
            .ranges
            .iter()
            .copied()
            .filter(|&i| self.slot(i).is_some_and(|s| s.depends_on(key)))
            .collect();
        if let Some(&index) = self.map.get(&RangeKey::Point(key.to_vec())) {
            doomed.push(index);
        }
        for &index in &doomed {
            self.unlink(index);
        }
        doomed.len()
    }

    /// Drops every multi-key range entry (points stay); returns how many were dropped.
    pub fn invalidate_ranges(&mut self) -> usize {
        let doomed: Vec<usize> = self.ranges.iter().copied().collect();
        for &index in &doomed {
            self.unlink(index);
        }
        doomed.len()
    }

    /// Charges held now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Entries evicted for room so far.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Evicts one entry by SIEVE; false when the cache is empty.
    fn evict_one(&mut self) -> bool {
        let mut hand = match self.hand.or(self.oldest) {
            Some(hand) => hand,
            None => return false,
        };
        // Each pass clears at most every bit once, so this ends within two laps.
        for _ in 0..=2 * self.map.len() {
            let Some(slot) = self.slot_mut(hand) else { return false };
            if slot.visited {
                slot.visited = false;
                let newer = slot.newer;
                hand = match newer.or(self.oldest) {
                    Some(next) => next,
                    None => return false,
                };
            } else {
                let newer = slot.newer;
                self.unlink(hand);
                self.hand = newer;
                self.evictions += 1;
                return true;
            }
        }
        false
    }

    /// Takes a slot out of the map, the queue and the byte count.
    fn unlink(&mut self, index: usize) {
        let Some(slot) = self.slots.get_mut(index).and_then(Option::take) else { return };
        match slot.newer.and_then(|n| self.slot_mut(n)) {
            Some(newer) => newer.older = slot.older,
            None => self.newest = slot.older,
        }
        match slot.older.and_then(|o| self.slot_mut(o)) {
            Some(older) => older.newer = slot.newer,
            None => self.oldest = slot.newer,
        }
        if self.hand == Some(index) {
            self.hand = slot.newer;
        }
        self.map.remove(&slot.key);
        self.ranges.remove(&index);
        self.bytes -= slot.charge;
        self.free.push(index);
    }

    fn slot(&self, index: usize) -> Option<&Slot> {
        self.slots.get(index).and_then(Option::as_ref)
    }

    fn slot_mut(&mut self, index: usize) -> Option<&mut Slot> {
        self.slots.get_mut(index).and_then(Option::as_mut)
    }

    /// Checks the invariants of the module documentation; `Err` names the first one broken.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut seen = 0;
        let mut bytes = 0;
        let mut previous = None;
        let mut cursor = self.oldest;
        while let Some(index) = cursor {
            let slot = self.slot(index).ok_or_else(|| format!("queue reaches empty slot {index}"))?;
            if slot.older != previous {
                return Err(format!("slot {index} links back to {:?}, not {previous:?}", slot.older));
            }
            if self.map.get(&slot.key) != Some(&index) {
                return Err(format!("slot {index} is not in the map under its key"));
            }
            if matches!(slot.key, RangeKey::Range { .. }) != self.ranges.contains(&index) {
                return Err(format!("slot {index} is misfiled in the range set"));
            }
            seen += 1;
            bytes += slot.charge;
            previous = Some(index);
            cursor = slot.newer;
            if seen > self.map.len() {
                return Err("the queue is longer than the map (a cycle?)".into());
            }
        }
        if previous != self.newest {
            return Err("the queue does not end at the newest entry".into());
        }
        if seen != self.map.len() || self.ranges.len() > seen {
            return Err(format!("queue has {seen} entries, map {}", self.map.len()));
        }
        if bytes != self.bytes {
            return Err(format!("charges add up to {bytes}, counted {}", self.bytes));
        }
        if self.bytes > self.max_bytes {
            return Err(format!("{} bytes held over the budget of {}", self.bytes, self.max_bytes));
        }
        if let Some(hand) = self.hand {
            if self.slot(hand).is_none() {
                return Err(format!("the hand points at empty slot {hand}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampkv_testkit::SplitMix64;

    fn answer(len: usize) -> Answer {
        Answer {
            body: Bytes::from(vec![7u8; len]),
            entries: usize::from(len > 0),
            fetched_at: Instant::now(),
        }
    }

    fn point(n: u32) -> RangeKey {
        RangeKey::Point(n.to_be_bytes().to_vec())
    }

    #[test]
    fn a_get_request_range_is_a_point_whatever_its_limit() {
        assert_eq!(RangeKey::of(b"ab", b"ab\0", 1, false), RangeKey::Point(b"ab".to_vec()));
        assert_eq!(RangeKey::of(b"ab", b"ab\0", 10, true), RangeKey::Point(b"ab".to_vec()));
        assert!(matches!(RangeKey::of(b"ab", b"ac", 1, false), RangeKey::Range { .. }));
        assert!(matches!(RangeKey::of(b"ab", b"ab\x01", 1, false), RangeKey::Range { .. }));
        let range = RangeKey::of(b"b", b"d", 5, false);
        assert!(range.covers(b"b") && range.covers(b"c\xff") && !range.covers(b"d") && !range.covers(b"a"));
        let proto = RangeKey::Point(b"k".to_vec()).to_proto();
        assert_eq!((proto.start.as_slice(), proto.end.as_slice(), proto.limit), (&b"k"[..], &b"k\0"[..], 1));
    }

    #[test]
    fn the_budget_holds_and_an_oversized_answer_is_refused() {
        let mut cache = Cache::new(10 * (ENTRY_OVERHEAD + 8 + 100));
        for n in 0..100 {
            assert!(cache.insert(point(n), answer(100)));
            cache.check_invariants().unwrap();
        }
        assert_eq!(cache.len(), 10);
        assert_eq!(cache.evictions(), 90);
        assert!(!cache.insert(point(1000), answer(100_000)));
        assert!(!cache.contains(&point(1000)));
        cache.check_invariants().unwrap();
    }

    #[test]
    fn entries_read_again_survive_a_scan_of_one_time_keys() {
        let mut cache = Cache::new(100 * (ENTRY_OVERHEAD + 8 + 10));
        for n in 0..20 {
            cache.insert(point(n), answer(10));
        }
        for n in 0..20 {
            assert!(cache.get(&point(n)).is_some());
        }
        // A scan of 1,000 keys read once each (FIFO or LRU would flush the hot 20).
        for n in 1000..2000 {
            cache.insert(point(n), answer(10));
            cache.check_invariants().unwrap();
        }
        let survivors = (0..20).filter(|&n| cache.contains(&point(n))).count();
        assert_eq!(survivors, 20, "the hot entries were read again and must survive the scan");
    }

    #[test]
    fn invalidation_drops_the_point_and_every_range_around_it() {
        let mut cache = Cache::new(1 << 20);
        cache.insert(RangeKey::Point(b"m".to_vec()), answer(5));
        cache.insert(RangeKey::of(b"a", b"z", 10, false), answer(5));
        cache.insert(RangeKey::of(b"a", b"z", 10, true), answer(5));
        cache.insert(RangeKey::of(b"n", b"z", 10, false), answer(5));
        cache.insert(RangeKey::Point(b"n".to_vec()), answer(5));
        assert_eq!(cache.invalidate(b"m"), 3);
        assert_eq!(cache.len(), 2);
        assert!(cache.contains(&RangeKey::of(b"n", b"z", 10, false)));
        assert!(cache.contains(&RangeKey::Point(b"n".to_vec())));
        cache.check_invariants().unwrap();
        assert_eq!(cache.invalidate(b"q"), 1);
        cache.check_invariants().unwrap();
    }

    #[test]
    fn a_full_answer_depends_only_on_the_keys_up_to_its_last_entry() {
        use prost::Message;
        let found = |keys: &[&[u8]]| {
            let values = keys
                .iter()
                .map(|k| stampkv_kvconnect::KvEntry {
                    key: k.to_vec(),
                    value: vec![],
                    encoding: 3,
                    versionstamp: vec![0; 10],
                })
                .collect();
            let body = Bytes::from(stampkv_kvconnect::ReadRangeOutput { values }.encode_to_vec());
            Answer { body, entries: keys.len(), fetched_at: Instant::now() }
        };
        // `@deno/kv`'s get: from the key to 0xFF, limit 1, and the key exists.
        let get = RangeKey::of(b"k", &[0xff], 1, false);
        let mut cache = Cache::new(1 << 20);
        cache.insert(get.clone(), found(&[b"k"]));
        assert_eq!(cache.invalidate(b"m"), 0, "a later key cannot change a full answer");
        assert_eq!(cache.invalidate(b"k"), 1);
        // The key was missing: the answer is the next key, and anything before it matters.
        cache.insert(get.clone(), found(&[b"p"]));
        assert_eq!(cache.invalidate(b"q"), 0);
        assert_eq!(cache.invalidate(b"m"), 1);
        // Not full: the whole range matters.
        cache.insert(RangeKey::of(b"a", b"z", 5, false), found(&[b"b"]));
        assert_eq!(cache.invalidate(b"y"), 1);
        // Reverse and full: only keys from its last (smallest) entry on.
        cache.insert(RangeKey::of(b"a", b"z", 2, true), found(&[b"x", b"w"]));
        assert_eq!(cache.invalidate(b"c"), 0);
        assert_eq!(cache.invalidate(b"w"), 1);
        cache.check_invariants().unwrap();
    }

    #[test]
    fn random_operations_keep_the_invariants_and_agree_with_a_model() {
        for seed in 1..=8u64 {
            let mut rng = SplitMix64::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let budget = 40 * (ENTRY_OVERHEAD + 64);
            let mut cache = Cache::new(budget);
            // The model: what each key was last given (eviction may forget it, never alter it).
            let mut model: HashMap<RangeKey, Bytes> = HashMap::new();
            for step in 0..3_000 {
                let key = if rng.below(4) == 0 {
                    let start = rng.below(50) as u32;
                    let end = start + 1 + rng.below(10) as u32;
                    RangeKey::Range {
                        start: start.to_be_bytes().to_vec(),
                        end: end.to_be_bytes().to_vec(),
                        limit: 10,
                        reverse: rng.below(2) == 0,
                    }
                } else {
                    point(rng.below(60) as u32)
                };
                match rng.below(10) {
                    0..=3 => {
                        let body = Bytes::from(vec![step as u8; rng.below(48) as usize]);
                        let stored = Answer { body: body.clone(), entries: 1, fetched_at: Instant::now() };
                        assert!(cache.insert(key.clone(), stored));
                        model.insert(key, body);
                    }
                    4..=7 => {
                        if let Some(found) = cache.get(&key) {
                            assert_eq!(Some(&found.body), model.get(&key), "seed {seed} step {step}");
                        }
                    }
                    8 => {
                        cache.remove(&key);
                        model.remove(&key);
                    }
                    _ => {
                        let probe = (rng.below(60) as u32).to_be_bytes();
                        cache.invalidate(&probe);
                        model.retain(|k, _| !k.covers(&probe));
                        assert!(!cache.contains(&RangeKey::Point(probe.to_vec())));
                    }
                }
                cache.check_invariants().unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
            }
        }
    }

    #[test]
    fn sieve_beats_fifo_on_a_zipf_stream() {
        // Zipf(1.0) over 10,000 keys by inverse transform over the cumulative weights.
        let keys = 10_000usize;
        let weights: Vec<f64> = (1..=keys).map(|r| 1.0 / r as f64).collect();
        let total: f64 = weights.iter().sum();
        let mut cumulative = Vec::with_capacity(keys);
        let mut sum = 0.0;
        for w in &weights {
            sum += w / total;
            cumulative.push(sum);
        }
        let mut rng = SplitMix64::new(42);
        let capacity = 500;
        let mut cache = Cache::new(capacity * (ENTRY_OVERHEAD + 8 + 8));
        let mut fifo: std::collections::VecDeque<usize> = Default::default();
        let mut fifo_set: HashSet<usize> = HashSet::new();
        let (mut sieve_hits, mut fifo_hits) = (0, 0);
        let requests = 100_000;
        for _ in 0..requests {
            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            let rank = cumulative.partition_point(|&c| c < u).min(keys - 1);
            let key = point(rank as u32);
            if cache.get(&key).is_some() {
                sieve_hits += 1;
            } else {
                cache.insert(key, answer(8));
            }
            if fifo_set.contains(&rank) {
                fifo_hits += 1;
            } else {
                fifo.push_back(rank);
                fifo_set.insert(rank);
                if fifo.len() > capacity {
                    if let Some(old) = fifo.pop_front() {
                        fifo_set.remove(&old);
                    }
                }
            }
        }
        cache.check_invariants().unwrap();
        assert!(sieve_hits > fifo_hits, "SIEVE {sieve_hits} hits vs FIFO {fifo_hits}");
        assert!(sieve_hits * 10 > requests * 5, "hit ratio {sieve_hits}/{requests} too low for Zipf");
    }
}
