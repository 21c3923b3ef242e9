//! History compaction by the servers: one interval of history is kept, a snapshot older
//! than that fails its next read with an error that says so. On a cluster of its own
//! (compaction is cluster-wide).

use stampkv::store::{Store, StoreSnapshot};
use stampkv::{key, Kv, Limits, Value};
use stampkv_etcd::{EtcdOptions, EtcdStore};
use stampkv_testkit::etcd::EtcdCluster;
use std::time::{Duration, Instant};

#[test]
fn the_compactor_keeps_one_interval_of_history_and_an_older_snapshot_fails_clearly() {
    let cluster = EtcdCluster::start_with_flags(1, &["--max-txn-ops", "4096"]).expect("start etcd");
    let mut options = EtcdOptions::new(cluster.endpoints()).with_prefix("history/");
    options.compaction_interval = Some(Duration::from_millis(500));
    let kv = Kv::with_store(EtcdStore::open(options).unwrap(), Limits::default());
    kv.set(&key!["h"], &Value::from(0.0)).unwrap();
    let encoded = key!["h"].encode().unwrap();
    // A snapshot whose revision is fixed by its first read.
    let old = kv.store().snapshot();
    assert!(old.get(&encoded).unwrap().is_some());
    let deadline = Instant::now() + Duration::from_secs(20);
    let failed = loop {
        for i in 1..=10 {
            kv.set(&key!["h"], &Value::from(f64::from(i))).unwrap();
        }
        if let Err(e) = old.get(&encoded) {
            break e;
        }
        assert!(Instant::now() < deadline, "the old snapshot's revision was never compacted");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(failed.to_string().contains("compacted"), "{failed}");
    assert!(kv.store().stats().compactions >= 1);
    // A fresh snapshot reads the latest state.
    let fresh = kv.store().snapshot();
    assert!(fresh.get(&encoded).unwrap().is_some());
    assert_eq!(kv.get::<Value>(&key!["h"]).unwrap().value, Some(Value::from(10.0)));
}
