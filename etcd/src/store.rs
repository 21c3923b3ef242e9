//! [`EtcdStore`]: the storage seam on an etcd cluster.

use crate::bridge::Bridge;
use crate::error::{error, storage_error, write_outcome, WriteOutcome};
use crate::feed::Feed;
use crate::group::{
    drop_if_empty, wait_until_sent, weigh, Group, GroupResult, GroupState, Joining, OpenGroup, MAX_GROUP_WAIT,
};
use crate::layout::{Envelope, Layout, SeqRecord, LAYOUT_VERSION};
use crate::metrics::{EtcdMetrics, EtcdStats};
use crate::options::EtcdOptions;
use crate::snapshot::{read_error, read_retryable, Consistency, EtcdSnapshot, ReadPoint};
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, GetResponse, KvClient, TxnOp, TxnOpResponse,
    TxnResponse,
};
use parking_lot::Mutex;
use stampkv::engine::Clock;
use stampkv::store::{Abort, BulkLoad, CommitOptions, ForeignCommitSink, Store, StoredEntry, Transaction};
use stampkv::{KvError, StorageErrorKind};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Operations one commit may need beyond its writes: the counter and the receipt.
const COMMIT_OVERHEAD_OPS: usize = 2;
/// The `--max-txn-ops` the store needs: Deno allows 1,000 mutations and enqueues per
/// atomic operation, each one etcd operation, and dead letters may add more.
pub const REQUIRED_TXN_OPS: usize = 2048;
/// The most bytes of keys and values the layer above puts in one commit: etcd refuses
/// requests over `--max-request-bytes` (1.5 MiB by default); Deno's own limit on one
/// atomic operation (819,200 bytes) stays under it.
const MAX_COMMIT_BYTES: usize = 1 << 20;
/// How often a commit is rebuilt because another server committed first, before it fails.
const MAX_CONFLICTS: u32 = 10_000;
/// The largest message the client accepts (a page of 1,024 entries of 64 KiB values).
const MAX_DECODING_BYTES: usize = 128 << 20;

/// What the store shares with its snapshots, cursors and background tasks.
pub(crate) struct Shared {
    pub(crate) bridge: Bridge,
    pub(crate) kv: KvClient,
    /// The change feed's own connection.
    pub(crate) feed_client: Client,
    /// Signalled whenever a commit of this process stops being in flight.
    pub(crate) flight_done: tokio::sync::Notify,
    pub(crate) layout: Layout,
    pub(crate) options: EtcdOptions,
    pub(crate) metrics: EtcdMetrics,
    closed: AtomicBool,
    /// The etcd revisions of this process's recent commits, and whether one is in flight:
    /// the change feed passes on only the commits of other servers.
    pub(crate) own: Mutex<OwnCommits>,
}

/// This process's recent commits, as the change feed needs them.
#[derive(Debug, Default)]
pub(crate) struct OwnCommits {
    pub(crate) in_flight: bool,
    pub(crate) revisions: std::collections::BTreeSet<i64>,
}

/// How many own commit revisions the feed remembers.
const OWN_REVISIONS_KEPT: usize = 4096;

impl Shared {
    /// A read without side effects: retried on failures that may pass (a lost member, a
    /// leader election) until the options' read timeout.
    pub(crate) fn read(&self, key: Vec<u8>, options: GetOptions, what: &str) -> Result<GetResponse, KvError> {
        self.check_open()?;
        let deadline = Instant::now() + self.options.read_timeout;
        let mut pause = Duration::from_millis(5);
        loop {
            let mut kv = self.kv.clone();
            let (key, get_options) = (key.clone(), options.clone());
            let started = Instant::now();
            let result = self
                .bridge
                .run(async move { kv.get(key, Some(get_options)).await })
                .ok_or(KvError::Closed)?;
            self.metrics.read_latency.record(started.elapsed());
            match result {
                Ok(response) => return Ok(response),
                Err(e) if read_retryable(&e) && Instant::now() + pause < deadline => {
                    self.metrics.retries.add(1);
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                Err(e) => return Err(read_error(what, e)),
            }
        }
    }

    /// Whether the store was closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn check_open(&self) -> Result<(), KvError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(KvError::Closed);
        }
        Ok(())
    }

    /// Sends one transaction and waits for its answer.
    pub(crate) fn txn(
        &self,
        txn: etcd_client::Txn,
    ) -> Result<Result<TxnResponse, etcd_client::Error>, KvError> {
        let mut kv = self.kv.clone();
        let started = Instant::now();
        let result = self.bridge.run(async move { kv.txn(txn).await }).ok_or(KvError::Closed)?;
        self.metrics.commit_latency.record(started.elapsed());
        Ok(result)
    }

    /// The latest read point: a linearizable read of the counter.
    pub(crate) fn latest(&self) -> Result<(ReadPoint, i64), KvError> {
        let response = self.read(self.layout.seq(), GetOptions::new(), "read the commit counter")?;
        point_of(&response)
    }
}

/// The read point of a response to a read of the counter, and the counter's `mod_revision`
/// (0 while no commit was made).
fn point_of(response: &GetResponse) -> Result<(ReadPoint, i64), KvError> {
    let revision = response.header().map(|h| h.revision()).unwrap_or(0);
    match response.kvs().first() {
        None => Ok((ReadPoint { revision, version: 0 }, 0)),
        Some(kv) => {
            let seq = SeqRecord::decode(kv.value()).ok_or_else(|| {
                error(StorageErrorKind::Corruption, "etcd: the commit counter does not parse")
            })?;
            Ok((ReadPoint { revision, version: seq.version }, kv.mod_revision()))
        }
    }
}

/// The state a commit is built on: read at `point`, valid while the counter's
/// `mod_revision` is still `seq_mod`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CommitBase {
    point: ReadPoint,
    seq_mod: i64,
}

/// The Deno KV layer's store on an etcd cluster; see the crate documentation.
#[derive(Clone)]
pub struct EtcdStore {
    shared: Arc<Shared>,
    /// Group commit: the commits of this process gathered into one etcd transaction at a
    /// time (its receipt key is its own).
    group: Arc<Group>,
    server_id: Arc<str>,
    database_id: Arc<str>,
    feed: Arc<Feed>,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.shared.options.endpoints)
            .field("prefix", &self.shared.options.prefix)
            .field("database_id", &self.database_id)
            .finish()
    }
}

impl EtcdStore {
    /// Connects to the cluster, checks that its settings fit (`--max-txn-ops` at least
    /// [`REQUIRED_TXN_OPS`]), and creates the database's identity record if this is the
    /// first server to open it.
    pub fn open(options: EtcdOptions) -> Result<EtcdStore, KvError> {
        if options.endpoints.is_empty() {
            return Err(error(StorageErrorKind::InvalidArgument, "etcd: no endpoint given"));
        }
        let bridge = Bridge::new(options.runtime_threads).map_err(|e| {
            error(StorageErrorKind::Io, format!("etcd: cannot start the client runtime: {e}"))
        })?;
        let endpoints = options.endpoints.clone();
        let connect = ConnectOptions::new()
            .with_connect_timeout(options.connect_timeout)
            .with_timeout(options.request_timeout)
            .with_keep_alive(Duration::from_secs(5), Duration::from_secs(5));
        let client = bridge
            .run(async move { Client::connect(endpoints, Some(connect)).await })
            .ok_or(KvError::Closed)?
            .map_err(|e| storage_error("connect", e))?;
        // The change feed has a connection of its own: a watch stream that backs up must
        // never hold the commits and reads up in HTTP/2 flow control.
        let endpoints = options.endpoints.clone();
        let feed_connect = ConnectOptions::new()
            .with_connect_timeout(options.connect_timeout)
            .with_keep_alive(Duration::from_secs(5), Duration::from_secs(5));
        let feed_client = bridge
            .run(async move { Client::connect(endpoints, Some(feed_connect)).await })
            .ok_or(KvError::Closed)?
            .map_err(|e| storage_error("connect", e))?;
        let kv = client.kv_client().max_decoding_message_size(MAX_DECODING_BYTES);
        let layout = Layout::new(&options.prefix);
        let shared = Arc::new(Shared {
            bridge,
            kv,
            feed_client,
            layout,
            options,
            metrics: EtcdMetrics::default(),
            closed: AtomicBool::new(false),
            own: Mutex::new(OwnCommits::default()),
            flight_done: tokio::sync::Notify::new(),
        });
        check_txn_ops(&shared)?;
        let database_id = identity(&shared)?;
        let (point, _) = shared.latest()?;
        let feed = Feed::start(shared.clone(), point.revision);
        crate::sweeper::start(&shared).map_err(|e| {
            error(StorageErrorKind::Io, format!("etcd: cannot start the expiry sweeper: {e}"))
        })?;
        crate::compactor::start(&shared).map_err(|e| {
            error(StorageErrorKind::Io, format!("etcd: cannot start the history compactor: {e}"))
        })?;
        Ok(EtcdStore {
            shared,
            group: Arc::new(Group::default()),
            server_id: random_hex().into(),
            database_id: database_id.into(),
            feed: Arc::new(feed),
        })
    }

    /// The database's id: made by the first server that opened it, the same for all.
    pub fn database_id(&self) -> &str {
        &self.database_id
    }

    /// This process's id in the cluster (the name of its receipt key).
    pub fn server_id(&self) -> &str {
        &self.server_id
    }

    /// The options the store was opened with.
    pub fn options(&self) -> &EtcdOptions {
        &self.shared.options
    }

    /// The runtime the store's calls run on.
    pub(crate) fn bridge(&self) -> &Bridge {
        &self.shared.bridge
    }

    /// A client of the cluster (the change feed's connection, for occasional calls).
    pub(crate) fn client(&self) -> Client {
        self.shared.feed_client.clone()
    }

    /// Counters and latencies of the store's etcd calls.
    pub fn stats(&self) -> EtcdStats {
        self.shared.metrics.stats()
    }

    /// A snapshot read by any member without a quorum round (serializable: it may lag
    /// behind the latest commits; Deno's `eventual` consistency).
    fn serializable_snapshot(&self) -> EtcdSnapshot {
        let read_time_ms = self.shared.options.clock.now_ms();
        EtcdSnapshot::lazy(self.shared.clone(), Consistency::Eventual, read_time_ms)
    }

    /// Builds one commit into this process's open group and waits for the group's
    /// transaction; see [`Store::commit`] and the [`group`](crate::group) module.
    fn commit_inner<T>(
        &self,
        build: &mut dyn FnMut(&mut dyn Transaction) -> Result<T, Abort>,
    ) -> Result<(u64, T), Abort> {
        let shared = &self.shared;
        let group = &self.group;
        let mut joining = Joining::new(group);
        let mut rebuilds = 0u32;
        // After a build whose reads were overtaken by other members, build under the lock.
        let mut serial = false;
        // Absence checks are deferred to the group's transaction until the commit is built
        // again (a deferred check that failed, or another server's commit, sends it back).
        let mut may_defer = true;
        loop {
            let mut state = group.state.lock();
            while state.sending {
                group.changed.wait(&mut state);
            }
            shared.check_open()?;
            let base = match state.base {
                Some(base) => base,
                None => {
                    let (point, seq_mod) = shared.latest()?;
                    let base = CommitBase { point, seq_mod };
                    state.base = Some(base);
                    base
                }
            };
            let number = state.sealed + 1;
            let open = state.open.get_or_insert_with(|| OpenGroup::new(number));
            let read_time_ms = shared.options.clock.now_ms();
            let snapshot = EtcdSnapshot::at(shared.clone(), base.point, read_time_ms);
            let version = base.point.version + open.members + 1;
            let (built, writes, absent) = if serial {
                // Built under the group lock, on the members' writes as they are.
                let mut transaction =
                    EtcdTransaction::new(&snapshot, Overlay::Locked(open), version, read_time_ms);
                transaction.may_defer = may_defer;
                let built = build(&mut transaction);
                (built, transaction.writes, transaction.absent)
            } else {
                // Built without the lock, so that the reads of many commits overlap; then
                // checked: every key read must still have the write it saw in the group.
                drop(state);
                let mut transaction =
                    EtcdTransaction::new(&snapshot, Overlay::Shared { group, number }, version, read_time_ms);
                transaction.may_defer = may_defer;
                let built = build(&mut transaction);
                state = group.state.lock();
                let valid = !state.sending
                    && state.base.is_some_and(|b| b.seq_mod == base.seq_mod)
                    && state.open.as_ref().is_some_and(|open| {
                        open.number == number
                            && (!transaction.version_used.get()
                                || version == base.point.version + open.members + 1)
                            && transaction
                                .reads
                                .borrow()
                                .iter()
                                .all(|(key, seen)| open.last_write_of(key) == *seen)
                    });
                if !valid {
                    serial = true;
                    continue;
                }
                (built, transaction.writes, transaction.absent)
            };
            serial = false;
            let version = match state.open.as_ref() {
                Some(open) => base.point.version + open.members + 1,
                None => continue,
            };
            let extra = match built {
                Ok(extra) => extra,
                Err(Abort::CheckFailed) => {
                    // A check counts only on the latest state: this process's base may be
                    // behind another server's commits.
                    let (point, seq_mod) = shared.latest()?;
                    if seq_mod == base.seq_mod {
                        drop_if_empty(&mut state);
                        return Err(Abort::CheckFailed);
                    }
                    if state.open.as_ref().is_none_or(|open| open.members == 0) {
                        state.open = None;
                        state.base = Some(CommitBase { point, seq_mod });
                    } else {
                        // The open group was built on the stale base too: its compare fails
                        // and its members build again. Build after it.
                        joining.pause();
                        wait_until_sent(group, &mut state, number);
                        joining.resume();
                    }
                    continue;
                }
                Err(abort) => {
                    drop_if_empty(&mut state);
                    return Err(abort);
                }
            };
            let Some(open) = state.open.as_mut() else {
                continue;
            };
            let (ops, bytes) = weigh(&writes);
            let ops = ops + absent.len();
            if open.members == 0 && ops + COMMIT_OVERHEAD_OPS > REQUIRED_TXN_OPS {
                state.open = None;
                return Err(Abort::Failed(error(
                    StorageErrorKind::InvalidArgument,
                    format!(
                        "etcd: a commit of {} operations is more than the {REQUIRED_TXN_OPS} the store allows",
                        ops + COMMIT_OVERHEAD_OPS
                    ),
                )));
            }
            if open.members > 0 && !open.fits(ops, bytes) {
                // The group leaves without this commit: build it again on the next one.
                open.full = true;
                group.changed.notify_all();
                joining.pause();
                wait_until_sent(group, &mut state, number);
                joining.resume();
                continue;
            }
            open.join(writes, absent, version, ops, bytes);
            joining.joined();
            let outcome = open.outcome.clone();
            if open.members == 1 {
                self.lead(state, base);
            } else {
                // The leader waits until the callers about to join have joined.
                group.changed.notify_all();
                drop(state);
            }
            match outcome.wait() {
                GroupResult::Applied => return Ok((version, extra)),
                GroupResult::Failed(kind, message) => return Err(Abort::Failed(error(kind, message))),
                GroupResult::Closed => return Err(Abort::Failed(KvError::Closed)),
                GroupResult::Rebuild => {
                    may_defer = false;
                    rebuilds += 1;
                    if rebuilds > MAX_CONFLICTS {
                        return Err(Abort::Failed(error(
                            StorageErrorKind::Unavailable,
                            "etcd: other servers' commits always came first",
                        )));
                    }
                    joining.resume();
                }
            }
        }
    }

    /// Leads the open group: lets the callers that are about to join it join (until none
    /// is left, the group is full or [`MAX_GROUP_WAIT`] passed), seals it, sends it as one
    /// etcd transaction and hands its outcome to every member.
    fn lead(&self, mut state: parking_lot::MutexGuard<'_, GroupState>, base: CommitBase) {
        let group = &self.group;
        loop {
            let Some(open) = state.open.as_ref() else { return };
            if open.full
                || group.joining.load(Ordering::Acquire) == 0
                || open.opened.elapsed() >= MAX_GROUP_WAIT
            {
                break;
            }
            group.changed.wait_for(&mut state, Duration::from_micros(250));
        }
        let Some(sealed) = state.open.take() else { return };
        state.sealed = sealed.number;
        state.sending = true;
        drop(state);
        let outcome = sealed.outcome.clone();
        let (result, next_base) = self.send(base, sealed);
        let mut state = group.state.lock();
        state.sending = false;
        state.base = next_base;
        drop(state);
        outcome.set(result);
        group.changed.notify_all();
    }

    /// Sends a sealed group as one transaction on `base`: the group's outcome, and the base
    /// of the next group (`None`: read it first).
    fn send(&self, base: CommitBase, group: OpenGroup) -> (GroupResult, Option<CommitBase>) {
        let shared = &self.shared;
        let members = group.members;
        let last_version = base.point.version + members;
        let commit_id = random_u128();
        let ops = commit_ops(shared, &self.server_id, last_version, commit_id, group.writes);
        let mut compares = vec![Compare::mod_revision(shared.layout.seq(), CompareOp::Equal, base.seq_mod)];
        compares.extend(
            group.absent.iter().map(|key| Compare::version(shared.layout.data(key), CompareOp::Equal, 0)),
        );
        let txn = etcd_client::Txn::new()
            .when(compares)
            .and_then(ops)
            .or_else([TxnOp::get(shared.layout.seq(), None)]);
        shared.own.lock().in_flight = true;
        let answer = shared.txn(txn);
        {
            // Recorded before the flight ends, so the feed never takes it for foreign.
            let mut own = shared.own.lock();
            if let Ok(Ok(response)) = &answer {
                if let Some(header) = response.header().filter(|_| response.succeeded()) {
                    own.revisions.insert(header.revision());
                    while own.revisions.len() > OWN_REVISIONS_KEPT {
                        own.revisions.pop_first();
                    }
                }
            }
            own.in_flight = false;
        }
        shared.flight_done.notify_waiters();
        let applied = |next: Option<CommitBase>| {
            shared.metrics.commits.add(members);
            shared.metrics.batches.add(1);
            shared.metrics.largest_batch.raise_to(members);
            (GroupResult::Applied, next)
        };
        match answer {
            Err(e) => (GroupResult::failed(&e), None),
            Ok(Ok(response)) if response.succeeded() => {
                let revision = response.header().map(|h| h.revision()).unwrap_or(base.point.revision + 1);
                applied(Some(CommitBase {
                    point: ReadPoint { revision, version: last_version },
                    seq_mod: revision,
                }))
            }
            Ok(Ok(response)) => {
                // Another server committed first: every member builds again on its state.
                shared.metrics.conflicts.add(1);
                match base_from_else(&response) {
                    Ok(next) => (GroupResult::Rebuild, Some(next)),
                    Err(e) => (GroupResult::failed(&e), None),
                }
            }
            Ok(Err(e)) => match write_outcome(&e) {
                WriteOutcome::NotApplied => (GroupResult::failed(&storage_error("commit", e)), None),
                WriteOutcome::Unknown => match self.settle(base, commit_id, &e) {
                    Ok(Settled::Applied) => applied(None),
                    Ok(Settled::NotApplied(next)) => (GroupResult::Rebuild, Some(next)),
                    Err(Abort::Failed(e)) => (GroupResult::failed(&e), None),
                    Err(Abort::CheckFailed) => (GroupResult::Rebuild, None),
                },
            },
        }
    }

    /// Learns whether a commit whose answer was lost was applied. A fence bumps the
    /// counter's `mod_revision` if it is still the one the commit compared: then the commit
    /// can never apply. If the fence finds the counter moved, the receipt says whether it
    /// was this commit that moved it (only this process writes its receipt, and it makes
    /// one commit at a time).
    fn settle(
        &self,
        base: CommitBase,
        commit_id: u128,
        first: &etcd_client::Error,
    ) -> Result<Settled, Abort> {
        let shared = &self.shared;
        shared.metrics.unknown_outcomes.add(1);
        tracing::warn!(error = %first, "etcd: commit outcome unknown; settling it");
        let deadline = Instant::now() + shared.options.settle_timeout;
        let mut pause = Duration::from_millis(20);
        let seq = shared.layout.seq();
        let receipt = shared.layout.receipt(&self.server_id);
        loop {
            let fence = SeqRecord { version: base.point.version, commit_id: random_u128() };
            let txn = etcd_client::Txn::new()
                .when([Compare::mod_revision(seq.clone(), CompareOp::Equal, base.seq_mod)])
                .and_then([TxnOp::put(seq.clone(), fence.encode(), None)])
                .or_else([TxnOp::get(seq.clone(), None), TxnOp::get(receipt.clone(), None)]);
            match shared.txn(txn)? {
                Ok(response) if response.succeeded() => {
                    // Fenced: the lost commit can never apply. Build again on the fence.
                    let revision = response.header().map(|h| h.revision()).unwrap_or(0);
                    shared.metrics.fences.add(1);
                    return Ok(Settled::NotApplied(CommitBase {
                        point: ReadPoint { revision, version: base.point.version },
                        seq_mod: revision,
                    }));
                }
                Ok(response) => {
                    let responses = response.op_responses();
                    let receipt_id = responses.get(1).and_then(|r| match r {
                        TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.value().to_vec()),
                        _ => None,
                    });
                    if receipt_id.as_deref() == Some(commit_id.to_be_bytes().as_slice()) {
                        return Ok(Settled::Applied);
                    }
                    return Ok(Settled::NotApplied(base_from_else(&response).map_err(Abort::Failed)?));
                }
                Err(e) => {
                    if Instant::now() + pause > deadline {
                        return Err(Abort::Failed(error(
                            StorageErrorKind::OutcomeUnknown,
                            format!(
                                "etcd: a commit was sent but whether it was applied could not be learned within {:?} ({e})",
                                shared.options.settle_timeout
                            ),
                        )));
                    }
                    shared.metrics.retries.add(1);
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
            }
        }
    }
}

/// How a commit with an unknown outcome was settled.
enum Settled {
    /// It was applied.
    Applied,
    /// It was not, and can no longer be: build again on this base.
    NotApplied(CommitBase),
}

/// The base of the next attempt, from the `get seq` of a transaction's failure branch.
fn base_from_else(response: &TxnResponse) -> Result<CommitBase, KvError> {
    let revision = response.header().map(|h| h.revision()).unwrap_or(0);
    let get = response.op_responses().into_iter().next();
    match get {
        Some(TxnOpResponse::Get(get)) => {
            let (mut point, seq_mod) = point_of(&get)?;
            point.revision = revision;
            Ok(CommitBase { point, seq_mod })
        }
        _ => Err(error(
            StorageErrorKind::Other,
            "etcd: a transaction's failure branch did not answer its read",
        )),
    }
}

/// The etcd operations of a group of commits whose last has `version`: the counter, the
/// receipt, then one put or delete per distinct key (the last write of a key wins, as etcd
/// refuses a key twice), and an expiry index entry after each put that expires.
fn commit_ops(
    shared: &Shared,
    server_id: &str,
    version: u64,
    commit_id: u128,
    writes: Vec<Write>,
) -> Vec<TxnOp> {
    let mut last_write: HashMap<&[u8], usize> = HashMap::with_capacity(writes.len());
    for (i, write) in writes.iter().enumerate() {
        last_write.insert(write.key.as_slice(), i);
    }
    let mut ops = Vec::with_capacity(writes.len() + COMMIT_OVERHEAD_OPS);
    ops.push(TxnOp::put(shared.layout.seq(), SeqRecord { version, commit_id }.encode(), None));
    ops.push(TxnOp::put(shared.layout.receipt(server_id), commit_id.to_be_bytes().to_vec(), None));
    for (i, write) in writes.iter().enumerate() {
        if last_write.get(write.key.as_slice()) != Some(&i) {
            continue;
        }
        let key = shared.layout.data(&write.key);
        ops.push(match &write.value {
            Some(value) => TxnOp::put(key, Envelope::encode(write.version, write.expires_at_ms, value), None),
            None => TxnOp::delete(key, None),
        });
        if let (Some(_), Some(at)) = (&write.value, write.expires_at_ms) {
            ops.push(TxnOp::put(shared.layout.expiry(at, &write.key), Vec::new(), None));
        }
    }
    ops
}

/// Checks that the cluster accepts transactions of [`REQUIRED_TXN_OPS`] operations, with
/// a read-only transaction of that many reads (it changes nothing).
fn check_txn_ops(shared: &Shared) -> Result<(), KvError> {
    let reads: Vec<TxnOp> = (0..REQUIRED_TXN_OPS).map(|_| TxnOp::get(shared.layout.seq(), None)).collect();
    match shared.txn(etcd_client::Txn::new().and_then(reads))? {
        Ok(_) => Ok(()),
        Err(etcd_client::Error::GRpcStatus(status)) if status.message().contains("too many operations") => Err(error(
            StorageErrorKind::InvalidArgument,
            format!(
                "etcd refuses transactions of {REQUIRED_TXN_OPS} operations: start every member with \
                 --max-txn-ops {REQUIRED_TXN_OPS} or more (Deno allows 1,000 mutations in one atomic operation)"
            ),
        )),
        Err(e) => Err(storage_error("check --max-txn-ops", e)),
    }
}

/// The database id in `R m meta`, written by the first server with `create_revision == 0`.
fn identity(shared: &Shared) -> Result<String, KvError> {
    let meta = shared.layout.meta();
    let proposed = format!("{{\"layout\":{LAYOUT_VERSION},\"databaseId\":\"{}\"}}", random_uuid());
    let txn = etcd_client::Txn::new()
        .when([Compare::create_revision(meta.clone(), CompareOp::Equal, 0)])
        .and_then([TxnOp::put(meta.clone(), proposed.clone(), None)])
        .or_else([TxnOp::get(meta, None)]);
    let response = shared.txn(txn)?.map_err(|e| storage_error("create the database record", e))?;
    let text = if response.succeeded() {
        proposed
    } else {
        match response.op_responses().into_iter().next() {
            Some(TxnOpResponse::Get(get)) => get
                .kvs()
                .first()
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
                .unwrap_or_default(),
            _ => String::new(),
        }
    };
    let layout = json_number(&text, "layout");
    if layout != Some(u64::from(LAYOUT_VERSION)) {
        return Err(error(
            StorageErrorKind::Corruption,
            format!("etcd: the database record under this prefix is not one this build reads: {text}"),
        ));
    }
    json_string(&text, "databaseId").ok_or_else(|| {
        error(StorageErrorKind::Corruption, format!("etcd: the database record has no id: {text}"))
    })
}

fn json_number(text: &str, field: &str) -> Option<u64> {
    let at = text.find(&format!("\"{field}\":"))? + field.len() + 3;
    let rest = text.get(at..)?;
    let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    rest.get(..end)?.parse().ok()
}

fn json_string(text: &str, field: &str) -> Option<String> {
    let at = text.find(&format!("\"{field}\":\""))? + field.len() + 4;
    let rest = text.get(at..)?;
    Some(rest.get(..rest.find('"')?)?.to_string())
}

/// A random 128-bit number (process-local randomness of the standard library's hasher).
pub(crate) fn random_u128() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let state = std::collections::hash_map::RandomState::new();
    let mut high = state.build_hasher();
    high.write_u128(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0),
    );
    let mut low = state.build_hasher();
    low.write_u64(high.finish());
    (u128::from(high.finish()) << 64) | u128::from(low.finish())
}

fn random_hex() -> String {
    format!("{:032x}", random_u128())
}

/// A random version-4 UUID in its text form.
fn random_uuid() -> String {
    let n =
        (random_u128() & !(0xF000u128 << 64) | (0x4000u128 << 64)) & !(0xC000u128 << 48) | (0x8000u128 << 48);
    let h = format!("{n:032x}");
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}

/// One write of a commit: a value (with its expiry) or, with `None`, a deletion.
pub(crate) struct Write {
    pub(crate) key: Vec<u8>,
    pub(crate) value: Option<Vec<u8>>,
    pub(crate) expires_at_ms: Option<u64>,
    /// The version of the commit that made it (set when the commit joins its group).
    pub(crate) version: u64,
}

/// How a commit being built sees the writes of its group's earlier members.
enum Overlay<'a> {
    /// The group lock is held: the open group as it is.
    Locked(&'a OpenGroup),
    /// Without the lock: group `number`, looked up under the lock read by read.
    Shared { group: &'a Group, number: u64 },
}

/// A commit being built on an etcd read point and the writes of its group's earlier members.
struct EtcdTransaction<'a> {
    snapshot: &'a EtcdSnapshot,
    overlay: Overlay<'a>,
    version: u64,
    now_ms: u64,
    writes: Vec<Write>,
    /// The keys read, and the group write each read saw (`None`: none; read from etcd).
    reads: RefCell<Vec<(Vec<u8>, Option<usize>)>>,
    /// Whether `build` asked for the commit's version (then it must not change).
    version_used: Cell<bool>,
    /// Whether a check of absence may be deferred to the group's transaction.
    may_defer: bool,
    /// The keys whose absence checks were deferred.
    absent: Vec<Vec<u8>>,
}

impl<'a> EtcdTransaction<'a> {
    fn new(snapshot: &'a EtcdSnapshot, overlay: Overlay<'a>, version: u64, now_ms: u64) -> Self {
        EtcdTransaction {
            snapshot,
            overlay,
            version,
            now_ms,
            writes: Vec::new(),
            reads: RefCell::new(Vec::new()),
            version_used: Cell::new(false),
            may_defer: false,
            absent: Vec::new(),
        }
    }

    /// The entry of `key` as the group's earlier members left it, if one wrote it
    /// (recording the read for validation when built without the lock).
    fn in_group(&self, key: &[u8]) -> Option<Option<StoredEntry>> {
        match &self.overlay {
            Overlay::Locked(open) => open.latest(key, self.now_ms),
            Overlay::Shared { group, number } => {
                let state = group.state.lock();
                let open = state.open.as_ref().filter(|open| open.number == *number);
                let seen = open.and_then(|open| open.last_write_of(key));
                self.reads.borrow_mut().push((key.to_vec(), seen));
                open.and_then(|open| open.latest(key, self.now_ms))
            }
        }
    }
}

impl Transaction for EtcdTransaction<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<StoredEntry>, KvError> {
        match self.in_group(key) {
            Some(entry) => Ok(entry),
            None => stampkv::store::StoreSnapshot::get(self.snapshot, key),
        }
    }

    /// A check that `key` is absent, on a key no earlier member wrote, becomes a compare of
    /// the group's transaction (`version == 0`) instead of a read; the other checks read.
    fn check_version(&mut self, key: &[u8], expected: Option<u64>) -> Result<bool, KvError> {
        if !self.may_defer || expected.is_some() {
            return Ok(self.get(key)?.map(|entry| entry.version) == expected);
        }
        match self.in_group(key) {
            Some(entry) => Ok(entry.is_none()),
            None => {
                self.absent.push(key.to_vec());
                Ok(true)
            }
        }
    }

    fn commit_version(&self) -> u64 {
        self.version_used.set(true);
        self.version
    }

    fn now_ms(&self) -> u64 {
        self.now_ms
    }

    fn put(&mut self, key: &[u8], value: &[u8], expires_at_ms: Option<u64>) {
        self.writes.push(Write { key: key.to_vec(), value: Some(value.to_vec()), expires_at_ms, version: 0 });
    }

    fn delete(&mut self, key: &[u8]) {
        self.writes.push(Write { key: key.to_vec(), value: None, expires_at_ms: None, version: 0 });
    }
}

impl Store for EtcdStore {
    type Snapshot = EtcdSnapshot;

    fn snapshot(&self) -> EtcdSnapshot {
        // Linearizable: the revision is chosen by the snapshot's first read, a quorum read.
        let read_time_ms = self.shared.options.clock.now_ms();
        EtcdSnapshot::lazy(self.shared.clone(), Consistency::Strong, read_time_ms)
    }

    fn eventual_snapshot(&self) -> Option<EtcdSnapshot> {
        Some(self.serializable_snapshot())
    }

    fn commit<T>(
        &self,
        _options: CommitOptions,
        mut build: impl FnMut(&mut dyn Transaction) -> Result<T, Abort>,
    ) -> Result<(u64, T), Abort> {
        // etcd makes every commit durable on a quorum before it answers: `sync` changes nothing.
        self.commit_inner(&mut build)
    }

    fn clock(&self) -> &Arc<dyn Clock> {
        &self.shared.options.clock
    }

    fn close(&self) -> Result<(), KvError> {
        self.shared.closed.store(true, Ordering::Release);
        self.feed.stop();
        Ok(())
    }

    fn subscribe_foreign_commits(&self, sink: ForeignCommitSink) {
        self.feed.subscribe(sink);
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn max_commit_bytes(&self) -> usize {
        MAX_COMMIT_BYTES
    }

    fn max_commit_writes(&self) -> usize {
        REQUIRED_TXN_OPS - COMMIT_OVERHEAD_OPS
    }

    /// Batches of entries, each one transaction, visible as they land; see the
    /// [`bulk`](crate::bulk) module.
    fn bulk_load(&self) -> Result<Box<dyn BulkLoad + '_>, KvError> {
        self.shared.check_open()?;
        Ok(Box::new(crate::bulk::EtcdBulkLoad::start(self.shared.clone())?))
    }
}
