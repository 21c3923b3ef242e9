//! Enqueue edge cases where stampkv once disagreed with Deno: which `keys_if_undelivered`
//! are accepted and written when a message is dead-lettered, the error for a key that
//! cannot be encoded, and the order in which an enqueue's errors come among a commit's
//! other errors. Every expected outcome and error text below was checked against Deno 2.9.6
//! (`deno run --unstable-kv` on `Deno.openKv(":memory:")`); the comments quote what Deno
//! printed.

use crate::common::{self, for_each_store};
use stampkv::engine::fs::MemFs;
use stampkv::store::Store;
use stampkv::value::v8;
use stampkv::{
    key, AtomicOperation, EnqueueOptions, Key, KeyPart, Kv, KvBigInt, KvError, KvOptions, KvValue,
    ListOptions, ListenOptions, QueueMessage, Selector, Value,
};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn fast() -> ListenOptions {
    ListenOptions { workers: 2, max_idle_wait: Duration::from_millis(5), ..ListenOptions::default() }
}

/// Waits until `done` holds, failing after `seconds`.
fn wait_until(seconds: u64, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A bigint key part Deno cannot encode (more than 255 bytes of magnitude): `2n ** 2100n`.
fn huge_bigint() -> KeyPart {
    let mut magnitude = vec![0u8; 263];
    magnitude[0] = 0x10; // 2^2100 = 0x10 followed by 262 zero bytes
    KeyPart::from(KvBigInt::from_sign_magnitude(false, &magnitude))
}

/// `[new Uint8Array(2100).fill(1)]`: 2103 bytes encoded, over the 2048-byte write limit.
fn oversized_key() -> Key {
    key![vec![1u8; 2100]]
}

fn no_retry(keys: Vec<Key>) -> EnqueueOptions {
    EnqueueOptions { keys_if_undelivered: keys, backoff_schedule: Some(vec![]), ..Default::default() }
}

fn number(n: f64) -> KvValue {
    KvValue::from_value(&Value::Number(n)).unwrap()
}

/// `(error text, JavaScript class)` of a commit that must fail.
fn commit_error<S: stampkv::store::Store>(op: AtomicOperation<'_, S>) -> (String, &'static str) {
    let error = op.commit().expect_err("the commit must fail");
    (error.to_string(), error.js_class())
}

fn type_error(text: &str) -> (String, &'static str) {
    (text.to_owned(), "TypeError")
}

// ---------------------------------------------------------------------------------------
// 1. Empty and oversized keys in keys_if_undelivered

// ---------------------------------------------------------------------------------------
// 2. A key that cannot be encoded

// ---------------------------------------------------------------------------------------
// 3. Where an enqueue's errors come in a commit

/// The ingredients of the order probe, each added to an operation the way the Deno probe
/// added them.
#[derive(Clone, Copy, Debug)]
enum Part {
    /// `enqueue(1, { delay: 2592000001 })`
    Delay,
    /// `enqueue(1, { backoffSchedule: [1, 1, 1, 1, 1, 1] })`
    Backoff6,
    /// `enqueue(1, { backoffSchedule: [1, 3600001] })`
    BackoffBad,
    /// `enqueue("x".repeat(70000))`
    Payload,
    /// `enqueue(1, { keysIfUndelivered: [[2n ** 2100n]] })`
    DeadKey,
    /// 101 `check({ key: ["c", i], versionstamp: null })`
    Checks101,
    /// 1000 `set(["m", i], 1)`
    Sets1000,
    /// `check({ key: ["c"], versionstamp: "zz" })`
    BadCheck,
    /// `set([Uint8Array(2100).fill(1)], 1)`
    KeyTooLarge,
    /// `set([], 1)`
    EmptyKey,
    /// `set(["v"], new Uint8Array(65537))`
    ValueTooLarge,
    /// 13 `set(["big", i], new Uint8Array(65536))`
    TotalSize,
    /// 41 `set([Uint8Array(2000).fill(1), i], 1)`
    TotalKeys,
    /// `set([2n ** 2100n], 1)`
    MutationKey,
    /// `set(["f"], () => 1)`: a value that cannot be serialized
    Unserializable,
    /// `enqueue(() => 1)`: a payload that cannot be serialized
    UnserializableEnqueue,
}

/// Number of messages still stored in the queue.
fn queued<S: Store>(kv: &Kv<S>) -> usize {
    common::count_raw(kv, &[0xFF, b'q'], &[0xFF, b'q', 0xFF])
}

/// Fails every delivery, so that messages with an empty schedule are dead-lettered at once.
fn fail_everything<S: Store>(kv: &Kv<S>) -> stampkv::QueueListener<S> {
    kv.listen_queue(fast(), |_: QueueMessage| Err::<(), _>("fail")).unwrap()
}

/// `(key, value)` of every entry in `selector`.
fn listed<S: Store>(kv: &Kv<S>, selector: &Selector) -> Vec<(Key, KvValue)> {
    kv.list::<KvValue>(selector, &ListOptions::default())
        .unwrap()
        .map(|e| e.map(|e| (e.key, e.value)).unwrap())
        .collect()
}

for_each_store! {
    fn open() -> TestKv {
        open_kv(KvOptions::default())
    }




    #[test]
    fn dead_letter_keys_are_not_limited_in_size_or_number_nor_counted_in_the_totals() {
        // Deno 2.9.6:
        //   kv.enqueue(1, { keysIfUndelivered: 11 keys })                                   -> ok
        //   kv.enqueue(1, { keysIfUndelivered: 50 keys [Uint8Array(2100).fill(1), i] })      -> ok
        //   kv.enqueue(1, { keysIfUndelivered: [[Uint8Array(900000).fill(1)]] })              -> ok
        // (50 such keys are 105,000 bytes: more than the 81,920-byte total key size.)
        let kv = open();
        let eleven: Vec<Key> = (0..11).map(|i| key!["k", i]).collect();
        kv.enqueue(&number(1.0), EnqueueOptions { keys_if_undelivered: eleven, ..Default::default() }).unwrap();
        let fifty: Vec<Key> = (0..50).map(|i| key![vec![1u8; 2100], i]).collect();
        kv.enqueue(&number(1.0), no_retry(fifty.clone())).unwrap();
        kv.enqueue(&number(3.0), no_retry(vec![key![vec![1u8; 900_000]]])).unwrap();
        let listener = fail_everything(&kv);
        wait_until(10, "the dead letters", || queued(&kv) == 1);
        listener.stop();
        let written = listed(&kv, &Selector::prefix(key![]));
        assert_eq!(written.len(), 51);
        assert_eq!(written[..50].iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(), fifty);
        assert_eq!(written[50], (key![vec![1u8; 900_000]], number(3.0)));
    }

    #[test]
    fn dead_letters_too_large_for_one_commit_are_all_written() {
        // Deno writes every keysIfUndelivered key, however many. Here 1030 copies of a 64 KiB
        // payload (about 67.5 MB) are more than one stampkv commit writes (64 MiB, half the
        // engine's batch limit), so they go in two commits; all are written and the message is
        // removed.
        let kv = open();
        let payload = KvValue::from_value(&Value::from("x".repeat(65_530))).unwrap();
        let keys: Vec<Key> = (0..1030).map(|i| key!["dead", i]).collect();
        kv.enqueue(&payload, no_retry(keys.clone())).unwrap();
        let listener = fail_everything(&kv);
        wait_until(60, "the dead letters", || queued(&kv) == 0);
        listener.stop();
        let entries: Vec<_> = kv
            .list::<KvValue>(&Selector::prefix(key!["dead"]), &ListOptions::default())
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(entries.iter().map(|e| e.key.clone()).collect::<Vec<_>>(), keys);
        assert!(entries.iter().all(|e| e.value == payload));
        let commits: HashSet<_> = entries.iter().map(|e| e.versionstamp).collect();
        // Split only as much as the store's commit size needs: two commits on the engine
        // (64 MiB each), about 1 MiB each on a networked store.
        let max_bytes = stampkv::store::Store::max_commit_bytes(kv.store()).min(64 << 20);
        let needed = (1030 * 65_540usize).div_ceil(max_bytes);
        assert!(
            (needed..=needed + needed / 8 + 1).contains(&commits.len()),
            "written in {} commits, {needed} needed",
            commits.len()
        );
    }

    #[test]
    fn a_dead_letter_key_that_cannot_be_encoded_is_invalid_enqueue() {
        // Deno 2.9.6: kv.enqueue(3, { keysIfUndelivered: [[2n ** 2100n]] }) and
        // kv.atomic().enqueue(3, { keysIfUndelivered: [[2n ** 2100n]] }).commit() ->
        // `TypeError: Invalid enqueue`.
        let kv = open();
        let options = || EnqueueOptions {
            keys_if_undelivered: vec![key!["fine"], Key(vec![huge_bigint()])],
            ..Default::default()
        };
        let error = kv.enqueue(&number(3.0), options()).unwrap_err();
        assert!(matches!(error, KvError::InvalidEnqueueKey(_)), "{error:?}");
        assert_eq!((error.to_string(), error.js_class()), type_error("Invalid enqueue"));
        let source = std::error::Error::source(&error).expect("the key error is the source");
        assert_eq!(source.to_string(), "BigUint requires more than 255 bytes to be represented");
        assert_eq!(
            commit_error(kv.atomic().set(&key!["a"], &number(1.0)).enqueue(&number(3.0), options())),
            type_error("Invalid enqueue")
        );
        assert_eq!(common::last_version(&kv), 0, "nothing was committed");
    }

    fn add<'a>(op: AtomicOperation<'a, TestStore>, part: Part) -> AtomicOperation<'a, TestStore> {
        let one = number(1.0);
        let ms = |ms: u64| Duration::from_millis(ms);
        match part {
            Part::Delay => op.enqueue(&one, EnqueueOptions { delay: ms(2_592_000_001), ..Default::default() }),
            Part::Backoff6 => {
                op.enqueue(&one, EnqueueOptions { backoff_schedule: Some(vec![ms(1); 6]), ..Default::default() })
            }
            Part::BackoffBad => op.enqueue(
                &one,
                EnqueueOptions { backoff_schedule: Some(vec![ms(1), ms(3_600_001)]), ..Default::default() },
            ),
            Part::Payload => op.enqueue(&Value::from("x".repeat(70_000)), EnqueueOptions::default()),
            Part::DeadKey => op.enqueue(
                &one,
                EnqueueOptions { keys_if_undelivered: vec![Key(vec![huge_bigint()])], ..Default::default() },
            ),
            Part::Checks101 => (0..101).fold(op, |op, i| op.check(&key!["c", i], None)),
            Part::Sets1000 => (0..1000).fold(op, |op, i| op.set(&key!["m", i], &one)),
            Part::BadCheck => op.check_hex(&key!["c"], Some("zz")),
            Part::KeyTooLarge => op.set(&oversized_key(), &one),
            Part::EmptyKey => op.set(&Key::new(), &one),
            Part::ValueTooLarge => op.set(&key!["v"], &KvValue::Bytes(vec![0; 65_537])),
            Part::TotalSize => {
                (0..13).fold(op, |op, i| op.set(&key!["big", i], &KvValue::Bytes(vec![0; 65_536])))
            }
            Part::TotalKeys => (0..41).fold(op, |op, i| op.set(&key![vec![1u8; 2000], i], &one)),
            Part::MutationKey => op.set(&Key(vec![huge_bigint()]), &one),
            // A value stampkv cannot serialize either: a `KvU64` nested in an array.
            Part::Unserializable => op.set(&key!["f"], &Value::Array(vec![Value::U64(1)])),
            Part::UnserializableEnqueue => {
                op.enqueue(&Value::Array(vec![Value::U64(1)]), EnqueueOptions::default())
            }
        }
    }

    #[test]
    fn enqueue_errors_come_where_deno_reports_them() {
        use Part::*;
        const DELAY: &str = "Delay cannot be greater than 30 days: received 2592000001";
        const BACKOFF6: &str = "Invalid backoffSchedule, max 5 intervals allowed";
        const BACKOFF_BAD: &str = "Invalid backoffSchedule, interval at index 1 is invalid";
        const PAYLOAD: &str = "enqueue payload too large (max 65536 bytes)";
        const INVALID_ENQUEUE: &str = "Invalid enqueue";
        const CHECKS: &str = "Too many checks (max 100)";
        const MUTATIONS: &str = "Too many mutations (max 1000)";
        const BAD_CHECK: &str = "Invalid check";
        const KEY: &str = "Key too large for write (max 2048 bytes)";
        const EMPTY: &str = "key cannot be empty";
        const VALUE: &str = "Value too large (max 65536 bytes)";
        const KEYS: &str = "Total key size too large (max 81920 bytes)";
        const BIGUINT: &str = "Invalid mutation: BigUint requires more than 255 bytes to be represented";
        // Deno 2.9.6, parts added in this order to one `kv.atomic()` (see `Part`), then
        // `commit()`; every error is a TypeError. "(build)" marks errors thrown by the
        // `enqueue()`/`set()` call itself, the others were thrown by `commit()`.
        let cases: &[(&[Part], &str)] = &[
            (&[Delay], DELAY),            // (build)
            (&[Backoff6], BACKOFF6),      // (build)
            (&[BackoffBad], BACKOFF_BAD), // (build)
            (&[Payload], PAYLOAD),
            (&[DeadKey], INVALID_ENQUEUE),
            (&[TotalKeys], KEYS),
            (&[Checks101, Delay], DELAY),            // (build)
            (&[Delay, Checks101], DELAY),            // (build)
            (&[Checks101, Backoff6], BACKOFF6),      // (build)
            (&[Checks101, BackoffBad], BACKOFF_BAD), // (build)
            (&[Checks101, Payload], CHECKS),
            (&[Checks101, DeadKey], CHECKS),
            (&[Payload, Checks101], CHECKS),
            (&[Sets1000, Delay], DELAY),       // (build)
            (&[Sets1000, Backoff6], BACKOFF6), // (build)
            (&[Sets1000, Payload], MUTATIONS),
            (&[Sets1000, DeadKey], MUTATIONS),
            (&[Sets1000, BackoffBad], BACKOFF_BAD), // (build)
            (&[BadCheck, Delay], DELAY),            // (build)
            (&[Delay, BadCheck], DELAY),            // (build)
            (&[BadCheck, Backoff6], BACKOFF6),      // (build)
            (&[BadCheck, BackoffBad], BACKOFF_BAD), // (build)
            (&[BadCheck, Payload], BAD_CHECK),
            (&[Payload, BadCheck], BAD_CHECK),
            (&[BadCheck, DeadKey], BAD_CHECK),
            (&[DeadKey, BadCheck], BAD_CHECK),
            (&[KeyTooLarge, Delay], DELAY),       // (build)
            (&[KeyTooLarge, Backoff6], BACKOFF6), // (build)
            (&[KeyTooLarge, Payload], KEY),
            (&[Payload, KeyTooLarge], KEY),
            (&[KeyTooLarge, DeadKey], INVALID_ENQUEUE),
            (&[DeadKey, KeyTooLarge], INVALID_ENQUEUE),
            (&[EmptyKey, Payload], EMPTY),
            (&[Payload, EmptyKey], EMPTY),
            (&[EmptyKey, DeadKey], INVALID_ENQUEUE),
            (&[ValueTooLarge, Delay], DELAY), // (build)
            (&[ValueTooLarge, Payload], VALUE),
            (&[Payload, ValueTooLarge], VALUE),
            (&[ValueTooLarge, DeadKey], INVALID_ENQUEUE),
            (&[DeadKey, ValueTooLarge], INVALID_ENQUEUE),
            (&[TotalSize, Delay], DELAY), // (build)
            (&[TotalSize, Payload], PAYLOAD),
            (&[Payload, TotalSize], PAYLOAD),
            (&[TotalSize, DeadKey], INVALID_ENQUEUE),
            (&[DeadKey, TotalSize], INVALID_ENQUEUE),
            (&[TotalKeys, Payload], PAYLOAD),
            (&[Payload, TotalKeys], PAYLOAD),
            (&[TotalKeys, DeadKey], INVALID_ENQUEUE),
            (&[MutationKey, DeadKey], BIGUINT),
            (&[DeadKey, MutationKey], BIGUINT),
            (&[MutationKey, Payload], BIGUINT),
            (&[DeadKey, Payload], INVALID_ENQUEUE),
            (&[Payload, DeadKey], INVALID_ENQUEUE),
            (&[Delay, Backoff6], DELAY),           // (build)
            (&[Backoff6, Delay], BACKOFF6),        // (build)
            (&[Payload, Delay], DELAY),            // (build)
            (&[DeadKey, Delay], DELAY),            // (build)
            (&[Payload, Backoff6], BACKOFF6),      // (build)
            (&[DeadKey, BackoffBad], BACKOFF_BAD), // (build)
        ];
        let kv = open();
        for (parts, expected) in cases {
            let op = parts.iter().fold(kv.atomic(), |op, part| add(op, *part));
            assert_eq!(commit_error(op), type_error(expected), "{parts:?}");
        }
        // Deno 2.9.6: set(["f"], () => 1) then enqueue(1, { delay: 2592000001 }) -> TypeError:
        // ()=>1 could not be cloned. (build); in the other order -> the delay error (build);
        // after enqueue("x".repeat(70000)), the bad dead-letter key or 101 checks -> the clone
        // error; 1000 sets then enqueue(() => 1) -> the clone error. The build-time errors come
        // first, in call order, whatever they are. (stampkv's text for a value it cannot
        // serialize is its own; the order is what is checked.)
        let unserializable = add(kv.atomic(), Unserializable).commit().unwrap_err().to_string();
        for (parts, expected) in [
            (&[Unserializable, Delay][..], unserializable.as_str()),
            (&[Delay, Unserializable], DELAY),
            (&[Unserializable, Backoff6], unserializable.as_str()),
            (&[Payload, Unserializable], unserializable.as_str()),
            (&[DeadKey, Unserializable], unserializable.as_str()),
            (&[Checks101, Unserializable], unserializable.as_str()),
            (&[Sets1000, UnserializableEnqueue], unserializable.as_str()),
        ] {
            let op = parts.iter().fold(kv.atomic(), |op, part| add(op, *part));
            assert_eq!(op.commit().unwrap_err().to_string(), expected, "{parts:?}");
        }
        assert_eq!(common::last_version(&kv), 0, "nothing was committed");
    }

    #[test]
    fn enqueue_payload_sizes_are_measured_as_deno_measures_them() {
        // Deno 2.9.6 (backoffSchedule: []):
        //   kv.enqueue("x".repeat(65530)) -> ok; "x".repeat(65531) -> TypeError: enqueue payload too large (max 65536 bytes)
        //   kv.enqueue(new Uint8Array(65523)) -> ok; new Uint8Array(65524) -> the same error
        let kv = open();
        let string = |n: usize| KvValue::from_value(&Value::from("x".repeat(n))).unwrap();
        assert!(
            matches!(string(65_530), KvValue::V8(bytes) if bytes.len() == 65_536),
            "V8 writes it as Deno does"
        );
        kv.enqueue(&string(65_530), no_retry(vec![])).unwrap();
        let error = kv.enqueue(&string(65_531), no_retry(vec![])).unwrap_err();
        assert!(matches!(error, KvError::EnqueuePayloadTooLarge { max: 65_536 }), "{error:?}");
        assert_eq!(
            (error.to_string(), error.js_class()),
            type_error("enqueue payload too large (max 65536 bytes)")
        );
        // Deno sends an enqueued Uint8Array V8-serialized, 13 bytes more than its data.
        assert_eq!(v8::serialize(&Value::Bytes(vec![0; 65_523])).unwrap().len(), 65_536);
        kv.enqueue(&KvValue::Bytes(vec![0; 65_523]), no_retry(vec![])).unwrap();
        assert_eq!(
            kv.enqueue(&KvValue::Bytes(vec![0; 65_524]), no_retry(vec![])).unwrap_err().to_string(),
            "enqueue payload too large (max 65536 bytes)"
        );
    }

    /// 12 `set(["big", i], new Uint8Array(65536))`: 786,768 bytes counted.
    fn big(kv: &TestKv) -> AtomicOperation<'_, TestStore> {
        (0..12).fold(kv.atomic(), |op, i| op.set(&key!["big", i], &KvValue::Bytes(vec![0; 65_536])))
    }

    #[test]
    fn only_an_explicit_backoff_schedule_counts_toward_the_total_size() {
        // Deno 2.9.6, after 12 `set(["big", i], new Uint8Array(65536))`:
        //   + enqueue("x".repeat(32426))                                  -> ok
        //   + enqueue("x".repeat(32426), { backoffSchedule: [] })         -> ok
        //   + enqueue("x".repeat(32406), { backoffSchedule: [1,1,1,1,1] }) -> ok
        //   + enqueue("x".repeat(32427))                                  -> TypeError: Total mutation size too large (max 819200 bytes)
        //   + enqueue("x".repeat(32427), { backoffSchedule: [] })         -> the same
        //   + enqueue("x".repeat(32407), { backoffSchedule: [1,1,1,1,1] }) -> the same
        // (The default schedule is not sent with the enqueue, so it counts nothing; an
        // explicit one counts 4 bytes per interval.)
        let kv = open();
        let string = |n: usize| Value::from("x".repeat(n));
        let five =
            || EnqueueOptions { backoff_schedule: Some(vec![Duration::from_millis(1); 5]), ..Default::default() };
        let too_large = type_error("Total mutation size too large (max 819200 bytes)");
        for (n, options) in [(32_426, EnqueueOptions::default()), (32_426, no_retry(vec![])), (32_406, five())] {
            assert!(big(&kv).enqueue(&string(n), options.clone()).commit().unwrap().ok(), "{n} {options:?}");
            assert_eq!(
                commit_error(big(&kv).enqueue(&string(n + 1), options.clone())),
                too_large,
                "{n} {options:?}"
            );
        }
    }

    #[test]
    fn a_delay_with_a_fraction_of_a_millisecond_is_shown_as_deno_shows_it() {
        // Deno 2.9.6: kv.enqueue(1, { delay: 2592000000.5 }) -> TypeError: Delay cannot be
        // greater than 30 days: received 2592000000.5
        let kv = open();
        let delay = Duration::from_millis(2_592_000_000) + Duration::from_micros(500);
        let error = kv.enqueue(&number(1.0), EnqueueOptions { delay, ..Default::default() }).unwrap_err();
        assert_eq!(
            (error.to_string(), error.js_class()),
            type_error("Delay cannot be greater than 30 days: received 2592000000.5")
        );
    }
}

// On the engine only: durability, files, maintenance.

#[test]
fn empty_and_oversized_dead_letter_keys_are_accepted_and_written() {
    // Deno 2.9.6:
    //   kv.enqueue(1, { keysIfUndelivered: [[]], backoffSchedule: [] })               -> { ok: true, ... }
    //   kv.enqueue(2, { keysIfUndelivered: [[Uint8Array(2100).fill(1)]], backoffSchedule: [] }) -> { ok: true, ... }
    //   kv.enqueue(4, { keysIfUndelivered: [["ok"]], backoffSchedule: [] })          -> { ok: true, ... }
    // then a handler that throws; afterwards:
    //   get([])                   -> { key: [], value: 1, versionstamp: "00000000000000140000" }
    //   get([Uint8Array(2100)])   -> TypeError: Key too large for read (max 2049 bytes)
    //   get(["ok"])               -> { key: [ "ok" ], value: 4, ... }
    //   list({ prefix: [] })      -> [Uint8Array(2100)] = 2, ["ok"] = 4
    //   list({ start: [], end: ["z"] }) -> keys of length 0, 1, 1 with values 1, 2, 4
    //   list({ start: [], end: ["z"] }, { reverse: true }) -> key lengths 1, 1, 0
    //   delete([])                -> TypeError: key cannot be empty
    //   delete([Uint8Array(2100)]) -> TypeError: Key too large for write (max 2048 bytes)
    let fs = MemFs::new();
    let open_fs = || Kv::open_with_fs(Arc::new(fs.clone()), "/dead", KvOptions::default()).unwrap();
    let kv = open_fs();
    kv.enqueue(&number(1.0), no_retry(vec![Key::new()])).unwrap();
    kv.enqueue(&number(2.0), no_retry(vec![oversized_key()])).unwrap();
    kv.enqueue(&number(4.0), no_retry(vec![key!["ok"]])).unwrap();
    let listener = fail_everything(&kv);
    wait_until(10, "the dead letters", || queued(&kv) == 0);
    listener.stop();

    let check = |kv: &Kv| {
        let too_large = kv.get::<KvValue>(&oversized_key()).unwrap_err();
        assert_eq!(too_large.to_string(), "Key too large for read (max 2049 bytes)");
        assert_eq!(kv.get::<KvValue>(&key!["ok"]).unwrap().value, Some(number(4.0)));
        assert_eq!(
            listed(kv, &Selector::prefix(key![])),
            vec![(oversized_key(), number(2.0)), (key!["ok"], number(4.0))]
        );
        let everything = Selector::range(Key::new(), key!["z"]);
        assert_eq!(
            listed(kv, &everything),
            vec![(Key::new(), number(1.0)), (oversized_key(), number(2.0)), (key!["ok"], number(4.0))]
        );
        let reverse = ListOptions { reverse: true, ..ListOptions::default() };
        let lengths: Vec<usize> =
            kv.list::<KvValue>(&everything, &reverse).unwrap().map(|e| e.unwrap().key.0.len()).collect();
        assert_eq!(lengths, vec![1, 1, 0]);
        // The empty key is stored under the empty engine key, with the value's stored form,
        // and reads find it as Deno's get([]) and getMany([[], ["ok"]]) do.
        assert_eq!(
            kv.engine().get_entry(&[]).unwrap().map(|entry| entry.value),
            Some(number(1.0).encode_stored())
        );
        assert_eq!(kv.get::<KvValue>(&Key::new()).unwrap().value, Some(number(1.0)));
        let both = kv.get_many::<KvValue>(&[Key::new(), key!["ok"]]).unwrap();
        assert_eq!(
            both.iter().map(|e| e.value.clone()).collect::<Vec<_>>(),
            vec![Some(number(1.0)), Some(number(4.0))]
        );
        assert_eq!(kv.delete(&Key::new()).unwrap_err().to_string(), "key cannot be empty");
        assert_eq!(
            kv.delete(&oversized_key()).unwrap_err().to_string(),
            "Key too large for write (max 2048 bytes)"
        );
    };
    check(&kv);
    // Nothing is poisoned: the entries survive a flush, a compaction and a reopen, and the
    // database keeps working around them.
    kv.engine().flush().unwrap();
    kv.engine().compact().unwrap();
    kv.close().unwrap();
    let kv = open_fs();
    check(&kv);
    kv.set(&key!["after"], &Value::from(5)).unwrap();
    kv.engine().flush().unwrap();
    kv.engine().compact().unwrap();
    assert_eq!(listed(&kv, &Selector::range(Key::new(), key!["z"])).len(), 4);
}
