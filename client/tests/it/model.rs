//! A randomized model test with a fixed seed: the same sets, deletes, sums, mins, maxes and
//! checks through `RemoteKv` (to stampkv's server) and on a local `stampkv::Kv`; outcomes,
//! values, versionstamp order and list results must agree.

use crate::common::{options, start_server, TOKEN};
use stampkv::{key, CommitResult, Key, Kv, KvOptions, KvValue, ListOptions, Selector, Value, Versionstamp};
use stampkv_client::{RemoteError, RemoteKv};
use std::collections::HashMap;

const KEYS: i32 = 16;
const OPS: usize = 400;

/// The versionstamps one side has seen for each key: the current one and an older one.
#[derive(Default)]
struct Stamps {
    current: HashMap<i32, Versionstamp>,
    older: HashMap<i32, Versionstamp>,
}

impl Stamps {
    fn update(&mut self, key: i32, stamp: Option<Versionstamp>) {
        match stamp {
            Some(s) => {
                if let Some(old) = self.current.insert(key, s) {
                    if old != s {
                        self.older.insert(key, old);
                    }
                }
            }
            None => {
                if let Some(old) = self.current.remove(&key) {
                    self.older.insert(key, old);
                }
            }
        }
    }
}

fn k(i: i32) -> Key {
    key!["m", i]
}

/// One random operation, applied to both sides.
enum Op {
    Set(i32, KvValue),
    Delete(i32),
    Sum(i32, u64),
    Min(i32, u64),
    Max(i32, u64),
    /// Check a key against its current stamp (`true`) or an older one / absence, then set.
    CheckedSet(i32, bool, KvValue),
}

fn random_value(rng: &mut fastrand::Rng) -> KvValue {
    match rng.u8(0..3) {
        0 => KvValue::U64(rng.u64(0..1000)),
        1 => KvValue::from_value(&Value::from(format!("v{}", rng.u32(0..1000)).as_str())).unwrap(),
        _ => KvValue::Bytes(vec![rng.u8(..); rng.usize(0..8)]),
    }
}

fn random_op(rng: &mut fastrand::Rng) -> Op {
    let key = rng.i32(0..KEYS);
    match rng.u8(0..10) {
        0..=2 => Op::Set(key, random_value(rng)),
        3 => Op::Delete(key),
        4..=5 => Op::Sum(key, rng.u64(..)),
        6 => Op::Min(key, rng.u64(0..1000)),
        7 => Op::Max(key, rng.u64(0..1000)),
        _ => Op::CheckedSet(key, rng.bool(), random_value(rng)),
    }
}

/// The outcome of one operation on one side: committed, check failed, or the error text.
#[derive(Debug, PartialEq)]
enum Outcome {
    Committed,
    CheckFailed,
    Failed(String),
}

fn check_stamp(stamps: &Stamps, key: i32, current: bool) -> Option<Versionstamp> {
    if current {
        stamps.current.get(&key).copied()
    } else {
        stamps.older.get(&key).copied()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_and_local_agree_on_a_random_history() {
    let running = start_server().await;
    let remote = RemoteKv::connect(&running.url, options(TOKEN)).await.unwrap();
    let local = Kv::open_in_memory(KvOptions::default()).unwrap();
    let (mut remote_stamps, mut local_stamps) = (Stamps::default(), Stamps::default());
    let (mut last_remote, mut last_local): (Option<Versionstamp>, Option<Versionstamp>) = (None, None);
    let mut rng = fastrand::Rng::with_seed(0x5EED_2024);
    let (mut committed, mut check_failures, mut errors) = (0, 0, 0);

    for step in 0..OPS {
        let op = random_op(&mut rng);
        let (mut r, mut l) = (remote.atomic(), local.atomic());
        let key = match &op {
            Op::Set(i, v) => {
                (r, l) = (r.set(&k(*i), v), l.set(&k(*i), v));
                *i
            }
            Op::Delete(i) => {
                (r, l) = (r.delete(&k(*i)), l.delete(&k(*i)));
                *i
            }
            Op::Sum(i, n) => {
                (r, l) = (r.sum(&k(*i), *n), l.sum(&k(*i), *n));
                *i
            }
            Op::Min(i, n) => {
                (r, l) = (r.min(&k(*i), *n), l.min(&k(*i), *n));
                *i
            }
            Op::Max(i, n) => {
                (r, l) = (r.max(&k(*i), *n), l.max(&k(*i), *n));
                *i
            }
            Op::CheckedSet(i, current, v) => {
                r = r.check(&k(*i), check_stamp(&remote_stamps, *i, *current)).set(&k(*i), v);
                l = l.check(&k(*i), check_stamp(&local_stamps, *i, *current)).set(&k(*i), v);
                *i
            }
        };
        let remote_result = r.commit().await;
        let local_result = l.commit();
        let remote_outcome = match &remote_result {
            Ok(CommitResult::Committed(_)) => Outcome::Committed,
            Ok(CommitResult::CheckFailed) => Outcome::CheckFailed,
            Err(RemoteError::Http { status: 400, body }) => Outcome::Failed(body.clone()),
            Err(e) => panic!("step {step}: unexpected remote error {e:?}"),
        };
        let local_outcome = match &local_result {
            Ok(CommitResult::Committed(_)) => Outcome::Committed,
            Ok(CommitResult::CheckFailed) => Outcome::CheckFailed,
            Err(e) => Outcome::Failed(e.to_string()),
        };
        assert_eq!(remote_outcome, local_outcome, "step {step}");
        match remote_outcome {
            Outcome::CheckFailed => check_failures += 1,
            Outcome::Failed(_) => errors += 1,
            Outcome::Committed => {}
        }
        if let (Ok(CommitResult::Committed(rs)), Ok(CommitResult::Committed(ls))) =
            (&remote_result, &local_result)
        {
            committed += 1;
            assert!(last_remote < Some(*rs) && last_local < Some(*ls), "step {step}: versionstamps increase");
            (last_remote, last_local) = (Some(*rs), Some(*ls));
        }
        let remote_entry = remote.get::<KvValue>(&k(key)).await.unwrap();
        let local_entry = local.get::<KvValue>(&k(key)).unwrap();
        assert_eq!(remote_entry.value, local_entry.value, "step {step}");
        remote_stamps.update(key, remote_entry.versionstamp);
        local_stamps.update(key, local_entry.versionstamp);

        if step % 50 == 49 {
            compare_lists(&remote, &local, step).await;
        }
    }
    assert!(committed > OPS / 2, "most operations commit: {committed}");
    assert!(
        check_failures > 10 && errors > 10,
        "the history covers failed checks ({check_failures}) and type errors ({errors})"
    );
    running.stop().await;
}

/// Lists everything on both sides (forward, reverse, small batches): same keys and values,
/// and the versionstamps in the same order.
async fn compare_lists(remote: &RemoteKv, local: &Kv, step: usize) {
    for reverse in [false, true] {
        let options = ListOptions { reverse, batch_size: Some(3), ..ListOptions::default() };
        let selector = Selector::prefix(key!["m"]);
        let remote_entries = remote.list::<KvValue>(&selector, &options).unwrap().collect().await.unwrap();
        let local_entries: Vec<_> =
            local.list::<KvValue>(&selector, &options).unwrap().map(Result::unwrap).collect();
        let strip = |e: &stampkv::KvEntry<KvValue>| (e.key.clone(), e.value.clone());
        assert_eq!(
            remote_entries.iter().map(strip).collect::<Vec<_>>(),
            local_entries.iter().map(strip).collect::<Vec<_>>(),
            "step {step}, reverse {reverse}"
        );
        let rank = |stamps: Vec<Versionstamp>| {
            let mut sorted = stamps.clone();
            sorted.sort();
            stamps.iter().map(|s| sorted.binary_search(s).unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(
            rank(remote_entries.iter().map(|e| e.versionstamp).collect()),
            rank(local_entries.iter().map(|e| e.versionstamp).collect()),
            "step {step}: versionstamp order"
        );
    }
}
