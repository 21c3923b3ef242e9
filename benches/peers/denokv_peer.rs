//! The Deno KV workloads' two sides: Deno KV's own SQLite backend (`denokv_sqlite`, the
//! peer) and stampkv, behind one trait, [`KvBench`], that sends the same requests to both.
//!
//! The peer is set up as the Deno CLI runs it: `Sqlite::new(conn_gen, SqliteNotifier::default(),
//! SqliteConfig { num_workers: 1, batch_timeout: None })` (one backend worker that serves
//! reads and writes, no write batching), `rusqlite::Connection::open(path)` (the backend
//! switches to WAL; `synchronous` stays at SQLite's FULL, so every atomic write fsyncs), a
//! `StdRng` for versionstamps, SQLite bundled into rusqlite. Every call goes through the
//! `denokv_proto::Database` trait on a current-thread tokio runtime, as a Deno isolate's
//! ops do; the backend answers on its own thread (one channel round trip per request).
//!
//! Requests, identical on both sides (keys `["users", i]` with `i` a JavaScript number = 16
//! encoded bytes; values 100-byte `KvValue::Bytes`):
//! - commit: `check(["users", i], versionstamp None)` + `set(["users", i], value)`, durable;
//! - get: stampkv `kv.get`; the peer a `snapshot_read` of `[key, key ++ 00)`, limit 1, Strong
//!   (what Deno's `kv.get` sends);
//! - list: one batch of up to 1000 entries under `["users"]` from a start key (the first
//!   batch of `kv.list({ prefix: ["users"], start }, { batchSize: 1000 })`); the peer reads
//!   `[start, ["users"] ++ FF)`, limit 1000;
//! - sum: `sum(["counters", c], KvU64 1)`, one durable atomic commit per sum;
//! - short list: `kv.list({ prefix: ["posts", u] }, { limit: 20 })` over keys
//!   `["posts", u, j]` (Deno's prefix range: `[prefix ++ 00, prefix ++ FF)`, limit 20).

use denokv_proto::{
    encode_key, AtomicWrite, Check, Consistency, Database, Key as DenoKey, KeyPart as DenoKeyPart,
    KvValue as DenoValue, Mutation, MutationKind, ReadRange, SnapshotReadOptions,
};
use denokv_sqlite::{Sqlite, SqliteConfig, SqliteNotifier};
use rand::{rngs::StdRng, RngCore, SeedableRng};
use stampkv::{key, Key, Kv, KvOptions, KvValue, ListOptions, Selector};
use stampkv_benches::value;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Entries per atomic commit when loading (Deno's mutation limit).
pub const LOAD_BATCH: u64 = 1000;

/// The Deno KV requests the workloads send.
pub trait KvBench {
    /// Commits `check(["users", i] absent)` + `set(["users", i], value)`; whether it applied.
    fn commit_new(&self, i: u64, value: &[u8]) -> bool;
    /// The same commits for keys `first..first + total` from `clients` concurrent clients
    /// (client `t` takes `first + t, first + t + clients, ...`), each value `value(pool, i)`;
    /// every commit's latency.
    fn commit_new_concurrent(
        &self,
        first: u64,
        total: u64,
        clients: u64,
        pool: &Arc<Vec<u8>>,
    ) -> Vec<Duration>;
    /// Sets `["users", 0..n]` (untimed setup), [`LOAD_BATCH`] sets per atomic commit.
    fn load(&self, n: u64, pool: &[u8]);
    /// Moves freshly loaded data to its resting place: stampkv flushes its memtable to a
    /// table; SQLite checkpoints its WAL into the database file.
    fn settle(&self);
    /// Point read of `["users", i]`; whether it was found.
    fn get(&self, i: u64) -> bool;
    /// Lists up to `limit` entries under `["users"]` from `["users", start]`; how many.
    fn list(&self, start: u64, limit: usize) -> usize;
    /// Adds KvU64 1 to `["counters", counter]` in its own atomic commit.
    fn sum(&self, counter: u64);
    /// Sets `["posts", u, j]` for `u` in `0..users`, `j` in `0..per_user` (untimed setup),
    /// [`LOAD_BATCH`] sets per atomic commit.
    fn load_posts(&self, users: u64, per_user: u64, pool: &[u8]);
    /// Lists up to `limit` entries with the prefix `["posts", user]`; how many.
    fn list_posts(&self, user: u64, limit: usize) -> usize;
    /// Closes the database.
    fn close(self: Box<Self>);
}

/// Opens engine `name` (`stampkv` or `denokv`) in `dir`.
pub fn open_kv(name: &str, dir: &Path) -> Box<dyn KvBench> {
    match name {
        "stampkv" => Box::new(StampKv::open(dir)),
        "denokv" => Box::new(DenoKvPeer::open(dir)),
        other => panic!("unknown engine {other} (stampkv or denokv)"),
    }
}

/// The stampkv key `["users", i]`.
pub fn stampkv_user(i: u64) -> Key {
    key!["users", i as f64]
}

/// The encoded Deno key `["users", i]`.
pub fn deno_user(i: u64) -> Vec<u8> {
    encode_key(&DenoKey(vec![DenoKeyPart::String("users".into()), DenoKeyPart::Float(i as f64)]))
        .expect("encode key")
}

fn deno_prefix(name: &str) -> Vec<u8> {
    encode_key(&DenoKey(vec![DenoKeyPart::String(name.into())])).expect("encode key")
}

fn deno_counter(counter: u64) -> Vec<u8> {
    encode_key(&DenoKey(vec![DenoKeyPart::String("counters".into()), DenoKeyPart::Float(counter as f64)]))
        .expect("encode key")
}

/// The stampkv key `["posts", user, j]`.
fn stampkv_post(user: u64, j: u64) -> Key {
    key!["posts", user as f64, j as f64]
}

/// The encoded Deno key `["posts", user]` with `tail` parts after it.
fn deno_post(user: u64, tail: Option<u64>) -> Vec<u8> {
    let mut parts = vec![DenoKeyPart::String("posts".into()), DenoKeyPart::Float(user as f64)];
    parts.extend(tail.map(|j| DenoKeyPart::Float(j as f64)));
    encode_key(&DenoKey(parts)).expect("encode key")
}

/// Checks that both sides encode the benchmark keys to the same (16) bytes.
pub fn check_key_encodings() {
    for i in [0, 1, 99, 12_345, 99_999] {
        let ours = stampkv_user(i).encode().expect("encode");
        assert_eq!(ours, deno_user(i), "key encodings differ for {i}");
        assert_eq!(ours.len(), 16);
    }
}

/// stampkv with default options: every commit fdatasync'ed before it is acknowledged,
/// concurrent commits share syncs.
pub struct StampKv {
    kv: Kv,
}

impl StampKv {
    /// Opens (creates) the database in `dir`.
    pub fn open(dir: &Path) -> Self {
        StampKv { kv: Kv::open(dir, KvOptions::default()).expect("open stampkv") }
    }

    fn commit(kv: &Kv, i: u64, value: &[u8]) -> bool {
        let key = stampkv_user(i);
        let result = kv
            .atomic()
            .check(&key, None)
            .set(&key, &KvValue::Bytes(value.to_vec()))
            .commit()
            .expect("commit");
        result.ok()
    }
}

impl KvBench for StampKv {
    fn commit_new(&self, i: u64, value: &[u8]) -> bool {
        Self::commit(&self.kv, i, value)
    }

    /// `clients` OS threads sharing the one `Kv`.
    fn commit_new_concurrent(
        &self,
        first: u64,
        total: u64,
        clients: u64,
        pool: &Arc<Vec<u8>>,
    ) -> Vec<Duration> {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..clients)
                .map(|t| {
                    let kv = &self.kv;
                    scope.spawn(move || {
                        let mut latencies = Vec::with_capacity((total / clients + 1) as usize);
                        for i in (first + t..first + total).step_by(clients as usize) {
                            let start = Instant::now();
                            assert!(Self::commit(kv, i, value(pool, i)), "commit {i} failed its check");
                            latencies.push(start.elapsed());
                        }
                        latencies
                    })
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().expect("writer thread")).collect()
        })
    }

    fn load(&self, n: u64, pool: &[u8]) {
        for first in (0..n).step_by(LOAD_BATCH as usize) {
            let mut op = self.kv.atomic();
            for i in first..(first + LOAD_BATCH).min(n) {
                op = op.set(&stampkv_user(i), &KvValue::Bytes(value(pool, i).to_vec()));
            }
            assert!(op.commit().expect("load").ok());
        }
    }

    fn settle(&self) {
        self.kv.engine().flush().expect("flush");
    }

    fn get(&self, i: u64) -> bool {
        self.kv.get::<KvValue>(&stampkv_user(i)).expect("get").exists()
    }

    fn list(&self, start: u64, limit: usize) -> usize {
        let selector = Selector::prefix(key!["users"]).with_start(stampkv_user(start));
        let options =
            ListOptions { limit: Some(limit), batch_size: Some(limit.min(1000)), ..ListOptions::default() };
        let mut count = 0;
        for entry in self.kv.list::<KvValue>(&selector, &options).expect("list") {
            entry.expect("list entry");
            count += 1;
        }
        count
    }

    fn sum(&self, counter: u64) {
        let result = self.kv.atomic().sum(&key!["counters", counter as f64], 1).commit().expect("sum");
        assert!(result.ok());
    }

    fn load_posts(&self, users: u64, per_user: u64, pool: &[u8]) {
        let all: Vec<(u64, u64)> = (0..users).flat_map(|u| (0..per_user).map(move |j| (u, j))).collect();
        for batch in all.chunks(LOAD_BATCH as usize) {
            let mut op = self.kv.atomic();
            for &(u, j) in batch {
                op = op.set(&stampkv_post(u, j), &KvValue::Bytes(value(pool, u * per_user + j).to_vec()));
            }
            assert!(op.commit().expect("load posts").ok());
        }
    }

    fn list_posts(&self, user: u64, limit: usize) -> usize {
        let selector = Selector::prefix(key!["posts", user as f64]);
        let options = ListOptions { limit: Some(limit), batch_size: Some(limit), ..ListOptions::default() };
        let mut count = 0;
        for entry in self.kv.list::<KvValue>(&selector, &options).expect("list") {
            entry.expect("list entry");
            count += 1;
        }
        count
    }

    fn close(self: Box<Self>) {
        self.kv.close().expect("close");
    }
}

/// `denokv_sqlite` as the Deno CLI runs it (see the module docs).
pub struct DenoKvPeer {
    runtime: tokio::runtime::Runtime,
    db: Sqlite,
    path: PathBuf,
}

impl DenoKvPeer {
    /// Opens (creates) `dir/kv.sqlite3`.
    pub fn open(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).expect("create dir");
        let path = dir.join("kv.sqlite3");
        let conn_path = path.clone();
        let conn_gen = move || {
            let conn = denokv_sqlite::Connection::open(&conn_path).expect("open sqlite");
            let rng: Box<dyn RngCore + Send> = Box::new(StdRng::from_entropy());
            Ok((conn, rng))
        };
        let config = SqliteConfig { num_workers: 1, batch_timeout: None };
        let db = Sqlite::new(conn_gen, SqliteNotifier::default(), config).expect("open denokv_sqlite");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        DenoKvPeer { runtime, db, path }
    }

    async fn write(db: &Sqlite, checks: Vec<Check>, mutations: Vec<Mutation>) -> bool {
        let write = AtomicWrite { checks, mutations, enqueues: Vec::new() };
        <Sqlite as Database>::atomic_write(db, write).await.expect("atomic_write").is_some()
    }

    async fn commit(db: &Sqlite, i: u64, value: &[u8]) -> bool {
        let key = deno_user(i);
        let check = Check { key: key.clone(), versionstamp: None };
        let set =
            Mutation { key, kind: MutationKind::Set(DenoValue::Bytes(value.to_vec())), expire_at: None };
        Self::write(db, vec![check], vec![set]).await
    }

    fn read(&self, start: Vec<u8>, end: Vec<u8>, limit: u32) -> usize {
        let range = ReadRange { start, end, limit: NonZeroU32::new(limit).expect("limit"), reverse: false };
        let options = SnapshotReadOptions { consistency: Consistency::Strong };
        let output = self
            .runtime
            .block_on(<Sqlite as Database>::snapshot_read(&self.db, vec![range], options))
            .expect("snapshot_read");
        output.into_iter().map(|range| range.entries.len()).sum()
    }
}

impl KvBench for DenoKvPeer {
    fn commit_new(&self, i: u64, value: &[u8]) -> bool {
        self.runtime.block_on(Self::commit(&self.db, i, value))
    }

    /// `clients` tasks on the one current-thread runtime (`spawn_local`), like as many
    /// pending `commit()` promises in one Deno isolate; the single backend worker takes them
    /// one at a time (no batching with `batch_timeout: None`).
    fn commit_new_concurrent(
        &self,
        first: u64,
        total: u64,
        clients: u64,
        pool: &Arc<Vec<u8>>,
    ) -> Vec<Duration> {
        let local = tokio::task::LocalSet::new();
        self.runtime.block_on(local.run_until(async {
            let tasks: Vec<_> = (0..clients)
                .map(|t| {
                    let (db, pool) = (self.db.clone(), pool.clone());
                    tokio::task::spawn_local(async move {
                        let mut latencies = Vec::with_capacity((total / clients + 1) as usize);
                        for i in (first + t..first + total).step_by(clients as usize) {
                            let start = Instant::now();
                            assert!(
                                Self::commit(&db, i, value(&pool, i)).await,
                                "commit {i} failed its check"
                            );
                            latencies.push(start.elapsed());
                        }
                        latencies
                    })
                })
                .collect();
            let mut all = Vec::with_capacity(total as usize);
            for task in tasks {
                all.extend(task.await.expect("writer task"));
            }
            all
        }))
    }

    fn load(&self, n: u64, pool: &[u8]) {
        for first in (0..n).step_by(LOAD_BATCH as usize) {
            let mutations = (first..(first + LOAD_BATCH).min(n))
                .map(|i| Mutation {
                    key: deno_user(i),
                    kind: MutationKind::Set(DenoValue::Bytes(value(pool, i).to_vec())),
                    expire_at: None,
                })
                .collect();
            assert!(self.runtime.block_on(Self::write(&self.db, Vec::new(), mutations)));
        }
    }

    fn settle(&self) {
        let conn = rusqlite::Connection::open(&self.path).expect("open sqlite");
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).expect("checkpoint");
    }

    fn get(&self, i: u64) -> bool {
        let start = deno_user(i);
        let mut end = start.clone();
        end.push(0);
        self.read(start, end, 1) == 1
    }

    fn list(&self, start: u64, limit: usize) -> usize {
        let mut end = deno_prefix("users");
        end.push(0xFF);
        self.read(deno_user(start), end, u32::try_from(limit).expect("limit"))
    }

    fn sum(&self, counter: u64) {
        let sum = MutationKind::Sum {
            value: DenoValue::U64(1),
            min_v8: Vec::new(),
            max_v8: Vec::new(),
            clamp: false,
        };
        let mutation = Mutation { key: deno_counter(counter), kind: sum, expire_at: None };
        assert!(self.runtime.block_on(Self::write(&self.db, Vec::new(), vec![mutation])));
    }

    fn load_posts(&self, users: u64, per_user: u64, pool: &[u8]) {
        let all: Vec<(u64, u64)> = (0..users).flat_map(|u| (0..per_user).map(move |j| (u, j))).collect();
        for batch in all.chunks(LOAD_BATCH as usize) {
            let mutations = batch
                .iter()
                .map(|&(u, j)| Mutation {
                    key: deno_post(u, Some(j)),
                    kind: MutationKind::Set(DenoValue::Bytes(value(pool, u * per_user + j).to_vec())),
                    expire_at: None,
                })
                .collect();
            assert!(self.runtime.block_on(Self::write(&self.db, Vec::new(), mutations)));
        }
    }

    fn list_posts(&self, user: u64, limit: usize) -> usize {
        let prefix = deno_post(user, None);
        let (mut start, mut end) = (prefix.clone(), prefix);
        start.push(0x00);
        end.push(0xFF);
        self.read(start, end, u32::try_from(limit).expect("limit"))
    }

    fn close(self: Box<Self>) {
        self.db.close();
    }
}
