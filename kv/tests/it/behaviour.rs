//! Serializability under concurrent check-and-retry commits, expiry, watch, and
//! versionstamps across reopen and simulated crashes.

use crate::common::for_each_store;
use stampkv::{key, Key, Kv, KvOptions, KvValue, ManualClock, SetOptions, SyncMode, Value};
use stampkv_engine::fs::{CrashPolicy, MemFs};
use stampkv_engine::Options;
use std::sync::Arc;
use std::time::Duration;

fn clocked(clock: &Arc<ManualClock>) -> KvOptions {
    let mut engine = Options::default();
    engine.clock = clock.clone();
    KvOptions::with_engine(engine)
}

for_each_store! {
    #[test]
    fn expired_entries_are_invisible_to_reads_lists_and_checks_from_the_instant_they_expire() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let kv = open_kv(clocked(&clock));
        let k = key!["session"];
        let options = SetOptions { expire_in: Some(Duration::from_millis(500)) };
        let v = kv.set_with(&k, &Value::String("token".into()), options).unwrap();
        clock.set(1_000_499);
        assert!(kv.get::<Value>(&k).unwrap().value.is_some());
        assert!(kv.atomic().check(&k, Some(v)).commit().unwrap().ok());
        clock.set(1_000_500);
        assert_eq!(kv.get::<Value>(&k).unwrap().value, None);
        assert_eq!(kv.list::<Value>(&stampkv::Selector::prefix(key![]), &Default::default()).unwrap().count(), 0);
        assert!(!kv.atomic().check(&k, Some(v)).commit().unwrap().ok(), "an expired entry fails its check");
        assert!(kv.atomic().check(&k, None).commit().unwrap().ok(), "and counts as absent");
        // A plain set clears an earlier expiry; sum clears it too.
        kv.set_with(&k, &KvValue::U64(1), options).unwrap();
        kv.atomic().sum(&k, 1).commit().unwrap();
        clock.advance(10_000);
        assert_eq!(kv.get::<KvValue>(&k).unwrap().value, Some(KvValue::U64(2)));
    }

    fn u64_at(kv: &TestKv, key: &Key) -> u64 {
        match kv.get::<KvValue>(key).unwrap().value {
            Some(KvValue::U64(n)) => n,
            other => panic!("{key:?}: {other:?}"),
        }
    }

    #[test]
    fn concurrent_transfers_with_check_and_retry_conserve_money() {
        const ACCOUNTS: u64 = 8;
        const THREADS: u64 = 4;
        const TRANSFERS: u64 = 300;
        let kv = open_kv(KvOptions::default());
        let mut op = kv.atomic();
        for a in 0..ACCOUNTS {
            op = op.set(&key!["account", a as i32], &KvValue::U64(1_000));
        }
        op.commit().unwrap();
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let kv = kv.clone();
                std::thread::spawn(move || {
                    let mut state = t * 7919 + 1;
                    let mut retries = 0;
                    for _ in 0..TRANSFERS {
                        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        let from = key!["account", ((state >> 33) % ACCOUNTS) as i32];
                        let to = key!["account", ((state >> 40) % ACCOUNTS) as i32];
                        if from == to {
                            continue;
                        }
                        loop {
                            let a = kv.get::<KvValue>(&from).unwrap();
                            let b = kv.get::<KvValue>(&to).unwrap();
                            let (Some(KvValue::U64(x)), Some(KvValue::U64(y))) = (&a.value, &b.value) else {
                                panic!()
                            };
                            let amount = (state >> 50) % 50;
                            if *x < amount {
                                break;
                            }
                            let result = kv
                                .atomic()
                                .check_entry(&a)
                                .check_entry(&b)
                                .set(&from, &KvValue::U64(x - amount))
                                .set(&to, &KvValue::U64(y + amount))
                                .sum(&key!["transfers"], 1)
                                .commit()
                                .unwrap();
                            if result.ok() {
                                break;
                            }
                            retries += 1;
                        }
                    }
                    retries
                })
            })
            .collect();
        let retries: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        let total: u64 = (0..ACCOUNTS).map(|a| u64_at(&kv, &key!["account", a as i32])).sum();
        assert_eq!(total, ACCOUNTS * 1_000, "money is conserved");
        let transfers = u64_at(&kv, &key!["transfers"]);
        assert!(transfers > 0 && transfers <= THREADS * TRANSFERS);
        eprintln!("{transfers} transfers, {retries} retries after check failures");
    }

    #[test]
    fn concurrent_counters_lose_no_update() {
        let kv = open_kv(KvOptions::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let kv = kv.clone();
                std::thread::spawn(move || {
                    for _ in 0..250 {
                        kv.atomic().sum(&key!["hits"], 1).commit().unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(u64_at(&kv, &key!["hits"]), 1_000);
    }

    #[test]
    fn watch_yields_the_current_state_then_changes_only() {
        let kv = open_kv(KvOptions::default());
        let (a, b) = (key!["a"], key!["b"]);
        kv.set(&a, &KvValue::U64(1)).unwrap();
        let mut watch = kv.watch(&[a.clone(), b.clone()]).unwrap();
        let first = watch.next_timeout(Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!(first[0].value, Some(KvValue::U64(1)));
        assert_eq!((first[1].key.clone(), first[1].value.clone()), (b.clone(), None));
        // Unrelated writes, failed checks and deleting a missing key yield nothing.
        kv.set(&key!["unrelated"], &KvValue::U64(0)).unwrap();
        assert!(!kv.atomic().check(&a, None).set(&a, &KvValue::U64(9)).commit().unwrap().ok());
        kv.delete(&b).unwrap();
        assert!(watch.next_timeout(Duration::from_millis(100)).is_none());
        // A change yields the new state; rapid changes may coalesce into the last one.
        let v = kv.set(&b, &KvValue::U64(2)).unwrap();
        let next = watch.next_timeout(Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!(next[1].value, Some(KvValue::U64(2)));
        assert_eq!(next[1].versionstamp, Some(v));
        for i in 0..5 {
            kv.set(&a, &KvValue::U64(10 + i)).unwrap();
        }
        let mut last = None;
        while let Some(state) = watch.next_timeout(Duration::from_millis(200)) {
            last = Some(state.unwrap());
        }
        assert_eq!(last.unwrap()[0].value, Some(KvValue::U64(14)));
        // From another thread, blocking.
        let mut watch = kv.watch(std::slice::from_ref(&a)).unwrap();
        watch.next().unwrap().unwrap();
        let writer = {
            let kv = kv.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                kv.set(&key!["a"], &KvValue::U64(100)).unwrap();
            })
        };
        assert_eq!(watch.next().unwrap().unwrap()[0].value, Some(KvValue::U64(100)));
        writer.join().unwrap();
        assert_eq!(
            kv.watch(&(0..11).map(|i| key![i]).collect::<Vec<_>>()).err().unwrap().to_string(),
            "Too many keys (max 10)"
        );
    }

    #[test]
    fn watch_sees_expiry_and_ends_when_the_database_closes() {
        let clock = Arc::new(ManualClock::new(5_000));
        let kv = open_kv(clocked(&clock));
        let k = key!["temp"];
        kv.set_with(&k, &KvValue::U64(1), SetOptions { expire_in: Some(Duration::from_millis(100)) }).unwrap();
        let mut watch = kv.watch(std::slice::from_ref(&k)).unwrap();
        assert!(watch.next_timeout(Duration::from_secs(5)).unwrap().unwrap()[0].value.is_some());
        clock.advance(100);
        let expired = watch.next_timeout(Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!(expired[0].value, None, "expiry counts as a change");
        let closer = {
            let kv = kv.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                kv.close().unwrap();
            })
        };
        assert!(watch.next().is_none(), "the watch ends when the database closes");
        closer.join().unwrap();
    }

    #[test]
    fn a_polled_watch_is_woken_by_commits_to_its_keys_and_sees_expiry_and_close() {
        use stampkv::WatchPoll;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let clock = Arc::new(ManualClock::new(5_000));
        let kv = open_kv(clocked(&clock));
        let (a, b) = (key!["a"], key!["b"]);
        kv.set(&a, &KvValue::U64(1)).unwrap();
        let mut watch = kv.watch(&[a.clone(), b.clone()]).unwrap();
        let wakes = Arc::new(AtomicUsize::new(0));
        {
            let wakes = wakes.clone();
            watch.set_waker(move || {
                wakes.fetch_add(1, Ordering::SeqCst);
            });
        }
        let WatchPoll::Changed(first) = watch.poll().unwrap() else { panic!("the first poll reads") };
        assert_eq!((first[0].value.clone(), first[1].value.clone()), (Some(KvValue::U64(1)), None));
        assert!(matches!(watch.poll().unwrap(), WatchPoll::Pending), "nothing changed");
        kv.set(&key!["unrelated"], &KvValue::U64(0)).unwrap();
        assert_eq!(wakes.load(Ordering::SeqCst), 0, "a commit to another key wakes nobody");
        kv.set_with(&b, &KvValue::U64(2), SetOptions { expire_in: Some(Duration::from_millis(100)) }).unwrap();
        assert_eq!(wakes.load(Ordering::SeqCst), 1);
        let WatchPoll::Changed(second) = watch.poll().unwrap() else { panic!("the set is seen") };
        assert_eq!(second[1].value, Some(KvValue::U64(2)));
        assert_eq!(watch.next_expiry_in(), Some(Duration::from_millis(100)));
        assert!(matches!(watch.poll().unwrap(), WatchPoll::Pending));
        clock.advance(100);
        assert_eq!(watch.next_expiry_in(), Some(Duration::ZERO));
        let WatchPoll::Changed(third) = watch.poll().unwrap() else { panic!("the expiry is seen") };
        assert_eq!(third[1].value, None);
        kv.clone().close().unwrap();
        assert!(wakes.load(Ordering::SeqCst) >= 2, "closing wakes the watch");
        assert!(matches!(watch.poll().unwrap(), WatchPoll::Closed));
    }
}

// On the engine only: durability, files, maintenance.

#[test]
fn compaction_removes_expired_entries_physically() {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let kv = Kv::open_in_memory(clocked(&clock)).unwrap();
    let options = SetOptions { expire_in: Some(Duration::from_millis(500)) };
    kv.set(&key!["kept"], &KvValue::U64(1)).unwrap();
    for i in 0..100 {
        kv.set_with(&key!["tmp", i], &KvValue::Bytes(vec![1; 500]), options).unwrap();
    }
    clock.advance(1_000);
    kv.engine().compact().unwrap();
    let usage = kv.engine().space_usage().unwrap();
    assert_eq!(usage.live_entries, 1);
    assert!(kv.engine().stats().table_bytes < 5_000, "expired values are gone from the tables");
}

#[test]
fn versionstamps_keep_increasing_across_reopen_and_crashes() {
    let options = || {
        let mut engine = Options::default();
        engine.sync_mode = SyncMode::Always;
        KvOptions::with_engine(engine)
    };
    let mut fs = MemFs::new();
    let mut kv = Kv::open_with_fs(Arc::new(fs.clone()), "/kv", options()).unwrap();
    let mut last = kv.set(&key!["x"], &KvValue::U64(0)).unwrap();
    for round in 1..=6u64 {
        if round % 2 == 0 {
            kv.close().unwrap();
        } else {
            // A power loss right now: every acknowledged (synced) commit must survive.
            let crashed = fs.crash_clone(CrashPolicy::Random(round));
            drop(kv);
            fs = crashed;
        }
        kv = Kv::open_with_fs(Arc::new(fs.clone()), "/kv", options()).unwrap();
        let seen = kv.get::<KvValue>(&key!["x"]).unwrap();
        assert_eq!(seen.value, Some(KvValue::U64(round - 1)), "round {round}: acknowledged commit lost");
        assert!(seen.versionstamp.unwrap() <= last);
        let v = kv.set(&key!["x"], &KvValue::U64(round)).unwrap();
        assert!(v > last, "round {round}: versionstamp went backwards");
        let empty = kv.atomic().commit().unwrap().versionstamp().unwrap();
        assert!(empty > v);
        last = empty;
    }
    kv.close().unwrap();
}
