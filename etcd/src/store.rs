//! [`EtcdStore`]: the storage seam on an etcd cluster.

use crate::bridge::Bridge;
use crate::error::{error, storage_error, write_outcome, WriteOutcome};
use crate::feed::Feed;
use crate::layout::{Envelope, Layout, SeqRecord, LAYOUT_VERSION};
use crate::metrics::{EtcdMetrics, EtcdStats};
use crate::options::EtcdOptions;
use crate::snapshot::{read_error, read_retryable, EtcdSnapshot, ReadPoint};
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, GetResponse, KvClient, TxnOp, TxnOpResponse,
    TxnResponse,
};
use parking_lot::Mutex;
use stampkv::engine::Clock;
use stampkv::store::{Abort, CommitOptions, ForeignCommitSink, Store, StoredEntry, Transaction};
use stampkv::{KvError, StorageErrorKind};
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
    pub(crate) client: Client,
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

    fn check_open(&self) -> Result<(), KvError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(KvError::Closed);
        }
        Ok(())
    }

    /// Sends one transaction and waits for its answer.
    fn txn(&self, txn: etcd_client::Txn) -> Result<Result<TxnResponse, etcd_client::Error>, KvError> {
        let mut kv = self.kv.clone();
        let started = Instant::now();
        let result = self.bridge.run(async move { kv.txn(txn).await }).ok_or(KvError::Closed)?;
        self.metrics.commit_latency.record(started.elapsed());
        Ok(result)
    }

    /// The latest read point: a linearizable read of the counter.
    fn latest(&self) -> Result<(ReadPoint, i64), KvError> {
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
struct CommitBase {
    point: ReadPoint,
    seq_mod: i64,
}

/// The Deno KV layer's store on an etcd cluster; see the crate documentation.
#[derive(Clone)]
pub struct EtcdStore {
    shared: Arc<Shared>,
    /// One commit of this process in flight at a time (its receipt key is its own).
    commit_lock: Arc<Mutex<Option<CommitBase>>>,
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
        let kv = client.kv_client().max_decoding_message_size(MAX_DECODING_BYTES);
        let layout = Layout::new(&options.prefix);
        let shared = Arc::new(Shared {
            bridge,
            kv,
            client,
            layout,
            options,
            metrics: EtcdMetrics::default(),
            closed: AtomicBool::new(false),
            own: Mutex::new(OwnCommits::default()),
        });
        check_txn_ops(&shared)?;
        let database_id = identity(&shared)?;
        let (point, _) = shared.latest()?;
        let feed = Feed::start(shared.clone(), point.revision);
        Ok(EtcdStore {
            shared,
            commit_lock: Arc::new(Mutex::new(None)),
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

    /// Counters and latencies of the store's etcd calls.
    pub fn stats(&self) -> EtcdStats {
        self.shared.metrics.stats()
    }

    /// A snapshot read by any member without a quorum round (serializable: it may lag
    /// behind the latest commits; Deno's `eventual` consistency).
    fn serializable_snapshot(&self) -> EtcdSnapshot {
        let read_time_ms = self.shared.options.clock.now_ms();
        let at = self
            .shared
            .read(self.shared.layout.seq(), GetOptions::new().with_serializable(), "read the commit counter")
            .and_then(|r| point_of(&r))
            .map(|(point, _)| point);
        EtcdSnapshot::new(self.shared.clone(), at, read_time_ms)
    }

    /// Runs one commit attempt loop; see [`Store::commit`].
    fn commit_inner<T>(
        &self,
        build: &mut dyn FnMut(&mut dyn Transaction) -> Result<T, Abort>,
    ) -> Result<(u64, T), Abort> {
        let shared = &self.shared;
        let mut last = self.commit_lock.lock();
        // The state after this process's last commit, if it made one: most often still the
        // latest, which saves a read; if not, the commit's compare fails and says so.
        let (mut base, mut fresh) = match *last {
            Some(base) => (base, false),
            None => {
                let (point, seq_mod) = shared.latest()?;
                (CommitBase { point, seq_mod }, true)
            }
        };
        let mut conflicts = 0u32;
        loop {
            shared.check_open()?;
            let read_time_ms = shared.options.clock.now_ms();
            let snapshot = EtcdSnapshot::new(shared.clone(), Ok(base.point), read_time_ms);
            let version = base.point.version + 1;
            let mut transaction =
                EtcdTransaction { snapshot: &snapshot, version, now_ms: read_time_ms, writes: Vec::new() };
            let extra = match build(&mut transaction) {
                Ok(extra) => extra,
                Err(abort) => {
                    // A check that failed on a remembered state may have read stale data:
                    // it counts only on the latest state.
                    if !fresh {
                        let (point, seq_mod) = shared.latest()?;
                        if seq_mod != base.seq_mod {
                            base = CommitBase { point, seq_mod };
                            fresh = true;
                            continue;
                        }
                    }
                    *last = Some(base);
                    return Err(abort);
                }
            };
            let commit_id = random_u128();
            let ops = commit_ops(shared, &self.server_id, version, commit_id, transaction.writes);
            if ops.len() > REQUIRED_TXN_OPS {
                *last = Some(base);
                return Err(Abort::Failed(error(
                    StorageErrorKind::InvalidArgument,
                    format!("etcd: a commit of {} operations is more than the {REQUIRED_TXN_OPS} the store allows", ops.len()),
                )));
            }
            let txn = etcd_client::Txn::new()
                .when([Compare::mod_revision(shared.layout.seq(), CompareOp::Equal, base.seq_mod)])
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
            match answer? {
                Ok(response) if response.succeeded() => {
                    let revision = response.header().map(|h| h.revision()).unwrap_or(base.point.revision + 1);
                    *last = Some(CommitBase { point: ReadPoint { revision, version }, seq_mod: revision });
                    shared.metrics.commits.add(1);
                    shared.metrics.batches.add(1);
                    shared.metrics.largest_batch.raise_to(1);
                    return Ok((version, extra));
                }
                Ok(response) => {
                    // Another server committed first: build again on its state.
                    shared.metrics.conflicts.add(1);
                    conflicts += 1;
                    if conflicts > MAX_CONFLICTS {
                        *last = None;
                        return Err(Abort::Failed(error(
                            StorageErrorKind::Unavailable,
                            "etcd: other servers' commits always came first",
                        )));
                    }
                    base = base_from_else(&response).map_err(Abort::Failed)?;
                    fresh = true;
                }
                Err(e) => match write_outcome(&e) {
                    WriteOutcome::NotApplied => {
                        *last = None;
                        return Err(Abort::Failed(storage_error("commit", e)));
                    }
                    WriteOutcome::Unknown => {
                        *last = None;
                        match self.settle(base, commit_id, &e)? {
                            Settled::Applied => {
                                shared.metrics.commits.add(1);
                                return Ok((version, extra));
                            }
                            Settled::NotApplied(next) => {
                                base = next;
                                fresh = true;
                            }
                        }
                    }
                },
            }
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

/// The etcd operations of a commit: the counter, the receipt, then one put or delete per
/// distinct key (the last write of a key wins, as etcd refuses a key twice).
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
            Some(value) => TxnOp::put(key, Envelope::encode(version, write.expires_at_ms, value), None),
            None => TxnOp::delete(key, None),
        });
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
struct Write {
    key: Vec<u8>,
    value: Option<Vec<u8>>,
    expires_at_ms: Option<u64>,
}

/// A commit being built on an etcd read point.
struct EtcdTransaction<'a> {
    snapshot: &'a EtcdSnapshot,
    version: u64,
    now_ms: u64,
    writes: Vec<Write>,
}

impl Transaction for EtcdTransaction<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<StoredEntry>, KvError> {
        stampkv::store::StoreSnapshot::get(self.snapshot, key)
    }

    fn commit_version(&self) -> u64 {
        self.version
    }

    fn now_ms(&self) -> u64 {
        self.now_ms
    }

    fn put(&mut self, key: &[u8], value: &[u8], expires_at_ms: Option<u64>) {
        self.writes.push(Write { key: key.to_vec(), value: Some(value.to_vec()), expires_at_ms });
    }

    fn delete(&mut self, key: &[u8]) {
        self.writes.push(Write { key: key.to_vec(), value: None, expires_at_ms: None });
    }
}

impl Store for EtcdStore {
    type Snapshot = EtcdSnapshot;

    fn snapshot(&self) -> EtcdSnapshot {
        let read_time_ms = self.shared.options.clock.now_ms();
        let at = self.shared.latest().map(|(point, _)| point);
        EtcdSnapshot::new(self.shared.clone(), at, read_time_ms)
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

    fn max_commit_bytes(&self) -> usize {
        MAX_COMMIT_BYTES
    }

    fn max_commit_writes(&self) -> usize {
        REQUIRED_TXN_OPS - COMMIT_OVERHEAD_OPS
    }
}
