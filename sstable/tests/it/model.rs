//! Random tables checked against a sorted in-memory model.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::Arc;

use stampkv_sstable::{BlockCache, Compression, TableIter, TableOptions};

use crate::common::{build, cmp_key, open, Entry, Rng};

/// A user key with lots of shared prefixes: a prefix from a small pool plus a short
/// suffix over a 4-letter alphabet (including 0x00 and 0xff); lengths 0..40.
fn random_user_key(rng: &mut Rng, prefixes: &[Vec<u8>]) -> Vec<u8> {
    let mut key = prefixes[rng.index(prefixes.len())].clone();
    let extra = rng.index(40 - key.len());
    let alphabet = [0x00, b'a', b'b', 0xff];
    for _ in 0..rng.index(extra + 1) {
        key.push(alphabet[rng.index(4)]);
    }
    key
}

fn random_trailer(rng: &mut Rng) -> u64 {
    match rng.index(10) {
        0 => 0,
        1 => u64::MAX,
        2 => rng.index(4) as u64,
        _ => rng.next_u64(),
    }
}

/// Entries with random keys; values random bytes, or (with `compressible`) for about half
/// of the keys a short random pattern repeated, so that blocks of one table differ in
/// how well they compress.
fn random_entries(rng: &mut Rng, distinct_keys: usize, compressible: bool) -> Vec<Entry> {
    let prefixes: Vec<Vec<u8>> = (0..8)
        .map(|i| {
            let len = [0, 1, 3, 8, 12, 20, 30, 39][i];
            rng.bytes(len)
        })
        .collect();
    let mut keys = BTreeSet::new();
    while keys.len() < distinct_keys {
        keys.insert(random_user_key(rng, &prefixes));
    }
    let mut entries = Vec::new();
    for key in keys {
        let versions = 1 + rng.index(4);
        let trailers: BTreeSet<u64> = (0..versions).map(|_| random_trailer(rng)).collect();
        for &t in trailers.iter().rev() {
            let len = if rng.chance(15) { 0 } else { rng.index(301) };
            let value = if compressible && rng.chance(50) {
                let pattern_len = 1 + rng.index(8);
                let pattern = rng.bytes(pattern_len);
                pattern.repeat(len / pattern.len() + 1)[..len].to_vec()
            } else {
                rng.bytes(len)
            };
            entries.push((key.clone(), t, value));
        }
    }
    entries
}

/// Index of the first entry >= target.
fn lower_bound(model: &[Entry], user: &[u8], trailer: u64) -> usize {
    model.partition_point(|(u, t, _)| cmp_key(u, *t, user, trailer) == Ordering::Less)
}

/// A seek target: present keys with nearby / extreme trailers, and absent keys.
fn random_target(rng: &mut Rng, model: &[Entry]) -> (Vec<u8>, u64) {
    let (user, trailer, _) = &model[rng.index(model.len())];
    match rng.index(8) {
        0 => (user.clone(), *trailer),
        1 => (user.clone(), trailer.wrapping_add(1)),
        2 => (user.clone(), trailer.wrapping_sub(1)),
        3 => (user.clone(), 0),
        4 => (user.clone(), u64::MAX),
        5 => ([user.as_slice(), &[0x00]].concat(), rng.next_u64()),
        6 => (user[..user.len() / 2].to_vec(), u64::MAX),
        _ => {
            let len = rng.index(6);
            (rng.bytes(len), rng.next_u64())
        }
    }
}

fn assert_at(it: &TableIter, model: &[Entry], pos: Option<usize>, what: &str) {
    match pos {
        Some(i) => {
            assert!(it.valid(), "{what}: expected entry {i}, iterator invalid");
            let (u, t, v) = &model[i];
            assert_eq!((it.user_key(), it.trailer()), (u.as_slice(), *t), "{what}");
            assert_eq!(it.value(), v.as_slice(), "{what}: value");
        }
        None => assert!(!it.valid(), "{what}: expected invalid"),
    }
}

fn check_scans(it: &mut TableIter, model: &[Entry]) {
    it.seek_to_first().unwrap();
    for i in 0..model.len() {
        assert_at(it, model, Some(i), "forward scan");
        it.next().unwrap();
    }
    assert!(!it.valid());
    it.seek_to_last().unwrap();
    for i in (0..model.len()).rev() {
        assert_at(it, model, Some(i), "reverse scan");
        it.prev().unwrap();
    }
    assert!(!it.valid());
}

fn check_seeks(it: &mut TableIter, model: &[Entry], rng: &mut Rng) {
    for _ in 0..300 {
        let (user, trailer) = random_target(rng, model);
        let lb = lower_bound(model, &user, trailer);
        it.seek(&user, trailer).unwrap();
        assert_at(it, model, (lb < model.len()).then_some(lb), "seek");
        let ub = model.partition_point(|(u, t, _)| cmp_key(u, *t, &user, trailer) != Ordering::Greater);
        it.seek_for_prev(&user, trailer).unwrap();
        assert_at(it, model, ub.checked_sub(1), "seek_for_prev");
    }
}

/// Random next/prev walks with direction changes, restarted by random seeks.
fn check_walks(it: &mut TableIter, model: &[Entry], rng: &mut Rng) {
    let mut pos: Option<usize> = None;
    for step in 0..3000 {
        if pos.is_none() || rng.chance(2) {
            let (user, trailer) = random_target(rng, model);
            let lb = lower_bound(model, &user, trailer);
            it.seek(&user, trailer).unwrap();
            pos = (lb < model.len()).then_some(lb);
        } else if rng.chance(50) {
            it.next().unwrap();
            pos = pos.map(|p| p + 1).filter(|&p| p < model.len());
        } else {
            it.prev().unwrap();
            pos = pos.and_then(|p| p.checked_sub(1));
        }
        assert_at(it, model, pos, &format!("walk step {step}"));
    }
}

fn check_gets(table: &stampkv_sstable::Table, model: &[Entry], rng: &mut Rng) {
    for (user, trailer, value) in model.iter().step_by(3) {
        assert_eq!(table.get(user, *trailer).unwrap(), Some((*trailer, value.clone())));
    }
    for _ in 0..500 {
        let (user, max_trailer) = random_target(rng, model);
        let lb = lower_bound(model, &user, max_trailer);
        let expected = model.get(lb).filter(|(u, _, _)| *u == user).map(|(_, t, v)| (*t, v.clone()));
        assert_eq!(table.get(&user, max_trailer).unwrap(), expected, "get {user:?} {max_trailer}");
    }
}

#[test]
fn random_tables_match_model() {
    let mut seed = 1;
    for block_size in [64, 4096] {
        for restart_interval in [1, 16] {
            for (bloom_bits_per_key, round) in [0, 10].into_iter().flat_map(|b| [(b, 0), (b, 1)]) {
                seed += 1;
                let mut rng = Rng::new(seed);
                // Round 1 compresses, with values that often compress.
                let compression = if round == 1 { Compression::Lz4 } else { Compression::None };
                let model = random_entries(&mut rng, 1000, round == 1);
                // Round 1 also starts restart points by bytes (values run up to 300 bytes)
                // and puts three index entries between restart points.
                let (restart_bytes, index_restart_interval) = if round == 1 { (100, 3) } else { (0, 1) };
                let options = TableOptions {
                    block_size,
                    restart_interval,
                    bloom_bits_per_key,
                    compression,
                    restart_bytes,
                    index_restart_interval,
                };
                let bytes = build(&model, options);
                let table = open(bytes.clone(), seed, None);
                assert_eq!(table.entry_count(), model.len() as u64);
                let mut it = table.iter();
                check_scans(&mut it, &model);
                check_seeks(&mut it, &model, &mut rng);
                check_walks(&mut it, &model, &mut rng);
                check_gets(&table, &model, &mut rng);
                // Through a block cache that holds every block (scans after the first
                // take the next block from it ahead of time) and through one that holds
                // a few (blocks taken ahead are evicted while the scan holds them).
                for capacity in [64 << 20, 16 << 10] {
                    let cache = Arc::new(BlockCache::new(capacity));
                    let table = open(bytes.clone(), seed, Some(cache));
                    let mut it = table.iter();
                    check_scans(&mut it, &model);
                    check_scans(&mut it, &model);
                    check_walks(&mut it, &model, &mut rng);
                }
            }
        }
    }
}

/// Many versions of one user key spread over many blocks, with the index separators
/// falling between versions of the same key.
#[test]
fn versions_spanning_blocks() {
    let mut model: Vec<Entry> = Vec::new();
    for t in (0..300u64).rev() {
        model.push((b"same".to_vec(), t * 3, vec![t as u8; 10]));
    }
    model.push((b"samf".to_vec(), 5, b"x".to_vec()));
    let options = TableOptions { block_size: 64, restart_interval: 4, ..TableOptions::default() };
    let table = open(build(&model, options), 1, None);
    let mut it = table.iter();
    check_scans(&mut it, &model);
    for max in [u64::MAX, 900, 899, 898, 450, 3, 2, 0] {
        let lb = lower_bound(&model, b"same", max);
        let want = model.get(lb).filter(|e| e.0 == b"same").map(|e| (e.1, e.2.clone()));
        assert_eq!(table.get(b"same", max).unwrap(), want, "max {max}");
    }
    let mut rng = Rng::new(99);
    check_seeks(&mut it, &model, &mut rng);
    check_walks(&mut it, &model, &mut rng);
}
