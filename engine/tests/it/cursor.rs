//! The lending cursor (`Db::cursor`, `Snapshot::cursor`): over random ranges of a database
//! whose versions are spread over memtables and every level, with tombstones, expired and
//! expiring values, it yields exactly what the owning iterator (`Db::range`) yields and a
//! `BTreeMap` model holds; it keeps its view while the database changes; it ends cleanly.

use crate::common::{env_or, Rng};
use stampkv_engine::{BackgroundMode, Clock, Db, DbCursor, Entry, ManualClock, Options, WriteBatch};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

/// What a read must see: key -> (value, expiry).
type Model = BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)>;

/// Key `i`: `key(i) < key(j)` for `i < j`.
fn key(i: u64) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

/// Key `i`, of one of four shapes around the 16 bytes the merge and the cursor hold of a
/// key: short; short with a trailing zero (equal to the short one in those 16 bytes);
/// exactly 16 bytes; and over 16 bytes, sharing the first 16 with every other such key.
fn shaped_key(i: u64) -> Vec<u8> {
    match i % 4 {
        0 => format!("key{i:04}").into_bytes(),
        1 => [format!("key{:04}", i - 1).as_bytes(), &[0]].concat(),
        2 => format!("key{i:04}-sixteen").into_bytes(),
        _ => format!("a-long-key-head-{i:04}").into_bytes(),
    }
}

/// Everything a cursor yields, as entries.
fn drain(mut cursor: DbCursor) -> Vec<Entry> {
    let mut out = Vec::new();
    while cursor.next().unwrap() {
        assert!(cursor.valid());
        out.push(Entry {
            key: cursor.key().to_vec(),
            value: cursor.value().to_vec(),
            seq: cursor.seq(),
            expires_at_ms: cursor.expires_at_ms(),
        });
    }
    // Past the end it stays there, lending nothing.
    assert!(!cursor.valid() && cursor.key().is_empty() && cursor.value().is_empty());
    assert!(!cursor.next().unwrap());
    out
}

fn random_bound(rng: &mut Rng) -> Bound<Vec<u8>> {
    match rng.below(3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(shaped_key(rng.below(420))),
        _ => Bound::Excluded(shaped_key(rng.below(420))),
    }
}

fn live_in(
    model: &Model,
    lower: &Bound<Vec<u8>>,
    upper: &Bound<Vec<u8>>,
    now_ms: u64,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    if let (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) = (lower, upper)
    {
        let both_included = matches!((lower, upper), (Bound::Included(_), Bound::Included(_)));
        if l > u || (l == u && !both_included) {
            return Vec::new();
        }
    }
    model
        .range::<Vec<u8>, _>((lower.clone(), upper.clone()))
        .filter(|(_, (_, expires))| expires.is_none_or(|at| now_ms < at))
        .map(|(k, (v, _))| (k.clone(), v.clone()))
        .collect()
}

#[test]
fn random_ranges_agree_with_the_iterator_and_the_model() {
    let seed = env_or("STAMPKV_CURSOR_SEED", 21);
    let steps = env_or("STAMPKV_CURSOR_STEPS", 3000);
    let clock = Arc::new(ManualClock::new(1_000));
    let mut options = Options::tiny_for_tests();
    options.background = BackgroundMode::Inline;
    options.clock = clock.clone();
    let db = Db::open_in_memory(options).unwrap();
    let mut model = Model::new();
    let mut rng = Rng::new(seed);
    let mut checks = 0;
    for step in 0..steps {
        let mut batch = WriteBatch::new();
        for _ in 0..1 + rng.below(4) {
            let k = shaped_key(rng.below(400));
            match rng.below(10) {
                0..=1 => {
                    batch.delete(&k);
                    model.remove(&k);
                }
                2 => {
                    let at = clock.now_ms() + 1 + rng.below(40);
                    let v = format!("expiring {step}").into_bytes();
                    batch.put_expiring(&k, &v, at);
                    model.insert(k, (v, Some(at)));
                }
                _ => {
                    let v = format!("value {step} {}", "x".repeat(rng.index(50))).into_bytes();
                    batch.put(&k, &v);
                    model.insert(k, (v, None));
                }
            }
        }
        db.write(batch).unwrap();
        if rng.below(8) == 0 {
            clock.advance(rng.below(10));
        }
        if step % 15 == 0 {
            let (lower, upper) = (random_bound(&mut rng), random_bound(&mut rng));
            let now = clock.now_ms();
            let want = live_in(&model, &lower, &upper, now);
            let range = (lower.clone(), upper.clone());
            let from_cursor = drain(db.cursor(range.clone()));
            let from_iter: Vec<Entry> = db.range(range).collect::<Result<_, _>>().unwrap();
            assert_eq!(from_cursor, from_iter, "step {step}: {lower:?}..{upper:?}");
            let pairs: Vec<(Vec<u8>, Vec<u8>)> =
                from_cursor.iter().map(|e| (e.key.clone(), e.value.clone())).collect();
            assert_eq!(pairs, want, "step {step}: {lower:?}..{upper:?}");
            for entry in &from_cursor {
                assert_eq!(entry.expires_at_ms, model[&entry.key].1, "step {step}");
            }
            checks += 1;
        }
    }
    let stats = db.stats();
    // The versions went through many flushes and compactions.
    assert!(stats.flushes > 10 && stats.compactions > 0, "{stats:?}");
    assert!(checks >= steps / 15);
}

#[test]
fn a_cursor_keeps_its_view_while_the_database_changes() {
    let mut options = Options::tiny_for_tests();
    options.background = BackgroundMode::Inline;
    let db = Db::open_in_memory(options).unwrap();
    for i in 0..300 {
        db.put(&key(i), format!("old {i}").as_bytes()).unwrap();
    }
    let snapshot = db.snapshot();
    let mut cursor = db.cursor::<&[u8], _>(..);
    assert!(cursor.next().unwrap());
    assert_eq!(cursor.key(), key(0).as_slice());
    // Rewrite and delete everything, flushing and compacting under the cursor.
    for i in 0..300 {
        if i % 2 == 0 {
            db.delete(&key(i)).unwrap();
        } else {
            db.put(&key(i), format!("new {i}").as_bytes()).unwrap();
        }
    }
    db.put(b"key9999", b"added").unwrap();
    db.compact().unwrap();
    let mut seen = vec![(cursor.key().to_vec(), cursor.value().to_vec())];
    while cursor.next().unwrap() {
        seen.push((cursor.key().to_vec(), cursor.value().to_vec()));
    }
    let old: Vec<(Vec<u8>, Vec<u8>)> = (0..300).map(|i| (key(i), format!("old {i}").into_bytes())).collect();
    assert_eq!(seen, old);
    // A snapshot's cursor sees the snapshot; a new cursor sees the present.
    let from_snapshot = drain(snapshot.cursor(key(290)..));
    assert_eq!(from_snapshot.len(), 10);
    assert!(from_snapshot.iter().all(|e| e.value.starts_with(b"old")));
    let now: Vec<Vec<u8>> = drain(db.cursor(key(290)..)).into_iter().map(|e| e.value).collect();
    assert_eq!(
        now,
        [
            b"new 291".to_vec(),
            b"new 293".to_vec(),
            b"new 295".to_vec(),
            b"new 297".to_vec(),
            b"new 299".to_vec(),
            b"added".to_vec()
        ]
    );
}

#[test]
fn empty_and_inverted_ranges_yield_nothing() {
    let db = Db::open_in_memory(Options::default()).unwrap();
    assert!(drain(db.cursor::<&[u8], _>(..)).is_empty());
    db.put(b"b", b"1").unwrap();
    let cursor = db.cursor(b"a".as_slice()..b"a".as_slice());
    assert!(!cursor.valid() && cursor.key().is_empty());
    assert!(drain(cursor).is_empty());
    assert!(drain(db.cursor(b"c".as_slice()..b"a".as_slice())).is_empty());
    assert!(drain(db.cursor::<&[u8], _>((Bound::Excluded(b"b".as_slice()), Bound::Unbounded))).is_empty());
    assert_eq!(drain(db.cursor(b"b".as_slice()..=b"b".as_slice())).len(), 1);
}
