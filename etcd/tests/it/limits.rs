//! etcd's hard limits as a user meets them: a cluster that lost its quorum, and a storage
//! quota used up. Each test starts a cluster of its own (it breaks it on purpose).
//!
//! The quota test prints the largest database its quota held; a larger quota, or other
//! values (each atomic writes as many values as fit in 600 KiB, at most 1,000):
//! `STAMPKV_QUOTA_MIB=2048 STAMPKV_QUOTA_VALUE_BYTES=1000 cargo test --release -p stampkv-etcd --test it -- limits::a_used --nocapture`.

use stampkv::select::{Consistency, ListOptions, Selector};
use stampkv::{key, Kv, KvError, KvValue, Limits, StorageErrorKind, Value};
use stampkv_etcd::{EtcdOptions, EtcdStore};
use stampkv_testkit::etcd::EtcdCluster;
use std::time::{Duration, Instant};

fn storage_kind(error: &KvError) -> Option<StorageErrorKind> {
    match error {
        KvError::Storage(e) => Some(e.kind()),
        _ => None,
    }
}

fn list_eventual(kv: &Kv<EtcdStore>) -> Result<usize, KvError> {
    let options = ListOptions { consistency: Consistency::Eventual, ..ListOptions::default() };
    kv.list::<KvValue>(&Selector::prefix(key!["q"]), &options)?.try_fold(0, |n, e| e.map(|_| n + 1))
}

#[test]
fn with_quorum_lost_writes_fail_in_bounded_time_eventual_reads_answer_and_all_resumes() {
    let mut cluster = EtcdCluster::start(3).expect("start a 3-member etcd cluster");
    let mut options = EtcdOptions::new(cluster.endpoints()).with_prefix("quorum/");
    options.read_timeout = Duration::from_secs(3);
    options.settle_timeout = Duration::from_secs(4);
    let bound = options.request_timeout + options.settle_timeout + Duration::from_secs(3);
    let kv = Kv::with_store(EtcdStore::open(options).unwrap(), Limits::default());
    for i in 0..10 {
        kv.set(&key!["q", i], &Value::from(1.0)).unwrap();
    }
    let leader = cluster.leader().expect("a leader");
    let survivor = (leader + 1) % 3;
    for i in (0..3).filter(|&i| i != survivor) {
        cluster.kill(i);
    }

    // A write fails, with a status that says why, within the bound.
    let started = Instant::now();
    let failed = kv.set(&key!["q", "lost"], &Value::from(2.0)).unwrap_err();
    let took = started.elapsed();
    let kind = storage_kind(&failed);
    assert!(
        matches!(kind, Some(StorageErrorKind::Unavailable | StorageErrorKind::OutcomeUnknown)),
        "a write without quorum failed with {failed}"
    );
    assert!(took <= bound, "a write without quorum took {took:?} to fail (bound {bound:?})");
    eprintln!("quorum lost: a write failed after {took:?}: {failed}");

    // The surviving member still answers eventual (serializable) reads.
    let started = Instant::now();
    assert_eq!(list_eventual(&kv).unwrap(), 10, "eventual reads without quorum");
    eprintln!("quorum lost: an eventual list answered in {:?}", started.elapsed());
    // A strong read needs the quorum: it fails, in bounded time too.
    let started = Instant::now();
    let strong = kv.get::<KvValue>(&key!["q", 1]).unwrap_err();
    assert_eq!(storage_kind(&strong), Some(StorageErrorKind::Unavailable), "{strong}");
    assert!(started.elapsed() <= bound, "a strong read without quorum took {:?}", started.elapsed());

    // The quorum back: writes work again, and the failed write applied at most once.
    for i in (0..3).filter(|&i| i != survivor) {
        cluster.restart(i).expect("restart a member");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let resumed = loop {
        match kv.set(&key!["q", "after"], &Value::from(3.0)) {
            Ok(versionstamp) => break versionstamp,
            Err(e) if Instant::now() < deadline => eprintln!("waiting for the quorum: {e}"),
            Err(e) => panic!("writes did not resume: {e}"),
        }
    };
    let lost = kv.get::<KvValue>(&key!["q", "lost"]).unwrap();
    assert!(lost.versionstamp.is_none_or(|v| v < resumed));
    assert!(list_eventual(&kv).unwrap() >= 11, "the write after the quorum came back is listed");
}

#[test]
fn a_used_up_storage_quota_fails_writes_with_quota_exceeded_and_reads_keep_working() {
    let quota_mib: u64 = std::env::var("STAMPKV_QUOTA_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(24);
    let quota = (quota_mib << 20).to_string();
    let cluster = EtcdCluster::start_with_flags(
        3,
        &[
            "--max-txn-ops",
            "4096",
            "--quota-backend-bytes",
            &quota,
            "--auto-compaction-mode",
            "revision",
            "--auto-compaction-retention",
            "1000",
        ],
    )
    .expect("start a 3-member etcd cluster");
    let options = EtcdOptions::new(cluster.endpoints()).with_prefix("quota/");
    let kv = Kv::with_store(EtcdStore::open(options).unwrap(), Limits::default());
    let value_bytes: usize =
        std::env::var("STAMPKV_QUOTA_VALUE_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(60 << 10);
    // Atomics of up to 600 KiB of values (Deno allows 800 KiB and 1,000 mutations).
    let per_commit = ((600 << 10) / value_bytes).clamp(1, 1000) as u64;
    let value = KvValue::Bytes(vec![7; value_bytes]);
    let (mut commits, mut live_bytes) = (0u64, 0u64);
    let refused = loop {
        let mut atomic = kv.atomic();
        for j in 0..per_commit {
            atomic = atomic.set(&key!["big", commits, j], &value);
        }
        match atomic.commit() {
            Ok(_) => {
                commits += 1;
                live_bytes += per_commit * value_bytes as u64;
            }
            Err(e) => break e,
        }
        assert!(commits < 10_000_000, "the quota never ran out");
    };
    assert_eq!(storage_kind(&refused), Some(StorageErrorKind::QuotaExceeded), "{refused}");
    let status = kv.store().member_statuses();
    let db_size = status.iter().filter_map(|(_, s)| s.as_ref().ok()).map(|s| s.db_size).max().unwrap_or(0);
    let alarms = kv.store().alarms().unwrap();
    assert!(alarms.iter().any(|(_, alarm)| alarm == "NOSPACE"), "alarms: {alarms:?}");
    eprintln!(
        "quota {quota_mib} MiB: {commits} commits, {} entries of {value_bytes} bytes, {:.1} MiB of values stored \
         before the quota error ({:.0}% of the quota; largest member file {:.1} MiB): {refused}",
        commits * per_commit,
        live_bytes as f64 / (1 << 20) as f64,
        100.0 * live_bytes as f64 / (quota_mib << 20) as f64,
        db_size as f64 / (1 << 20) as f64
    );
    // Reads keep working, and so do deletes' refusals: every write is refused until an
    // operator compacts, defragments and disarms the alarm.
    let first = kv.get::<KvValue>(&key!["big", 0u64, 0u64]).unwrap();
    assert!(first.value.as_ref() == Some(&value), "the first entry does not read back");
    let small = kv.set(&key!["small"], &Value::from(1.0)).unwrap_err();
    assert_eq!(storage_kind(&small), Some(StorageErrorKind::QuotaExceeded), "{small}");
}
