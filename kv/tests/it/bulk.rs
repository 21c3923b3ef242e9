//! Bulk snapshots and restores: a whole database out and back in with its versionstamps,
//! expiry times and queued messages, as one unit, and the restores that must be refused.

use parking_lot::Mutex;
use stampkv::engine::Options;
use stampkv::{
    key, BulkEntry, EnqueueOptions, Key, KeyPart, Kv, KvBigInt, KvError, KvOptions, KvValue, ListenOptions,
    ManualClock, QueuedMessage, SetOptions, Value, Versionstamp,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NOW_MS: u64 = 1_700_000_000_000;

fn clocked(clock: &Arc<ManualClock>) -> KvOptions {
    let mut engine = Options::default();
    engine.clock = clock.clone();
    KvOptions::with_engine(engine)
}

fn sample(kv: &Kv) {
    kv.set(&key!["users", 1], &Value::from("ada")).unwrap();
    kv.set(&key![&b"\x00raw"[..]], &KvValue::Bytes(vec![0, 1, 2])).unwrap();
    kv.set(&key![KvBigInt::from(-5i64), 1.5, true], &KvValue::U64(7)).unwrap();
    kv.set_with(&key!["temp"], &Value::from(1.0), SetOptions { expire_in: Some(Duration::from_secs(60)) })
        .unwrap();
    kv.set_with(&key!["gone"], &Value::from(2.0), SetOptions { expire_in: Some(Duration::from_millis(1)) })
        .unwrap();
    kv.atomic()
        .set(&key!["users", 2], &Value::from("grace"))
        .set(&key!["users", 3], &Value::Null)
        .commit()
        .unwrap();
    kv.delete(&key!["users", 3]).unwrap();
    kv.enqueue(
        &Value::from("later"),
        EnqueueOptions { delay: Duration::from_secs(30), ..Default::default() },
    )
    .unwrap();
    kv.enqueue(
        &Value::from("first"),
        EnqueueOptions {
            delay: Duration::from_secs(5),
            keys_if_undelivered: vec![key!["dead", 1], Key::default()],
            backoff_schedule: Some(vec![Duration::from_millis(10)]),
        },
    )
    .unwrap();
}

fn contents(kv: &Kv) -> (Vec<BulkEntry>, Vec<QueuedMessage>, Versionstamp) {
    let snapshot = kv.bulk_snapshot();
    let entries = snapshot.entries().collect::<Result<Vec<_>, _>>().unwrap();
    let messages = snapshot.messages().collect::<Result<Vec<_>, _>>().unwrap();
    (entries, messages, snapshot.last_versionstamp())
}

fn restore_all(into: &Kv, entries: &[BulkEntry], messages: &[QueuedMessage], last: Option<Versionstamp>) {
    let mut restore = into.restore().unwrap();
    for e in entries {
        restore.entry(&e.key, &e.value, Some(e.versionstamp), e.expires_at_ms).unwrap();
    }
    for m in messages {
        restore.message(m).unwrap();
    }
    let summary = restore.finish(last).unwrap();
    assert_eq!(summary.entries, entries.len() as u64);
    assert_eq!(summary.messages, messages.len() as u64);
}

#[test]
fn a_snapshot_restored_into_a_new_database_reads_back_identically() {
    let clock = Arc::new(ManualClock::new(NOW_MS));
    let source = Kv::open_in_memory(clocked(&clock)).unwrap();
    sample(&source);
    clock.advance(2);
    let (entries, messages, last) = contents(&source);
    assert_eq!(entries.len(), 5, "{entries:?}");
    assert!(entries.iter().all(|e| e.key != key!["gone"] && e.key != key!["users", 3]));
    let temp = entries.iter().find(|e| e.key == key!["temp"]).unwrap();
    assert!(temp.expires_at_ms.is_some_and(|at| at > NOW_MS));
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].value, KvValue::from_value(&Value::from("first")).unwrap());
    assert_eq!(messages[0].keys_if_undelivered, vec![key!["dead", 1], Key::default()]);
    assert_eq!(messages[0].backoff_ms, vec![10]);
    assert_eq!(messages[1].backoff_ms, stampkv::DEFAULT_BACKOFF_MS.to_vec());
    assert!(messages[0].deadline_ms < messages[1].deadline_ms);

    let target = Kv::open_in_memory(clocked(&clock)).unwrap();
    restore_all(&target, &entries, &messages, Some(last));
    assert_eq!(contents(&target), (entries.clone(), messages.clone(), last));
    let got = target.get::<Value>(&key!["users", 1]).unwrap();
    assert_eq!(got.value, Some(Value::from("ada")));
    assert_eq!(
        got.versionstamp,
        Some(entries.iter().find(|e| e.key == key!["users", 1]).unwrap().versionstamp)
    );
    // Later commits get newer versionstamps than anything restored.
    let next = target.set(&key!["after"], &Value::Null).unwrap();
    assert!(next > last);
    // Expiry still applies on the engine's clock.
    clock.advance(61_000);
    assert!(!target.get::<Value>(&key!["temp"]).unwrap().exists());
}

#[test]
fn restored_messages_are_delivered_and_dead_lettered_like_enqueued_ones() {
    let clock = Arc::new(ManualClock::new(NOW_MS));
    let kv = Kv::open_in_memory(clocked(&clock)).unwrap();
    let delivered = Arc::new(Mutex::new(Vec::new()));
    let seen = delivered.clone();
    // A listener already running learns about the restored messages.
    let options = ListenOptions { workers: 1, max_idle_wait: Duration::from_millis(5), ..Default::default() };
    let _listener = kv
        .listen_queue(options, move |message| {
            let text = message.value_as::<Value>().unwrap();
            seen.lock().push(text.clone());
            if text == Value::from("fails") {
                Err("no")
            } else {
                Ok(())
            }
        })
        .unwrap();
    let message = |deadline_ms, text: &str| QueuedMessage {
        deadline_ms,
        attempts: 0,
        value: KvValue::from_value(&Value::from(text)).unwrap(),
        backoff_ms: vec![],
        keys_if_undelivered: vec![key!["dead"]],
    };
    let mut restore = kv.restore().unwrap();
    restore.message(&message(NOW_MS - 10, "fails")).unwrap();
    restore.message(&message(NOW_MS, "b")).unwrap();
    restore.message(&message(NOW_MS, "c")).unwrap();
    restore.message(&message(NOW_MS + 1000, "d")).unwrap();
    restore.finish(None).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while delivered.lock().len() < 3 {
        assert!(Instant::now() < deadline, "not delivered: {:?}", delivered.lock());
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(*delivered.lock(), vec![Value::from("fails"), Value::from("b"), Value::from("c")]);
    clock.advance(2000);
    while delivered.lock().len() < 4 {
        assert!(Instant::now() < deadline, "not delivered: {:?}", delivered.lock());
        std::thread::sleep(Duration::from_millis(5));
    }
    while !kv.get::<Value>(&key!["dead"]).unwrap().exists() {
        assert!(Instant::now() < deadline, "the failed message was not dead-lettered");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(kv.get::<Value>(&key!["dead"]).unwrap().value, Some(Value::from("fails")));
}

#[test]
fn entries_without_a_versionstamp_share_the_restores_own() {
    let kv = Kv::open_in_memory(KvOptions::default()).unwrap();
    kv.set(&key!["z"], &Value::Null).unwrap();
    kv.set(&key!["z"], &Value::Bool(true)).unwrap();
    let mut restore = kv.restore().unwrap();
    let own = restore.versionstamp();
    assert_eq!(own, Versionstamp::from_sequence(3));
    restore.entry(&key!["a"], &KvValue::U64(1), None, None).unwrap();
    restore.entry(&key!["b"], &KvValue::U64(2), None, None).unwrap();
    let summary = restore.finish(None).unwrap();
    assert_eq!(summary.last_versionstamp, own);
    for k in [key!["a"], key!["b"]] {
        assert_eq!(kv.get::<KvValue>(&k).unwrap().versionstamp, Some(own));
    }
    assert_eq!(kv.get::<Value>(&key!["z"]).unwrap().value, Some(Value::Bool(true)));
    assert!(kv.set(&key!["c"], &Value::Null).unwrap() > own);
}

#[test]
fn kept_versionstamps_must_be_newer_than_the_last_commit_of_a_database_with_data() {
    let dir = tempfile::tempdir().unwrap();
    let kv = Kv::open(dir.path(), KvOptions::default()).unwrap();
    kv.set(&key!["existing"], &Value::Null).unwrap();
    kv.set(&key!["existing"], &Value::Bool(false)).unwrap();
    let mut restore = kv.restore().unwrap();
    restore.entry(&key!["a"], &KvValue::U64(1), Some(Versionstamp::from_sequence(2)), None).unwrap();
    match restore.finish(None) {
        Err(KvError::InvalidRestore(text)) => assert!(text.contains("not newer"), "{text}"),
        other => panic!("{other:?}"),
    }
    assert!(!kv.get::<KvValue>(&key!["a"]).unwrap().exists());
    let mut restore = kv.restore().unwrap();
    restore.entry(&key!["a"], &KvValue::U64(1), Some(Versionstamp::from_sequence(9)), None).unwrap();
    restore.finish(None).unwrap();
    assert_eq!(kv.get::<KvValue>(&key!["a"]).unwrap().versionstamp, Some(Versionstamp::from_sequence(9)));
    assert_eq!(kv.engine().last_sequence(), 9);
}

#[test]
fn malformed_restores_are_refused_and_leave_the_database_unchanged() {
    let kv = Kv::open_in_memory(KvOptions::default()).unwrap();
    let invalid = |result: Result<(), KvError>, expect: &str| match result {
        Err(KvError::InvalidRestore(text)) => assert!(text.contains(expect), "{text} lacks {expect}"),
        other => panic!("{other:?}, expected {expect}"),
    };
    let message = QueuedMessage {
        deadline_ms: 100,
        attempts: 0,
        value: KvValue::U64(1),
        backoff_ms: vec![],
        keys_if_undelivered: vec![],
    };
    {
        let mut restore = kv.restore().unwrap();
        restore.entry(&key!["b"], &KvValue::U64(1), None, None).unwrap();
        invalid(restore.entry(&key!["a"], &KvValue::U64(1), None, None), "ascending");
        invalid(restore.entry(&key!["b"], &KvValue::U64(1), None, None), "ascending");
        let odd = Versionstamp([0, 0, 0, 0, 0, 0, 0, 5, 0, 1]);
        invalid(restore.entry(&key!["c"], &KvValue::U64(1), Some(odd), None), "0000");
        invalid(restore.entry(&key!["c"], &KvValue::U64(1), Some(Versionstamp([0; 10])), None), "never");
        assert!(matches!(
            restore.entry_encoded(&[0x02, b'x'], &KvValue::U64(1), None, None),
            Err(KvError::Key(_))
        ));
        assert!(matches!(
            restore.entry_encoded(&[0xFF, b'q'], &KvValue::U64(1), None, None),
            Err(KvError::Key(_))
        ));
        restore.message(&message).unwrap();
        invalid(restore.message(&QueuedMessage { deadline_ms: 99, ..message.clone() }), "delivery order");
        invalid(restore.entry(&key!["d"], &KvValue::U64(1), None, None), "before every queued message");
        // Dropped: nothing of it is visible.
    }
    assert!(kv.bulk_snapshot().is_empty().unwrap());
    assert_eq!(kv.engine().last_sequence(), 0);
}

#[test]
fn a_restore_fails_if_a_commit_happens_meanwhile() {
    let kv = Kv::open_in_memory(KvOptions::default()).unwrap();
    let mut restore = kv.restore().unwrap();
    restore.entry(&key!["a"], &KvValue::U64(1), None, None).unwrap();
    kv.set(&key!["b"], &Value::Null).unwrap();
    match restore.finish(None) {
        Err(KvError::InvalidRestore(text)) => assert!(text.contains("changed"), "{text}"),
        other => panic!("{other:?}"),
    }
    assert!(!kv.get::<KvValue>(&key!["a"]).unwrap().exists());
}

#[test]
fn watches_see_restored_entries() {
    let kv = Kv::open_in_memory(KvOptions::default()).unwrap();
    let mut watch = kv.watch(&[key!["w"]]).unwrap();
    let first = watch.next_timeout(Duration::from_secs(5)).unwrap().unwrap();
    assert!(!first[0].exists());
    let mut restore = kv.restore().unwrap();
    restore.entry(&key!["w"], &KvValue::U64(4), Some(Versionstamp::from_sequence(40)), None).unwrap();
    restore.finish(None).unwrap();
    let next = watch.next_timeout(Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!(next[0].value, Some(KvValue::U64(4)));
    assert_eq!(next[0].versionstamp, Some(Versionstamp::from_sequence(40)));
}

#[test]
fn every_key_part_kind_survives_the_round_trip() {
    let kv = Kv::open_in_memory(KvOptions::default()).unwrap();
    let keys: Vec<Key> = vec![
        Key::default(),
        key![&b""[..]],
        key![&b"\x00\xff"[..], "s\u{0}"],
        key![""],
        key!["\u{1F995}"],
        key![KvBigInt::from(-300i64)],
        key![KvBigInt::from(0i64)],
        Key(vec![KeyPart::BigInt(KvBigInt::from_sign_magnitude(false, &[0xAB; 40]))]),
        key![f64::NEG_INFINITY],
        key![-0.0],
        key![0.0],
        key![f64::NAN],
        key![false],
        key![true, 1.0],
    ];
    let mut sorted = keys.clone();
    sorted.sort();
    let mut restore = kv.restore().unwrap();
    for (i, k) in sorted.iter().enumerate() {
        restore
            .entry(k, &KvValue::U64(i as u64), Some(Versionstamp::from_sequence(100 - i as u64)), None)
            .unwrap();
    }
    restore.finish(None).unwrap();
    let (entries, _, _) = contents(&kv);
    let read: Vec<(Vec<u8>, u64)> =
        entries.iter().map(|e| (e.key.encode().unwrap(), e.versionstamp.sequence())).collect();
    let expected: Vec<(Vec<u8>, u64)> =
        sorted.iter().enumerate().map(|(i, k)| (k.encode().unwrap(), 100 - i as u64)).collect();
    assert_eq!(read, expected);
}
