//! Atomic operations: checks on versionstamps, then mutations in order, all or nothing.
//!
//! A commit first validates every limit (Deno's order and texts). Then, under the engine's
//! commit lock and against the latest state, it evaluates the checks; if one fails,
//! nothing is written and no versionstamp is used. Otherwise it applies the mutations in
//! order to an overlay of the keys they touch (so `set` then `sum` on one key sees the
//! set), and writes the overlay as one engine batch with one sequence number — the
//! commit's versionstamp. **Better than Deno:** a mutation that fails (a `sum` on a
//! string, say) fails the whole commit: nothing is visible or durable and the
//! versionstamp does not advance.

use crate::queue::{Enqueue, EnqueueOptions, PendingEnqueue};
use crate::shared::Core;
use crate::store::{Abort, CommitOptions, EngineStore, OnDurable, Store, Transaction};
use crate::{
    CommitResult, InvalidVersionstamp, Key, KeyPart, KvBigInt, KvEntryMaybe, KvError, KvValue, SetOptions,
    ToKvValue, Value, Versionstamp,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// A versionstamp check: the key's current versionstamp must equal this one (`None`: the
/// key must not exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The key.
    pub key: Key,
    /// The expected versionstamp, or `None` for "absent".
    pub versionstamp: Option<Versionstamp>,
}

/// What a mutation does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MutationKind {
    /// Set the value.
    Set(KvValue),
    /// Delete the key (no error if it is missing).
    Delete,
    /// Add: `KvU64` operands wrap at 2^64; V8 numbers and bigints follow Deno's `sum`.
    Sum(KvValue),
    /// Keep the smaller `KvU64`.
    Min(KvValue),
    /// Keep the larger `KvU64`.
    Max(KvValue),
    /// Set the value under the key extended by a string part holding the commit's
    /// versionstamp in hex.
    SetSuffixVersionstampedKey(KvValue),
}

/// One mutation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mutation {
    /// The key (the prefix, for versionstamped keys).
    pub key: Key,
    /// What to do.
    pub kind: MutationKind,
    /// For `Set` and `SetSuffixVersionstampedKey`: expire this long after the commit. It
    /// must be a whole number of milliseconds and end by +262142-12-31T23:59:59.999Z (see
    /// [`SetOptions::expire_in`]). Other kinds ignore it, as Deno's `mutate()` does.
    pub expire_in: Option<Duration>,
}

/// An atomic operation being built; nothing happens until [`AtomicOperation::commit`].
///
/// Errors are reported by `commit`, in Deno's order: first what Deno throws while the
/// operation is built (a value that cannot be serialized, an `expire_in` that is not a
/// whole number of milliseconds, an enqueue's delay or backoff schedule), then the count
/// limits (checks, mutations plus enqueues), then malformed checks (`Invalid check`),
/// malformed mutations (`Invalid mutation: ...`), enqueues whose `keys_if_undelivered`
/// cannot be encoded (`Invalid enqueue`), then the sizes: check and mutation keys, values,
/// enqueue payloads, the total size and the total key size.
#[must_use = "an atomic operation does nothing until it is committed"]
pub struct AtomicOperation<'a, S: Store = EngineStore> {
    core: &'a Arc<Core<S>>,
    checks: Vec<PendingCheck>,
    mutations: Vec<Mutation>,
    enqueues: Vec<PendingEnqueue>,
    /// Absolute expiry times (ms since the Unix epoch) by mutation index, for mutations
    /// added with [`AtomicOperation::mutate_expiring_at`].
    expires_at: BTreeMap<usize, u64>,
    /// The first error Deno throws while building, before `commit` runs.
    error: Option<KvError>,
}

/// A check as given. A malformed versionstamp still counts as a check; it fails the
/// commit with `Invalid check` after the count limits, as in Deno.
struct PendingCheck {
    key: Key,
    versionstamp: Result<Option<Versionstamp>, InvalidVersionstamp>,
}

impl<'a, S: Store> AtomicOperation<'a, S> {
    pub(crate) fn new(core: &'a Arc<Core<S>>) -> Self {
        AtomicOperation {
            core,
            checks: Vec::new(),
            mutations: Vec::new(),
            enqueues: Vec::new(),
            expires_at: BTreeMap::new(),
            error: None,
        }
    }

    fn remember(&mut self, error: KvError) {
        self.error.get_or_insert(error);
    }

    fn push_value(
        mut self,
        key: &Key,
        value: &(impl ToKvValue + ?Sized),
        make: fn(KvValue) -> MutationKind,
        expire_in: Option<Duration>,
    ) -> Self {
        match value.to_kv_value() {
            Ok(value) => self.mutations.push(Mutation { key: key.clone(), kind: make(value), expire_in }),
            Err(e) => self.remember(e),
        }
        self
    }

    /// Requires `key` to have `versionstamp` (`None`: to be absent) when the commit runs.
    pub fn check(mut self, key: &Key, versionstamp: Option<Versionstamp>) -> Self {
        self.checks.push(PendingCheck { key: key.clone(), versionstamp: Ok(versionstamp) });
        self
    }

    /// [`AtomicOperation::check`] with a versionstamp in hex (case-insensitive), as Deno
    /// accepts it; anything but 20 hex characters fails the commit with `Invalid check`.
    /// A malformed check still counts toward the 100 checks, and the count limits are
    /// reported before it, as in Deno.
    pub fn check_hex(mut self, key: &Key, versionstamp: Option<&str>) -> Self {
        let versionstamp = versionstamp.map(str::parse::<Versionstamp>).transpose();
        self.checks.push(PendingCheck { key: key.clone(), versionstamp });
        self
    }

    /// Requires the entry to be unchanged since it was read.
    pub fn check_entry<T>(self, entry: &KvEntryMaybe<T>) -> Self {
        let versionstamp = entry.versionstamp;
        self.check(&entry.key, versionstamp)
    }

    /// Sets `key` to `value`.
    pub fn set(self, key: &Key, value: &(impl ToKvValue + ?Sized)) -> Self {
        self.push_value(key, value, MutationKind::Set, None)
    }

    /// Sets `key` to `value` with options (expiry). An `expire_in` that is not a whole
    /// number of milliseconds fails the commit (see [`SetOptions::expire_in`]).
    pub fn set_with(mut self, key: &Key, value: &(impl ToKvValue + ?Sized), options: SetOptions) -> Self {
        if let Err(e) = check_whole_millis(options.expire_in) {
            self.remember(e);
            return self;
        }
        self.push_value(key, value, MutationKind::Set, options.expire_in)
    }

    /// Deletes `key`.
    pub fn delete(mut self, key: &Key) -> Self {
        self.mutations.push(Mutation { key: key.clone(), kind: MutationKind::Delete, expire_in: None });
        self
    }

    /// Adds `operand` to the `KvU64` at `key` (modulo 2^64; a missing key takes `operand`).
    pub fn sum(self, key: &Key, operand: u64) -> Self {
        self.mutate(Mutation {
            key: key.clone(),
            kind: MutationKind::Sum(KvValue::U64(operand)),
            expire_in: None,
        })
    }

    /// Adds the number `operand` to the number stored at `key`: Deno's
    /// `mutate({ type: "sum", key, value: operand })` with a JavaScript number. A missing
    /// key takes `operand`; a stored number becomes the `f64` sum (overflowing to
    /// `Infinity`, `NaN` allowed) and is stored as a V8 double. A stored bigint, `KvU64`
    /// or anything else fails the commit with Deno's text (`Cannot sum BigInt with
    /// Number`, ...; see [`crate::SumError`]). There is no `min_number`/`max_number`: Deno
    /// refuses min and max on anything but a `KvU64`.
    ///
    /// ```
    /// use stampkv::{key, Kv, KvOptions, Value};
    ///
    /// let kv = Kv::open_in_memory(KvOptions::default())?;
    /// kv.atomic().sum_number(&key!["score"], 1.5).commit()?;
    /// kv.atomic().sum_number(&key!["score"], 2.0).commit()?;
    /// assert_eq!(kv.get::<Value>(&key!["score"])?.value, Some(Value::Number(3.5)));
    /// # Ok::<(), stampkv::KvError>(())
    /// ```
    pub fn sum_number(self, key: &Key, operand: f64) -> Self {
        self.push_value(key, &Value::Number(operand), MutationKind::Sum, None)
    }

    /// Adds the bigint `operand` to the bigint stored at `key`: Deno's
    /// `mutate({ type: "sum", key, value: operand })` with a JavaScript bigint. A missing
    /// key takes `operand`; a stored bigint becomes the exact sum. A stored `KvU64` with
    /// an operand in `0..2^64` is added to modulo 2^64, as Deno does (any other operand:
    /// `Cannot sum KvU64 with BigInt`). A stored number or anything else fails the commit
    /// with Deno's text (see [`crate::SumError`]). Any primitive integer, or a parsed
    /// [`KvBigInt`], is an operand.
    ///
    /// ```
    /// use stampkv::{key, Kv, KvBigInt, KvOptions, Value};
    ///
    /// let kv = Kv::open_in_memory(KvOptions::default())?;
    /// let big: KvBigInt = "100000000000000000000000000000".parse().unwrap();
    /// kv.atomic().sum_bigint(&key!["total"], big).sum_bigint(&key!["total"], -1).commit()?;
    /// let total = kv.get::<Value>(&key!["total"])?.value;
    /// assert_eq!(total, Some(Value::BigInt("99999999999999999999999999999".parse().unwrap())));
    /// # Ok::<(), stampkv::KvError>(())
    /// ```
    pub fn sum_bigint(self, key: &Key, operand: impl Into<KvBigInt>) -> Self {
        self.push_value(key, &Value::BigInt(operand.into()), MutationKind::Sum, None)
    }

    /// Keeps the smaller of the `KvU64` at `key` and `operand`.
    pub fn min(self, key: &Key, operand: u64) -> Self {
        self.mutate(Mutation {
            key: key.clone(),
            kind: MutationKind::Min(KvValue::U64(operand)),
            expire_in: None,
        })
    }

    /// Keeps the larger of the `KvU64` at `key` and `operand`.
    pub fn max(self, key: &Key, operand: u64) -> Self {
        self.mutate(Mutation {
            key: key.clone(),
            kind: MutationKind::Max(KvValue::U64(operand)),
            expire_in: None,
        })
    }

    /// Sets `value` under `key_prefix` extended by the commit's versionstamp (a string part
    /// of 20 hex characters): Deno's `set([...prefix, kv.commitVersionstamp()], value)`.
    pub fn set_versionstamped_key(self, key_prefix: &Key, value: &(impl ToKvValue + ?Sized)) -> Self {
        self.push_value(key_prefix, value, MutationKind::SetSuffixVersionstampedKey, None)
    }

    /// Enqueues `value` as part of this operation: it is queued only if the operation
    /// commits, and becomes deliverable `options.delay` after the commit.
    ///
    /// As in Deno, a delay over 30 days, a bad backoff schedule or a value that cannot be
    /// serialized fails the commit before anything else; a `keys_if_undelivered` key that
    /// cannot be encoded (`Invalid enqueue`) and a payload over the value limit are
    /// reported among the commit's own checks. Empty and oversized `keys_if_undelivered`
    /// are accepted, as Deno accepts them.
    pub fn enqueue(mut self, value: &(impl ToKvValue + ?Sized), options: EnqueueOptions) -> Self {
        match PendingEnqueue::new(value, options) {
            Ok(enqueue) => self.enqueues.push(enqueue),
            Err(e) => self.remember(e),
        }
        self
    }

    /// Adds any mutation. A `Set` or `SetSuffixVersionstampedKey` whose `expire_in` is not
    /// a whole number of milliseconds fails the commit, as Deno's `mutate()` throws.
    pub fn mutate(mut self, mutation: Mutation) -> Self {
        if carries_expiry(&mutation.kind) {
            if let Err(e) = check_whole_millis(mutation.expire_in) {
                self.remember(e);
                return self;
            }
        }
        self.mutations.push(mutation);
        self
    }

    /// Adds a mutation that expires at an absolute time, `expires_at_ms` milliseconds after
    /// the Unix epoch on the engine's clock, as KV Connect's `expire_at_ms` carries it (a
    /// time already past stores an entry that is expired at once). Its `expire_in` is
    /// ignored. Only `Set` and `SetSuffixVersionstampedKey` store an expiry; other kinds
    /// ignore it. A time after +262142-12-31T23:59:59.999Z fails the commit with
    /// `Invalid mutation: expireAt is too large: <ms>`.
    pub fn mutate_expiring_at(mut self, mutation: Mutation, expires_at_ms: u64) -> Self {
        if carries_expiry(&mutation.kind) {
            self.expires_at.insert(self.mutations.len(), expires_at_ms);
        }
        self.mutations.push(Mutation { expire_in: None, ..mutation });
        self
    }

    /// Runs the operation: all of it, or — when a check fails — none of it.
    pub fn commit(self) -> Result<CommitResult, KvError> {
        let (core, plan) = self.plan()?;
        let outcome = core.store.commit(CommitOptions::default(), |view| plan.apply(view));
        match outcome {
            Ok((seq, (written, touched, queued))) => {
                let versionstamp = checked_versionstamp(seq, written);
                core.watch.notify(&touched);
                if !queued.is_empty() {
                    core.queue.enqueued(&queued);
                }
                Ok(CommitResult::Committed(versionstamp))
            }
            Err(Abort::CheckFailed) => Ok(CommitResult::CheckFailed),
            Err(Abort::Failed(e)) => Err(e),
        }
    }

    /// [`AtomicOperation::commit`] for callers that must not wait for durability on their
    /// thread (an async server): the commit is applied before this returns, and `done` is
    /// called with its result once it is known — at once (on this thread) for a failed
    /// check or an error, and once the commit is durable and visible otherwise (on the
    /// store's durability thread, or on this one). Watchers and queue listeners are woken
    /// just before `done`. `done` must not block; if it panics on the durability thread, the
    /// panic is reported there and goes no further (the commit stands).
    ///
    /// Whether the call itself may block (the store waiting for room, or a store over the
    /// network) says [`Kv::commit_may_block`](crate::Kv::commit_may_block).
    pub fn commit_then(self, done: impl FnOnce(Result<CommitResult, KvError>) + Send + 'static) {
        let (core, plan) = match self.plan() {
            Ok(planned) => planned,
            Err(e) => return done(Err(e)),
        };
        let meeting = Arc::new(Meeting::default());
        let durable = meeting.clone();
        let on_durable: OnDurable = Box::new(move |result| durable.durable(result));
        let outcome =
            core.store.commit_deferred(CommitOptions::default(), |view| plan.apply(view), on_durable);
        match outcome {
            Ok((seq, (written, touched, queued))) => {
                let versionstamp = checked_versionstamp(seq, written);
                let core = core.clone();
                meeting.finish_with(Box::new(move |result| {
                    if result.is_ok() {
                        core.watch.notify(&touched);
                        if !queued.is_empty() {
                            core.queue.enqueued(&queued);
                        }
                    }
                    done(result.map(|()| CommitResult::Committed(versionstamp)));
                }));
            }
            Err(Abort::CheckFailed) => done(Ok(CommitResult::CheckFailed)),
            Err(Abort::Failed(e)) => done(Err(e)),
        }
    }

    /// Checks the limits and validates the operation into a plan.
    fn plan(self) -> Result<(&'a Arc<Core<S>>, Plan), KvError> {
        let AtomicOperation { core, checks, mutations, enqueues, expires_at, error } = self;
        let limits = &core.limits;
        // Deno throws these from the builder call, before the commit starts.
        if let Some(error) = error {
            return Err(error);
        }
        if checks.len() > limits.max_checks {
            return Err(KvError::TooManyChecks { max: limits.max_checks });
        }
        if mutations.len() + enqueues.len() > limits.max_mutations {
            return Err(KvError::TooManyMutations { max: limits.max_mutations });
        }
        let plan = Plan::validate(core, checks, mutations, &expires_at, enqueues)?;
        Ok((core, plan))
    }
}

/// The versionstamp of commit version `seq`; the one written into the write set (if any)
/// must be the same: the version the store assigned.
fn checked_versionstamp(seq: u64, written: Option<Versionstamp>) -> Versionstamp {
    let versionstamp = Versionstamp::from_sequence(seq);
    if cfg!(any(feature = "invariants", debug_assertions)) {
        if let Some(written) = written {
            assert_eq!(versionstamp, written, "invariant violated: versionstamp");
        }
    }
    versionstamp
}

/// What finishes a deferred commit, called with whether it became durable.
type Finish = Box<dyn FnOnce(Result<(), KvError>) + Send>;

/// Where a deferred commit's two halves meet: the store's durability notice, and the
/// finishing step that needs what the commit returned. Whichever arrives second runs the
/// finishing step, exactly once.
#[derive(Default)]
struct Meeting {
    state: parking_lot::Mutex<MeetingState>,
}

#[derive(Default)]
enum MeetingState {
    #[default]
    Waiting,
    Durable(Result<(), KvError>),
    Finish(Finish),
    Done,
}

impl Meeting {
    /// The store's notice.
    fn durable(&self, result: Result<(), KvError>) {
        let mut state = self.state.lock();
        match std::mem::replace(&mut *state, MeetingState::Done) {
            MeetingState::Waiting => *state = MeetingState::Durable(result),
            MeetingState::Finish(finish) => {
                drop(state);
                finish(result);
            }
            MeetingState::Durable(_) | MeetingState::Done => {
                debug_assert!(false, "a deferred commit's durability was reported twice");
            }
        }
    }

    /// The finishing step, once the commit returned.
    fn finish_with(&self, finish: Finish) {
        let mut state = self.state.lock();
        match std::mem::replace(&mut *state, MeetingState::Done) {
            MeetingState::Waiting => *state = MeetingState::Finish(finish),
            MeetingState::Durable(result) => {
                drop(state);
                finish(result);
            }
            MeetingState::Finish(_) | MeetingState::Done => {
                debug_assert!(false, "a deferred commit was finished twice");
            }
        }
    }
}

/// A validated operation with its keys encoded.
struct Plan {
    checks: Vec<(Vec<u8>, Option<Versionstamp>)>,
    mutations: Vec<(Vec<u8>, MutationKind, Option<Expiry>)>,
    enqueues: Vec<Enqueue>,
}

/// When a mutation's entry expires.
#[derive(Debug, Clone, Copy)]
enum Expiry {
    /// This many milliseconds after the commit.
    In(u64),
    /// At this time (milliseconds since the Unix epoch).
    At(u64),
}

/// What a successful commit reports: its versionstamp, the (encoded) keys it wrote, and
/// the engine keys of the messages it enqueued.
type Applied = (Option<Versionstamp>, Vec<Vec<u8>>, Vec<Vec<u8>>);

/// A key's state in the overlay: value and absolute expiry, or deleted.
type Pending = Option<(KvValue, Option<u64>)>;

impl Plan {
    /// Checks every key, value and total against the limits, in Deno's order.
    fn validate<S: Store>(
        core: &Core<S>,
        checks: Vec<PendingCheck>,
        mutations: Vec<Mutation>,
        expires_at: &BTreeMap<usize, u64>,
        enqueues: Vec<PendingEnqueue>,
    ) -> Result<Plan, KvError> {
        let limits = &core.limits;
        let now_ms = core.store.clock().now_ms();
        let mut plan = Plan { checks: Vec::new(), mutations: Vec::new(), enqueues: Vec::new() };
        // 1. Parse checks, then mutations, then enqueues: a malformed check or a key that
        // cannot be encoded fails here, before any key or value size is looked at.
        for check in checks {
            let versionstamp = check.versionstamp.map_err(|_| KvError::InvalidCheck)?;
            let encoded = check.key.encode().map_err(|_| KvError::InvalidCheck)?;
            plan.checks.push((encoded, versionstamp));
        }
        for (index, mutation) in mutations.into_iter().enumerate() {
            let encoded = mutation.key.encode().map_err(KvError::InvalidMutationKey)?;
            let expiry = match (mutation.expire_in, expires_at.get(&index)) {
                (_, Some(&at)) if at > MAX_EXPIRES_AT_MS => {
                    return Err(KvError::InvalidMutation(format!("expireAt is too large: {at}")));
                }
                (_, Some(&at)) => Some(Expiry::At(at)),
                (Some(expire_in), None) if carries_expiry(&mutation.kind) => {
                    Some(Expiry::In(expire_in_millis(expire_in, now_ms)?))
                }
                _ => None,
            };
            plan.mutations.push((encoded, mutation.kind, expiry));
        }
        plan.enqueues = enqueues.into_iter().map(PendingEnqueue::parse).collect::<Result<_, _>>()?;
        // 2. Every check and mutation key: not empty, not too large.
        let (mut total, mut total_keys) = (0usize, 0usize);
        let check_keys = plan.checks.iter().map(|(key, _)| key);
        let mutation_keys = plan.mutations.iter().map(|(key, _, _)| key);
        for encoded in check_keys.chain(mutation_keys) {
            if encoded.is_empty() {
                return Err(KvError::EmptyKey);
            }
            if encoded.len() > limits.max_write_key_bytes {
                return Err(KvError::KeyTooLargeForWrite { max: limits.max_write_key_bytes });
            }
            total += encoded.len();
        }
        // 3. Values, counted with their keys.
        for (encoded, kind, _) in &plan.mutations {
            if let Some(value) = carried_value(kind) {
                let size = stored_size(value);
                if size > limits.max_value_bytes {
                    return Err(KvError::ValueTooLarge { max: limits.max_value_bytes });
                }
                total += encoded.len() + size;
                total_keys += encoded.len();
            }
        }
        // 4. Enqueue payloads (their `keys_if_undelivered` count nothing, as in Deno).
        for enqueue in &plan.enqueues {
            if enqueue.payload_size() > limits.max_value_bytes {
                return Err(KvError::EnqueuePayloadTooLarge { max: limits.max_value_bytes });
            }
            total += enqueue.counted_bytes();
        }
        if total > limits.max_total_mutation_bytes {
            return Err(KvError::TotalMutationSizeTooLarge { max: limits.max_total_mutation_bytes });
        }
        if total_keys > limits.max_total_key_bytes {
            return Err(KvError::TotalKeySizeTooLarge { max: limits.max_total_key_bytes });
        }
        Ok(plan)
    }

    /// Evaluates checks and mutations against the latest state; builds the batch.
    fn apply(&self, view: &mut dyn Transaction) -> Result<Applied, Abort> {
        for (key, expected) in &self.checks {
            // Every stored versionstamp is a version's; one that is not can never match.
            let expected = match expected {
                None => None,
                Some(v) if Versionstamp::from_sequence(v.sequence()) == *v => Some(v.sequence()),
                Some(_) => return Err(Abort::CheckFailed),
            };
            if !view.check_version(key, expected)? {
                return Err(Abort::CheckFailed);
            }
        }
        // The commit's version is asked for only when it is written into the data (a
        // versionstamped key, a queue record): a store that groups commits can then place
        // this commit in its group as late as it joins.
        let needs_version = !self.enqueues.is_empty()
            || self
                .mutations
                .iter()
                .any(|(_, kind, _)| matches!(kind, MutationKind::SetSuffixVersionstampedKey(_)));
        let versionstamp = needs_version.then(|| Versionstamp::from_sequence(view.commit_version()));
        let now_ms = view.now_ms();
        let mut overlay: BTreeMap<Vec<u8>, Pending> = BTreeMap::new();
        for (key, kind, expiry) in &self.mutations {
            let expires_at = expiry.map(|expiry| match expiry {
                Expiry::In(ms) => now_ms.saturating_add(ms),
                Expiry::At(at) => at,
            });
            match kind {
                MutationKind::Set(value) => {
                    overlay.insert(key.clone(), Some((value.clone(), expires_at)));
                }
                MutationKind::Delete => {
                    overlay.insert(key.clone(), None);
                }
                MutationKind::SetSuffixVersionstampedKey(value) => {
                    let versionstamp =
                        versionstamp.unwrap_or_else(|| Versionstamp::from_sequence(view.commit_version()));
                    let mut full_key = key.clone();
                    KeyPart::String(versionstamp.to_hex())
                        .encode_into(&mut full_key)
                        .map_err(KvError::from)?;
                    overlay.insert(full_key, Some((value.clone(), expires_at)));
                }
                MutationKind::Sum(operand) | MutationKind::Min(operand) | MutationKind::Max(operand) => {
                    let current = current_value(&overlay, view, key)?;
                    let result = arithmetic(kind, current.as_ref(), operand)?;
                    // sum/min/max clear any expiry, as Deno does.
                    overlay.insert(key.clone(), Some((result, None)));
                }
            }
        }
        let queued: Vec<Vec<u8>> = match versionstamp {
            Some(versionstamp) => self
                .enqueues
                .iter()
                .enumerate()
                .map(|(index, enqueue)| enqueue.write(view, now_ms, versionstamp.sequence(), index as u32))
                .collect(),
            None => Vec::new(),
        };
        for (key, pending) in &overlay {
            match pending {
                Some((value, expires_at)) => view.put(key, &value.encode_stored(), *expires_at),
                None => view.delete(key),
            }
        }
        Ok((versionstamp, overlay.into_keys().collect(), queued))
    }
}

/// The value a value-carrying mutation stores, if it carries one.
fn carried_value(kind: &MutationKind) -> Option<&KvValue> {
    match kind {
        MutationKind::Delete => None,
        MutationKind::Set(v)
        | MutationKind::Sum(v)
        | MutationKind::Min(v)
        | MutationKind::Max(v)
        | MutationKind::SetSuffixVersionstampedKey(v) => Some(v),
    }
}

/// A value's size as Deno counts it: its data (8 for a `KvU64`).
fn stored_size(value: &KvValue) -> usize {
    match value {
        KvValue::V8(bytes) | KvValue::Bytes(bytes) => bytes.len(),
        KvValue::U64(_) => 8,
    }
}

/// The latest expiry time Deno accepts, in milliseconds since the Unix epoch:
/// +262142-12-31T23:59:59.999Z, the last millisecond of its date type.
const MAX_EXPIRES_AT_MS: u64 = 8_210_266_876_799_999;

/// Whether a mutation kind stores an expiry (Deno's `mutate()` drops `expireIn` otherwise).
fn carries_expiry(kind: &MutationKind) -> bool {
    matches!(kind, MutationKind::Set(_) | MutationKind::SetSuffixVersionstampedKey(_))
}

/// Refuses an `expire_in` with a fraction of a millisecond, with Deno's text for a
/// non-integer `expireIn` (the value in decimal milliseconds: `received 1.5`).
fn check_whole_millis(expire_in: Option<Duration>) -> Result<(), KvError> {
    let Some(expire_in) = expire_in else { return Ok(()) };
    let fraction_ns = expire_in.subsec_nanos() % 1_000_000;
    if fraction_ns == 0 {
        return Ok(());
    }
    let fraction = format!("{fraction_ns:06}");
    let received = format!("{}.{}", expire_in.as_millis(), fraction.trim_end_matches('0'));
    Err(KvError::InvalidExpireIn { received })
}

/// `expire_in` in whole milliseconds, refusing an expiry after [`MAX_EXPIRES_AT_MS`] when
/// counted from `now_ms`, with Deno's text (which shows at most `u64::MAX`).
fn expire_in_millis(expire_in: Duration, now_ms: u64) -> Result<u64, KvError> {
    let ms = u64::try_from(expire_in.as_millis()).unwrap_or(u64::MAX);
    if now_ms.checked_add(ms).is_none_or(|at| at > MAX_EXPIRES_AT_MS) {
        return Err(KvError::InvalidMutation(format!("expireIn is too large: {ms}")));
    }
    Ok(ms)
}

/// The value of `key` as the commit sees it so far: the overlay first, then the database.
fn current_value(
    overlay: &BTreeMap<Vec<u8>, Pending>,
    view: &dyn Transaction,
    key: &[u8],
) -> Result<Option<KvValue>, Abort> {
    if let Some(pending) = overlay.get(key) {
        return Ok(pending.as_ref().map(|(value, _)| value.clone()));
    }
    match view.get(key)? {
        Some(entry) => Ok(Some(KvValue::decode_stored(&entry.value).map_err(KvError::from)?)),
        None => Ok(None),
    }
}

/// sum/min/max of the current value and the operand.
fn arithmetic(kind: &MutationKind, current: Option<&KvValue>, operand: &KvValue) -> Result<KvValue, KvError> {
    let (name, combine): (&'static str, fn(u64, u64) -> u64) = match kind {
        MutationKind::Sum(_) => ("sum", u64::wrapping_add),
        MutationKind::Min(_) => ("min", u64::min),
        _ => ("max", u64::max),
    };
    let KvValue::U64(operand_u64) = operand else {
        if name == "sum" {
            return crate::value::sum_v8(current, operand).map_err(|e| KvError::Sum(e.to_string()));
        }
        return Err(KvError::NonU64Operand { operation: name });
    };
    match current {
        None => Ok(KvValue::U64(*operand_u64)),
        Some(KvValue::U64(stored)) => Ok(KvValue::U64(combine(*stored, *operand_u64))),
        Some(_) => Err(KvError::NonU64Value { operation: name }),
    }
}
