//! Randomised model test: random operations against the engine and against a `BTreeMap`
//! model, with tiny memtables, blocks and files so that flushes and compactions happen all
//! the time, plus clean reopens and simulated crashes through the crash-simulating `MemFs`.
//!
//! After a crash the database must equal the model after some prefix of the acknowledged
//! commits, and that prefix must include every commit acknowledged as synced: no hole, no
//! partial batch. Every read also checks the sequence number of each entry.
//!
//! Fixed seeds run in CI. More: `STAMPKV_MODEL_SEEDS=200 STAMPKV_MODEL_OPS=5000 cargo test
//! --release -p stampkv-engine --test it model::`; one seed: `STAMPKV_MODEL_SEED=1234`.

use crate::common::{env_or, Rng};
use stampkv_engine::fs::{CrashPolicy, MemFs};
use stampkv_engine::{
    BackgroundMode, Clock, Compression, Db, Entry, ManualClock, Options, Snapshot, SyncMode, WriteBatch,
    WriteOptions,
};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

/// A model entry: value, sequence number of the commit that wrote it, expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ModelValue {
    value: Vec<u8>,
    seq: u64,
    expires_at_ms: Option<u64>,
}

type State = BTreeMap<Vec<u8>, ModelValue>;

/// Live entries of a state at time `now`.
fn visible(state: &State, now_ms: u64) -> Vec<Entry> {
    state
        .iter()
        .filter(|(_, v)| v.expires_at_ms.is_none_or(|at| now_ms < at))
        .map(|(k, v)| Entry {
            key: k.clone(),
            value: v.value.clone(),
            seq: v.seq,
            expires_at_ms: v.expires_at_ms,
        })
        .collect()
}

struct Harness {
    rng: Rng,
    seed: u64,
    fs: MemFs,
    clock: Arc<ManualClock>,
    options: Options,
    db: Option<Db>,
    /// States after each acknowledged commit since the last point known durable;
    /// `history[0]` is durable.
    history: Vec<State>,
    snapshots: Vec<(Snapshot, State, u64)>,
    step: usize,
    crashes: u64,
    reopens: u64,
    flushes: u64,
    compactions: u64,
}

const DIR: &str = "/model-db";

impl Harness {
    fn new(seed: u64, background: BackgroundMode) -> Self {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let mut options = Options::tiny_for_tests();
        options.background = background;
        options.sync_mode = SyncMode::Buffered;
        options.clock = clock.clone();
        // Block compression: LZ4 everywhere (the default), nowhere, or below level 0 only.
        match seed % 3 {
            0 => {}
            1 => options.table.compression = Compression::None,
            _ => options.compression_per_level = vec![Compression::None, Compression::Lz4],
        }
        // Level targets: dynamic (the default) for odd seeds, static for even ones.
        options.dynamic_level_bytes = seed % 2 == 1;
        let fs = MemFs::new();
        let db = Db::open_with_fs(Arc::new(fs.clone()), DIR, options.clone()).expect("open");
        Harness {
            rng: Rng::new(seed),
            seed,
            fs,
            clock,
            options,
            db: Some(db),
            history: vec![State::new()],
            snapshots: Vec::new(),
            step: 0,
            crashes: 0,
            reopens: 0,
            flushes: 0,
            compactions: 0,
        }
    }

    fn db(&self) -> &Db {
        self.db.as_ref().expect("database open")
    }

    fn model(&self) -> &State {
        self.history.last().expect("history never empty")
    }

    fn context(&self) -> String {
        format!("seed {} step {}", self.seed, self.step)
    }

    fn random_key(&mut self) -> Vec<u8> {
        let id = self.rng.below(64);
        // Keys of different lengths sharing prefixes exercise the key order.
        match id % 4 {
            0 => format!("k{id:02}").into_bytes(),
            1 => format!("k{id:02}-long-suffix").into_bytes(),
            2 => vec![b'k', b'0' + (id % 10) as u8],
            _ => format!("k{id:02}\0{}", id % 3).into_bytes(),
        }
    }

    fn random_value(&mut self) -> Vec<u8> {
        let len = match self.rng.below(10) {
            0 => 0,
            1 => 300 + self.rng.below(700) as usize,
            _ => self.rng.below(60) as usize,
        };
        if len > 0 && self.rng.one_in(3) {
            // A short pattern repeated: values that compress.
            let pattern_len = 1 + self.rng.below(6) as usize;
            let pattern = self.rng.bytes(pattern_len);
            return pattern.iter().copied().cycle().take(len).collect();
        }
        self.rng.bytes(len)
    }

    fn run(&mut self, ops: usize) {
        for step in 0..ops {
            self.step = step;
            match self.rng.below(100) {
                0..=24 => self.op_put(),
                25..=34 => self.op_delete(),
                35..=46 => self.op_batch(),
                47..=60 => self.op_get(),
                61..=70 => self.op_scan(),
                71..=74 => self.op_snapshot(),
                75..=79 => self.op_check_snapshots(),
                80..=82 => self.op_advance_clock(),
                83..=85 => self.op_flush(),
                86..=87 => self.op_compact(),
                88..=91 => self.op_reopen(),
                92..=96 => self.op_crash(),
                _ => self.op_empty_commit(),
            }
        }
        self.op_crash();
        self.check_everything();
        let stats = self.db().stats();
        let counts = (self.crashes, self.reopens, self.flushes, self.compactions);
        if std::env::var_os("STAMPKV_MODEL_VERBOSE").is_some() {
            eprintln!(
                "seed {}: (crashes, reopens, flushes, compactions) = {counts:?}; now {stats:?}",
                self.seed
            );
        }
        // The run must have exercised what it claims to test.
        assert!(self.crashes > 0 && self.flushes > 0, "{}: too little happened: {counts:?}", self.context());
    }

    /// Commits `batch`, records the new model state, and checks the sequence number.
    fn commit(&mut self, batch: WriteBatch, apply: impl FnOnce(&mut State, u64)) {
        let sync = self.rng.chance(30);
        let before = self.db().last_sequence();
        let seq = self.db().write_opt(batch, WriteOptions::with_sync(Some(sync))).expect("write");
        assert_eq!(seq, before + 1, "{}: sequence numbers are dense per commit", self.context());
        let mut state = self.model().clone();
        apply(&mut state, seq);
        if sync {
            // Everything up to and including this commit is durable now.
            self.history = vec![state];
        } else {
            self.history.push(state);
        }
    }

    fn random_expiry(&mut self) -> Option<u64> {
        self.rng.chance(15).then(|| self.clock.now_ms() + 1 + self.rng.below(3000))
    }

    fn op_put(&mut self) {
        let (key, value, expiry) = (self.random_key(), self.random_value(), self.random_expiry());
        let mut batch = WriteBatch::new();
        match expiry {
            Some(at) => batch.put_expiring(&key, &value, at),
            None => batch.put(&key, &value),
        };
        self.commit(batch, |s, seq| {
            s.insert(key, ModelValue { value, seq, expires_at_ms: expiry });
        });
    }

    fn op_delete(&mut self) {
        let key = self.random_key();
        let mut batch = WriteBatch::new();
        batch.delete(&key);
        self.commit(batch, |s, _| {
            s.remove(&key);
        });
    }

    fn op_batch(&mut self) {
        let count = 2 + self.rng.below(6);
        let mut batch = WriteBatch::new();
        let mut ops = Vec::new();
        for _ in 0..count {
            let key = if !ops.is_empty() && self.rng.chance(15) {
                // Same key twice in one batch: the last write wins.
                let (k, _): &(Vec<u8>, Option<Vec<u8>>) = &ops[self.rng.below(ops.len() as u64) as usize];
                k.clone()
            } else {
                self.random_key()
            };
            if self.rng.chance(25) {
                batch.delete(&key);
                ops.push((key, None));
            } else {
                let value = self.random_value();
                batch.put(&key, &value);
                ops.push((key, Some(value)));
            }
        }
        self.commit(batch, |s, seq| {
            for (key, value) in ops {
                match value {
                    Some(value) => s.insert(key, ModelValue { value, seq, expires_at_ms: None }),
                    None => s.remove(&key),
                };
            }
        });
    }

    fn op_empty_commit(&mut self) {
        self.commit(WriteBatch::new(), |_, _| {});
    }

    fn op_get(&mut self) {
        let key = self.random_key();
        let now = self.clock.now_ms();
        let expected = visible(self.model(), now).into_iter().find(|e| e.key == key);
        let actual = self.db().get_entry(&key).expect("get");
        assert_eq!(actual, expected, "{}: get {:?}", self.context(), String::from_utf8_lossy(&key));
    }

    fn random_bounds(&mut self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        let bound = |rng: &mut Rng, key: Vec<u8>| match rng.below(3) {
            0 => Bound::Unbounded,
            1 => Bound::Included(key),
            _ => Bound::Excluded(key),
        };
        let (a, b) = (self.random_key(), self.random_key());
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        (bound(&mut self.rng, lo), bound(&mut self.rng, hi))
    }

    fn op_scan(&mut self) {
        let (lo, hi) = self.random_bounds();
        let now = self.clock.now_ms();
        let expected: Vec<Entry> = visible(self.model(), now)
            .into_iter()
            .filter(|e| (bound_ref(&lo), bound_ref(&hi)).contains_key(&e.key))
            .collect();
        let range = (lo.clone(), hi.clone());
        let context = format!("{}: scan {:?}..{:?}", self.context(), lo, hi);
        match self.rng.below(3) {
            0 => {
                let got: Vec<Entry> = self.db().range(range.clone()).collect::<Result<_, _>>().expect("scan");
                assert_eq!(got, expected, "{context} forward");
            }
            1 => {
                let mut got: Vec<Entry> =
                    self.db().range(range.clone()).rev().collect::<Result<_, _>>().expect("scan");
                got.reverse();
                assert_eq!(got, expected, "{context} reverse");
            }
            _ => {
                // Alternate ends: the two cursors must meet without overlap or gaps.
                let mut iter = self.db().range(range.clone());
                let (mut front, mut back) = (Vec::new(), Vec::new());
                loop {
                    let from_front = self.rng.chance(50);
                    let item = if from_front { iter.next() } else { iter.next_back() };
                    let Some(entry) = item else { break };
                    let entry = entry.expect("scan");
                    if from_front {
                        front.push(entry);
                    } else {
                        back.push(entry);
                    }
                }
                assert!(
                    iter.next().is_none() && iter.next_back().is_none(),
                    "{context}: resumed after ending"
                );
                back.reverse();
                front.extend(back);
                assert_eq!(front, expected, "{context} double-ended");
            }
        }
    }

    fn op_snapshot(&mut self) {
        if self.snapshots.len() >= 4 {
            self.snapshots.remove(0);
        }
        let snapshot = self.db().snapshot();
        self.snapshots.push((snapshot, self.model().clone(), self.clock.now_ms()));
    }

    fn op_check_snapshots(&mut self) {
        for (snapshot, state, time) in &self.snapshots {
            let expected = visible(state, *time);
            let got: Vec<Entry> = snapshot.range::<&[u8], _>(..).collect::<Result<_, _>>().expect("scan");
            assert_eq!(got, expected, "{}: snapshot at seq {}", self.context(), snapshot.sequence());
            if let Some(e) = expected.first() {
                assert_eq!(snapshot.get_entry(&e.key).expect("get").as_ref(), Some(e));
            }
        }
        if self.rng.chance(30) && !self.snapshots.is_empty() {
            self.snapshots.remove(0);
        }
    }

    fn op_advance_clock(&mut self) {
        self.clock.advance(self.rng.below(2000));
    }

    fn op_flush(&mut self) {
        self.db().flush().expect("flush");
        self.mark_all_durable();
    }

    fn op_compact(&mut self) {
        self.db().compact().expect("compact");
        self.mark_all_durable();
        self.check_everything();
    }

    fn mark_all_durable(&mut self) {
        let last = self.history.pop().expect("history never empty");
        self.history = vec![last];
    }

    fn open(&mut self, fs: MemFs) {
        self.fs = fs;
        let db = Db::open_with_fs(Arc::new(self.fs.clone()), DIR, self.options.clone());
        self.db = Some(db.unwrap_or_else(|e| panic!("{}: reopen failed: {e}", self.context())));
    }

    fn op_reopen(&mut self) {
        self.snapshots.clear();
        self.reopens += 1;
        let db = self.db.take().expect("open");
        let stats = db.stats();
        self.flushes += stats.flushes;
        self.compactions += stats.compactions;
        db.close().expect("close");
        self.mark_all_durable();
        self.open(self.fs.clone());
        self.check_everything();
    }

    fn op_crash(&mut self) {
        self.snapshots.clear();
        let policy =
            if self.rng.chance(20) { CrashPolicy::KeepAll } else { CrashPolicy::Random(self.rng.next_u64()) };
        let crashed = self.fs.crash_clone(policy);
        self.crashes += 1;
        let stats = self.db().stats();
        self.flushes += stats.flushes;
        self.compactions += stats.compactions;
        // The old instance goes away; whatever it does now cannot reach the crashed copy.
        drop(self.db.take());
        self.open(crashed);
        let now = self.clock.now_ms();
        let recovered: Vec<Entry> = self.db().iter().collect::<Result<_, _>>().expect("scan after crash");
        let candidates: Vec<usize> = if policy == CrashPolicy::KeepAll {
            // A process crash loses nothing that was acknowledged.
            vec![self.history.len() - 1]
        } else {
            (0..self.history.len()).collect()
        };
        let matched =
            candidates.iter().rev().find(|&&k| visible(&self.history[k], now) == recovered).copied();
        let Some(k) = matched else {
            panic!(
                "{}: state after crash ({policy:?}) is not a prefix containing every synced commit; \
                 recovered {} entries, candidates {:?}",
                self.context(),
                recovered.len(),
                candidates
            );
        };
        let state = self.history.swap_remove(k);
        self.history = vec![state];
        // Sequence numbers keep growing: no entry is newer than the last sequence.
        let last = self.db().last_sequence();
        assert!(
            recovered.iter().all(|e| e.seq <= last),
            "{}: entry newer than last_sequence",
            self.context()
        );
    }

    fn check_everything(&mut self) {
        let now = self.clock.now_ms();
        let expected = visible(self.model(), now);
        let got: Vec<Entry> = self.db().iter().collect::<Result<_, _>>().expect("scan");
        assert_eq!(got, expected, "{}: full scan", self.context());
        let mut reversed: Vec<Entry> = self.db().iter().rev().collect::<Result<_, _>>().expect("scan");
        reversed.reverse();
        assert_eq!(reversed, expected, "{}: full reverse scan", self.context());
    }
}

fn bound_ref(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

trait ContainsKey {
    fn contains_key(&self, key: &[u8]) -> bool;
}

impl ContainsKey for (Bound<&[u8]>, Bound<&[u8]>) {
    fn contains_key(&self, key: &[u8]) -> bool {
        std::ops::RangeBounds::<[u8]>::contains(self, key)
    }
}

fn seeds(default_count: u64, salt: u64) -> Vec<u64> {
    if let Ok(seed) = std::env::var("STAMPKV_MODEL_SEED") {
        return vec![seed.parse().expect("STAMPKV_MODEL_SEED must be a number")];
    }
    (0..env_or("STAMPKV_MODEL_SEEDS", default_count)).map(|i| i * 7919 + salt).collect()
}

#[test]
fn model_with_inline_background_work_and_crashes() {
    let ops = env_or("STAMPKV_MODEL_OPS", 1500) as usize;
    for seed in seeds(12, 1) {
        Harness::new(seed, BackgroundMode::Inline).run(ops);
    }
}

#[test]
fn model_with_background_threads_and_crashes() {
    let ops = env_or("STAMPKV_MODEL_OPS", 1500) as usize;
    for seed in seeds(4, 2) {
        Harness::new(seed, BackgroundMode::Threads).run(ops);
    }
}
