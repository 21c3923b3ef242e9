//! Concurrency: writer threads, reader threads and a maintenance thread (manual `flush` and
//! `compact`) at once, with tiny memtables and files so background flushes and compactions
//! run all the time. Proves that:
//!
//! - a batch is seen whole or not at all: writers set all keys of a group to one value in
//!   one batch (or delete them all), and every snapshot, point read and forward or reverse
//!   range scan sees each group either absent or uniform, with one sequence number;
//! - reads are linearizable against the commit order: every group a reader observes is
//!   exactly the latest write to that group at the read's sequence number (or, for reads
//!   without a snapshot, at some sequence number between `last_sequence()` before and after
//!   the read), and what one reader sees never goes backwards;
//! - a writer reads its own acknowledged write; sequence numbers are dense and unique;
//! - `Db::write_with` is atomic read-modify-write: concurrent transfers between accounts
//!   conserve the total in every snapshot, each account ends at exactly what the
//!   successful transfers imply, and every transfer's log entry is visible exactly when its
//!   balance changes are;
//! - after closing and reopening, the database holds exactly the final observed state.
//!
//! Variants: in-memory (`MemFs`, reopened from the same file system), on disk
//! (`tempfile::tempdir`, `SyncMode::Always` with group commit) and `Db::open_in_memory`.
//!
//! Longer: `STAMPKV_CONC_OPS=20000 cargo test -p stampkv-engine --test it concurrency::`
//! (commits per writer thread); `STAMPKV_CONC_SEED=<n>` changes the seed.

use crate::common::{env_or, Rng};
use stampkv_engine::fs::MemFs;
use stampkv_engine::{BackgroundMode, Db, Entry, Error, Options, SyncMode, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WRITERS: u64 = 4;
const READERS: u64 = 3;

fn seed() -> u64 {
    env_or("STAMPKV_CONC_SEED", 0x00C0_4C0B_2E4C)
}

/// Commits per writer thread.
fn ops(default: u64) -> u64 {
    env_or("STAMPKV_CONC_OPS", default).max(1)
}

/// Where a test's database lives, so it can be reopened.
enum Store {
    /// A real directory.
    Dir(tempfile::TempDir),
    /// An in-memory file system that survives closing the database.
    Mem(MemFs),
    /// `Db::open_in_memory`: gone once closed.
    Scratch,
}

impl Store {
    fn open(&self, options: Options) -> Db {
        match self {
            Store::Dir(dir) => Db::open(dir.path(), options),
            Store::Mem(fs) => Db::open_with_fs(Arc::new(fs.clone()), "/concurrency", options),
            Store::Scratch => Db::open_in_memory(options),
        }
        .expect("open")
    }

    fn can_reopen(&self) -> bool {
        !matches!(self, Store::Scratch)
    }
}

fn tiny(sync_mode: SyncMode, background: BackgroundMode) -> Options {
    let mut options = Options::tiny_for_tests();
    options.sync_mode = sync_mode;
    options.background = background;
    options
}

fn scan_all(db: &Db) -> Vec<Entry> {
    db.iter().collect::<Result<_, _>>().expect("full scan")
}

/// Closes `db`, reopens it from `store` and checks it holds exactly `expected`.
fn reopen_and_compare(store: &Store, db: Db, options: Options, expected: &[Entry], context: &str) {
    let last = db.last_sequence();
    db.close().expect("close");
    if !store.can_reopen() {
        return;
    }
    let db = store.open(options);
    assert_eq!(db.last_sequence(), last, "{context}: last sequence after reopen");
    let found = scan_all(&db);
    assert_eq!(found.len(), expected.len(), "{context}: entry count after reopen");
    for (f, e) in found.iter().zip(expected) {
        assert_eq!(f, e, "{context}: entry after reopen");
    }
    db.close().expect("close after reopen");
}

/// Runs the maintenance thread's loop until `done`: a manual flush every few ms and
/// sometimes a full compaction (at least one), concurrently with the background threads.
fn maintenance(db: &Db, done: &AtomicBool, seed: u64) -> (u64, u64) {
    let mut rng = Rng::new(seed);
    let (mut flushes, mut compactions) = (0, 0);
    loop {
        std::thread::sleep(Duration::from_millis(1 + rng.below(10)));
        let finished = done.load(Ordering::Acquire);
        if rng.chance(10) || (finished && compactions == 0) {
            db.compact().expect("manual compaction");
            compactions += 1;
        } else {
            db.flush().expect("manual flush");
            flushes += 1;
        }
        if finished {
            return (flushes, compactions);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Groups: every batch writes or deletes a whole group.

const GROUPS: u64 = 16;
const GROUP_KEYS: u64 = 8;

fn group_key(group: u64, index: u64) -> Vec<u8> {
    format!("g{group:02}/{index}").into_bytes()
}

/// Bounds of group `group`'s keys: "gNN/" .. "gNN0" ('/' sorts just before '0').
fn group_bounds(group: u64) -> (Vec<u8>, Vec<u8>) {
    (format!("g{group:02}/").into_bytes(), format!("g{group:02}0").into_bytes())
}

/// One committed write of a group: its sequence number and value (`None`: deleted).
type GroupWrite = (u64, Option<Vec<u8>>);

/// A group as a read saw it: the sequence number and value fingerprint of its keys, or
/// `None` if it was absent.
type Seen = Option<(u64, u64)>;

/// What a reader saw of a group at some sequence number in `lo..=hi`.
struct Observation {
    group: u64,
    lo: u64,
    hi: u64,
    seen: Seen,
}

/// Observations a reader keeps for the final history check (it checks the rest inline).
const MAX_OBSERVATIONS_PER_READER: usize = 250_000;

/// FNV-1a: a compact stand-in for a value in observations.
fn fingerprint(value: &[u8]) -> u64 {
    value.iter().fold(0xCBF2_9CE4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3))
}

/// Checks that `entries` (in key order) are a whole group: absent, or all keys with one
/// value and one sequence number.
fn whole_group(entries: &[Entry], group: u64) -> Result<Seen, String> {
    let Some(first) = entries.first() else {
        return Ok(None);
    };
    let keys: Vec<Vec<u8>> = entries.iter().map(|e| e.key.clone()).collect();
    let expected_keys: Vec<Vec<u8>> = (0..GROUP_KEYS).map(|i| group_key(group, i)).collect();
    let show = |e: &Entry| {
        format!("{}={}@{}", String::from_utf8_lossy(&e.key), String::from_utf8_lossy(&e.value), e.seq)
    };
    if keys != expected_keys || entries.iter().any(|e| e.value != first.value || e.seq != first.seq) {
        let shown: Vec<String> = entries.iter().map(show).collect();
        return Err(format!("group {group} is not whole: [{}]", shown.join(", ")));
    }
    if !first.value.starts_with(b"gen-") {
        return Err(format!("group {group} holds a value no writer wrote: {}", show(first)));
    }
    Ok(Some((first.seq, fingerprint(&first.value))))
}

struct GroupsConfig {
    name: &'static str,
    store: Store,
    options: Options,
    /// Per-commit `sync` override chosen at random, to mix synced and unsynced commits.
    mixed_sync: bool,
    ops_per_writer: u64,
}

/// What a reader thread did.
#[derive(Default)]
struct ReaderReport {
    observations: Vec<Observation>,
    reads: u64,
}

fn group_writer(
    db: &Db,
    t: u64,
    ops: u64,
    mixed_sync: bool,
    seed: u64,
    name: &str,
) -> Vec<(u64, GroupWrite)> {
    let mut rng = Rng::new(seed ^ (t + 1).wrapping_mul(0xA24B_AED4_963E_E407));
    let mut log = Vec::with_capacity(ops as usize);
    let mut last_seq = 0;
    for n in 0..ops {
        let group = rng.below(GROUPS);
        let value = (!rng.chance(10)).then(|| {
            let pad = 8 + rng.below(48) as usize;
            format!("gen-{t}-{n}|{}", ".".repeat(pad)).into_bytes()
        });
        let mut batch = WriteBatch::new();
        for i in 0..GROUP_KEYS {
            match &value {
                Some(v) => batch.put(&group_key(group, i), v),
                None => batch.delete(&group_key(group, i)),
            };
        }
        let sync = mixed_sync.then(|| rng.chance(50));
        let context = format!("{name} seed {seed} writer {t} commit {n}");
        let seq = db
            .write_opt(batch, WriteOptions::with_sync(sync))
            .unwrap_or_else(|e| panic!("{context}: write: {e}"));
        assert!(seq > last_seq, "{context}: sequence {seq} after {last_seq}");
        last_seq = seq;
        // Acknowledged means visible: read your own write.
        assert!(db.last_sequence() >= seq, "{context}: commit {seq} acknowledged but not visible");
        if let Some(entry) = db.get_entry(&group_key(group, 0)).expect("get") {
            assert!(
                entry.seq >= seq,
                "{context}: read {} at seq {} after committing seq {seq}",
                String::from_utf8_lossy(&entry.value),
                entry.seq
            );
            if entry.seq == seq {
                assert_eq!(Some(&entry.value), value.as_ref(), "{context}: own write read back wrong");
            }
        }
        log.push((group, (seq, value)));
    }
    log
}

fn group_reader(db: &Db, r: u64, done: &AtomicBool, seed: u64, name: &str) -> ReaderReport {
    let mut rng = Rng::new(seed ^ (r + 100).wrapping_mul(0x9FB2_1C65_1E98_DF25));
    let mut report = ReaderReport::default();
    let mut last_seen = [0u64; GROUPS as usize];
    let mut last_snapshot = 0;
    let mut finished = false;
    while !finished {
        finished = done.load(Ordering::Acquire);
        let group = rng.below(GROUPS);
        let (lo_key, hi_key) = group_bounds(group);
        let mode = rng.below(5);
        let context = format!("{name} seed {seed} reader {r} read {} (mode {mode})", report.reads);
        let mut observed: Vec<(u64, u64, u64, Seen)> = Vec::new();
        let check = |entries: &[Entry], group: u64| {
            whole_group(entries, group).unwrap_or_else(|e| panic!("{context}: {e}"))
        };
        match mode {
            // A snapshot: point reads of one group, compared with a range scan of it.
            0 | 1 => {
                let snapshot = db.snapshot();
                let seq = snapshot.sequence();
                assert!(
                    seq >= last_snapshot,
                    "{context}: snapshot sequence went back from {last_snapshot} to {seq}"
                );
                last_snapshot = seq;
                let by_get: Vec<Entry> = (0..GROUP_KEYS)
                    .filter_map(|i| snapshot.get_entry(&group_key(group, i)).expect("snapshot get"))
                    .collect();
                let seen = check(&by_get, group);
                if mode == 1 {
                    let mut by_scan: Vec<Entry> = snapshot
                        .range(lo_key.as_slice()..hi_key.as_slice())
                        .rev()
                        .collect::<Result<_, _>>()
                        .expect("scan");
                    by_scan.reverse();
                    assert_eq!(
                        by_scan, by_get,
                        "{context}: snapshot {seq} scan and point reads of group {group} differ"
                    );
                }
                observed.push((group, seq, seq, seen));
            }
            // Latest state, no snapshot: a forward or reverse scan of one group.
            2 | 3 => {
                let lo = db.last_sequence();
                let iter = db.range(lo_key.as_slice()..hi_key.as_slice());
                let mut entries: Vec<Entry> = if mode == 2 {
                    iter.collect::<Result<_, _>>().expect("scan")
                } else {
                    iter.rev().collect::<Result<_, _>>().expect("reverse scan")
                };
                if mode == 3 {
                    entries.reverse();
                }
                let hi = db.last_sequence();
                observed.push((group, lo, hi, check(&entries, group)));
            }
            // A snapshot scan of every group.
            _ => {
                let snapshot = db.snapshot();
                let seq = snapshot.sequence();
                assert!(
                    seq >= last_snapshot,
                    "{context}: snapshot sequence went back from {last_snapshot} to {seq}"
                );
                last_snapshot = seq;
                let all: Vec<Entry> =
                    snapshot.range(b"g".as_slice()..b"h".as_slice()).collect::<Result<_, _>>().expect("scan");
                for g in 0..GROUPS {
                    let (lo_key, hi_key) = group_bounds(g);
                    let part: Vec<Entry> =
                        all.iter().filter(|e| e.key >= lo_key && e.key < hi_key).cloned().collect();
                    observed.push((g, seq, seq, check(&part, g)));
                }
                assert_eq!(
                    all.len() as u64,
                    observed.iter().filter(|o| o.3.is_some()).count() as u64 * GROUP_KEYS,
                    "{context}: keys outside the groups"
                );
            }
        }
        for (group, lo, hi, seen) in observed {
            if let Some((seq, _)) = &seen {
                assert!(*seq <= hi, "{context}: group {group} at seq {seq} seen by a read at {hi}");
                let last = &mut last_seen[group as usize];
                assert!(*seq >= *last, "{context}: group {group} went back from seq {last} to {seq}");
                *last = *seq;
            }
            if report.observations.len() < MAX_OBSERVATIONS_PER_READER {
                report.observations.push(Observation { group, lo, hi, seen });
            }
        }
        report.reads += 1;
    }
    report
}

/// Whether `seen` is the state of a group at some sequence number in `lo..=hi`, given the
/// group's writes in sequence order.
fn matches_history(writes: &[GroupWrite], lo: u64, hi: u64, seen: Seen) -> bool {
    let state_at_lo = writes.partition_point(|(seq, _)| *seq <= lo);
    let as_seen = |index: usize| -> Seen {
        let (seq, value) = writes.get(index.checked_sub(1)?)?;
        value.as_ref().map(|v| (*seq, fingerprint(v)))
    };
    let later = writes[state_at_lo..].iter().take_while(|(seq, _)| *seq <= hi).count();
    (state_at_lo..=state_at_lo + later).any(|i| as_seen(i) == seen)
}

/// The writes of a group around `lo..=hi`, for failure messages.
fn describe_writes(writes: &[GroupWrite], lo: u64, hi: u64) -> String {
    let from = writes.partition_point(|(seq, _)| *seq <= lo).saturating_sub(2);
    let shown: Vec<String> = writes[from..]
        .iter()
        .take_while(|(seq, _)| *seq <= hi.saturating_add(5))
        .take(12)
        .map(|(seq, value)| match value {
            Some(v) => format!("{seq}: {}", String::from_utf8_lossy(v)),
            None => format!("{seq}: deleted"),
        })
        .collect();
    format!("[{}]", shown.join(", "))
}

fn run_groups(config: GroupsConfig) {
    let GroupsConfig { name, store, options, mixed_sync, ops_per_writer } = config;
    let seed = seed();
    let started = Instant::now();
    let db = store.open(options.clone());
    let done = AtomicBool::new(false);
    let (logs, reports, maintenance_work) = std::thread::scope(|s| {
        let (db, done) = (&db, &done);
        let writers: Vec<_> = (0..WRITERS)
            .map(|t| s.spawn(move || group_writer(db, t, ops_per_writer, mixed_sync, seed, name)))
            .collect();
        let readers: Vec<_> =
            (0..READERS).map(|r| s.spawn(move || group_reader(db, r, done, seed, name))).collect();
        let maintainer = s.spawn(move || maintenance(db, done, seed ^ 0x4D41_494E));
        let logs: Vec<_> = writers.into_iter().map(|h| h.join()).collect();
        done.store(true, Ordering::Release);
        let reports: Vec<_> = readers.into_iter().map(|h| h.join()).collect();
        let maintenance_work = maintainer.join();
        let logs: Vec<_> =
            logs.into_iter().map(|l| l.unwrap_or_else(|e| std::panic::resume_unwind(e))).collect();
        let reports: Vec<_> =
            reports.into_iter().map(|r| r.unwrap_or_else(|e| std::panic::resume_unwind(e))).collect();
        (logs, reports, maintenance_work.unwrap_or_else(|e| std::panic::resume_unwind(e)))
    });
    let context = format!("{name} seed {seed}");

    // Sequence numbers are dense and unique: each commit got its own.
    let total = WRITERS * ops_per_writer;
    let mut by_group: Vec<Vec<GroupWrite>> = vec![Vec::new(); GROUPS as usize];
    let mut seqs: Vec<u64> = Vec::with_capacity(total as usize);
    for (group, write) in logs.into_iter().flatten() {
        seqs.push(write.0);
        by_group[group as usize].push(write);
    }
    seqs.sort_unstable();
    assert!(seqs.iter().copied().eq(1..=total), "{context}: sequence numbers are not 1..={total}");
    assert_eq!(db.last_sequence(), total, "{context}: last sequence");
    for writes in &mut by_group {
        writes.sort_by_key(|w| w.0);
    }

    // Every observation is the group's state at a sequence number the read could use.
    let mut observations = 0u64;
    let mut present = 0u64;
    for (r, report) in reports.iter().enumerate() {
        for o in &report.observations {
            let writes = &by_group[o.group as usize];
            assert!(
                matches_history(writes, o.lo, o.hi, o.seen),
                "{context}: reader {r} saw group {} as {} at a sequence number in {}..={}, but its writes were {}",
                o.group,
                match o.seen {
                    Some((seq, _)) => format!("written by commit {seq}"),
                    None => "absent".into(),
                },
                o.lo,
                o.hi,
                describe_writes(writes, o.lo, o.hi)
            );
            observations += 1;
            present += u64::from(o.seen.is_some());
        }
    }
    let reads: u64 = reports.iter().map(|r| r.reads).sum();
    assert!(
        reads >= READERS && present > 0,
        "{context}: readers did too little ({reads} reads, {present} present)"
    );

    // The final state is the last write of each group.
    let final_state = scan_all(&db);
    for group in 0..GROUPS {
        let (lo_key, hi_key) = group_bounds(group);
        let part: Vec<Entry> =
            final_state.iter().filter(|e| e.key >= lo_key && e.key < hi_key).cloned().collect();
        let seen = whole_group(&part, group).unwrap_or_else(|e| panic!("{context}: final state: {e}"));
        let writes = &by_group[group as usize];
        assert!(
            matches_history(writes, total, total, seen),
            "{context}: final state of group {group} is {seen:?}, not its last write: {}",
            describe_writes(writes, total, total)
        );
    }
    let stats = db.stats();
    assert!(stats.flushes > 0 && stats.compactions > 0, "{context}: no flush or compaction ran: {stats:?}");
    println!(
        "{name}: {total} commits, {reads} reads, {observations} group observations ({present} present), \
         {} flushes, {} compactions, manual (flushes, compactions) {maintenance_work:?}, {:?}",
        stats.flushes,
        stats.compactions,
        started.elapsed()
    );
    reopen_and_compare(&store, db, options, &final_state, &context);
}

#[test]
fn groups_are_seen_whole_buffered_in_memory() {
    run_groups(GroupsConfig {
        name: "groups_buffered_in_memory",
        store: Store::Mem(MemFs::new()),
        options: tiny(SyncMode::Buffered, BackgroundMode::Threads),
        mixed_sync: false,
        ops_per_writer: ops(1500),
    });
}

#[test]
fn groups_are_seen_whole_always_on_disk() {
    run_groups(GroupsConfig {
        name: "groups_always_on_disk",
        store: Store::Dir(tempfile::tempdir().expect("tempdir")),
        options: tiny(SyncMode::Always, BackgroundMode::Threads),
        mixed_sync: false,
        ops_per_writer: ops(1000),
    });
}

#[test]
fn groups_are_seen_whole_mixed_sync_open_in_memory() {
    run_groups(GroupsConfig {
        name: "groups_mixed_sync_open_in_memory",
        store: Store::Scratch,
        options: tiny(SyncMode::Periodic(Duration::from_millis(2)), BackgroundMode::Threads),
        mixed_sync: true,
        ops_per_writer: ops(1500),
    });
}

// ---------------------------------------------------------------------------------------
// Transfers: read-modify-write with `write_with`.

const ACCOUNTS: u64 = 24;
const INITIAL_BALANCE: u64 = 1000;
const TOTAL: u64 = ACCOUNTS * INITIAL_BALANCE;

fn account_key(account: u64) -> Vec<u8> {
    format!("acct/{account:03}").into_bytes()
}

fn log_key(thread: u64, n: u64) -> Vec<u8> {
    format!("log/{thread}/{n:06}").into_bytes()
}

fn balance_of(value: &[u8]) -> u64 {
    std::str::from_utf8(value)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad balance {value:?}"))
}

/// A transfer's log entry: "from to amount".
fn parse_log(value: &[u8]) -> (u64, u64, u64) {
    let text = std::str::from_utf8(value).expect("log entry is text");
    let parts: Vec<u64> = text.split(' ').map(|p| p.parse().expect("log number")).collect();
    (parts[0], parts[1], parts[2])
}

#[derive(Debug)]
enum TransferError {
    Engine(Error),
    Insufficient,
}

impl From<Error> for TransferError {
    fn from(e: Error) -> Self {
        TransferError::Engine(e)
    }
}

/// A successful transfer as its thread recorded it.
struct Transfer {
    seq: u64,
    from: u64,
    to: u64,
    amount: u64,
}

fn transfer_thread(db: &Db, t: u64, ops: u64, seed: u64, name: &str) -> (Vec<Transfer>, u64) {
    let mut rng = Rng::new(seed ^ (t + 1).wrapping_mul(0xE703_7ED1_A0B4_28DB));
    let mut done = Vec::new();
    let mut declined = 0;
    let mut last_seq = 0;
    for n in 0..ops {
        let from = rng.below(ACCOUNTS);
        let to = (from + 1 + rng.below(ACCOUNTS - 1)) % ACCOUNTS;
        let amount = 1 + rng.below(400);
        let context = format!("{name} seed {seed} thread {t} transfer {n}");
        let result = db.write_with(WriteOptions::default(), |view| {
            assert!(
                view.last_sequence() >= last_seq,
                "{context}: the latest view is older than my last commit"
            );
            let read = |account| -> Result<u64, TransferError> {
                let entry = view
                    .get(&account_key(account))?
                    .unwrap_or_else(|| panic!("{context}: account {account} missing"));
                Ok(balance_of(&entry.value))
            };
            let (a, b) = (read(from)?, read(to)?);
            if a < amount {
                return Err(TransferError::Insufficient);
            }
            let mut batch = WriteBatch::new();
            batch.put(&account_key(from), (a - amount).to_string().as_bytes());
            batch.put(&account_key(to), (b + amount).to_string().as_bytes());
            batch.put(&log_key(t, done.len() as u64), format!("{from} {to} {amount}").as_bytes());
            Ok((batch, ()))
        });
        match result {
            Ok((seq, ())) => {
                assert!(seq > last_seq, "{context}: sequence {seq} after {last_seq}");
                last_seq = seq;
                done.push(Transfer { seq, from, to, amount });
            }
            Err(TransferError::Insufficient) => declined += 1,
            Err(TransferError::Engine(e)) => panic!("{context}: write_with: {e}"),
        }
    }
    (done, declined)
}

/// Balances from the account entries of one read; checks every account is there.
fn balances(entries: &[Entry], context: &str) -> Vec<u64> {
    let keys: Vec<Vec<u8>> = entries.iter().map(|e| e.key.clone()).collect();
    let expected: Vec<Vec<u8>> = (0..ACCOUNTS).map(account_key).collect();
    assert_eq!(keys, expected, "{context}: accounts missing or extra");
    entries.iter().map(|e| balance_of(&e.value)).collect()
}

fn transfer_reader(db: &Db, r: u64, done: &AtomicBool, seed: u64, name: &str) -> (u64, u64) {
    let mut rng = Rng::new(seed ^ (r + 100).wrapping_mul(0x8CB9_2BA7_2F3D_8DD7));
    let (lo, hi) = (b"acct/".as_slice(), b"acct0".as_slice());
    let mut last_snapshot = 0;
    let (mut reads, mut full_checks) = (0u64, 0u64);
    let mut finished = false;
    while !finished {
        finished = done.load(Ordering::Acquire);
        let mode = rng.below(4);
        let context = format!("{name} seed {seed} reader {r} read {reads} (mode {mode})");
        let accounts: Vec<Entry> = match mode {
            0 | 1 => {
                let snapshot = db.snapshot();
                let seq = snapshot.sequence();
                assert!(
                    seq >= last_snapshot,
                    "{context}: snapshot sequence went back from {last_snapshot} to {seq}"
                );
                last_snapshot = seq;
                if mode == 0 {
                    (0..ACCOUNTS).filter_map(|a| snapshot.get_entry(&account_key(a)).expect("get")).collect()
                } else {
                    snapshot.range(lo..hi).collect::<Result<_, _>>().expect("scan")
                }
            }
            2 => db.range(lo..hi).collect::<Result<_, _>>().expect("scan"),
            _ => {
                let mut entries: Vec<Entry> =
                    db.range(lo..hi).rev().collect::<Result<_, _>>().expect("reverse scan");
                entries.reverse();
                entries
            }
        };
        let sum: u64 = balances(&accounts, &context).iter().sum();
        assert_eq!(sum, TOTAL, "{context}: the total is not conserved");
        if reads % 16 == 0 || finished {
            // In one snapshot the balances are exactly what the visible log entries imply,
            // and every commit after the first is one transfer with one log entry.
            let snapshot = db.snapshot();
            let seq = snapshot.sequence();
            let logs: Vec<Entry> = snapshot
                .range(b"log/".as_slice()..b"log0".as_slice())
                .collect::<Result<_, _>>()
                .expect("scan");
            let accounts: Vec<Entry> = snapshot.range(lo..hi).collect::<Result<_, _>>().expect("scan");
            let mut expected = vec![INITIAL_BALANCE as i64; ACCOUNTS as usize];
            for entry in &logs {
                assert!(entry.seq <= seq, "{context}: log entry at seq {} in snapshot {seq}", entry.seq);
                let (from, to, amount) = parse_log(&entry.value);
                expected[from as usize] -= amount as i64;
                expected[to as usize] += amount as i64;
            }
            let found: Vec<i64> = balances(&accounts, &context).into_iter().map(|b| b as i64).collect();
            assert_eq!(
                found,
                expected,
                "{context}: snapshot {seq}: balances disagree with the {} visible log entries",
                logs.len()
            );
            assert_eq!(logs.len() as u64 + 1, seq, "{context}: snapshot {seq}: visible log entries");
            full_checks += 1;
        }
        reads += 1;
    }
    (reads, full_checks)
}

fn run_transfers(name: &str, store: Store, options: Options, ops_per_thread: u64) {
    let seed = seed();
    let context = format!("{name} seed {seed}");
    let started = Instant::now();
    let db = store.open(options.clone());
    let mut init = WriteBatch::new();
    for a in 0..ACCOUNTS {
        init.put(&account_key(a), INITIAL_BALANCE.to_string().as_bytes());
    }
    assert_eq!(
        db.write(init).expect("initial balances"),
        1,
        "{context}: a fresh database starts at sequence 1"
    );
    let done = AtomicBool::new(false);
    let (results, reader_counts, maintenance_work) = std::thread::scope(|s| {
        let (db, done) = (&db, &done);
        let writers: Vec<_> = (0..WRITERS)
            .map(|t| s.spawn(move || transfer_thread(db, t, ops_per_thread, seed, name)))
            .collect();
        let readers: Vec<_> =
            (0..READERS).map(|r| s.spawn(move || transfer_reader(db, r, done, seed, name))).collect();
        let maintainer = s.spawn(move || maintenance(db, done, seed ^ 0x4D41_494E));
        let results: Vec<_> = writers.into_iter().map(|h| h.join()).collect();
        done.store(true, Ordering::Release);
        let counts: Vec<_> = readers.into_iter().map(|h| h.join()).collect();
        let maintenance_work = maintainer.join();
        let results: Vec<_> =
            results.into_iter().map(|r| r.unwrap_or_else(|e| std::panic::resume_unwind(e))).collect();
        let counts: Vec<_> =
            counts.into_iter().map(|c| c.unwrap_or_else(|e| std::panic::resume_unwind(e))).collect();
        (results, counts, maintenance_work.unwrap_or_else(|e| std::panic::resume_unwind(e)))
    });

    let successes: u64 = results.iter().map(|(done, _)| done.len() as u64).sum();
    let declined: u64 = results.iter().map(|(_, d)| *d).sum();
    assert_eq!(successes + declined, WRITERS * ops_per_thread, "{context}: transfers unaccounted for");
    assert!(successes > 0, "{context}: no transfer succeeded");
    // A declined transfer commits nothing: one sequence number per successful transfer.
    assert_eq!(db.last_sequence(), 1 + successes, "{context}: last sequence vs successful transfers");
    assert_eq!(db.stats().commits, 1 + successes, "{context}: commits counted by stats");
    let mut seqs: Vec<u64> = results.iter().flat_map(|(done, _)| done.iter().map(|t| t.seq)).collect();
    seqs.sort_unstable();
    assert!(seqs.iter().copied().eq(2..=1 + successes), "{context}: transfer sequence numbers are not dense");

    // Each account ends at exactly what the recorded transfers imply; the total is conserved.
    let mut expected = vec![INITIAL_BALANCE as i64; ACCOUNTS as usize];
    for transfer in results.iter().flat_map(|(done, _)| done) {
        expected[transfer.from as usize] -= transfer.amount as i64;
        expected[transfer.to as usize] += transfer.amount as i64;
    }
    let final_state = scan_all(&db);
    let accounts: Vec<Entry> = final_state.iter().filter(|e| e.key.starts_with(b"acct/")).cloned().collect();
    let found: Vec<i64> = balances(&accounts, &context).into_iter().map(|b| b as i64).collect();
    assert_eq!(found, expected, "{context}: final balances");
    assert_eq!(found.iter().sum::<i64>(), TOTAL as i64, "{context}: final total");
    // Every successful transfer left its log entry, in the commit that moved the money.
    let logs: BTreeMap<Vec<u8>, &Entry> =
        final_state.iter().filter(|e| e.key.starts_with(b"log/")).map(|e| (e.key.clone(), e)).collect();
    assert_eq!(logs.len() as u64, successes, "{context}: log entries");
    for (t, (done, _)) in results.iter().enumerate() {
        for (n, transfer) in done.iter().enumerate() {
            let entry = logs
                .get(&log_key(t as u64, n as u64))
                .unwrap_or_else(|| panic!("{context}: log {t}/{n} missing"));
            assert_eq!(entry.seq, transfer.seq, "{context}: log {t}/{n} sequence");
            assert_eq!(
                parse_log(&entry.value),
                (transfer.from, transfer.to, transfer.amount),
                "{context}: log {t}/{n}"
            );
        }
    }
    let reads: u64 = reader_counts.iter().map(|c| c.0).sum();
    let full_checks: u64 = reader_counts.iter().map(|c| c.1).sum();
    assert!(reads >= READERS && full_checks >= READERS, "{context}: readers did too little");
    let stats = db.stats();
    assert!(stats.flushes > 0 && stats.compactions > 0, "{context}: no flush or compaction ran: {stats:?}");
    println!(
        "{name}: {successes} transfers, {declined} declined, {reads} reads ({full_checks} full checks), \
         {} flushes, {} compactions, manual (flushes, compactions) {maintenance_work:?}, {:?}",
        stats.flushes,
        stats.compactions,
        started.elapsed()
    );
    reopen_and_compare(&store, db, options, &final_state, &context);
}

#[test]
fn transfers_conserve_the_total_always_on_disk() {
    run_transfers(
        "transfers_always_on_disk",
        Store::Dir(tempfile::tempdir().expect("tempdir")),
        tiny(SyncMode::Always, BackgroundMode::Threads),
        ops(1000),
    );
}

#[test]
fn transfers_conserve_the_total_buffered_in_memory() {
    run_transfers(
        "transfers_buffered_in_memory",
        Store::Mem(MemFs::new()),
        tiny(SyncMode::Buffered, BackgroundMode::Threads),
        ops(1500),
    );
}
