//! Atomic operations: checks, every mutation kind, sum/min/max rules, all-or-nothing,
//! versionstamps, and every limit with Deno's message.

use crate::common::{self, for_each_store};
use stampkv::{
    key, CommitResult, Key, KvError, KvOptions, KvValue, Mutation, MutationKind, Value, Versionstamp,
};

fn text(s: &str) -> Value {
    Value::String(s.to_owned())
}

#[test]
fn versionstamps_parse_and_print() {
    let v = Versionstamp::from_sequence(1);
    assert_eq!(v.to_string(), "00000000000000010000");
    assert_eq!("00000000000000010000".parse::<Versionstamp>().unwrap(), v);
}

for_each_store! {
    fn open() -> TestKv {
        open_kv(KvOptions::default())
    }

    fn value_at(kv: &TestKv, key: &Key) -> Option<KvValue> {
        kv.get::<KvValue>(key).unwrap().value
    }

    #[test]
    fn set_get_delete_and_versionstamps() {
        let kv = open();
        let v1 = kv.set(&key!["users", 1], &text("ada")).unwrap();
        let entry = kv.get::<Value>(&key!["users", 1]).unwrap();
        assert_eq!(entry.value, Some(text("ada")));
        assert_eq!(entry.versionstamp, Some(v1));
        assert_eq!(v1.to_hex().len(), 20);
        let v2 = kv.set(&key!["users", 1], &text("ada")).unwrap();
        assert!(v2 > v1, "every commit gets a larger versionstamp, even for the same value");
        kv.delete(&key!["users", 1]).unwrap();
        let gone = kv.get::<Value>(&key!["users", 1]).unwrap();
        assert_eq!((gone.value, gone.versionstamp), (None, None));
        // Empty commits get versionstamps too.
        let empty = kv.atomic().commit().unwrap();
        assert!(empty.versionstamp().unwrap() > v2);
    }

    #[test]
    fn checks_compare_versionstamps_and_absence() {
        let kv = open();
        let k = key!["k"];
        // Absent check on an absent key passes; then the key exists and it fails.
        let first = kv.atomic().check(&k, None).set(&k, &text("1")).commit().unwrap();
        let v1 = first.versionstamp().unwrap();
        assert_eq!(kv.atomic().check(&k, None).set(&k, &text("2")).commit().unwrap(), CommitResult::CheckFailed);
        // The current versionstamp passes; a stale one fails; nothing is applied on failure.
        let v2 = kv.atomic().check(&k, Some(v1)).set(&k, &text("3")).commit().unwrap().versionstamp().unwrap();
        let before = common::last_version(&kv);
        assert_eq!(
            kv.atomic().check(&k, Some(v1)).set(&k, &text("4")).delete(&key!["other"]).commit().unwrap(),
            CommitResult::CheckFailed
        );
        assert_eq!(common::last_version(&kv), before, "a failed check uses no versionstamp");
        assert_eq!(kv.get::<Value>(&k).unwrap().value, Some(text("3")));
        // Several checks: all must hold.
        kv.set(&key!["j"], &text("x")).unwrap();
        let j = kv.get::<Value>(&key!["j"]).unwrap();
        let now = kv.get::<Value>(&k).unwrap();
        assert!(kv.atomic().check_entry(&now).check_entry(&j).check(&key!["none"], None).commit().unwrap().ok());
        assert!(!kv.atomic().check_entry(&now).check(&key!["j"], Some(v2)).commit().unwrap().ok());
        // Hex versionstamps are parsed case-insensitively; anything else is an invalid check.
        let upper = v2.to_hex().to_uppercase();
        assert!(kv.atomic().check_hex(&k, Some(&upper)).commit().unwrap().ok());
        let err = kv.atomic().check_hex(&k, Some("xyz")).commit().unwrap_err();
        assert_eq!(err.to_string(), "Invalid check");
    }

    #[test]
    fn mutations_apply_in_order() {
        let kv = open();
        let k = key!["k"];
        assert!(kv.atomic().set(&k, &text("a")).delete(&k).commit().unwrap().ok());
        assert_eq!(value_at(&kv, &k), None, "set then delete: absent");
        assert!(kv.atomic().delete(&k).set(&k, &text("b")).commit().unwrap().ok());
        assert!(value_at(&kv, &k).is_some(), "delete then set: present");
        assert!(kv.atomic().set(&k, &KvValue::U64(1)).sum(&k, 2).commit().unwrap().ok());
        assert_eq!(value_at(&kv, &k), Some(KvValue::U64(3)), "set then sum");
        assert!(kv.atomic().set(&k, &text("x")).set(&k, &text("y")).commit().unwrap().ok());
        assert_eq!(kv.get::<Value>(&k).unwrap().value, Some(text("y")), "last set wins");
        // Every key written by one commit carries its versionstamp.
        let v =
            kv.atomic().set(&key!["p"], &text("1")).set(&key!["q"], &text("2")).commit().unwrap().versionstamp();
        assert_eq!(kv.get::<Value>(&key!["p"]).unwrap().versionstamp, v);
        assert_eq!(kv.get::<Value>(&key!["q"]).unwrap().versionstamp, v);
    }

    #[test]
    fn sum_min_and_max_on_kv_u64() {
        let kv = open();
        let (s, lo, hi) = (key!["sum"], key!["min"], key!["max"]);
        assert!(kv.atomic().sum(&s, 5).min(&lo, 5).max(&hi, 5).commit().unwrap().ok());
        assert_eq!(
            (value_at(&kv, &s), value_at(&kv, &lo), value_at(&kv, &hi)),
            (Some(KvValue::U64(5)), Some(KvValue::U64(5)), Some(KvValue::U64(5))),
            "missing keys take the operand"
        );
        assert!(kv.atomic().sum(&s, 10).min(&lo, 3).max(&hi, 3).commit().unwrap().ok());
        assert_eq!(
            (value_at(&kv, &s), value_at(&kv, &lo), value_at(&kv, &hi)),
            (Some(KvValue::U64(15)), Some(KvValue::U64(3)), Some(KvValue::U64(5)))
        );
        kv.set(&s, &KvValue::U64(u64::MAX)).unwrap();
        kv.atomic().sum(&s, 3).commit().unwrap();
        assert_eq!(value_at(&kv, &s), Some(KvValue::U64(2)), "2^64 - 1 + 3 wraps to 2");
    }

    #[test]
    fn type_mismatches_fail_the_whole_commit() {
        let kv = open();
        kv.set(&key!["s"], &text("not a number")).unwrap();
        let before = common::last_version(&kv);
        for (op, name) in [("sum", "sum"), ("min", "min"), ("max", "max")] {
            let atomic = kv.atomic().set(&key!["x"], &text("1"));
            let atomic = match op {
                "sum" => atomic.sum(&key!["s"], 1),
                "min" => atomic.min(&key!["s"], 1),
                _ => atomic.max(&key!["s"], 1),
            };
            let err = atomic.set(&key!["y"], &text("2")).commit().unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("Failed to perform '{name}' mutation on a non-U64 value in the database")
            );
            assert_eq!(err.js_class(), "TypeError");
        }
        // Better than Deno: nothing of the failed commits is visible, no versionstamp used.
        assert_eq!(value_at(&kv, &key!["x"]), None);
        assert_eq!(value_at(&kv, &key!["y"]), None);
        assert_eq!(common::last_version(&kv), before);
        let err = kv
            .atomic()
            .mutate(Mutation {
                key: key!["m"],
                kind: MutationKind::Min(KvValue::Bytes(vec![1])),
                expire_in: None,
            })
            .commit()
            .unwrap_err();
        assert_eq!(err.to_string(), "Failed to perform 'min' mutation on a non-U64 operand");
    }

    #[test]
    fn versionstamped_keys_end_with_the_commit_s_versionstamp() {
        let kv = open();
        let result = kv.atomic().set_versionstamped_key(&key!["vk"], &text("v")).commit().unwrap();
        let versionstamp = result.versionstamp().unwrap();
        let key = key!["vk", versionstamp.to_hex()];
        let entry = kv.get::<Value>(&key).unwrap();
        assert_eq!(entry.value, Some(text("v")));
        assert_eq!(entry.versionstamp, Some(versionstamp));
        let err = kv.atomic().set_versionstamped_key(&key![], &text("v")).commit().unwrap_err();
        assert_eq!(err.to_string(), "key cannot be empty");
    }

    #[test]
    fn every_limit_is_enforced_before_anything_is_applied() {
        let kv = open();
        let before = common::last_version(&kv);
        let big_key = key![vec![1u8; 2047]]; // 2049 bytes encoded
        let ok_key = key![vec![1u8; 2046]]; // 2048 bytes encoded
        assert!(kv.atomic().set(&ok_key, &text("v")).commit().unwrap().ok());
        let cases: Vec<(stampkv::AtomicOperation<'_, TestStore>, &str)> = vec![
            (kv.atomic().set(&big_key, &text("v")), "Key too large for write (max 2048 bytes)"),
            (kv.atomic().delete(&big_key), "Key too large for write (max 2048 bytes)"),
            (kv.atomic().check(&big_key, None), "Key too large for write (max 2048 bytes)"),
            (kv.atomic().set(&key![], &text("v")), "key cannot be empty"),
            (kv.atomic().delete(&key![]), "key cannot be empty"),
            (kv.atomic().check(&key![], None), "key cannot be empty"),
            (kv.atomic().set(&key!["v"], &KvValue::Bytes(vec![0; 65537])), "Value too large (max 65536 bytes)"),
        ];
        for (op, message) in cases {
            assert_eq!(op.commit().unwrap_err().to_string(), message);
        }
        assert!(kv.atomic().set(&key!["v"], &KvValue::Bytes(vec![0; 65536])).commit().unwrap().ok());
        let mut op = kv.atomic();
        for i in 0..101 {
            op = op.check(&key!["c", i], None);
        }
        assert_eq!(op.commit().unwrap_err().to_string(), "Too many checks (max 100)");
        let mut op = kv.atomic();
        for i in 0..1001 {
            op = op.delete(&key!["d", i]);
        }
        assert_eq!(op.commit().unwrap_err().to_string(), "Too many mutations (max 1000)");
        // 12 values of 64 KiB with short keys fit in 819200 bytes, 13 do not.
        let value = KvValue::Bytes(vec![7; 65536]);
        let mut op = kv.atomic();
        for i in 0..12 {
            op = op.set(&key![format!("key{i:04}")], &value);
        }
        assert!(op.commit().unwrap().ok());
        let mut op = kv.atomic();
        for i in 0..13 {
            op = op.set(&key![format!("key{i:04}")], &value);
        }
        assert_eq!(op.commit().unwrap_err().to_string(), "Total mutation size too large (max 819200 bytes)");
        // 42 keys of 1998 bytes exceed 81920 bytes of keys.
        let mut op = kv.atomic();
        for i in 0..42u8 {
            op = op.set(&key![vec![i + 1; 1996]], &text("v"));
        }
        assert_eq!(op.commit().unwrap_err().to_string(), "Total key size too large (max 81920 bytes)");
        assert_eq!(common::last_version(&kv), before + 3, "only the three valid commits were applied");
    }

    #[test]
    fn get_many_and_read_key_limits() {
        let kv = open();
        kv.set(&key!["a"], &text("1")).unwrap();
        kv.set(&key!["c"], &text("3")).unwrap();
        let keys = vec![key!["c"], key!["b"], key!["a"], key![]];
        let entries = kv.get_many::<Value>(&keys).unwrap();
        let values: Vec<Option<Value>> = entries.iter().map(|e| e.value.clone()).collect();
        assert_eq!(values, vec![Some(text("3")), None, Some(text("1")), None]);
        assert_eq!(entries.iter().map(|e| e.key.clone()).collect::<Vec<_>>(), keys, "argument order");
        assert!(kv.get_many::<Value>(&[]).unwrap().is_empty());
        let eleven: Vec<Key> = (0..11).map(|i| key![i]).collect();
        assert_eq!(kv.get_many::<Value>(&eleven).unwrap_err().to_string(), "Too many ranges (max 10)");
        // A point read covers [key, key ++ 00): the key may take 2048 bytes, not 2049.
        assert!(kv.get::<Value>(&key![vec![1u8; 2046]]).is_ok());
        let err = kv.get::<Value>(&key![vec![1u8; 2047]]).unwrap_err();
        assert_eq!(err.to_string(), "Key too large for read (max 2049 bytes)");
        // The empty key reads as absent.
        assert_eq!(kv.get::<Value>(&key![]).unwrap().value, None);
    }

    #[test]
    fn values_keep_their_encoding() {
        let kv = open();
        kv.set(&key!["bytes"], &KvValue::Bytes(vec![1, 2, 3])).unwrap();
        kv.set(&key!["u64"], &KvValue::U64(258)).unwrap();
        kv.set(&key!["top-level bytes"], &Value::Bytes(vec![9])).unwrap();
        assert_eq!(value_at(&kv, &key!["bytes"]), Some(KvValue::Bytes(vec![1, 2, 3])));
        assert_eq!(value_at(&kv, &key!["u64"]), Some(KvValue::U64(258)));
        assert_eq!(
            value_at(&kv, &key!["top-level bytes"]),
            Some(KvValue::Bytes(vec![9])),
            "a plain byte array is stored as bytes"
        );
        // Raw V8 bytes pass through unaltered, even when Value cannot represent them.
        let array_buffer = KvValue::V8(vec![0xff, 0x10, 0x42, 0x02, 0x00, 0x00]);
        kv.set(&key!["raw"], &array_buffer).unwrap();
        assert_eq!(value_at(&kv, &key!["raw"]), Some(array_buffer));
        assert!(matches!(kv.get::<Value>(&key!["raw"]), Err(KvError::Value(_))));
    }

    #[test]
    fn mutate_sum_on_v8_numbers_and_bigints_follows_deno() {
        let kv = open();
        let sum = |key: &Key, operand: Value| {
            let operand = KvValue::from_value(&operand).unwrap();
            kv.atomic()
                .mutate(Mutation { key: key.clone(), kind: MutationKind::Sum(operand), expire_in: None })
                .commit()
        };
        let n = key!["n"];
        sum(&n, Value::Number(1.5)).unwrap();
        sum(&n, Value::Number(2.0)).unwrap();
        assert_eq!(
            kv.get::<Value>(&n).unwrap().value,
            Some(Value::Number(3.5)),
            "missing key takes the operand, then adds"
        );
        let b = key!["b"];
        sum(&b, Value::BigInt(stampkv::KvBigInt::from(i64::MAX))).unwrap();
        sum(&b, Value::BigInt(stampkv::KvBigInt::from(1i64))).unwrap();
        assert_eq!(
            kv.get::<Value>(&b).unwrap().value,
            Some(Value::BigInt(stampkv::KvBigInt::from(i64::MAX as i128 + 1))),
            "bigints are exact"
        );
        let err = sum(&n, Value::BigInt(stampkv::KvBigInt::from(1i64))).unwrap_err();
        assert_eq!(err.to_string(), "Cannot sum Number with BigInt");
        kv.set(&key!["u"], &KvValue::U64(1)).unwrap();
        let err = sum(&key!["u"], Value::Number(1.0)).unwrap_err();
        assert_eq!(err.to_string(), "Cannot sum KvU64 with Number");
        kv.set(&key!["s"], &Value::String("x".into())).unwrap();
        assert_eq!(sum(&key!["s"], Value::Number(1.0)).unwrap_err().to_string(), "unsupported value type");
    }

    #[test]
    fn commit_then_reports_each_outcome_once_visible_and_wakes_watchers() {
        use std::sync::mpsc;
        use std::time::Duration;
        let kv = open();
        let a = key!["deferred", "a"];
        let mut watch = kv.watch(std::slice::from_ref(&a)).unwrap();
        watch.next_timeout(Duration::from_secs(5)).unwrap().unwrap();
        // Many commits in flight at once from several threads, each reported exactly once.
        let (done, results) = mpsc::channel();
        let writers: Vec<_> = (0..4u64)
            .map(|w| {
                let (kv, done) = (kv.clone(), done.clone());
                std::thread::spawn(move || {
                    for i in 0..50u64 {
                        let key = key!["deferred", w, i];
                        let (kv2, done, k2) = (kv.clone(), done.clone(), key.clone());
                        kv.atomic().check(&key, None).set(&key, &KvValue::U64(i)).commit_then(move |result| {
                            // Acknowledged only once readable.
                            let seen = kv2.get::<KvValue>(&k2).unwrap().versionstamp;
                            done.send((k2, result, seen)).unwrap();
                        });
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        let mut stamps = Vec::new();
        for _ in 0..200 {
            let (key, result, seen) = results.recv_timeout(Duration::from_secs(10)).unwrap();
            let CommitResult::Committed(stamp) = result.unwrap() else { panic!("{key:?}: check failed") };
            assert_eq!(seen, Some(stamp), "{key:?} acknowledged before it was visible");
            stamps.push(stamp);
        }
        assert!(results.recv_timeout(Duration::from_millis(50)).is_err(), "an outcome was reported twice");
        stamps.sort();
        stamps.dedup();
        assert_eq!(stamps.len(), 200, "one versionstamp per commit");
        // A failed check and a refused operation are reported at once, on this thread.
        let (done, results) = mpsc::channel();
        let again = key!["deferred", 0u64, 0u64];
        let d = done.clone();
        kv.atomic().check(&again, None).set(&again, &KvValue::U64(7)).commit_then(move |r| d.send(r).unwrap());
        assert_eq!(results.try_recv().unwrap().unwrap(), CommitResult::CheckFailed);
        let too_many = (0..1001).fold(kv.atomic(), |op, i| op.check(&key!["c", i], None));
        let d = done.clone();
        too_many.commit_then(move |r| d.send(r).unwrap());
        assert!(matches!(results.try_recv().unwrap(), Err(KvError::TooManyChecks { .. })));
        // Watchers are woken by a deferred commit.
        kv.atomic().set(&a, &KvValue::U64(1)).commit_then(move |r| done.send(r).unwrap());
        results.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
        let next = watch.next_timeout(Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!(next[0].value, Some(KvValue::U64(1)));
    }
}
