//! What only a shared store has: two stores (two servers) on one database.

use crate::common::{cluster, fresh_prefix};
use stampkv::{key, EnqueueOptions, Kv, KvValue, Limits, ListenOptions, Value, WatchPoll};
use stampkv_etcd::{EtcdOptions, EtcdStore};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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

/// Listener options for the queue tests: a short visibility timeout, frequent looks.
fn listen_options(visibility_timeout: Duration) -> ListenOptions {
    ListenOptions { workers: 2, visibility_timeout, max_idle_wait: Duration::from_millis(50) }
}

#[test]
fn queue_listeners_on_two_servers_each_take_a_share_and_deliver_every_message_once() {
    let (a, b) = two_servers();
    let deliveries: Arc<Mutex<HashMap<u64, Vec<char>>>> = Arc::default();
    let listen = |kv: &Kv<EtcdStore>, server: char| {
        let deliveries = deliveries.clone();
        kv.listen_queue(listen_options(Duration::from_secs(30)), move |message| {
            let KvValue::U64(id) = message.value else {
                return Err(format!("unexpected {:?}", message.value));
            };
            deliveries.lock().unwrap().entry(id).or_default().push(server);
            std::thread::sleep(Duration::from_millis(20));
            Ok::<_, String>(())
        })
        .unwrap()
    };
    let (listener_a, listener_b) = (listen(&a, 'a'), listen(&b, 'b'));
    for id in 0..100u64 {
        let through = if id % 2 == 0 { &a } else { &b };
        through.enqueue(&KvValue::U64(id), EnqueueOptions::default()).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while deliveries.lock().unwrap().len() < 100 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Long enough for a second delivery of anything to show.
    std::thread::sleep(Duration::from_millis(500));
    listener_a.stop();
    listener_b.stop();
    let deliveries = deliveries.lock().unwrap();
    assert_eq!(deliveries.len(), 100, "messages never delivered");
    let twice: Vec<_> = deliveries.iter().filter(|(_, by)| by.len() > 1).collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    let by_a = deliveries.values().filter(|by| by[0] == 'a').count();
    eprintln!("queue on two servers: {by_a} messages delivered by a, {} by b", 100 - by_a);
    assert!(by_a > 0 && by_a < 100, "one server delivered everything ({by_a} by a)");
    assert!(a.bulk_snapshot().messages().next().is_none(), "acknowledged messages are still queued");
}

#[test]
fn a_message_whose_listener_stopped_answering_is_delivered_again_by_the_other_server() {
    let (a, b) = two_servers();
    let visibility = Duration::from_secs(2);
    // Server a's one worker takes the message and never returns in time (as if its process
    // had been killed): its claim in etcd is all that is left of it.
    let (taken_tx, taken_rx) = std::sync::mpsc::channel::<u32>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let one_worker = ListenOptions { workers: 1, ..listen_options(visibility) };
    let listener_a = a
        .listen_queue(one_worker, move |message| {
            taken_tx.send(message.attempt).unwrap();
            let _ = release_rx.lock().unwrap().recv_timeout(Duration::from_secs(30));
            Ok::<_, String>(())
        })
        .unwrap();
    a.enqueue(&Value::from("job"), EnqueueOptions::default()).unwrap();
    assert_eq!(taken_rx.recv_timeout(Duration::from_secs(10)).unwrap(), 1);
    let claimed_at = Instant::now();
    let (delivered_tx, delivered_rx) = std::sync::mpsc::channel::<u32>();
    let listener_b = b
        .listen_queue(listen_options(visibility), move |message| {
            delivered_tx.send(message.attempt).unwrap();
            Ok::<_, String>(())
        })
        .unwrap();
    let attempt = delivered_rx.recv_timeout(Duration::from_secs(20)).expect("server b never got the message");
    let after = claimed_at.elapsed();
    assert!(
        after >= visibility - Duration::from_millis(300),
        "delivered again after {after:?}, before the visibility timeout"
    );
    assert_eq!(attempt, 1, "a delivery whose handler never answered is not a failed attempt");
    // a's handler finally returns: its acknowledgement finds the message moved on, and the
    // message is not delivered a third time.
    release_tx.send(()).unwrap();
    std::thread::sleep(visibility + Duration::from_millis(500));
    let (again_b, again_a) = (delivered_rx.try_recv(), taken_rx.try_recv());
    assert!(
        again_b.is_err() && again_a.is_err(),
        "delivered a third time: by b {again_b:?}, by a {again_a:?}"
    );
    listener_a.stop();
    listener_b.stop();
    assert!(b.bulk_snapshot().messages().next().is_none(), "the message is still queued");
}

#[test]
fn racing_inserts_of_one_key_through_two_servers_let_exactly_one_win() {
    // `check(key, null)` is deferred to the group's transaction as a compare: many racing
    // inserts of each key, in groups on two servers, still let exactly one win.
    let (a, b) = two_servers();
    let wins: Mutex<HashMap<u64, Vec<u64>>> = Mutex::default();
    std::thread::scope(|s| {
        for t in 0..16u64 {
            let (kv, wins) = (if t % 2 == 0 { &a } else { &b }, &wins);
            s.spawn(move || {
                for k in 0..30u64 {
                    let result = kv
                        .atomic()
                        .check(&key!["insert", k], None)
                        .set(&key!["insert", k], &KvValue::U64(t))
                        .commit()
                        .unwrap();
                    if result.ok() {
                        wins.lock().unwrap().entry(k).or_default().push(t);
                    }
                }
            });
        }
    });
    let wins = wins.into_inner().unwrap();
    for k in 0..30u64 {
        let winners = wins.get(&k).cloned().unwrap_or_default();
        assert_eq!(winners.len(), 1, "key {k}: {} inserts won ({winners:?})", winners.len());
        assert_eq!(b.get::<KvValue>(&key!["insert", k]).unwrap().value, Some(KvValue::U64(winners[0])));
    }
}

#[test]
fn an_absence_check_holds_on_an_expired_entry_that_is_still_stored() {
    let clock = Arc::new(stampkv::ManualClock::new(1_700_000_000_000));
    let options =
        EtcdOptions::new(cluster().endpoints()).with_prefix(&fresh_prefix()).with_clock(clock.clone());
    let kv = Kv::with_store(EtcdStore::open(options).unwrap(), Limits::default());
    let soon = stampkv::SetOptions { expire_in: Some(Duration::from_secs(10)) };
    kv.set_with(&key!["lease"], &Value::from(1.0), soon).unwrap();
    assert!(!kv
        .atomic()
        .check(&key!["lease"], None)
        .set(&key!["lease"], &Value::from(2.0))
        .commit()
        .unwrap()
        .ok());
    // Expired (the sweeper runs on the same clock, but at most once a second).
    clock.advance(11_000);
    let taken =
        kv.atomic().check(&key!["lease"], None).set(&key!["lease"], &Value::from(3.0)).commit().unwrap();
    assert!(taken.ok(), "an expired entry failed an absence check");
    assert_eq!(kv.get::<Value>(&key!["lease"]).unwrap().value, Some(Value::from(3.0)));
}
