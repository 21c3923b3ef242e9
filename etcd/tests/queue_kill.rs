//! Process-kill test of the queue across servers: a listener in another process (a
//! second server) claims a message and is killed with SIGKILL while its handler runs; the
//! message is delivered again by this process's listener once the visibility timeout has
//! passed, and every message is delivered and acknowledged exactly once here.
//!
//! `harness = false`: the test re-executes itself as the child (the environment variable
//! [`CHILD_ENV`] carries the cluster's endpoints and the database's prefix).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unreachable,
    reason = "test code: a panic is a failed test"
)]

use stampkv::{EnqueueOptions, Kv, KvValue, Limits, ListenOptions};
use stampkv_etcd::{EtcdOptions, EtcdStore};
use stampkv_testkit::etcd::EtcdCluster;
use stampkv_testkit::process::{killed_by_sigkill, libtest_selects};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Set in the child's environment to `ENDPOINTS PREFIX`.
const CHILD_ENV: &str = "STAMPKV_QUEUE_KILL_CHILD";
/// How long a claimed message stays invisible to other listeners.
const VISIBILITY: Duration = Duration::from_secs(2);
/// Messages enqueued.
const MESSAGES: u64 = 20;

fn main() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        child(&spec);
    }
    if libtest_selects("queue_listener_killed_while_handling") {
        parent();
        println!("test queue_listener_killed_while_handling ... ok");
    }
}

fn open(endpoints: Vec<String>, prefix: &str) -> Kv<EtcdStore> {
    let store = EtcdStore::open(EtcdOptions::new(endpoints).with_prefix(prefix)).unwrap();
    Kv::with_store(store, Limits::default())
}

fn options(workers: usize) -> ListenOptions {
    ListenOptions { workers, visibility_timeout: VISIBILITY, max_idle_wait: Duration::from_millis(50) }
}

/// The other server: one worker that takes a message, says which, and never finishes.
fn child(spec: &str) -> ! {
    let (endpoints, prefix) = spec.split_once(' ').unwrap();
    let kv = open(endpoints.split(',').map(String::from).collect(), prefix);
    let _listener = kv
        .listen_queue(options(1), |message| {
            let KvValue::U64(id) = message.value else { return Err("unexpected value".to_string()) };
            println!("got {id}");
            std::io::stdout().flush().unwrap();
            std::thread::sleep(Duration::from_secs(3600));
            Ok(())
        })
        .unwrap();
    std::thread::sleep(Duration::from_secs(3600));
    std::process::exit(0)
}

fn parent() {
    let cluster = EtcdCluster::start(3).expect("start a 3-member etcd cluster");
    let prefix = format!("queue-kill-{}/", std::process::id());
    let kv = open(cluster.endpoints(), &prefix);
    for id in 0..MESSAGES {
        kv.enqueue(&KvValue::U64(id), EnqueueOptions::default()).unwrap();
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_ENV, format!("{} {prefix}", cluster.endpoints_arg()))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let taken: u64 =
        line.trim().strip_prefix("got ").and_then(|id| id.parse().ok()).expect("the child's claim");
    let claimed_at = Instant::now();
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(killed_by_sigkill(&status), "the child ended otherwise: {status}");

    let deliveries: Arc<Mutex<HashMap<u64, Vec<Instant>>>> = Arc::default();
    let seen = deliveries.clone();
    let listener = kv
        .listen_queue(options(2), move |message| {
            let KvValue::U64(id) = message.value else { return Err("unexpected value".to_string()) };
            seen.lock().unwrap().entry(id).or_default().push(Instant::now());
            Ok(())
        })
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while deliveries.lock().unwrap().len() < MESSAGES as usize && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Long enough for a second delivery of anything to show.
    std::thread::sleep(VISIBILITY + Duration::from_millis(500));
    listener.stop();
    let deliveries = deliveries.lock().unwrap();
    assert_eq!(deliveries.len(), MESSAGES as usize, "messages never delivered: {:?}", deliveries.keys());
    for (id, at) in deliveries.iter() {
        assert_eq!(at.len(), 1, "message {id} delivered {} times here", at.len());
    }
    let again = deliveries[&taken][0].duration_since(claimed_at);
    assert!(
        again + Duration::from_millis(300) >= VISIBILITY,
        "the killed listener's message came back after {again:?}, before the visibility timeout"
    );
    assert!(kv.bulk_snapshot().messages().next().is_none(), "acknowledged messages are still queued");
    eprintln!("queue kill: the killed listener's message {taken} was delivered again after {again:?}");
    kv.close().unwrap();
}
