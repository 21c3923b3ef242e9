//! The queue: delivery, delays, retries on the backoff schedule, dead letters, atomic
//! enqueues, ordering, concurrency, persistence across reopen and crashes, limits.

use crate::common::{self, for_each_store};
use parking_lot::Mutex;
use stampkv::engine::fs::{CrashPolicy, MemFs};
use stampkv::engine::Options;
use stampkv::{key, EnqueueOptions, Kv, KvOptions, KvValue, ListenOptions, ManualClock, QueueMessage};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn clocked(clock: &Arc<ManualClock>) -> KvOptions {
    let mut engine = Options::default();
    engine.clock = clock.clone();
    KvOptions::with_engine(engine)
}

fn fast() -> ListenOptions {
    ListenOptions { workers: 2, max_idle_wait: Duration::from_millis(5), ..ListenOptions::default() }
}

fn id_of(message: &QueueMessage) -> u64 {
    match message.value {
        KvValue::U64(n) => n,
        ref other => panic!("unexpected payload {other:?}"),
    }
}

/// Waits until `done` holds, failing after `seconds`.
fn wait_until(seconds: u64, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

for_each_store! {
    /// Number of messages still stored in the queue.
    fn queued(kv: &TestKv) -> usize {
        common::count_raw(kv, &[0xFF, b'q'], &[0xFF, b'q', 0xFF])
    }

    #[test]
    fn a_message_is_delivered_and_removed() {
        let kv = open_kv(KvOptions::default());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let _listener = kv
            .listen_queue(fast(), move |m: QueueMessage| {
                sink.lock().push((id_of(&m), m.attempt));
                Ok::<_, String>(())
            })
            .unwrap();
        let versionstamp = kv.enqueue(&KvValue::U64(7), EnqueueOptions::default()).unwrap();
        assert!(versionstamp.sequence() > 0);
        wait_until(10, "delivery", || !seen.lock().is_empty());
        assert_eq!(*seen.lock(), vec![(7, 1)]);
        wait_until(10, "removal", || queued(&kv) == 0);
        // Queue records never show up in lists.
        assert_eq!(
            kv.list::<KvValue>(&stampkv::Selector::prefix(key![]), &Default::default()).unwrap().count(),
            0
        );
    }

    #[test]
    fn delayed_messages_wait_for_their_deadline() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let kv = open_kv(clocked(&clock));
        let delivered_at = Arc::new(Mutex::new(None));
        let (sink, handler_clock) = (delivered_at.clone(), clock.clone());
        let _listener = kv
            .listen_queue(fast(), move |_| {
                *sink.lock() = Some(stampkv::engine::Clock::now_ms(&*handler_clock));
                Ok::<_, String>(())
            })
            .unwrap();
        kv.enqueue(
            &KvValue::U64(1),
            EnqueueOptions { delay: Duration::from_millis(5_000), ..Default::default() },
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        clock.advance(4_999);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(*delivered_at.lock(), None, "delivered before its deadline");
        clock.advance(1);
        wait_until(10, "delivery at the deadline", || delivered_at.lock().is_some());
        assert_eq!(*delivered_at.lock(), Some(1_005_000));
    }

    #[test]
    fn failures_are_retried_on_the_schedule_then_dead_lettered_once() {
        let clock = Arc::new(ManualClock::new(0));
        let kv = open_kv(clocked(&clock));
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let (sink, handler_clock) = (attempts.clone(), clock.clone());
        let _listener = kv
            .listen_queue(fast(), move |m: QueueMessage| {
                sink.lock().push((m.attempt, stampkv::engine::Clock::now_ms(&*handler_clock)));
                Err("handler failed")
            })
            .unwrap();
        let dead = [key!["failed", "a"], key!["failed", "b"]];
        let options = EnqueueOptions {
            keys_if_undelivered: dead.to_vec(),
            backoff_schedule: Some(vec![Duration::from_millis(100), Duration::from_millis(200)]),
            ..Default::default()
        };
        kv.enqueue(&KvValue::U64(42), options).unwrap();
        wait_until(10, "first attempt", || attempts.lock().len() == 1);
        // The retry is not due before now + 100 ms.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(attempts.lock().len(), 1);
        clock.advance(100);
        wait_until(10, "second attempt", || attempts.lock().len() == 2);
        clock.advance(199);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(attempts.lock().len(), 2, "retried before the second interval");
        clock.advance(1);
        wait_until(10, "third attempt", || attempts.lock().len() == 3);
        wait_until(10, "dead letters", || dead.iter().all(|k| kv.get::<KvValue>(k).unwrap().value.is_some()));
        assert_eq!(*attempts.lock(), vec![(1, 0), (2, 100), (3, 300)]);
        let letters: Vec<_> = dead.iter().map(|k| kv.get::<KvValue>(k).unwrap()).collect();
        assert!(letters.iter().all(|e| e.value == Some(KvValue::U64(42))));
        assert_eq!(letters[0].versionstamp, letters[1].versionstamp, "one commit wrote every dead letter");
        wait_until(10, "removal", || queued(&kv) == 0);
        clock.advance(1_000_000);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(attempts.lock().len(), 3, "no delivery after the dead letter");
    }

    #[test]
    fn an_empty_schedule_means_no_retry_and_a_panic_counts_as_failure() {
        let kv = open_kv(KvOptions::default());
        let calls = Arc::new(AtomicU64::new(0));
        let counter = calls.clone();
        let _listener = kv
            .listen_queue(fast(), move |_| -> Result<(), String> {
                counter.fetch_add(1, Ordering::SeqCst);
                panic!("handler panicked");
            })
            .unwrap();
        let options = EnqueueOptions {
            keys_if_undelivered: vec![key!["dlq"]],
            backoff_schedule: Some(vec![]),
            ..Default::default()
        };
        kv.enqueue(&KvValue::Bytes(b"payload".to_vec()), options).unwrap();
        wait_until(10, "dead letter", || kv.get::<KvValue>(&key!["dlq"]).unwrap().value.is_some());
        assert_eq!(kv.get::<KvValue>(&key!["dlq"]).unwrap().value, Some(KvValue::Bytes(b"payload".to_vec())));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn an_enqueue_inside_an_atomic_operation_commits_with_it_or_not_at_all() {
        let kv = open_kv(KvOptions::default());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let _listener = kv
            .listen_queue(fast(), move |m: QueueMessage| {
                sink.lock().push(id_of(&m));
                Ok::<_, String>(())
            })
            .unwrap();
        kv.set(&key!["guard"], &KvValue::U64(0)).unwrap();
        let failed = kv
            .atomic()
            .check(&key!["guard"], None)
            .enqueue(&KvValue::U64(1), EnqueueOptions::default())
            .commit()
            .unwrap();
        assert!(!failed.ok());
        let ok = kv
            .atomic()
            .set(&key!["side"], &KvValue::U64(5))
            .enqueue(&KvValue::U64(2), EnqueueOptions::default())
            .enqueue(&KvValue::U64(3), EnqueueOptions::default())
            .commit()
            .unwrap();
        assert!(ok.ok());
        wait_until(10, "deliveries", || seen.lock().len() == 2);
        std::thread::sleep(Duration::from_millis(50));
        let mut got = seen.lock().clone();
        got.sort();
        assert_eq!(got, vec![2, 3], "the failed commit enqueued nothing");
    }

    #[test]
    fn messages_with_the_same_deadline_come_out_in_enqueue_order() {
        let clock = Arc::new(ManualClock::new(10_000));
        let kv = open_kv(clocked(&clock));
        for id in 0..30 {
            kv.enqueue(&KvValue::U64(id), EnqueueOptions::default()).unwrap();
        }
        let mut op = kv.atomic();
        for id in 30..40 {
            op = op.enqueue(&KvValue::U64(id), EnqueueOptions::default());
        }
        op.commit().unwrap();
        // An earlier deadline goes first whatever the enqueue order.
        clock.set(9_000);
        kv.enqueue(&KvValue::U64(99), EnqueueOptions::default()).unwrap();
        clock.set(10_000);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let one_worker = ListenOptions { workers: 1, ..fast() };
        let _listener = kv
            .listen_queue(one_worker, move |m: QueueMessage| {
                sink.lock().push(id_of(&m));
                Ok::<_, String>(())
            })
            .unwrap();
        wait_until(10, "all deliveries", || seen.lock().len() == 41);
        let mut expected = vec![99];
        expected.extend(0..40);
        assert_eq!(*seen.lock(), expected);
    }

    #[test]
    fn several_listeners_and_producers_handle_every_message_exactly_once() {
        let kv = open_kv(KvOptions::default());
        let counts: Arc<Mutex<HashMap<u64, u32>>> = Arc::default();
        let listeners: Vec<_> = (0..3)
            .map(|_| {
                let sink = counts.clone();
                kv.listen_queue(fast(), move |m: QueueMessage| {
                    *sink.lock().entry(id_of(&m)).or_default() += 1;
                    Ok::<_, String>(())
                })
                .unwrap()
            })
            .collect();
        let producers: Vec<_> = (0..4u64)
            .map(|p| {
                let kv = kv.clone();
                std::thread::spawn(move || {
                    for i in 0..250 {
                        kv.enqueue(&KvValue::U64(p * 1_000 + i), EnqueueOptions::default()).unwrap();
                    }
                })
            })
            .collect();
        for producer in producers {
            producer.join().unwrap();
        }
        wait_until(30, "every message", || counts.lock().len() == 1_000);
        wait_until(10, "the queue to drain", || queued(&kv) == 0);
        assert!(counts.lock().values().all(|c| *c == 1), "a message was delivered twice");
        for listener in listeners {
            listener.stop();
        }
    }

    #[test]
    fn a_handler_past_its_visibility_timeout_loses_the_message_to_another_worker() {
        let kv = open_kv(KvOptions::default());
        let deliveries = Arc::new(AtomicU64::new(0));
        let counter = deliveries.clone();
        let short = ListenOptions {
            workers: 2,
            visibility_timeout: Duration::from_millis(100),
            max_idle_wait: Duration::from_millis(5),
        };
        let _listener = kv
            .listen_queue(short, move |m: QueueMessage| {
                if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                    std::thread::sleep(Duration::from_millis(400));
                }
                assert!(m.attempt >= 1);
                Ok::<_, String>(())
            })
            .unwrap();
        kv.enqueue(&KvValue::U64(1), EnqueueOptions::default()).unwrap();
        wait_until(10, "a second delivery", || deliveries.load(Ordering::SeqCst) >= 2);
        wait_until(10, "removal", || queued(&kv) == 0);
    }

    #[test]
    fn closing_lets_handlers_finish_and_stops_listening() {
        let kv = open_kv(KvOptions::default());
        let finished = Arc::new(AtomicU64::new(0));
        let flag = finished.clone();
        let listener = kv
            .listen_queue(fast(), move |_| {
                std::thread::sleep(Duration::from_millis(200));
                flag.store(1, Ordering::SeqCst);
                Ok::<_, String>(())
            })
            .unwrap();
        kv.enqueue(&KvValue::U64(1), EnqueueOptions::default()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let handle = kv.clone();
        kv.close().unwrap();
        assert_eq!(finished.load(Ordering::SeqCst), 1, "close waited for the running handler");
        listener.wait();
        let err = handle.listen_queue(fast(), |_| Ok::<_, String>(())).err().unwrap();
        assert_eq!(err.to_string(), "Queue already closed");
    }

    #[test]
    fn enqueue_options_are_validated_with_deno_s_messages() {
        let kv = open_kv(KvOptions::default());
        let cases: Vec<(EnqueueOptions, String)> = vec![
            (
                EnqueueOptions { delay: Duration::from_millis(2_592_000_001), ..Default::default() },
                "Delay cannot be greater than 30 days: received 2592000001".into(),
            ),
            (
                EnqueueOptions {
                    backoff_schedule: Some(vec![Duration::from_millis(1); 6]),
                    ..Default::default()
                },
                "Invalid backoffSchedule, max 5 intervals allowed".into(),
            ),
            (
                EnqueueOptions {
                    backoff_schedule: Some(vec![Duration::from_millis(1), Duration::from_millis(3_600_001)]),
                    ..Default::default()
                },
                "Invalid backoffSchedule, interval at index 1 is invalid".into(),
            ),
        ];
        for (options, message) in cases {
            assert_eq!(kv.enqueue(&KvValue::U64(1), options).unwrap_err().to_string(), message);
        }
        let big = KvValue::Bytes(vec![0; 65_537]);
        assert_eq!(
            kv.enqueue(&big, EnqueueOptions::default()).unwrap_err().to_string(),
            "enqueue payload too large (max 65536 bytes)"
        );
        // Thirty days exactly is fine; enqueues count towards the mutation limit.
        kv.enqueue(
            &KvValue::U64(1),
            EnqueueOptions { delay: Duration::from_millis(2_592_000_000), ..Default::default() },
        )
        .unwrap();
        let mut op = kv.atomic();
        for i in 0..1_000 {
            op = op.delete(&key!["x", i]);
        }
        let err = op.enqueue(&KvValue::U64(1), EnqueueOptions::default()).commit().unwrap_err();
        assert_eq!(err.to_string(), "Too many mutations (max 1000)");
    }
}

// On the engine only: durability, files, maintenance.

#[test]
fn messages_survive_reopen_and_delayed_ones_keep_their_deadlines() {
    let clock = Arc::new(ManualClock::new(50_000));
    let fs = MemFs::new();
    let open = |fs: &MemFs| Kv::open_with_fs(Arc::new(fs.clone()), "/q", clocked(&clock)).unwrap();
    let kv = open(&fs);
    kv.enqueue(&KvValue::U64(1), EnqueueOptions::default()).unwrap();
    kv.enqueue(
        &KvValue::U64(2),
        EnqueueOptions { delay: Duration::from_millis(10_000), ..Default::default() },
    )
    .unwrap();
    kv.close().unwrap();
    let kv = open(&fs);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let _listener = kv
        .listen_queue(fast(), move |m: QueueMessage| {
            sink.lock().push(id_of(&m));
            Ok::<_, String>(())
        })
        .unwrap();
    wait_until(10, "the immediate message", || seen.lock().len() == 1);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(*seen.lock(), vec![1], "the delayed message kept its deadline across the reopen");
    clock.advance(10_000);
    wait_until(10, "the delayed message", || seen.lock().len() == 2);
}

#[test]
fn a_message_in_flight_at_a_crash_is_delivered_again_after_reopen() {
    let fs = MemFs::new();
    let kv = Kv::open_with_fs(Arc::new(fs.clone()), "/c", KvOptions::default()).unwrap();
    kv.enqueue(&KvValue::U64(5), EnqueueOptions::default()).unwrap();
    let started = Arc::new(AtomicU64::new(0));
    let flag = started.clone();
    let _listener = kv
        .listen_queue(fast(), move |_| {
            flag.store(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(300));
            Ok::<_, String>(())
        })
        .unwrap();
    wait_until(10, "the handler to start", || started.load(Ordering::SeqCst) == 1);
    // The power fails while the handler runs.
    let crashed = fs.crash_clone(CrashPolicy::DropAll);
    let kv2 = Kv::open_with_fs(Arc::new(crashed), "/c", KvOptions::default()).unwrap();
    let again = Arc::new(Mutex::new(Vec::new()));
    let sink = again.clone();
    let _second = kv2
        .listen_queue(fast(), move |m: QueueMessage| {
            sink.lock().push(id_of(&m));
            Ok::<_, String>(())
        })
        .unwrap();
    wait_until(10, "redelivery", || again.lock().len() == 1);
    assert_eq!(*again.lock(), vec![5]);
}
