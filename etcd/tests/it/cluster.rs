//! What only a shared store has: two stores (two servers) on one database.

use crate::common::{cluster, fresh_prefix};
use stampkv::{key, Kv, KvValue, Limits, WatchPoll};
use stampkv_etcd::{EtcdOptions, EtcdStore};
use std::time::{Duration, Instant};

fn two_servers() -> (Kv<EtcdStore>, Kv<EtcdStore>) {
    let prefix = fresh_prefix();
    let open = || {
        let store = EtcdStore::open(EtcdOptions::new(cluster().endpoints()).with_prefix(&prefix)).unwrap();
        Kv::with_store(store, Limits::default())
    };
    (open(), open())
}

#[test]
fn two_servers_share_one_database_id_and_read_each_others_writes_at_once() {
    let (a, b) = two_servers();
    assert_eq!(a.store().database_id(), b.store().database_id());
    let written = a.set(&key!["user", 1], &KvValue::U64(1)).unwrap();
    let read = b.get::<KvValue>(&key!["user", 1]).unwrap();
    assert_eq!(read.versionstamp, Some(written));
    let later = b.set(&key!["user", 2], &KvValue::U64(2)).unwrap();
    assert!(later > written, "versionstamps increase across servers");
}

#[test]
fn a_watch_on_one_server_sees_a_commit_made_through_the_other() {
    let (a, b) = two_servers();
    let mut watch = a.watch(&[key!["w"]]).unwrap();
    let first = watch.poll().unwrap();
    assert!(matches!(first, WatchPoll::Changed(_)), "the current state first");
    let written = b.set(&key!["w"], &KvValue::U64(7)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match watch.poll().unwrap() {
            WatchPoll::Changed(entries) if entries[0].versionstamp == Some(written) => break,
            _ if Instant::now() > deadline => panic!("the watch on server a never saw b's commit"),
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

#[test]
fn concurrent_sums_through_two_servers_lose_no_update_and_versionstamps_never_repeat() {
    let (a, b) = two_servers();
    let per_thread = 40;
    let stamps = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for kv in [&a, &b, &a, &b] {
            let stamps = &stamps;
            s.spawn(move || {
                for _ in 0..per_thread {
                    let result = kv.atomic().sum(&key!["counter"], 1).commit().unwrap();
                    stamps.lock().unwrap().push(result.versionstamp().unwrap());
                }
            });
        }
    });
    let total = a.get::<KvValue>(&key!["counter"]).unwrap().value;
    assert_eq!(total, Some(KvValue::U64(4 * per_thread)));
    let mut stamps = stamps.into_inner().unwrap();
    let n = stamps.len();
    stamps.sort();
    stamps.dedup();
    assert_eq!(stamps.len(), n, "every commit has its own versionstamp");
    assert!(a.store().stats().conflicts + b.store().stats().conflicts > 0, "the servers did race");
}
