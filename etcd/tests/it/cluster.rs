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

#[test]
fn concurrent_commits_on_one_server_share_etcd_transactions_and_keep_their_own_checks() {
    let (a, _) = two_servers();
    let rounds = 20u64;
    let stamps = std::sync::Mutex::new(Vec::new());
    let stale_failed = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        // Eight threads increment one key by read, check, write: within a group, a member's
        // check must see the writes of the members before it, or increments are lost.
        for _ in 0..8 {
            let (a, stamps) = (&a, &stamps);
            s.spawn(move || {
                for _ in 0..rounds {
                    loop {
                        let current = a.get::<KvValue>(&key!["cas"]).unwrap();
                        let next = match current.value {
                            Some(KvValue::U64(n)) => n + 1,
                            _ => 1,
                        };
                        let result = a
                            .atomic()
                            .check(&key!["cas"], current.versionstamp)
                            .set(&key!["cas"], &KvValue::U64(next))
                            .commit()
                            .unwrap();
                        if let Some(stamp) = result.versionstamp() {
                            stamps.lock().unwrap().push(stamp);
                            break;
                        }
                    }
                }
            });
        }
        // Eight threads write keys of their own under checks that hold (they group), and
        // each round also send one commit whose check cannot hold: it fails alone.
        for t in 0..8u64 {
            let (a, stamps, stale_failed) = (&a, &stamps, &stale_failed);
            s.spawn(move || {
                let mut last = None;
                for i in 0..rounds {
                    let result = a
                        .atomic()
                        .check(&key!["own", t], last)
                        .set(&key!["own", t], &KvValue::U64(i))
                        .sum(&key!["sum"], 1)
                        .commit()
                        .unwrap();
                    let stamp =
                        result.versionstamp().expect("a check on a key only this thread writes holds");
                    stamps.lock().unwrap().push(stamp);
                    last = Some(stamp);
                    let stale =
                        a.atomic().check(&key!["own", t], None).sum(&key!["sum"], 1000).commit().unwrap();
                    assert!(!stale.ok(), "a check against a key that exists must fail");
                    stale_failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    assert_eq!(a.get::<KvValue>(&key!["cas"]).unwrap().value, Some(KvValue::U64(8 * rounds)));
    assert_eq!(a.get::<KvValue>(&key!["sum"]).unwrap().value, Some(KvValue::U64(8 * rounds)));
    assert_eq!(stale_failed.into_inner(), 8 * rounds);
    let mut stamps = stamps.into_inner().unwrap();
    let n = stamps.len();
    stamps.sort();
    stamps.dedup();
    assert_eq!(stamps.len(), n, "every commit has its own versionstamp");
    let stats = a.store().stats();
    assert!(stats.largest_batch > 1, "concurrent commits were grouped: {stats:?}");
    assert!(stats.batches < stats.commits, "fewer etcd transactions than commits: {stats:?}");
}

#[test]
fn blind_writes_from_many_threads_are_grouped_and_all_applied() {
    let (a, b) = two_servers();
    let stamps = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..32u64 {
            let (kv, stamps) = (if t % 2 == 0 { &a } else { &b }, &stamps);
            s.spawn(move || {
                for i in 0..25u64 {
                    let stamp = kv.set(&key!["blind", t, i], &KvValue::U64(i)).unwrap();
                    stamps.lock().unwrap().push((stamp, t, i));
                }
            });
        }
    });
    let stamps = stamps.into_inner().unwrap();
    for (stamp, t, i) in &stamps {
        assert_eq!(b.get::<KvValue>(&key!["blind", *t, *i]).unwrap().versionstamp, Some(*stamp));
    }
    let mut unique: Vec<_> = stamps.iter().map(|(s, _, _)| *s).collect();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), stamps.len(), "every commit has its own versionstamp");
    let grouped = a.store().stats().largest_batch.max(b.store().stats().largest_batch);
    assert!(grouped > 1, "32 writers on two servers never shared a transaction");
}
