//! The expiry sweeper: expired entries are deleted from etcd (with their index entries),
//! entries written again without an expiry or with a later one stay.

use crate::common::{cluster, fresh_prefix};
use stampkv::{key, Kv, KvValue, Limits, SetOptions, Value};
use stampkv_etcd::{EtcdOptions, EtcdStore};
use std::time::{Duration, Instant};

/// How many etcd keys start with `prefix`, read straight from etcd.
fn raw_count(prefix: String) -> i64 {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let mut client = etcd_client::Client::connect(cluster().endpoints(), None).await.unwrap();
        let options = etcd_client::GetOptions::new().with_prefix().with_count_only();
        client.get(prefix, Some(options)).await.unwrap().count()
    })
}

#[test]
fn the_sweeper_deletes_expired_entries_and_their_index_and_keeps_the_rest() {
    let prefix = fresh_prefix();
    let store = EtcdStore::open(EtcdOptions::new(cluster().endpoints()).with_prefix(&prefix)).unwrap();
    let kv = Kv::with_store(store, Limits::default());
    let soon = SetOptions { expire_in: Some(Duration::from_secs(2)) };
    for i in 0..50u64 {
        kv.set_with(&key!["tmp", i], &Value::from(1.0), soon).unwrap();
    }
    for i in 0..5u64 {
        kv.set(&key!["keep", i], &Value::from(1.0)).unwrap();
    }
    // Written again without an expiry: its index entry is stale and must not delete it.
    kv.set_with(&key!["renewed"], &Value::from(1.0), soon).unwrap();
    kv.set(&key!["renewed"], &Value::from(2.0)).unwrap();
    let later = SetOptions { expire_in: Some(Duration::from_secs(3600)) };
    kv.set_with(&key!["later"], &Value::from(3.0), later).unwrap();
    assert_eq!(raw_count(format!("{prefix}x")), 52, "one index entry per expiring put");

    let deadline = Instant::now() + Duration::from_secs(15);
    while raw_count(format!("{prefix}d")) > 7 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(raw_count(format!("{prefix}d")), 7, "expired entries left in etcd");
    assert_eq!(raw_count(format!("{prefix}x")), 1, "only the later entry's index entry is left");
    assert_eq!(kv.store().stats().expired_swept, 50);
    assert_eq!(kv.get::<Value>(&key!["renewed"]).unwrap().value, Some(Value::from(2.0)));
    assert!(kv.get::<KvValue>(&key!["later"]).unwrap().value.is_some());
}
