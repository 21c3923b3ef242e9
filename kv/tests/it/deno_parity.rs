//! Edge cases where stampkv once disagreed with Deno: expiry bounds, the order in which
//! `list` and `commit` report errors, and sums on V8 numbers and bigints. Every expected
//! outcome and error text below was checked against Deno 2.9.6 (`deno run --unstable-kv`
//! on `Deno.openKv(":memory:")`); the comments quote what Deno printed.

use crate::common::{self, for_each_store};
use stampkv::engine::Options;
use stampkv::{
    key, EnqueueOptions, Key, KeyPart, KvBigInt, KvError, KvOptions, KvValue, ListOptions, ManualClock,
    Mutation, MutationKind, Selector, SetOptions, Value,
};
use std::sync::Arc;
use std::time::Duration;

/// The last expiry Deno 2.9.6 accepts: +262142-12-31T23:59:59.999Z in ms since the epoch
/// (`Date.UTC(262142, 11, 31, 23, 59, 59, 999)`).
const MAX_EXPIRES_AT_MS: u64 = 8_210_266_876_799_999;

/// A wall-clock time close to the one the probes ran at.
const NOW_MS: u64 = 1_796_058_591_868;

fn ms(ms: u64) -> SetOptions {
    SetOptions { expire_in: Some(Duration::from_millis(ms)) }
}

fn expiring(expire_in: Duration) -> SetOptions {
    SetOptions { expire_in: Some(expire_in) }
}

/// A bigint key part Deno cannot encode (more than 255 bytes of magnitude): `2n ** 2100n`.
fn huge_bigint() -> KeyPart {
    let mut magnitude = vec![0u8; 263];
    magnitude[0] = 0x10; // 2^2100 = 0x10 followed by 262 zero bytes
    KeyPart::from(KvBigInt::from_sign_magnitude(false, &magnitude))
}

fn big_bytes_key(len: usize) -> Key {
    key![vec![1u8; len]]
}

fn type_error(text: &str) -> (String, &'static str) {
    (text.to_owned(), "TypeError")
}

// ---------------------------------------------------------------------------------------
// expireIn

// ---------------------------------------------------------------------------------------
// list(): the order of its checks

// ---------------------------------------------------------------------------------------
// commit(): the order of its checks

// ---------------------------------------------------------------------------------------
// Sums on V8 numbers and bigints

for_each_store! {
    fn open() -> TestKv {
        open_kv(KvOptions::default())
    }

    fn clocked(now_ms: u64) -> (TestKv, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(now_ms));
        let mut engine = Options::default();
        engine.clock = clock.clone();
        (open_kv(KvOptions::with_engine(engine)), clock)
    }

    /// `(error text, JavaScript class)` of a commit that must fail.
    fn commit_error(op: stampkv::AtomicOperation<'_, TestStore>) -> (String, &'static str) {
        let error = op.commit().expect_err("the commit must fail");
        (error.to_string(), error.js_class())
    }

    #[test]
    fn expire_in_past_deno_s_last_date_is_refused_and_commits_nothing() {
        // Deno 2.9.6: `kv.set(["k"], 1, { expireIn: 9007199254740991 })`, the same in
        // `atomic().set(...)` and in `atomic().mutate({ type: "set", ... })` all throw
        // `TypeError: Invalid mutation: expireIn is too large: 9007199254740991`.
        let (kv, _clock) = clocked(NOW_MS);
        let k = key!["k"];
        let huge = 9_007_199_254_740_991;
        let expected = type_error("Invalid mutation: expireIn is too large: 9007199254740991");
        let before = common::last_version(&kv);
        let error = kv.set_with(&k, &Value::from(1), ms(huge)).unwrap_err();
        assert_eq!((error.to_string(), error.js_class()), expected);
        assert_eq!(commit_error(kv.atomic().set_with(&k, &Value::from(1), ms(huge))), expected);
        let value = KvValue::from_value(&Value::from(1)).unwrap();
        let set = Mutation {
            key: k.clone(),
            kind: MutationKind::Set(value.clone()),
            expire_in: Some(Duration::from_millis(huge)),
        };
        assert_eq!(commit_error(kv.atomic().mutate(set)), expected);
        // `set([...prefix, kv.commitVersionstamp()], 1, { expireIn: 9007199254740991 })` too.
        let versionstamped = Mutation {
            key: k.clone(),
            kind: MutationKind::SetSuffixVersionstampedKey(value),
            expire_in: Some(Duration::from_millis(huge)),
        };
        assert_eq!(commit_error(kv.atomic().mutate(versionstamped)), expected);
        assert_eq!(kv.get::<Value>(&k).unwrap().value, None);
        assert_eq!(common::last_version(&kv), before, "no versionstamp was used");
        // 2^53 - 2, 2^53 and 8640000000000000 (JavaScript's last Date) are refused the same way.
        for huge in [9_007_199_254_740_990, 9_007_199_254_740_992, 8_640_000_000_000_000] {
            let error = kv.set_with(&k, &Value::from(1), ms(huge)).unwrap_err();
            assert_eq!(error.to_string(), format!("Invalid mutation: expireIn is too large: {huge}"));
        }
    }

    #[test]
    fn expire_in_is_accepted_exactly_up_to_deno_s_last_date() {
        // Deno 2.9.6, binary search: the largest accepted expireIn plus Date.now() was
        // 8210266876800000 +- the clock's tick; with `expireIn = MAX - Date.now() + off`:
        // off = 0 -> ok, off = 1 or 2 -> `Invalid mutation: expireIn is too large: ...`.
        // MAX = 8210266876799999 = +262142-12-31T23:59:59.999Z.
        for now in [0, 1, NOW_MS] {
            let (kv, _clock) = clocked(now);
            let last = MAX_EXPIRES_AT_MS - now;
            kv.set_with(&key!["k"], &Value::from(1), ms(last)).unwrap();
            assert!(kv.get::<Value>(&key!["k"]).unwrap().value.is_some());
            let error = kv.set_with(&key!["k"], &Value::from(2), ms(last + 1)).unwrap_err();
            assert_eq!(error.to_string(), format!("Invalid mutation: expireIn is too large: {}", last + 1));
        }
        // The bound moves with the clock: what was the last accepted value is refused 1 ms later.
        let (kv, clock) = clocked(NOW_MS);
        let last = MAX_EXPIRES_AT_MS - NOW_MS;
        clock.advance(1);
        assert!(kv.set_with(&key!["k"], &Value::from(1), ms(last)).is_err());
    }

    #[test]
    fn expire_in_beyond_u64_is_reported_as_deno_saturates_it() {
        // Deno 2.9.6: `expireIn: 1e300` and `expireIn: 2 ** 64` -> `TypeError: Invalid mutation:
        // expireIn is too large: 18446744073709551615`; `2 ** 63` -> `... too large:
        // 9223372036854775808`.
        let kv = open();
        let error =
            kv.set_with(&key!["k"], &Value::from(1), expiring(Duration::from_secs(u64::MAX))).unwrap_err();
        assert_eq!(error.to_string(), "Invalid mutation: expireIn is too large: 18446744073709551615");
        // Duration::MAX is not a whole number of milliseconds: that is reported first.
        let error = kv.set_with(&key!["k"], &Value::from(1), expiring(Duration::MAX)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "expireIn must be a non-negative integer: received 18446744073709551615999.999999"
        );
        let error = kv.set_with(&key!["k"], &Value::from(1), ms(1 << 63)).unwrap_err();
        assert_eq!(error.to_string(), "Invalid mutation: expireIn is too large: 9223372036854775808");
    }

    #[test]
    fn expire_in_zero_is_accepted() {
        // Deno 2.9.6: `kv.set(["k"], 1, { expireIn: 0 })` (and `-0`) -> `{ ok: true, ... }`.
        // Deno keeps showing the row until its sweeper runs; stampkv hides it from the instant
        // it expires (SPEC 6), which for 0 is the commit itself.
        let (kv, _clock) = clocked(NOW_MS);
        let versionstamp = kv.set_with(&key!["k"], &Value::from(1), ms(0)).unwrap();
        assert_eq!(common::last_version(&kv), versionstamp.sequence());
        assert_eq!(kv.get::<Value>(&key!["k"]).unwrap().value, None);
    }

    #[test]
    fn expire_in_with_a_fraction_of_a_millisecond_is_refused_not_rounded() {
        // Deno 2.9.6: `expireIn: 1.5` -> `TypeError: expireIn must be a non-negative integer:
        // received 1.5`, thrown by `set()` itself (before `commit()`, so before the count
        // limits: `atomic().check(...101 checks).set(k, 1, { expireIn: 1.5 })` throws this, not
        // `Too many checks`). NaN, Infinity and -1 get the same text; a Duration cannot hold them.
        let kv = open();
        let k = key!["k"];
        let expected = type_error("expireIn must be a non-negative integer: received 1.5");
        let error = kv.set_with(&k, &Value::from(1), expiring(Duration::from_micros(1_500))).unwrap_err();
        assert!(matches!(error, KvError::InvalidExpireIn { .. }));
        assert_eq!((error.to_string(), error.js_class()), expected);
        let mut op = kv.atomic();
        for i in 0..101 {
            op = op.check(&key!["c", i], None);
        }
        assert_eq!(
            commit_error(op.set_with(&k, &Value::from(1), expiring(Duration::from_micros(1_500)))),
            expected
        );
        let value = KvValue::from_value(&Value::from(1)).unwrap();
        let set = Mutation {
            key: k.clone(),
            kind: MutationKind::Set(value),
            expire_in: Some(Duration::from_micros(1_500)),
        };
        assert_eq!(commit_error(kv.atomic().mutate(set)), expected);
        // The value is printed in decimal milliseconds, as JavaScript prints the number.
        let error = kv.set_with(&k, &Value::from(1), expiring(Duration::new(2, 1))).unwrap_err();
        assert_eq!(error.to_string(), "expireIn must be a non-negative integer: received 2000.000001");
        let error = kv.set_with(&k, &Value::from(1), expiring(Duration::from_nanos(250_000))).unwrap_err();
        assert_eq!(error.to_string(), "expireIn must be a non-negative integer: received 0.25");
        assert_eq!(kv.get::<Value>(&k).unwrap().value, None);
        // Whole milliseconds given in another unit are fine.
        kv.set_with(&k, &Value::from(1), expiring(Duration::from_micros(3_000))).unwrap();
    }

    #[test]
    fn expire_in_is_ignored_on_mutations_that_store_no_expiry() {
        // Deno 2.9.6: `mutate({ type: "sum", key, value: new Deno.KvU64(1n), expireIn:
        // 9007199254740991 })`, the same with `expireIn: 1.5`, and `mutate({ type: "delete",
        // key, expireIn: 9007199254740991 })` all commit: `mutate()` only reads expireIn for
        // `set`.
        let kv = open();
        let k = key!["q"];
        for expire_in in [Duration::from_millis(9_007_199_254_740_991), Duration::from_micros(1_500)] {
            let sum =
                Mutation { key: k.clone(), kind: MutationKind::Sum(KvValue::U64(1)), expire_in: Some(expire_in) };
            assert!(kv.atomic().mutate(sum).commit().unwrap().ok());
            let delete = Mutation { key: key!["d"], kind: MutationKind::Delete, expire_in: Some(expire_in) };
            assert!(kv.atomic().mutate(delete).commit().unwrap().ok());
        }
        assert_eq!(kv.get::<KvValue>(&k).unwrap().value, Some(KvValue::U64(2)));
    }

    fn list_error(kv: &TestKv, selector: &Selector, options: &ListOptions) -> String {
        match kv.list::<KvValue>(selector, options) {
            Ok(mut iter) => match iter.next() {
                Some(Err(e)) => e.to_string(),
                other => {
                    panic!("listing {selector:?} with {options:?} did not fail: {:?}", other.map(|r| r.is_ok()))
                }
            },
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn list_reports_selector_and_cursor_errors_before_too_many_entries() {
        // Deno 2.9.6, each with `{ batchSize: 1001 }` (and the option shown):
        //   { start: ["b"], end: ["a"] }              -> TypeError: Start key is greater than end key
        //   { prefix: ["a"], start: ["b"] }           -> TypeError: Start key is not in the keyspace defined by prefix
        //   { prefix: ["a"], start: ["a"] }           -> (the same)
        //   { prefix: ["a"], end: ["b"] }             -> TypeError: End key is not in the keyspace defined by prefix
        //   { prefix: ["a"], start, end }             -> TypeError: Selector can not specify both 'start' and 'end' key when specifying 'prefix'
        //   {}                                        -> TypeError: Selector must specify either 'prefix' or both 'start' and 'end' key
        //   { prefix: ["a"] }, cursor "FQE", "!!!", "/w==", " AA==" -> TypeError: invalid cursor
        //   { start: ["a", 2], end: ["a", 4] }, cursor "AA=="       -> TypeError: cursor out of bounds
        //   the same, reverse, cursor "_w=="                        -> TypeError: cursor out of bounds
        //   { prefix: ["a"], start: ["a", 3] }, cursor "AA=="       -> TypeError: cursor out of bounds
        //   { prefix: ["a"], end: ["a", 3] }, reverse, cursor "_w==" -> TypeError: cursor out of bounds
        //   { prefix: [Uint8Array(2100)] }                          -> TypeError: Key too large for read (max 2049 bytes)
        //   { start/end: [Uint8Array(2100/2101)] }                  -> (the same)
        //   { prefix: [2n ** 2100n] }                               -> TypeError: BigUint requires more than 255 bytes to be represented
        let kv = open();
        for i in 0..5 {
            kv.set(&key!["a", i], &Value::from(i)).unwrap();
        }
        let batch = |cursor: Option<&str>, reverse: bool| ListOptions {
            batch_size: Some(1001),
            cursor: cursor.map(str::to_owned),
            reverse,
            ..ListOptions::default()
        };
        let plain = batch(None, false);
        let cases: Vec<(Selector, ListOptions, &str)> = vec![
            (Selector::range(key!["b"], key!["a"]), plain.clone(), "Start key is greater than end key"),
            (
                Selector::prefix(key!["a"]).with_start(key!["b"]),
                plain.clone(),
                "Start key is not in the keyspace defined by prefix",
            ),
            (
                Selector::prefix(key!["a"]).with_start(key!["a"]),
                plain.clone(),
                "Start key is not in the keyspace defined by prefix",
            ),
            (
                Selector::prefix(key!["a"]).with_end(key!["b"]),
                plain.clone(),
                "End key is not in the keyspace defined by prefix",
            ),
            (
                Selector::prefix(key!["a"]).with_start(key!["a", 1]).with_end(key!["a", 2]),
                plain.clone(),
                "Selector can not specify both 'start' and 'end' key when specifying 'prefix'",
            ),
            (
                Selector::default(),
                plain.clone(),
                "Selector must specify either 'prefix' or both 'start' and 'end' key",
            ),
            (Selector::prefix(key!["a"]), batch(Some("FQE"), false), "invalid cursor"),
            (Selector::prefix(key!["a"]), batch(Some("!!!"), false), "invalid cursor"),
            (Selector::prefix(key!["a"]), batch(Some("/w=="), false), "invalid cursor"),
            (Selector::prefix(key!["a"]), batch(Some(" AA=="), false), "invalid cursor"),
            (Selector::range(key!["a", 2], key!["a", 4]), batch(Some("AA=="), false), "cursor out of bounds"),
            (Selector::range(key!["a", 2], key!["a", 4]), batch(Some("_w=="), true), "cursor out of bounds"),
            (
                Selector::prefix(key!["a"]).with_start(key!["a", 3]),
                batch(Some("AA=="), false),
                "cursor out of bounds",
            ),
            (
                Selector::prefix(key!["a"]).with_end(key!["a", 3]),
                batch(Some("_w=="), true),
                "cursor out of bounds",
            ),
            (Selector::prefix(big_bytes_key(2100)), plain.clone(), "Key too large for read (max 2049 bytes)"),
            (
                Selector::range(big_bytes_key(2100), big_bytes_key(2101)),
                plain.clone(),
                "Key too large for read (max 2049 bytes)",
            ),
            (
                Selector::prefix(Key(vec![huge_bigint()])),
                plain.clone(),
                "BigUint requires more than 255 bytes to be represented",
            ),
        ];
        for (selector, options, expected) in cases {
            assert_eq!(list_error(&kv, &selector, &options), expected, "{selector:?} {options:?}");
        }
    }

    #[test]
    fn list_checks_limit_then_batch_size_then_selector_and_too_many_entries_last() {
        // Deno 2.9.6:
        //   { limit: 0, batchSize: 1001 }        -> Error: Limit must be a positive integer: received 0
        //   { limit: 0, batchSize: 0 }           -> Error: Limit must be a positive integer: received 0
        //   {} with { batchSize: 0 }             -> Error: batchSize must be a positive integer: received 0
        //   {} with { limit: 0 }                 -> Error: Limit must be a positive integer: received 0
        //   {} with { batchSize: 1001, cursor: "FQE" } -> TypeError: Selector must specify either 'prefix' or both 'start' and 'end' key
        //   { start: ["b"], end: ["a"] }, cursor "FQE"  -> TypeError: Start key is greater than end key
        //   start > end, both 2100-byte keys            -> TypeError: Start key is greater than end key
        //   { prefix: [Uint8Array(2100)] }, cursor "FQE" -> TypeError: invalid cursor
        //   { prefix: [Uint8Array(2040)] }, a 20-byte cursor -> TypeError: Key too large for read (max 2049 bytes)
        //   { prefix: ["a"] }, { limit: 5, batchSize: 1001 } -> TypeError: Too many entries (max 1000)
        //   { prefix: ["a"] }, { batchSize: 1001, cursor: "" } -> TypeError: Too many entries (max 1000)
        //   { start: ["a", 1], end: ["a", 1] }, { batchSize: 1001 } -> TypeError: Too many entries (max 1000)
        //   { prefix: ["a"] }, { limit: 1001 } and { limit: 1001, batchSize: 1000 } -> all 5 entries
        let kv = open();
        for i in 0..5 {
            kv.set(&key!["a", i], &Value::from(i)).unwrap();
        }
        let options = |limit: Option<usize>, batch_size: Option<usize>, cursor: Option<&str>| ListOptions {
            limit,
            batch_size,
            cursor: cursor.map(str::to_owned),
            ..ListOptions::default()
        };
        let a = Selector::prefix(key!["a"]);
        let limit_0 = "Limit must be a positive integer: received 0";
        let batch_0 = "batchSize must be a positive integer: received 0";
        let too_many = "Too many entries (max 1000)";
        let cases: Vec<(Selector, ListOptions, &str)> = vec![
            (a.clone(), options(Some(0), Some(1001), None), limit_0),
            (a.clone(), options(Some(0), Some(0), None), limit_0),
            (Selector::default(), options(None, Some(0), None), batch_0),
            (Selector::default(), options(Some(0), None, None), limit_0),
            (
                Selector::default(),
                options(None, Some(1001), Some("FQE")),
                "Selector must specify either 'prefix' or both 'start' and 'end' key",
            ),
            (
                Selector::range(key!["b"], key!["a"]),
                options(None, None, Some("FQE")),
                "Start key is greater than end key",
            ),
            (
                Selector::range(key![vec![2u8; 2100]], key![vec![1u8; 2100]]),
                options(None, None, None),
                "Start key is greater than end key",
            ),
            (Selector::prefix(big_bytes_key(2100)), options(None, None, Some("FQE")), "invalid cursor"),
            (
                Selector::prefix(big_bytes_key(2040)),
                options(None, None, Some("eHh4eHh4eHh4eHh4eHh4eHh4eHg=")),
                "Key too large for read (max 2049 bytes)",
            ),
            (a.clone(), options(Some(5), Some(1001), None), too_many),
            (a.clone(), options(None, Some(1001), Some("")), too_many),
            (Selector::range(key!["a", 1], key!["a", 1]), options(None, Some(1001), None), too_many),
        ];
        for (selector, options, expected) in cases {
            assert_eq!(list_error(&kv, &selector, &options), expected, "{selector:?} {options:?}");
        }
        let error = kv.list::<KvValue>(&a, &options(Some(0), Some(1001), None)).err().unwrap();
        assert_eq!(error.js_class(), "Error");
        for ok in [
            options(Some(1001), None, None),
            options(Some(1001), Some(1000), None),
            options(None, Some(1000), None),
        ] {
            assert_eq!(kv.list::<KvValue>(&a, &ok).unwrap().count(), 5, "{ok:?}");
        }
    }

    fn with_checks<'a>(mut op: stampkv::AtomicOperation<'a, TestStore>, n: usize) -> stampkv::AtomicOperation<'a, TestStore> {
        for i in 0..n {
            op = op.check(&key!["c", i as i64], None);
        }
        op
    }

    fn with_sets<'a>(mut op: stampkv::AtomicOperation<'a, TestStore>, n: usize) -> stampkv::AtomicOperation<'a, TestStore> {
        for i in 0..n {
            op = op.set(&key!["m", i as i64], &Value::from(1));
        }
        op
    }

    /// A malformed check, as Deno's `check({ key: ["c"], versionstamp: "zz" })`.
    fn malformed(kv: &TestKv) -> stampkv::AtomicOperation<'_, TestStore> {
        kv.atomic().check_hex(&key!["c"], Some("zz"))
    }

    #[test]
    fn a_malformed_check_counts_as_a_check_and_is_reported_after_the_count_limits() {
        // Deno 2.9.6:
        //   malformed + 100 valid checks (101)       -> TypeError: Too many checks (max 100)
        //   malformed + 99 valid checks (100)        -> TypeError: Invalid check
        //   malformed + 1001 sets                    -> TypeError: Too many mutations (max 1000)
        //   malformed + 1000 sets                    -> TypeError: Invalid check
        //   malformed + 1000 sets + 1 enqueue        -> TypeError: Too many mutations (max 1000)
        let kv = open();
        assert_eq!(commit_error(with_checks(malformed(&kv), 100)), type_error("Too many checks (max 100)"));
        assert_eq!(commit_error(with_checks(malformed(&kv), 99)), type_error("Invalid check"));
        assert_eq!(commit_error(with_sets(malformed(&kv), 1001)), type_error("Too many mutations (max 1000)"));
        assert_eq!(commit_error(with_sets(malformed(&kv), 1000)), type_error("Invalid check"));
        let enqueue = with_sets(malformed(&kv), 1000).enqueue(&Value::from(1), EnqueueOptions::default());
        assert_eq!(commit_error(enqueue), type_error("Too many mutations (max 1000)"));
        assert_eq!(common::last_version(&kv), 0, "nothing was committed");
    }

    #[test]
    fn a_malformed_check_is_reported_before_sizes_keys_and_other_checks() {
        // Deno 2.9.6, each with `check({ key: ["c"], versionstamp: "zz" })`:
        //   + 13 sets of Uint8Array(65536)           -> TypeError: Invalid check (not the total size)
        //   + set(["v"], Uint8Array(65537))          -> TypeError: Invalid check
        //   + set([Uint8Array(2100)], 1)             -> TypeError: Invalid check
        //   + set([], 1)                             -> TypeError: Invalid check
        //   after check({ key: [], versionstamp: null }) -> TypeError: Invalid check
        //   + set([2n ** 2100n], 1)                  -> TypeError: Invalid check
        //   + set(["e"], 1, { expireIn: 9007199254740991 }) -> TypeError: Invalid check
        //   + sum(["s"], 1n) on a string             -> TypeError: Invalid check
        //   + mutate({ type: "min", value: 1 })      -> TypeError: Invalid check
        //   after or before a check that fails       -> TypeError: Invalid check (no `{ ok: false }`)
        let kv = open();
        kv.set(&key!["s"], &Value::from("str")).unwrap();
        let invalid = type_error("Invalid check");
        let mut total = malformed(&kv);
        for i in 0..13 {
            total = total.set(&key!["big", i], &KvValue::Bytes(vec![0; 65536]));
        }
        assert_eq!(commit_error(total), invalid);
        assert_eq!(commit_error(malformed(&kv).set(&key!["v"], &KvValue::Bytes(vec![0; 65537]))), invalid);
        assert_eq!(commit_error(malformed(&kv).set(&big_bytes_key(2100), &Value::from(1))), invalid);
        assert_eq!(commit_error(malformed(&kv).set(&key![], &Value::from(1))), invalid);
        assert_eq!(commit_error(kv.atomic().check(&key![], None).check_hex(&key!["c"], Some("zz"))), invalid);
        assert_eq!(commit_error(malformed(&kv).set(&Key(vec![huge_bigint()]), &Value::from(1))), invalid);
        assert_eq!(
            commit_error(malformed(&kv).set_with(&key!["e"], &Value::from(1), ms(9_007_199_254_740_991))),
            invalid
        );
        assert_eq!(commit_error(malformed(&kv).sum(&key!["s"], 1)), invalid);
        let min = Mutation {
            key: key!["x"],
            kind: MutationKind::Min(KvValue::from_value(&Value::from(1)).unwrap()),
            expire_in: None,
        };
        assert_eq!(commit_error(malformed(&kv).mutate(min)), invalid);
        assert_eq!(commit_error(kv.atomic().check(&key!["s"], None).check_hex(&key!["c"], Some("zz"))), invalid);
        assert_eq!(commit_error(malformed(&kv).check(&key!["s"], None)), invalid);
    }

    #[test]
    fn check_versionstamps_are_20_hex_characters_and_check_keys_must_encode() {
        // Deno 2.9.6: versionstamp "0000000000000001000A" -> `{ ok: false }` (a valid check that
        // fails); "0000000000000001000" (19), "0x000000000000000100" (20 but not hex) and "" ->
        // `TypeError: Invalid check`. A check on `[2n ** 2100n]` (versionstamp null) ->
        // `TypeError: Invalid check`, and a second, malformed check after it -> the same.
        let kv = open();
        assert!(!kv.atomic().check_hex(&key!["c"], Some("0000000000000001000A")).commit().unwrap().ok());
        for bad in ["0000000000000001000", "0x000000000000000100", ""] {
            assert_eq!(
                commit_error(kv.atomic().check_hex(&key!["c"], Some(bad))),
                type_error("Invalid check"),
                "{bad:?}"
            );
        }
        let huge = Key(vec![huge_bigint()]);
        let error = kv.atomic().check(&huge, None).commit().unwrap_err();
        assert!(matches!(error, KvError::InvalidCheck), "{error:?}");
        assert_eq!(
            commit_error(kv.atomic().check(&huge, None).check_hex(&key!["c"], Some("zz"))),
            type_error("Invalid check")
        );
    }

    #[test]
    fn a_mutation_key_that_cannot_be_encoded_is_an_invalid_mutation() {
        // Deno 2.9.6, with the key `[2n ** 2100n]`: atomic `set`, `kv.set`, `delete`, `sum` and a
        // versionstamped `set` -> `TypeError: Invalid mutation: BigUint requires more than 255
        // bytes to be represented`; `kv.get` -> `TypeError: BigUint requires more than 255 bytes
        // to be represented` (no prefix: it is a read).
        let kv = open();
        let huge = Key(vec![huge_bigint()]);
        let expected = type_error("Invalid mutation: BigUint requires more than 255 bytes to be represented");
        assert_eq!(commit_error(kv.atomic().set(&huge, &Value::from(1))), expected);
        assert_eq!(commit_error(kv.atomic().delete(&huge)), expected);
        assert_eq!(commit_error(kv.atomic().sum(&huge, 1)), expected);
        assert_eq!(commit_error(kv.atomic().set_versionstamped_key(&huge, &Value::from(1))), expected);
        let error = kv.set(&huge, &Value::from(1)).unwrap_err();
        assert!(matches!(error, KvError::InvalidMutationKey(_)), "{error:?}");
        assert!(std::error::Error::source(&error).is_some(), "the key error is the source");
        assert_eq!(error.to_string(), expected.0);
        assert_eq!(kv.delete(&huge).unwrap_err().to_string(), expected.0);
        let error = kv.get::<Value>(&huge).unwrap_err();
        assert_eq!(error.to_string(), "BigUint requires more than 255 bytes to be represented");
    }

    #[test]
    fn mutations_are_parsed_in_order_before_key_and_value_sizes() {
        // Deno 2.9.6:
        //   101 checks + set(expireIn: 9007199254740991)       -> TypeError: Too many checks (max 100)
        //   set(expireIn: 9007199254740991) + 1000 more sets   -> TypeError: Too many mutations (max 1000)
        //   set(["e"], expireIn too large), set([2n ** 2100n]) -> TypeError: Invalid mutation: expireIn is too large: 9007199254740991
        //   set([2n ** 2100n]), set(["e"], expireIn too large) -> TypeError: Invalid mutation: BigUint requires more than 255 bytes to be represented
        //   one set([2n ** 2100n], 1, { expireIn: too large }) -> (the BigUint error)
        //   set([], 1), set(["e"], expireIn too large)         -> (the expireIn error)
        //   set([Uint8Array(2100)], 1), set(["e"], too large)  -> (the expireIn error)
        //   check(["s"] must be absent, fails) + set(expireIn too large) -> (the expireIn error)
        //   sum(["s"], 1n) on a string + 101 checks            -> TypeError: Too many checks (max 100)
        //   set(["v"], Uint8Array(65537)), set([Uint8Array(2100)], 1) -> TypeError: Key too large for write (max 2048 bytes)
        //   check([Uint8Array(2100)]) + 13 sets of 64 KiB      -> TypeError: Key too large for write (max 2048 bytes)
        let kv = open();
        kv.set(&key!["s"], &Value::from("str")).unwrap();
        let huge_key = Key(vec![huge_bigint()]);
        let too_large = ms(9_007_199_254_740_991);
        let expire = type_error("Invalid mutation: expireIn is too large: 9007199254740991");
        let biguint = type_error("Invalid mutation: BigUint requires more than 255 bytes to be represented");
        let one = Value::from(1);
        let e = key!["e"];
        assert_eq!(
            commit_error(with_checks(kv.atomic(), 101).set_with(&e, &one, too_large)),
            type_error("Too many checks (max 100)")
        );
        assert_eq!(
            commit_error(with_sets(kv.atomic().set_with(&e, &one, too_large), 1000)),
            type_error("Too many mutations (max 1000)")
        );
        assert_eq!(commit_error(kv.atomic().set_with(&e, &one, too_large).set(&huge_key, &one)), expire);
        assert_eq!(commit_error(kv.atomic().set(&huge_key, &one).set_with(&e, &one, too_large)), biguint);
        assert_eq!(commit_error(kv.atomic().set_with(&huge_key, &one, too_large)), biguint);
        assert_eq!(commit_error(kv.atomic().set(&key![], &one).set_with(&e, &one, too_large)), expire);
        assert_eq!(
            commit_error(kv.atomic().set(&big_bytes_key(2100), &one).set_with(&e, &one, too_large)),
            expire
        );
        assert_eq!(commit_error(kv.atomic().check(&key!["s"], None).set_with(&e, &one, too_large)), expire);
        assert_eq!(
            commit_error(with_checks(kv.atomic().sum(&key!["s"], 1), 101)),
            type_error("Too many checks (max 100)")
        );
        let key_too_large = type_error("Key too large for write (max 2048 bytes)");
        let value_then_key =
            kv.atomic().set(&key!["v"], &KvValue::Bytes(vec![0; 65537])).set(&big_bytes_key(2100), &one);
        assert_eq!(commit_error(value_then_key), key_too_large);
        let mut total = kv.atomic().check(&big_bytes_key(2100), None);
        for i in 0..13 {
            total = total.set(&key!["big", i], &KvValue::Bytes(vec![0; 65536]));
        }
        assert_eq!(commit_error(total), key_too_large);
    }

    #[test]
    fn sum_number_and_sum_bigint_behave_as_deno_s_mutate_sum() {
        // Deno 2.9.6:
        //   mutate({ type: "sum", key: ["n"], value: 1.5 }) on a missing key -> get: 1.5
        //   mutate({ type: "sum", key: ["n"], value: 2 })                  -> get: 3.5
        //   sum -5n then 2n ** 70n in one commit on a missing key         -> 1180591620717411303419n
        //   mutate({ type: "sum", key: ["b"], value: 1 }) on that bigint  -> TypeError: Cannot sum BigInt with Number
        //   atomic().sum(["n"], 1n) (a KvU64) on the number               -> TypeError: Failed to perform 'sum' mutation on a non-U64 value in the database
        //   atomic().min(["n"], 1n) on the number                         -> TypeError: Failed to perform 'min' mutation on a non-U64 value in the database
        //   KvU64(5n) stored, mutate({ type: "sum", value: 7n })          -> KvU64(12n)
        //   mutate({ type: "min" | "max", value: 1 | 1n })                -> TypeError: Failed to perform 'min' (resp. 'max') mutation on a non-U64 operand
        //   sum Infinity then NaN on 3.5                                  -> get: NaN
        let kv = open();
        let n = key!["n"];
        assert!(kv.atomic().sum_number(&n, 1.5).commit().unwrap().ok());
        assert_eq!(kv.get::<Value>(&n).unwrap().value, Some(Value::Number(1.5)));
        kv.atomic().sum_number(&n, 2.0).commit().unwrap();
        assert_eq!(kv.get::<Value>(&n).unwrap().value, Some(Value::Number(3.5)));
        let b = key!["b"];
        let two_70: KvBigInt = "1180591620717411303424".parse().unwrap();
        kv.atomic().sum_bigint(&b, -5).sum_bigint(&b, two_70).commit().unwrap();
        let expected: KvBigInt = "1180591620717411303419".parse().unwrap();
        assert_eq!(kv.get::<Value>(&b).unwrap().value, Some(Value::BigInt(expected)));
        assert_eq!(commit_error(kv.atomic().sum_number(&b, 1.0)), type_error("Cannot sum BigInt with Number"));
        assert_eq!(
            commit_error(kv.atomic().sum(&n, 1)),
            type_error("Failed to perform 'sum' mutation on a non-U64 value in the database")
        );
        assert_eq!(
            commit_error(kv.atomic().min(&n, 1)),
            type_error("Failed to perform 'min' mutation on a non-U64 value in the database")
        );
        let u = key!["u"];
        kv.set(&u, &KvValue::U64(5)).unwrap();
        kv.atomic().sum_bigint(&u, 7u8).commit().unwrap();
        assert_eq!(kv.get::<KvValue>(&u).unwrap().value, Some(KvValue::U64(12)));
        for (kind, name) in
            [(MutationKind::Min as fn(KvValue) -> MutationKind, "min"), (MutationKind::Max, "max")]
        {
            for operand in [Value::from(1), Value::BigInt(KvBigInt::from(1))] {
                let m = Mutation {
                    key: key!["x"],
                    kind: kind(KvValue::from_value(&operand).unwrap()),
                    expire_in: None,
                };
                assert_eq!(
                    commit_error(kv.atomic().mutate(m)),
                    type_error(&format!("Failed to perform '{name}' mutation on a non-U64 operand"))
                );
            }
        }
        kv.atomic().sum_number(&n, f64::INFINITY).commit().unwrap();
        assert_eq!(kv.get::<Value>(&n).unwrap().value, Some(Value::Number(f64::INFINITY)));
        kv.atomic().sum_number(&n, f64::NAN).commit().unwrap();
        assert!(kv.get::<Value>(&n).unwrap().value.and_then(|v| v.as_f64()).is_some_and(f64::is_nan));
    }

    #[test]
    fn sum_bigint_takes_every_primitive_integer() {
        let kv = open();
        let k = key!["t"];
        kv.atomic()
            .sum_bigint(&k, 1i8)
            .sum_bigint(&k, 2i16)
            .sum_bigint(&k, 3i32)
            .sum_bigint(&k, 4i64)
            .sum_bigint(&k, 5i128)
            .sum_bigint(&k, 6isize)
            .sum_bigint(&k, 7u16)
            .sum_bigint(&k, 8u32)
            .sum_bigint(&k, 9u64)
            .sum_bigint(&k, u128::MAX)
            .sum_bigint(&k, 10usize)
            .commit()
            .unwrap();
        let expected = KvBigInt::from(u128::MAX).to_string().parse::<KvBigInt>().unwrap();
        let stored = kv.get::<Value>(&k).unwrap().value.unwrap();
        let stored = stored.as_bigint().unwrap();
        assert_eq!(stored.to_string(), "340282366920938463463374607431768211510");
        assert!(*stored > expected);
        assert!(u128::try_from(stored).is_err(), "2^128 + 54 does not fit a u128");
        assert_eq!(u128::try_from(&expected), Ok(u128::MAX));
    }
}
