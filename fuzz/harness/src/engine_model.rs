//! `engine_model`: the LSM engine against a `BTreeMap` model, with crashes.
//!
//! The input is a sequence of at most [`MAX_OPS`] operations: puts (some expiring), deletes,
//! multi-key batches (with repeated keys), empty commits, conditional puts through
//! `write_with`, gets, forward / reverse / double-ended range scans with any bounds,
//! snapshots and reads from them, clock advances, flush, compact, clean reopen and crash
//! (`MemFs::crash_clone` with a seed from the input, or a process crash that keeps every
//! write). The database uses `Options::tiny_for_tests()` (4 KiB memtables, 256-byte blocks)
//! with inline background work, so flushes and compactions happen constantly and a run is
//! deterministic. Each commit chooses whether to sync.
//!
//! Properties: every commit gets the next sequence number; every read (get, scan, snapshot
//! read) equals the model — keys, values, sequence numbers, expiry; after a crash the
//! database equals the model after some prefix of the acknowledged commits that includes
//! every commit acknowledged as synced (and, for a process crash, all of them).

use arbitrary::{Arbitrary, Unstructured};
use stampkv_engine::fs::{CrashPolicy, MemFs};
use stampkv_engine::{
    BackgroundMode, Clock, Db, Entry, Error, ManualClock, Options, Snapshot, SyncMode, WriteBatch,
    WriteOptions,
};
use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// Operations per run: keeps each execution fast.
pub const MAX_OPS: usize = 200;

const DIR: &str = "/fuzz-db";

#[derive(Arbitrary, Debug, Clone, Copy)]
struct KeyId(u8);

impl KeyId {
    /// 256 keys of different lengths sharing prefixes (as engine/tests/it/model.rs makes them).
    fn bytes(self) -> Vec<u8> {
        let id = self.0;
        match id % 4 {
            0 => format!("k{id:02}").into_bytes(),
            1 => format!("k{id:02}-long-suffix").into_bytes(),
            2 => vec![b'k', b'0' + id % 10, id / 64],
            _ => format!("k{id:02}\0{}", id % 3).into_bytes(),
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
struct ValueSpec {
    len: u8,
    fill: u8,
}

impl ValueSpec {
    fn bytes(self, salt: usize) -> Vec<u8> {
        let len = match self.len {
            0..=19 => 0,
            224..=255 => 300 + usize::from(self.len - 224) * 60,
            n => usize::from(n % 60),
        };
        (0..len).map(|i| self.fill.wrapping_add((i + salt) as u8).wrapping_mul(31)).collect()
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum BoundSpec {
    Unbounded,
    Included(KeyId),
    Excluded(KeyId),
}

impl BoundSpec {
    fn bound(self) -> Bound<Vec<u8>> {
        match self {
            BoundSpec::Unbounded => Bound::Unbounded,
            BoundSpec::Included(k) => Bound::Included(k.bytes()),
            BoundSpec::Excluded(k) => Bound::Excluded(k.bytes()),
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum ScanMode {
    Forward,
    Reverse,
    /// Alternate ends: bit i of the pattern takes item i from the front (1) or back (0).
    DoubleEnded(u64),
}

#[derive(Debug)]
enum Op {
    Put { key: KeyId, value: ValueSpec, expire_in: Option<u16>, sync: bool },
    Delete { key: KeyId, sync: bool },
    Batch { writes: Vec<(KeyId, Option<ValueSpec>)>, sync: bool },
    Empty { sync: bool },
    PutIfAbsent { key: KeyId, value: ValueSpec, sync: bool },
    Get { key: KeyId },
    Scan { lo: BoundSpec, hi: BoundSpec, mode: ScanMode },
    Snapshot,
    ReadSnapshots { drop_oldest: bool },
    Advance { ms: u16 },
    Flush,
    Compact,
    Reopen,
    Crash { seed: u64, kind: u8 },
}

impl<'a> Arbitrary<'a> for Op {
    /// Weighted: mostly writes and reads, some snapshots, clock moves, flushes, compactions,
    /// reopens and crashes (a uniform choice would reopen far more often than it writes).
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match u.int_in_range(0u8..=99)? {
            0..=27 => Op::Put {
                key: u.arbitrary()?,
                value: u.arbitrary()?,
                expire_in: u.arbitrary()?,
                sync: u.arbitrary()?,
            },
            28..=37 => Op::Delete { key: u.arbitrary()?, sync: u.arbitrary()? },
            38..=49 => Op::Batch { writes: u.arbitrary()?, sync: u.arbitrary()? },
            50..=52 => Op::Empty { sync: u.arbitrary()? },
            53..=57 => Op::PutIfAbsent { key: u.arbitrary()?, value: u.arbitrary()?, sync: u.arbitrary()? },
            58..=67 => Op::Get { key: u.arbitrary()? },
            68..=77 => Op::Scan { lo: u.arbitrary()?, hi: u.arbitrary()?, mode: u.arbitrary()? },
            78..=80 => Op::Snapshot,
            81..=84 => Op::ReadSnapshots { drop_oldest: u.arbitrary()? },
            85..=88 => Op::Advance { ms: u.arbitrary()? },
            89..=91 => Op::Flush,
            92..=93 => Op::Compact,
            94..=95 => Op::Reopen,
            _ => Op::Crash { seed: u.arbitrary()?, kind: u.arbitrary()? },
        })
    }
}

/// A model entry: value, sequence number of the commit that wrote it, expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ModelValue {
    value: Vec<u8>,
    seq: u64,
    expires_at_ms: Option<u64>,
}

type State = BTreeMap<Vec<u8>, ModelValue>;

/// Live entries of a state at time `now_ms` in `range`.
fn visible(state: &State, now_ms: u64, range: &(Bound<Vec<u8>>, Bound<Vec<u8>>)) -> Vec<Entry> {
    state
        .iter()
        .filter(|(k, v)| range.contains(*k) && v.expires_at_ms.is_none_or(|at| now_ms < at))
        .map(|(k, v)| Entry {
            key: k.clone(),
            value: v.value.clone(),
            seq: v.seq,
            expires_at_ms: v.expires_at_ms,
        })
        .collect()
}

const ALL: (Bound<Vec<u8>>, Bound<Vec<u8>>) = (Bound::Unbounded, Bound::Unbounded);

/// Why a conditional put committed nothing.
#[derive(Debug)]
enum PutIfAbsentError {
    Exists,
    Engine(Error),
}

impl From<Error> for PutIfAbsentError {
    fn from(e: Error) -> Self {
        PutIfAbsentError::Engine(e)
    }
}

struct Harness {
    fs: MemFs,
    clock: Arc<ManualClock>,
    options: Options,
    db: Option<Db>,
    /// States after each acknowledged commit since the last point known durable;
    /// `history[0]` is durable.
    history: Vec<State>,
    snapshots: Vec<(Snapshot, State, u64)>,
    step: usize,
    log: Vec<String>,
    /// Flushes and compactions (including trivial moves) of closed instances.
    work: (u64, u64),
}

/// Runs the `engine_model` target on one input.
pub fn engine_model(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let mut harness = Harness::new();
    let mut step = 0;
    while step < MAX_OPS && !u.is_empty() {
        let Ok(op) = Op::arbitrary(&mut u) else { break };
        harness.step = step;
        harness.apply(op);
        step += 1;
    }
    if crate::util::verbose() {
        harness.tally();
        let files = harness.db().stats().files_per_level;
        eprintln!(
            "engine_model: {step} operations: {:?}; (flushes, compactions) {:?}; files per level {files:?}",
            crate::util::op_counts(&harness.log),
            harness.work
        );
    }
    harness.check_everything("end");
}

impl Harness {
    fn new() -> Self {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let mut options = Options::tiny_for_tests();
        options.background = BackgroundMode::Inline;
        options.sync_mode = SyncMode::Buffered;
        options.clock = clock.clone();
        let fs = MemFs::new();
        let db = Db::open_with_fs(Arc::new(fs.clone()), DIR, options.clone()).expect("open");
        Harness {
            fs,
            clock,
            options,
            db: Some(db),
            history: vec![State::new()],
            snapshots: Vec::new(),
            step: 0,
            log: Vec::new(),
            work: (0, 0),
        }
    }

    /// Adds the current instance's flushes and compactions to `work`.
    fn tally(&mut self) {
        let stats = self.db().stats();
        self.work.0 += stats.flushes;
        self.work.1 += stats.compactions + stats.trivial_moves;
    }

    fn db(&self) -> &Db {
        self.db.as_ref().expect("database open")
    }

    fn model(&self) -> &State {
        self.history.last().expect("history never empty")
    }

    fn ctx(&self) -> String {
        let start = self.log.len().saturating_sub(12);
        format!("step {}; last operations: {:?}", self.step, &self.log[start..])
    }

    fn apply(&mut self, op: Op) {
        self.log.push(format!("{op:?}"));
        match op {
            Op::Put { key, value, expire_in, sync } => {
                let (key, value) = (key.bytes(), value.bytes(self.step));
                let expiry = expire_in.map(|d| self.clock.now_ms() + 1 + u64::from(d % 3000));
                let mut batch = WriteBatch::new();
                match expiry {
                    Some(at) => batch.put_expiring(&key, &value, at),
                    None => batch.put(&key, &value),
                };
                self.commit(batch, sync, |s, seq| {
                    s.insert(key, ModelValue { value, seq, expires_at_ms: expiry });
                });
            }
            Op::Delete { key, sync } => {
                let key = key.bytes();
                let mut batch = WriteBatch::new();
                batch.delete(&key);
                self.commit(batch, sync, |s, _| {
                    s.remove(&key);
                });
            }
            Op::Batch { writes, sync } => {
                let mut batch = WriteBatch::new();
                let mut ops = Vec::new();
                for (i, (key, value)) in writes.into_iter().take(8).enumerate() {
                    let key = key.bytes();
                    match value {
                        Some(v) => {
                            let v = v.bytes(self.step + i);
                            batch.put(&key, &v);
                            ops.push((key, Some(v)));
                        }
                        None => {
                            batch.delete(&key);
                            ops.push((key, None));
                        }
                    }
                }
                // A key written twice: the last write wins.
                self.commit(batch, sync, |s, seq| {
                    for (key, value) in ops {
                        match value {
                            Some(value) => s.insert(key, ModelValue { value, seq, expires_at_ms: None }),
                            None => s.remove(&key),
                        };
                    }
                });
            }
            Op::Empty { sync } => self.commit(WriteBatch::new(), sync, |_, _| {}),
            Op::PutIfAbsent { key, value, sync } => {
                self.put_if_absent(key.bytes(), value.bytes(self.step), sync)
            }
            Op::Get { key } => {
                let key = key.bytes();
                let now = self.clock.now_ms();
                let expected = visible(self.model(), now, &ALL).into_iter().find(|e| e.key == key);
                let got = self.db().get_entry(&key).unwrap_or_else(|e| panic!("{}: get: {e}", self.ctx()));
                assert_eq!(got, expected, "{}: get {:?}", self.ctx(), String::from_utf8_lossy(&key));
            }
            Op::Scan { lo, hi, mode } => self.scan((lo.bound(), hi.bound()), mode),
            Op::Snapshot => {
                if self.snapshots.len() >= 4 {
                    self.snapshots.remove(0);
                }
                let snapshot = self.db().snapshot();
                self.snapshots.push((snapshot, self.model().clone(), self.clock.now_ms()));
            }
            Op::ReadSnapshots { drop_oldest } => {
                for (snapshot, state, time) in &self.snapshots {
                    let expected = visible(state, *time, &ALL);
                    let got: Vec<Entry> = snapshot
                        .range::<&[u8], _>(..)
                        .collect::<Result<_, _>>()
                        .unwrap_or_else(|e| panic!("{}: snapshot scan: {e}", self.ctx()));
                    assert_eq!(got, expected, "{}: snapshot at seq {}", self.ctx(), snapshot.sequence());
                    for e in expected.iter().take(3) {
                        let got =
                            snapshot.get_entry(&e.key).unwrap_or_else(|err| panic!("{}: {err}", self.ctx()));
                        assert_eq!(got.as_ref(), Some(e), "{}: snapshot get", self.ctx());
                    }
                }
                if drop_oldest && !self.snapshots.is_empty() {
                    self.snapshots.remove(0);
                }
            }
            Op::Advance { ms } => self.clock.advance(u64::from(ms % 4000)),
            Op::Flush => {
                self.db().flush().unwrap_or_else(|e| panic!("{}: flush: {e}", self.ctx()));
                self.mark_all_durable();
            }
            Op::Compact => {
                self.db().compact().unwrap_or_else(|e| panic!("{}: compact: {e}", self.ctx()));
                self.mark_all_durable();
                self.check_everything("after compact");
            }
            Op::Reopen => {
                self.snapshots.clear();
                self.tally();
                let db = self.db.take().expect("open");
                db.close().unwrap_or_else(|e| panic!("{}: close: {e}", self.ctx()));
                self.mark_all_durable();
                self.reopen(self.fs.clone());
                self.check_everything("after reopen");
            }
            Op::Crash { seed, kind } => self.crash(seed, kind),
        }
    }

    /// Commits `batch`, checks its sequence number and records the new model state.
    fn commit(&mut self, batch: WriteBatch, sync: bool, apply: impl FnOnce(&mut State, u64)) {
        let before = self.db().last_sequence();
        let seq = self
            .db()
            .write_opt(batch, WriteOptions::with_sync(Some(sync)))
            .unwrap_or_else(|e| panic!("{}: write: {e}", self.ctx()));
        assert_eq!(seq, before + 1, "{}: sequence numbers are dense per commit", self.ctx());
        assert_eq!(self.db().last_sequence(), seq, "{}: a commit is visible when it returns", self.ctx());
        let mut state = self.model().clone();
        apply(&mut state, seq);
        self.record(state, sync);
    }

    fn record(&mut self, state: State, sync: bool) {
        if sync {
            // Everything up to and including this commit is durable now.
            self.history = vec![state];
        } else {
            self.history.push(state);
        }
    }

    fn put_if_absent(&mut self, key: Vec<u8>, value: Vec<u8>, sync: bool) {
        let now = self.clock.now_ms();
        let exists = visible(self.model(), now, &ALL).iter().any(|e| e.key == key);
        let before = self.db().last_sequence();
        let result = self.db().write_with(WriteOptions::with_sync(Some(sync)), |view| {
            assert_eq!(view.last_sequence(), before, "the view sees the latest commit");
            if view.get(&key)?.is_some() {
                return Err(PutIfAbsentError::Exists);
            }
            let mut batch = WriteBatch::new();
            batch.put(&key, &value);
            Ok((batch, ()))
        });
        match result {
            Ok((seq, ())) => {
                assert!(!exists, "{}: put-if-absent committed over a live key", self.ctx());
                assert_eq!(seq, before + 1, "{}: sequence", self.ctx());
                let mut state = self.model().clone();
                state.insert(key, ModelValue { value, seq, expires_at_ms: None });
                self.record(state, sync);
            }
            Err(PutIfAbsentError::Exists) => {
                assert!(exists, "{}: put-if-absent saw a key the model does not have", self.ctx());
                assert_eq!(
                    self.db().last_sequence(),
                    before,
                    "{}: an abandoned commit used a sequence",
                    self.ctx()
                );
            }
            Err(PutIfAbsentError::Engine(e)) => panic!("{}: write_with: {e}", self.ctx()),
        }
    }

    fn scan(&mut self, range: (Bound<Vec<u8>>, Bound<Vec<u8>>), mode: ScanMode) {
        let now = self.clock.now_ms();
        let expected = visible(self.model(), now, &range);
        let what = format!("{}: scan {range:?} {mode:?}", self.ctx());
        let mut cursor = self.db().cursor(range.clone());
        let iter = self.db().range(range);
        let got: Vec<Entry> = match mode {
            ScanMode::Forward => {
                let got: Vec<Entry> =
                    iter.collect::<Result<_, _>>().unwrap_or_else(|e| panic!("{what}: {e}"));
                // The lending cursor sees exactly what the owning iterator sees.
                let mut lent = Vec::new();
                while cursor.next().unwrap_or_else(|e| panic!("{what}: cursor: {e}")) {
                    lent.push(Entry {
                        key: cursor.key().to_vec(),
                        value: cursor.value().to_vec(),
                        seq: cursor.seq(),
                        expires_at_ms: cursor.expires_at_ms(),
                    });
                }
                assert_eq!(lent, got, "{what}: cursor");
                got
            }
            ScanMode::Reverse => {
                let mut got: Vec<Entry> =
                    iter.rev().collect::<Result<_, _>>().unwrap_or_else(|e| panic!("{what}: {e}"));
                got.reverse();
                got
            }
            ScanMode::DoubleEnded(pattern) => {
                let mut iter = iter;
                let (mut front, mut back) = (Vec::new(), Vec::new());
                for i in 0.. {
                    let from_front = pattern.rotate_right(i % 64) & 1 == 1;
                    let item = if from_front { iter.next() } else { iter.next_back() };
                    let Some(entry) = item else { break };
                    let entry = entry.unwrap_or_else(|e| panic!("{what}: {e}"));
                    if from_front {
                        front.push(entry);
                    } else {
                        back.push(entry);
                    }
                    assert!(
                        front.len() + back.len() <= expected.len(),
                        "{what}: more entries than the model"
                    );
                }
                assert!(iter.next().is_none() && iter.next_back().is_none(), "{what}: resumed after ending");
                back.reverse();
                front.extend(back);
                front
            }
        };
        assert_eq!(got, expected, "{what}");
    }

    fn mark_all_durable(&mut self) {
        let last = self.history.pop().expect("history never empty");
        self.history = vec![last];
    }

    fn reopen(&mut self, fs: MemFs) {
        self.fs = fs;
        let db = Db::open_with_fs(Arc::new(self.fs.clone()), DIR, self.options.clone());
        self.db = Some(db.unwrap_or_else(|e| panic!("{}: reopen failed: {e}", self.ctx())));
    }

    fn crash(&mut self, seed: u64, kind: u8) {
        self.snapshots.clear();
        let policy = match kind % 8 {
            0 => CrashPolicy::KeepAll,
            1 => CrashPolicy::DropAll,
            _ => CrashPolicy::Random(seed),
        };
        let crashed = self.fs.crash_clone(policy);
        self.tally();
        // The old instance goes away; whatever it does now cannot reach the crashed copy.
        drop(self.db.take());
        self.reopen(crashed);
        let now = self.clock.now_ms();
        let recovered: Vec<Entry> = self
            .db()
            .iter()
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{}: scan after crash: {e}", self.ctx()));
        let candidates: Vec<usize> = if policy == CrashPolicy::KeepAll {
            // A process crash loses nothing that was acknowledged.
            vec![self.history.len() - 1]
        } else {
            (0..self.history.len()).collect()
        };
        let matched =
            candidates.iter().rev().find(|&&k| visible(&self.history[k], now, &ALL) == recovered).copied();
        let Some(k) = matched else {
            panic!(
                "{}: state after crash ({policy:?}) is not a prefix of the commits containing every synced one; \
                 recovered {recovered:?}; durable model {:?}; latest model {:?}",
                self.ctx(),
                visible(&self.history[0], now, &ALL),
                visible(self.model(), now, &ALL),
            );
        };
        let state = self.history.swap_remove(k);
        self.history = vec![state];
        let last = self.db().last_sequence();
        assert!(recovered.iter().all(|e| e.seq <= last), "{}: entry newer than last_sequence", self.ctx());
        self.check_everything("after crash");
    }

    fn check_everything(&self, when: &str) {
        let now = self.clock.now_ms();
        let expected = visible(self.model(), now, &ALL);
        let got: Vec<Entry> = self
            .db()
            .iter()
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{}: scan: {e}", self.ctx()));
        assert_eq!(got, expected, "{}: full scan {when}", self.ctx());
        let mut reversed: Vec<Entry> = self
            .db()
            .iter()
            .rev()
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{}: scan: {e}", self.ctx()));
        reversed.reverse();
        assert_eq!(reversed, expected, "{}: full reverse scan {when}", self.ctx());
        for e in expected.iter().take(4) {
            let got = self.db().get_entry(&e.key).unwrap_or_else(|err| panic!("{}: get: {err}", self.ctx()));
            assert_eq!(got.as_ref(), Some(e), "{}: get {when}", self.ctx());
        }
    }
}
