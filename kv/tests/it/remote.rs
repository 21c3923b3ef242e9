//! Raw access for network front ends: `Kv::snapshot_read` and absolute expiry.

use crate::common::for_each_store;
use stampkv::remote::RawRange;
use stampkv::{key, EnqueueOptions, Kv, KvOptions, KvValue, Mutation, MutationKind, Value};

fn range(start: &[u8], end: &[u8], limit: usize, reverse: bool) -> RawRange {
    RawRange { start: start.to_vec(), end: end.to_vec(), limit, reverse }
}

for_each_store! {
    #[test]
    fn snapshot_read_ranges_limits_and_reverse() {
        let kv = open_kv(KvOptions::default());
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            kv.set(&key![*name], &Value::Number(i as f64)).unwrap();
        }
        let vs = kv.set(&key!["n"], &KvValue::U64(7)).unwrap();
        let all = kv
            .snapshot_read(&[
                range(&[0x02], &[0x03], 10, false),
                range(&[0x02], &[0x03], 2, true),
                range(&[0x02, b'n', 0], &[0x02, b'n', 0, 0], 1, false),
                range(&[0x02], &[0x03], 0, false),
                range(&[0x03], &[0x02], 5, false),
            ])
            .unwrap();
        let keys = |i: usize| all[i].iter().map(|e| e.key.clone()).collect::<Vec<_>>();
        assert_eq!(
            keys(0),
            vec![b"\x02a\x00".to_vec(), b"\x02b\x00".to_vec(), b"\x02c\x00".to_vec(), b"\x02n\x00".to_vec()]
        );
        assert_eq!(keys(1), vec![b"\x02n\x00".to_vec(), b"\x02c\x00".to_vec()]);
        assert_eq!(all[2].len(), 1);
        assert_eq!(all[2][0].value, KvValue::U64(7));
        assert_eq!(all[2][0].versionstamp, vs);
        assert!(all[3].is_empty());
        assert!(all[4].is_empty());
    }

    #[test]
    fn snapshot_read_never_reaches_the_reserved_key_space() {
        let kv = open_kv(KvOptions::default());
        kv.set(&key!["a"], &Value::Null).unwrap();
        kv.enqueue(
            &Value::Null,
            EnqueueOptions { delay: std::time::Duration::from_secs(3600), ..Default::default() },
        )
        .unwrap();
        let all = kv
            .snapshot_read(&[range(&[], &[0xFF, 0xFF], 100, false), range(&[0xFF], &[0xFF, 0xFF], 100, true)])
            .unwrap();
        assert_eq!(all[0].len(), 1);
        assert!(all[1].is_empty());
    }

    #[test]
    fn absolute_expiry_in_the_past_is_invisible_and_far_future_is_kept() {
        let kv = open_kv(KvOptions::default());
        let set =
            |name: &str| Mutation { key: key![name], kind: MutationKind::Set(KvValue::U64(1)), expire_in: None };
        kv.atomic()
            .mutate_expiring_at(set("past"), 1)
            .mutate_expiring_at(set("future"), 4_000_000_000_000)
            .commit()
            .unwrap();
        assert!(!kv.get::<KvValue>(&key!["past"]).unwrap().exists());
        assert!(kv.get::<KvValue>(&key!["future"]).unwrap().exists());
        let err = kv.atomic().mutate_expiring_at(set("x"), u64::MAX).commit().unwrap_err();
        assert_eq!(err.to_string(), format!("Invalid mutation: expireAt is too large: {}", u64::MAX));
    }
}

// On the engine only: durability, files, maintenance.

/// A point range `[key, key ++ 0x00)` (what Deno's `get` sends) takes a lookup path of its
/// own; it must answer exactly as the same key read through a range one byte wider would:
/// present, absent, deleted, expired, in the memtable and in tables, and every limit.
#[test]
fn point_ranges_answer_as_ranges_do() {
    let kv = Kv::open_in_memory(KvOptions::default()).unwrap();
    let expiring =
        |name: &str| Mutation { key: key![name], kind: MutationKind::Set(KvValue::U64(9)), expire_in: None };
    for round in 0..2 {
        kv.set(&key!["a"], &Value::Number(f64::from(round))).unwrap();
        kv.set(&key!["gone"], &Value::Null).unwrap();
        kv.delete(&key!["gone"]).unwrap();
        kv.atomic().mutate_expiring_at(expiring("old"), 1).commit().unwrap();
        kv.set(&key!["a", "child"], &Value::Bool(true)).unwrap();
        for name in ["a", "gone", "old", "missing"] {
            let start = key![name].encode().unwrap();
            let mut point_end = start.clone();
            point_end.push(0);
            // A range that also holds ["a", "child"]: limit 1 returns the key itself first.
            let mut wide_end = start.clone();
            wide_end.push(0xFF);
            for limit in [1, 2] {
                let both = kv
                    .snapshot_read(&[
                        range(&start, &point_end, limit, false),
                        range(&start, &wide_end, 1, false),
                    ])
                    .unwrap();
                let point: Vec<_> = both[0].clone();
                let wide: Vec<_> = both[1].iter().filter(|e| e.key == start).cloned().collect();
                assert_eq!(point, wide, "{name} (round {round}, limit {limit})");
                assert_eq!(point.len(), usize::from(name == "a"), "{name}");
            }
        }
        kv.engine().flush().unwrap();
    }
}
