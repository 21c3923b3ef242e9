//! `kv_model`: the Deno KV layer against a model of its contract.
//!
//! The input is a sequence of at most [`MAX_OPS`] operations on a `Kv` (tiny engine options,
//! inline background work, a manual clock, a `MemFs`, every commit durable): `set` (some
//! with `expire_in`), `delete`, atomic operations with checks (absent, current, stale and
//! arbitrary versionstamps) and mutations (set, set with expiry, delete, sum/min/max on
//! `KvU64`, versionstamped keys, enqueue), `get`, `get_many`, `list` with every selector
//! form, reverse, limit and paging through cursors, `enqueue`, clock advances, flush,
//! compact, clean reopen and crash.
//!
//! The model is a `BTreeMap` of encoded key → (stored value, versionstamp, expiry) plus the
//! list of queued messages. Properties: every read equals the model (values, versionstamps,
//! expiry at the current clock); a commit's versionstamp is the next sequence number and
//! strictly larger than every earlier one, shared by every key the commit writes; a failed
//! check or a failing mutation (sum on a non-`KvU64`) applies nothing and uses no
//! versionstamp; sums wrap at 2^64; a listing is in key order (reversed if asked), limited,
//! and paging through it with cursors gives exactly the whole listing; enqueued messages
//! are stored under the reserved prefix `FF 'q'` (deadline, sequence, index), never listed;
//! a reopen or a crash (every commit was synced) loses nothing.

use arbitrary::{Arbitrary, Unstructured};
use stampkv::engine::fs::{CrashPolicy, MemFs};
use stampkv::engine::{BackgroundMode, Clock as _, Options};
use stampkv::{
    CommitResult, EnqueueOptions, Key, KeyPart, Kv, KvBigInt, KvError, KvOptions, KvValue, ListOptions,
    ManualClock, Selector, SetOptions, Value, Versionstamp,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Operations per run: keeps each execution fast.
pub const MAX_OPS: usize = 150;

const DIR: &str = "/fuzz-kv";

#[derive(Arbitrary, Debug, Clone)]
struct KeySpec(Vec<(u8, u8)>);

impl KeySpec {
    /// Up to 3 parts from a small space, so keys share prefixes and collide.
    fn key(&self) -> Key {
        Key(self.0.iter().take(3).map(|&(kind, v)| part(kind, v)).collect())
    }
}

fn part(kind: u8, v: u8) -> KeyPart {
    match kind % 5 {
        0 => KeyPart::String(["a", "b", "users", "posts", "", "a\0"][usize::from(v % 6)].to_owned()),
        1 => KeyPart::Number(f64::from((v % 8) as i8 - 3)),
        2 => KeyPart::BigInt(KvBigInt::from(i64::from((v % 6) as i8 - 2))),
        3 => KeyPart::Bytes(vec![v % 3; usize::from(v % 3)]),
        _ => KeyPart::Bool(v & 1 == 1),
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum ValueSpec {
    U64(u64),
    NearMax(u8),
    Text(u8),
    Number(i16),
    Bytes { len: u8, fill: u8 },
}

impl ValueSpec {
    fn value(self) -> KvValue {
        match self {
            ValueSpec::U64(n) => KvValue::U64(n),
            ValueSpec::NearMax(n) => KvValue::U64(u64::MAX - u64::from(n % 4)),
            ValueSpec::Text(n) => {
                KvValue::from_value(&Value::String(format!("text-{n}"))).expect("a string is a value")
            }
            ValueSpec::Number(n) => {
                KvValue::from_value(&Value::Number(f64::from(n))).expect("a number is a value")
            }
            ValueSpec::Bytes { len, fill } => KvValue::Bytes(vec![fill; usize::from(len % 100)]),
        }
    }
}

#[derive(Arbitrary, Debug, Clone)]
enum CheckSpec {
    Absent(KeySpec),
    Current(KeySpec),
    Stale(KeySpec),
    Exact(KeySpec, u8),
}

#[derive(Arbitrary, Debug, Clone)]
enum MutationSpec {
    Set(KeySpec, ValueSpec, Option<u16>),
    Delete(KeySpec),
    Sum(KeySpec, u64),
    Min(KeySpec, u64),
    Max(KeySpec, u64),
    Versionstamped(KeySpec, ValueSpec),
    Enqueue(u16),
}

#[derive(Arbitrary, Debug, Clone)]
enum SelectorSpec {
    Prefix(KeySpec),
    PrefixStart(KeySpec, KeySpec),
    PrefixEnd(KeySpec, KeySpec),
    Range(KeySpec, KeySpec),
    /// A start or end that does not extend the prefix (invalid).
    PrefixOther(KeySpec, KeySpec, bool),
}

#[derive(Debug, Clone)]
enum Op {
    Set { key: KeySpec, value: ValueSpec, expire_in: Option<u16> },
    Delete { key: KeySpec },
    Atomic { checks: Vec<CheckSpec>, mutations: Vec<MutationSpec> },
    Get { key: KeySpec },
    GetMany { keys: Vec<KeySpec> },
    List { selector: SelectorSpec, reverse: bool, limit: Option<u8>, page: u8 },
    Enqueue { delay_ms: u16 },
    Advance { ms: u16 },
    Flush,
    Compact,
    Reopen,
    Crash { seed: u64 },
}

impl<'a> Arbitrary<'a> for Op {
    /// Weighted: mostly writes, atomic operations and reads; some clock moves, flushes,
    /// compactions, reopens and crashes.
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match u.int_in_range(0u8..=99)? {
            0..=21 => Op::Set { key: u.arbitrary()?, value: u.arbitrary()?, expire_in: u.arbitrary()? },
            22..=29 => Op::Delete { key: u.arbitrary()? },
            30..=49 => Op::Atomic { checks: u.arbitrary()?, mutations: u.arbitrary()? },
            50..=59 => Op::Get { key: u.arbitrary()? },
            60..=64 => Op::GetMany { keys: u.arbitrary()? },
            65..=76 => Op::List {
                selector: u.arbitrary()?,
                reverse: u.arbitrary()?,
                limit: u.arbitrary()?,
                page: u.arbitrary()?,
            },
            77..=81 => Op::Enqueue { delay_ms: u.arbitrary()? },
            82..=87 => Op::Advance { ms: u.arbitrary()? },
            88..=90 => Op::Flush,
            91..=92 => Op::Compact,
            93..=95 => Op::Reopen,
            _ => Op::Crash { seed: u.arbitrary()? },
        })
    }
}

/// A model entry: stored value, commit sequence, expiry.
#[derive(Debug, Clone, PartialEq)]
struct ModelEntry {
    value: KvValue,
    seq: u64,
    expires_at_ms: Option<u64>,
}

/// What a mutation leaves in the commit's overlay: a value with expiry, or a deletion.
type Pending = Option<(KvValue, Option<u64>)>;

struct Harness {
    fs: MemFs,
    clock: Arc<ManualClock>,
    kv: Option<Kv>,
    model: BTreeMap<Vec<u8>, ModelEntry>,
    /// Queued messages: (deadline, sequence, index in the commit).
    queue: Vec<(u64, u64, u32)>,
    last_versionstamp: Versionstamp,
    step: usize,
    log: Vec<String>,
}

/// Runs the `kv_model` target on one input.
pub fn kv_model(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let mut harness = Harness::new();
    let mut step = 0;
    while step < MAX_OPS && !u.is_empty() {
        let Ok(op) = Op::arbitrary(&mut u) else { break };
        harness.step = step;
        harness.log.push(format!("{op:?}"));
        harness.apply(op);
        step += 1;
    }
    if crate::util::verbose() {
        eprintln!("kv_model: {step} operations: {:?}", crate::util::op_counts(&harness.log));
    }
    harness.check_all("end");
}

fn options(clock: &Arc<ManualClock>) -> KvOptions {
    let mut engine = Options::tiny_for_tests();
    engine.background = BackgroundMode::Inline;
    engine.clock = clock.clone();
    KvOptions::with_engine(engine)
}

/// The selector's common prefix, which cursors leave out (the reference's rule).
fn common_prefix(selector: &Selector) -> Vec<u8> {
    match (&selector.prefix, &selector.start, &selector.end) {
        (Some(p), _, _) => encode(p),
        (None, Some(s), Some(e)) => {
            let (s, e) = (encode(s), encode(e));
            s.iter().zip(&e).take_while(|(a, b)| a == b).map(|(a, _)| *a).collect()
        }
        _ => Vec::new(),
    }
}

fn encode(key: &Key) -> Vec<u8> {
    key.encode().expect("model keys encode")
}

impl Harness {
    fn new() -> Self {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let fs = MemFs::new();
        let kv = Kv::open_with_fs(Arc::new(fs.clone()), DIR, options(&clock)).expect("open");
        Harness {
            fs,
            clock,
            kv: Some(kv),
            model: BTreeMap::new(),
            queue: Vec::new(),
            last_versionstamp: Versionstamp::from_sequence(0),
            step: 0,
            log: Vec::new(),
        }
    }

    fn kv(&self) -> &Kv {
        self.kv.as_ref().expect("database open")
    }

    fn ctx(&self) -> String {
        let start = self.log.len().saturating_sub(10);
        format!("step {}; last operations: {:?}", self.step, &self.log[start..])
    }

    fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    /// The live model entry of an encoded key.
    fn live(&self, key: &[u8]) -> Option<&ModelEntry> {
        let now = self.now();
        self.model.get(key).filter(|e| e.expires_at_ms.is_none_or(|at| now < at))
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Set { key, value, expire_in } => {
                let mutation = MutationSpec::Set(key, value, expire_in);
                let direct = self.step.is_multiple_of(2); // kv.set / set_with, or the same through atomic()
                self.atomic(Vec::new(), vec![mutation], direct);
            }
            Op::Delete { key } => {
                self.atomic(Vec::new(), vec![MutationSpec::Delete(key)], self.step.is_multiple_of(2))
            }
            Op::Atomic { checks, mutations } => {
                let checks = checks.into_iter().take(4).collect();
                let mutations = mutations.into_iter().take(6).collect();
                self.atomic(checks, mutations, false);
            }
            Op::Get { key } => {
                let key = key.key();
                let got =
                    self.kv().get::<KvValue>(&key).unwrap_or_else(|e| panic!("{}: get: {e}", self.ctx()));
                let expected = if key.is_empty() { None } else { self.live(&encode(&key)) };
                assert_eq!(got.key, key, "{}: get returned another key", self.ctx());
                self.assert_entry(got.value, got.versionstamp, expected, &format!("get {key:?}"));
            }
            Op::GetMany { keys } => {
                let keys: Vec<Key> = keys.iter().take(12).map(KeySpec::key).collect();
                match self.kv().get_many::<KvValue>(&keys) {
                    Ok(entries) => {
                        assert!(
                            keys.len() <= 10,
                            "{}: get_many of {} keys succeeded",
                            self.ctx(),
                            keys.len()
                        );
                        assert_eq!(entries.len(), keys.len(), "{}: get_many result count", self.ctx());
                        for (key, got) in keys.iter().zip(entries) {
                            let expected = if key.is_empty() { None } else { self.live(&encode(key)) };
                            assert_eq!(&got.key, key, "{}: get_many order", self.ctx());
                            self.assert_entry(
                                got.value,
                                got.versionstamp,
                                expected,
                                &format!("get_many {key:?}"),
                            );
                        }
                    }
                    Err(KvError::TooManyRanges { max: 10 }) => assert!(keys.len() > 10, "{}", self.ctx()),
                    Err(e) => panic!("{}: get_many: {e}", self.ctx()),
                }
            }
            Op::List { selector, reverse, limit, page } => self.list(&selector, reverse, limit, page),
            Op::Enqueue { delay_ms } => self.atomic(Vec::new(), vec![MutationSpec::Enqueue(delay_ms)], true),
            Op::Advance { ms } => self.clock.advance(u64::from(ms % 5000)),
            Op::Flush => self.kv().engine().flush().unwrap_or_else(|e| panic!("{}: flush: {e}", self.ctx())),
            Op::Compact => {
                self.kv().engine().compact().unwrap_or_else(|e| panic!("{}: compact: {e}", self.ctx()));
                self.check_all("after compact");
            }
            Op::Reopen => {
                let kv = self.kv.take().expect("open");
                kv.close().unwrap_or_else(|e| panic!("{}: close: {e}", self.ctx()));
                self.kv = Some(self.open(self.fs.clone()));
                self.check_all("after reopen");
            }
            Op::Crash { seed } => {
                // Every commit was synced before it was acknowledged: nothing may be lost.
                let crashed = self.fs.crash_clone(CrashPolicy::Random(seed));
                drop(self.kv.take());
                self.fs = crashed;
                self.kv = Some(self.open(self.fs.clone()));
                self.check_all("after crash");
            }
        }
    }

    fn open(&self, fs: MemFs) -> Kv {
        Kv::open_with_fs(Arc::new(fs), DIR, options(&self.clock))
            .unwrap_or_else(|e| panic!("{}: reopen failed: {e}", self.ctx()))
    }

    fn assert_entry(
        &self,
        value: Option<KvValue>,
        versionstamp: Option<Versionstamp>,
        expected: Option<&ModelEntry>,
        what: &str,
    ) {
        let expected = expected.map(|e| (e.value.clone(), Versionstamp::from_sequence(e.seq)));
        let got = value.zip(versionstamp);
        assert_eq!(got, expected, "{}: {what} at {}", self.ctx(), self.now());
    }

    /// Runs an atomic operation against the database and the model.
    fn atomic(&mut self, checks: Vec<CheckSpec>, mutations: Vec<MutationSpec>, direct: bool) {
        let now = self.now();
        let before = self.kv().engine().last_sequence();
        let next = before + 1;
        let stamp = Versionstamp::from_sequence(next);

        // --- the model's verdict --------------------------------------------------------
        let mut resolved_checks = Vec::new();
        let mut empty_key = false;
        let mut checks_hold = true;
        for check in &checks {
            let (spec, expected) = match check {
                CheckSpec::Absent(k) => (k, None),
                CheckSpec::Current(k) => (k, self.live_stamp(k)),
                CheckSpec::Stale(k) => {
                    let stale = match self.live_stamp(k) {
                        Some(v) => Versionstamp::from_sequence(v.sequence().wrapping_sub(1)),
                        None => Versionstamp::from_sequence(next),
                    };
                    (k, Some(stale))
                }
                CheckSpec::Exact(k, n) => (k, Some(Versionstamp::from_sequence(u64::from(*n)))),
            };
            let key = spec.key();
            empty_key |= key.is_empty();
            if !key.is_empty()
                && self.live(&encode(&key)).map(|e| Versionstamp::from_sequence(e.seq)) != expected
            {
                checks_hold = false;
            }
            resolved_checks.push((key, expected));
        }
        let mut overlay: BTreeMap<Vec<u8>, Pending> = BTreeMap::new();
        let mut enqueues = Vec::new();
        let mut mutation_error = false;
        for m in &mutations {
            match m {
                MutationSpec::Set(k, _, _)
                | MutationSpec::Delete(k)
                | MutationSpec::Sum(k, _)
                | MutationSpec::Min(k, _)
                | MutationSpec::Max(k, _)
                | MutationSpec::Versionstamped(k, _) => empty_key |= k.key().is_empty(),
                MutationSpec::Enqueue(_) => {}
            }
            match m {
                MutationSpec::Set(k, v, expire_in) => {
                    let at = expire_in.map(|ms| now + u64::from(ms % 5000));
                    overlay.insert(encode(&k.key()), Some((v.value(), at)));
                }
                MutationSpec::Delete(k) => {
                    overlay.insert(encode(&k.key()), None);
                }
                MutationSpec::Versionstamped(k, v) => {
                    let mut key = k.key();
                    key.0.push(KeyPart::String(stamp.to_hex()));
                    overlay.insert(encode(&key), Some((v.value(), None)));
                }
                MutationSpec::Sum(k, n) | MutationSpec::Min(k, n) | MutationSpec::Max(k, n) => {
                    let key = encode(&k.key());
                    let current = match overlay.get(&key) {
                        Some(pending) => pending.as_ref().map(|(v, _)| v.clone()),
                        None => self.live(&key).map(|e| e.value.clone()),
                    };
                    let combined = match (current, m) {
                        (None, _) => Some(*n),
                        (Some(KvValue::U64(c)), MutationSpec::Sum(..)) => Some(c.wrapping_add(*n)),
                        (Some(KvValue::U64(c)), MutationSpec::Min(..)) => Some(c.min(*n)),
                        (Some(KvValue::U64(c)), _) => Some(c.max(*n)),
                        (Some(_), _) => None,
                    };
                    match combined {
                        Some(result) => {
                            overlay.insert(key, Some((KvValue::U64(result), None)));
                        }
                        None => mutation_error = true,
                    }
                }
                MutationSpec::Enqueue(delay) => {
                    let index = enqueues.len() as u32;
                    enqueues.push((now + u64::from(*delay), next, index));
                }
            }
        }

        // --- the database ---------------------------------------------------------------
        let result = self.run_atomic(&resolved_checks, &mutations, direct);
        let what = format!("{}: atomic {checks:?} {mutations:?}", self.ctx());
        let after = self.kv().engine().last_sequence();
        if empty_key {
            assert!(matches!(result, Err(KvError::EmptyKey)), "{what}: expected EmptyKey, got {result:?}");
            assert_eq!(after, before, "{what}: a refused commit used a versionstamp");
            return;
        }
        if !checks_hold {
            assert_eq!(result.as_ref().ok(), Some(&None), "{what}: expected a failed check, got {result:?}");
            assert_eq!(after, before, "{what}: a failed check used a versionstamp");
            return;
        }
        if mutation_error {
            assert!(
                matches!(result, Err(KvError::NonU64Value { .. })),
                "{what}: expected a sum/min/max failure, got {result:?}"
            );
            assert_eq!(after, before, "{what}: a failed mutation used a versionstamp");
            return;
        }
        let got = match result {
            Ok(Some(v)) => v,
            other => panic!("{what}: expected a commit, got {other:?}"),
        };
        assert_eq!(got, stamp, "{what}: the versionstamp is not the next sequence number");
        assert!(got > self.last_versionstamp, "{what}: versionstamps went backwards");
        assert_eq!(after, next, "{what}: last_sequence after the commit");
        self.last_versionstamp = got;
        for (key, pending) in overlay {
            match pending {
                Some((value, expires_at_ms)) => {
                    self.model.insert(key, ModelEntry { value, seq: next, expires_at_ms });
                }
                None => {
                    self.model.remove(&key);
                }
            }
        }
        self.queue.extend(enqueues);
        self.check_queue();
    }

    fn live_stamp(&self, k: &KeySpec) -> Option<Versionstamp> {
        let key = k.key();
        if key.is_empty() {
            return None;
        }
        self.live(&encode(&key)).map(|e| Versionstamp::from_sequence(e.seq))
    }

    /// `Ok(Some(versionstamp))` for a commit, `Ok(None)` for a failed check.
    fn run_atomic(
        &self,
        checks: &[(Key, Option<Versionstamp>)],
        mutations: &[MutationSpec],
        direct: bool,
    ) -> Result<Option<Versionstamp>, KvError> {
        let kv = self.kv();
        let expire = |ms: &Option<u16>| SetOptions {
            expire_in: ms.map(|ms| Duration::from_millis(u64::from(ms % 5000))),
        };
        let enqueue_options = |delay: u16| EnqueueOptions {
            delay: Duration::from_millis(u64::from(delay)),
            ..EnqueueOptions::default()
        };
        if direct && checks.is_empty() && mutations.len() == 1 {
            match &mutations[0] {
                MutationSpec::Set(k, v, ms) => {
                    return kv.set_with(&k.key(), &v.value(), expire(ms)).map(Some)
                }
                MutationSpec::Delete(k) => {
                    // `delete` returns no versionstamp: read it back from the engine.
                    kv.delete(&k.key())?;
                    return Ok(Some(Versionstamp::from_sequence(kv.engine().last_sequence())));
                }
                MutationSpec::Enqueue(delay) => {
                    return kv.enqueue(&KvValue::U64(u64::from(*delay)), enqueue_options(*delay)).map(Some)
                }
                _ => {}
            }
        }
        let mut op = kv.atomic();
        for (key, versionstamp) in checks {
            op = op.check(key, *versionstamp);
        }
        for m in mutations {
            op = match m {
                MutationSpec::Set(k, v, ms) => op.set_with(&k.key(), &v.value(), expire(ms)),
                MutationSpec::Delete(k) => op.delete(&k.key()),
                MutationSpec::Sum(k, n) => op.sum(&k.key(), *n),
                MutationSpec::Min(k, n) => op.min(&k.key(), *n),
                MutationSpec::Max(k, n) => op.max(&k.key(), *n),
                MutationSpec::Versionstamped(k, v) => op.set_versionstamped_key(&k.key(), &v.value()),
                MutationSpec::Enqueue(delay) => {
                    op.enqueue(&KvValue::U64(u64::from(*delay)), enqueue_options(*delay))
                }
            };
        }
        Ok(match op.commit()? {
            CommitResult::Committed(v) => Some(v),
            CommitResult::CheckFailed => None,
        })
    }

    /// The queued messages stored under `FF 'q'` are exactly the model's.
    fn check_queue(&self) {
        let mut stored = Vec::new();
        for entry in self.kv().engine().range([0xFF, b'q'].as_slice()..[0xFF, b'r'].as_slice()) {
            let entry = entry.unwrap_or_else(|e| panic!("{}: queue scan: {e}", self.ctx()));
            let key = &entry.key;
            assert_eq!(key.len(), 22, "{}: queue key {key:?}", self.ctx());
            let deadline = u64::from_be_bytes(key[2..10].try_into().expect("8 bytes"));
            let seq = u64::from_be_bytes(key[10..18].try_into().expect("8 bytes"));
            let index = u32::from_be_bytes(key[18..22].try_into().expect("4 bytes"));
            assert_eq!(entry.seq, seq, "{}: a message is written by the commit that enqueues it", self.ctx());
            stored.push((deadline, seq, index));
        }
        let mut expected = self.queue.clone();
        expected.sort_unstable();
        assert_eq!(stored, expected, "{}: queued messages", self.ctx());
    }

    /// The model's entries in `[start, end)` (encoded), in key order.
    fn expected_range(&self, start: &[u8], end: &[u8]) -> Vec<(Vec<u8>, ModelEntry)> {
        if start >= end {
            return Vec::new();
        }
        let now = self.now();
        self.model
            .range(start.to_vec()..end.to_vec())
            .filter(|(_, e)| e.expires_at_ms.is_none_or(|at| now < at))
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect()
    }

    fn list(&self, spec: &SelectorSpec, reverse: bool, limit: Option<u8>, page: u8) {
        let with = |mut p: Vec<u8>, b: u8| {
            p.push(b);
            p
        };
        let extends = |key: &Key, prefix: &Key| {
            let (k, p) = (encode(key), encode(prefix));
            k.len() > p.len() && k.starts_with(&p)
        };
        let extend = |prefix: &KeySpec, more: &KeySpec| {
            let mut key = prefix.key();
            key.0.extend(more.key().0.into_iter().take(2));
            if key.0.len() == prefix.key().0.len() {
                key.0.push(part(0, 0));
            }
            key
        };
        // The selector, and the range it must list (None: the selector is invalid).
        let (selector, range) = match spec {
            SelectorSpec::Prefix(p) => {
                let p = p.key();
                let e = encode(&p);
                (Selector::prefix(p), Some((with(e.clone(), 0x00), with(e, 0xFF))))
            }
            SelectorSpec::PrefixStart(p, s) => {
                let start = extend(p, s);
                let e = encode(&p.key());
                (Selector::prefix(p.key()).with_start(start.clone()), Some((encode(&start), with(e, 0xFF))))
            }
            SelectorSpec::PrefixEnd(p, s) => {
                let end = extend(p, s);
                let e = encode(&p.key());
                (Selector::prefix(p.key()).with_end(end.clone()), Some((with(e, 0x00), encode(&end))))
            }
            SelectorSpec::Range(s, e) => {
                let (s, e) = (s.key(), e.key());
                let range = (encode(&s) <= encode(&e)).then(|| (encode(&s), encode(&e)));
                (Selector::range(s, e), range)
            }
            SelectorSpec::PrefixOther(p, other, is_start) => {
                let (p, other) = (p.key(), other.key());
                let valid = extends(&other, &p);
                let e = encode(&p);
                let range = valid.then(|| {
                    if *is_start {
                        (encode(&other), with(e.clone(), 0xFF))
                    } else {
                        (with(e.clone(), 0x00), encode(&other))
                    }
                });
                let selector = if *is_start {
                    Selector::prefix(p).with_start(other)
                } else {
                    Selector::prefix(p).with_end(other)
                };
                (selector, range)
            }
        };
        let what = format!("{}: list {selector:?} reverse {reverse} limit {limit:?}", self.ctx());
        let options =
            ListOptions { limit: limit.map(|n| usize::from(n % 8) + 1), reverse, ..ListOptions::default() };
        let listed = self.kv().list::<KvValue>(&selector, &options);
        let Some((start, end)) = range else {
            assert!(
                matches!(listed, Err(KvError::InvalidList(_))),
                "{what}: an invalid selector was accepted"
            );
            return;
        };
        let mut expected = self.expected_range(&start, &end);
        if reverse {
            expected.reverse();
        }
        let all = expected.len();
        if let Some(n) = options.limit {
            expected.truncate(n);
        }
        let got: Vec<_> = listed
            .unwrap_or_else(|e| panic!("{what}: {e}"))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(got.len(), expected.len(), "{what}: entry count");
        for (g, (key, e)) in got.iter().zip(&expected) {
            assert_eq!(&encode(&g.key), key, "{what}: key order");
            assert_eq!(g.value, e.value, "{what}: value of {:?}", g.key);
            assert_eq!(
                g.versionstamp,
                Versionstamp::from_sequence(e.seq),
                "{what}: versionstamp of {:?}",
                g.key
            );
        }
        // Paging with cursors gives exactly the whole listing.
        let mut whole = self.expected_range(&start, &end);
        if reverse {
            whole.reverse();
        }
        let mut whole: Vec<Vec<u8>> = whole.into_iter().map(|(k, _)| k).collect();
        let page = usize::from(page % 5) + 1;
        let mut paged: Vec<Vec<u8>> = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..=all + 1 {
            let options =
                ListOptions { limit: Some(page), reverse, cursor: cursor.clone(), ..ListOptions::default() };
            let mut iter = self
                .kv()
                .list::<KvValue>(&selector, &options)
                .unwrap_or_else(|e| panic!("{what}: page: {e}"));
            let mut count = 0;
            for entry in iter.by_ref() {
                paged.push(encode(&entry.unwrap_or_else(|e| panic!("{what}: page: {e}")).key));
                count += 1;
            }
            let next = iter.cursor().unwrap_or_else(|e| panic!("{what}: cursor: {e}"));
            if count < page {
                assert_eq!(next, "", "{what}: a short page must end the listing");
            }
            if next.is_empty() && count == page && paged.last() == Some(&common_prefix(&selector)) {
                // The reference's cursor of a key equal to the selector's common prefix (a
                // range whose start is a byte prefix of its end, listing its start key) is
                // the empty suffix, "", which also means "no cursor": paging stops there.
                whole.truncate(paged.len());
            }
            if next.is_empty() {
                break;
            }
            cursor = Some(next);
        }
        assert_eq!(paged, whole, "{what}: paging by {page} with cursors");
    }

    fn check_all(&self, when: &str) {
        let now = self.now();
        let expected: Vec<(&Vec<u8>, &ModelEntry)> =
            self.model.iter().filter(|(_, e)| e.expires_at_ms.is_none_or(|at| now < at)).collect();
        let got: Vec<_> = self
            .kv()
            .list::<KvValue>(&Selector::prefix(Key::new()), &ListOptions::default())
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .unwrap_or_else(|e| panic!("{}: list {when}: {e}", self.ctx()));
        let got: Vec<(Vec<u8>, KvValue, Versionstamp)> =
            got.into_iter().map(|e| (encode(&e.key), e.value, e.versionstamp)).collect();
        let want: Vec<(Vec<u8>, KvValue, Versionstamp)> = expected
            .into_iter()
            .map(|(k, e)| (k.clone(), e.value.clone(), Versionstamp::from_sequence(e.seq)))
            .collect();
        assert_eq!(got, want, "{}: everything {when}", self.ctx());
        self.check_queue();
        let last = self.kv().engine().last_sequence();
        assert!(
            last >= self.last_versionstamp.sequence(),
            "{}: last_sequence {last} went below an acknowledged commit {when}",
            self.ctx()
        );
        // Expiry is the engine's: the entries' expiry times match the model.
        for (key, e) in self.model.iter().filter(|(_, e)| e.expires_at_ms.is_some_and(|at| now < at)).take(4)
        {
            let entry =
                self.kv().engine().get_entry(key).unwrap_or_else(|err| panic!("{}: {err}", self.ctx()));
            let at = entry.and_then(|entry| entry.expires_at_ms);
            assert_eq!(at, e.expires_at_ms, "{}: expiry of {key:?} {when}", self.ctx());
        }
    }
}
