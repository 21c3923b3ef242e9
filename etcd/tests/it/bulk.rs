//! Restores into the cluster store (`stampkv load --etcd`, `import-deno --etcd`): a whole
//! database with its versionstamps, expiry times and queued messages, written in batches.

use crate::common::{cluster, fresh_prefix};
use stampkv::Versionstamp;
use stampkv::{
    key, BulkEntry, EnqueueOptions, Kv, KvError, KvValue, Limits, QueuedMessage, SetOptions, Value,
};
use stampkv_etcd::{EtcdOptions, EtcdStore};
use std::time::Duration;

fn open(prefix: &str) -> Kv<EtcdStore> {
    let store = EtcdStore::open(EtcdOptions::new(cluster().endpoints()).with_prefix(prefix)).unwrap();
    Kv::with_store(store, Limits::default())
}

/// A source database on the engine: `n` users, an expiring key, two queued messages.
fn source(n: u64) -> Kv {
    let kv = Kv::open_in_memory(stampkv::KvOptions::default()).unwrap();
    for i in 0..n {
        kv.set(&key!["users", i as f64], &Value::from(format!("user {i}"))).unwrap();
    }
    kv.set_with(&key!["temp"], &Value::from(1.0), SetOptions { expire_in: Some(Duration::from_secs(600)) })
        .unwrap();
    kv.atomic()
        .set(&key!["u64"], &KvValue::U64(7))
        .set(&key!["bytes"], &KvValue::Bytes(vec![0, 255]))
        .commit()
        .unwrap();
    for delay in [30, 60] {
        let options = EnqueueOptions { delay: Duration::from_secs(delay), ..Default::default() };
        kv.enqueue(&Value::from(format!("in {delay} s")), options).unwrap();
    }
    kv
}

fn contents<S: stampkv::store::Store>(kv: &Kv<S>) -> (Vec<BulkEntry>, Vec<QueuedMessage>, Versionstamp) {
    let snapshot = kv.bulk_snapshot();
    let entries = snapshot.entries().collect::<Result<Vec<_>, _>>().unwrap();
    let messages = snapshot.messages().collect::<Result<Vec<_>, _>>().unwrap();
    (entries, messages, snapshot.last_versionstamp())
}

#[test]
fn a_database_restored_into_the_cluster_reads_back_identically_and_later_commits_are_newer() {
    // More entries than one batch transaction carries.
    let from = source(2_500);
    let (entries, messages, last) = contents(&from);
    let prefix = fresh_prefix();
    let into = open(&prefix);
    let mut restore = into.restore().unwrap();
    for e in &entries {
        restore.entry(&e.key, &e.value, Some(e.versionstamp), e.expires_at_ms).unwrap();
    }
    for m in &messages {
        restore.message(m).unwrap();
    }
    let summary = restore.finish(Some(last)).unwrap();
    assert_eq!((summary.entries, summary.messages), (entries.len() as u64, 2));
    assert_eq!(summary.last_versionstamp, last);

    // Read back through a second server of the same database.
    let other = open(&prefix);
    assert_eq!(contents(&other), (entries.clone(), messages, last));
    let committed = other.set(&key!["after"], &Value::from(true)).unwrap();
    assert!(committed > last, "a commit after the restore got {committed}, not above {last}");
}

#[test]
fn a_cluster_database_with_data_refuses_versionstamps_that_are_not_newer() {
    let kv = open(&fresh_prefix());
    let at = kv.set(&key!["a"], &Value::from(1.0)).unwrap();
    let mut restore = kv.restore().unwrap();
    let refused = restore.entry(&key!["b"], &KvValue::U64(1), Some(at), None).unwrap_err();
    assert!(matches!(&refused, KvError::InvalidRestore(text) if text.contains("not newer")), "{refused}");
}

#[test]
fn a_commit_during_a_restore_stops_it_and_says_what_was_written() {
    let prefix = fresh_prefix();
    let kv = open(&prefix);
    let other = open(&prefix);
    let mut restore = kv.restore().unwrap();
    for i in 0..1_500u32 {
        restore.entry(&key!["r", f64::from(i)], &KvValue::U64(i.into()), None, None).unwrap();
    }
    // The first batch has landed; a commit through another server now moves the counter.
    other.set(&key!["meanwhile"], &Value::from(1.0)).unwrap();
    let stopped = restore.finish(None).unwrap_err();
    assert!(
        matches!(&stopped, KvError::InvalidRestore(text) if text.contains("a commit was made while the load ran") && text.contains("after 1000 entries")),
        "{stopped}"
    );
}
