//! Members killed under load: the etcd leader is killed with SIGKILL while 16 writers
//! commit through two stores (two servers); afterwards every acknowledged commit is there
//! exactly once with its versionstamp, no commit that failed as "not applied" is there, and
//! versionstamps increase in each writer's commit order and never repeat.
//!
//! One run in CI; more with `STAMPKV_FAILOVER_RUNS=10 cargo test -p stampkv-etcd failover`.

use stampkv::{key, Kv, KvError, KvValue, Limits, StorageErrorKind, Versionstamp};
use stampkv_etcd::{EtcdOptions, EtcdStore};
use stampkv_testkit::etcd::EtcdCluster;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const WRITERS: u64 = 16;

/// What one writer saw.
#[derive(Default)]
struct Seen {
    acked: Vec<(u64, Versionstamp)>,
    not_applied: Vec<u64>,
    unknown: Vec<u64>,
    longest: Duration,
}

fn one_run(run: usize) -> (usize, usize, usize, Duration) {
    let mut cluster = EtcdCluster::start(3).expect("start a 3-member etcd cluster");
    let open = || {
        let options = EtcdOptions::new(cluster.endpoints()).with_prefix("failover/");
        Kv::with_store(EtcdStore::open(options).unwrap(), Limits::default())
    };
    let (a, b) = (open(), open());
    let stop = AtomicBool::new(false);
    let seen: Vec<Mutex<Seen>> = (0..WRITERS).map(|_| Mutex::new(Seen::default())).collect();
    std::thread::scope(|s| {
        for t in 0..WRITERS {
            let (kv, stop, seen) = (if t % 2 == 0 { &a } else { &b }, &stop, &seen[t as usize]);
            s.spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Acquire) {
                    let started = Instant::now();
                    // Each commit creates its own key and adds 1 to a shared counter: a commit
                    // applied twice would leave the counter above the number of keys.
                    let result =
                        kv.atomic().set(&key!["w", t, i], &KvValue::U64(i)).sum(&key!["count"], 1).commit();
                    let took = started.elapsed();
                    let mut seen = seen.lock().unwrap();
                    seen.longest = seen.longest.max(took);
                    match result {
                        Ok(done) => seen.acked.push((i, done.versionstamp().expect("no check to fail"))),
                        Err(KvError::Storage(e)) if e.kind() == StorageErrorKind::OutcomeUnknown => {
                            seen.unknown.push(i)
                        }
                        Err(KvError::Storage(_)) => seen.not_applied.push(i),
                        Err(e) => panic!("writer {t}: {e}"),
                    }
                    i += 1;
                }
            });
        }
        std::thread::sleep(Duration::from_millis(1500));
        let leader = cluster.leader().expect("a leader");
        cluster.kill(leader);
        std::thread::sleep(Duration::from_millis(3000));
        cluster.restart(leader).expect("restart the killed member");
        std::thread::sleep(Duration::from_millis(1000));
        stop.store(true, Ordering::Release);
    });
    let (mut acked, mut unknown_applied, mut longest) = (0, 0, Duration::ZERO);
    let mut all_stamps = Vec::new();
    let mut keys_present = 0u64;
    for (t, seen) in seen.into_iter().enumerate() {
        let seen = seen.into_inner().unwrap();
        longest = longest.max(seen.longest);
        let mut last = None;
        for (i, stamp) in &seen.acked {
            let entry = b.get::<KvValue>(&key!["w", t as u64, *i]).unwrap();
            assert_eq!(
                entry.versionstamp,
                Some(*stamp),
                "run {run}: acknowledged commit {t}/{i} lost or applied again"
            );
            assert!(last < Some(*stamp), "run {run}: writer {t}'s versionstamps do not increase");
            last = Some(*stamp);
            all_stamps.push(*stamp);
        }
        for i in &seen.not_applied {
            let entry = b.get::<KvValue>(&key!["w", t as u64, *i]).unwrap();
            assert_eq!(
                entry.versionstamp, None,
                "run {run}: commit {t}/{i} failed as not applied, yet it is there"
            );
        }
        for i in &seen.unknown {
            if b.get::<KvValue>(&key!["w", t as u64, *i]).unwrap().versionstamp.is_some() {
                unknown_applied += 1;
            }
        }
        acked += seen.acked.len();
        keys_present += seen.acked.len() as u64;
    }
    keys_present += unknown_applied as u64;
    let count = b.get::<KvValue>(&key!["count"]).unwrap().value;
    assert_eq!(count, Some(KvValue::U64(keys_present)), "run {run}: a commit was applied twice or half");
    let n = all_stamps.len();
    all_stamps.sort();
    all_stamps.dedup();
    assert_eq!(all_stamps.len(), n, "run {run}: a versionstamp repeats");
    assert!(acked > 100, "run {run}: only {acked} commits were acknowledged");
    let stats = (a.store().stats(), b.store().stats());
    eprintln!(
        "failover run {run}: {acked} acknowledged, longest commit {longest:?}, unknown outcomes settled {}, fences {}",
        stats.0.unknown_outcomes + stats.1.unknown_outcomes,
        stats.0.fences + stats.1.fences
    );
    (acked, unknown_applied, n, longest)
}

#[test]
fn killing_the_etcd_leader_under_16_writers_loses_and_doubles_nothing() {
    let runs = std::env::var("STAMPKV_FAILOVER_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let mut longest = Duration::ZERO;
    for run in 0..runs {
        let (_, _, _, took) = one_run(run);
        longest = longest.max(took);
    }
    eprintln!("failover: {runs} runs, longest commit pause {longest:?}");
}
