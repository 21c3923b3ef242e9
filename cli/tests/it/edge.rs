//! `stampkv edge` as a process in front of `stampkv serve`, and the primary killed with
//! SIGKILL: the edge keeps serving what it cached (fresh, then stale within
//! `--stale-if-error`), answers a miss with a 503 naming the upstream, and recovers when the
//! primary comes back on the same address (with the same database id).

use stampkv::{key, Consistency, Key, Kv, KvOptions, KvValue};
use stampkv_client::{ConnectOptions, RemoteKv, Retry};
use stampkv_kvconnect as proto;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "edge-process-token-0123";

/// A running `stampkv` process and its address; killed when dropped, so a failed test
/// leaves nothing behind.
struct Process {
    child: Child,
    addr: String,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(args: &[&str]) -> Process {
    let child = Command::new(env!("CARGO_BIN_EXE_stampkv"))
        .args(args)
        .env("STAMPKV_ACCESS_TOKEN", TOKEN)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    until_listening(child, args)
}

/// Waits for the process's `listening` log line.
fn until_listening(mut child: Child, args: &[&str]) -> Process {
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "stampkv {args:?} exited before listening");
        if line.contains("msg=\"listening\"") {
            break;
        }
    }
    let addr = line.split("addr=").nth(1).unwrap().split(' ').next().unwrap().to_owned();
    // Keep draining the log so the process never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = stderr.read_to_end(&mut sink);
    });
    Process { child, addr }
}

fn primary(dir: &std::path::Path, addr: &str) -> Process {
    spawn(&["serve", "--addr", addr, "--path", dir.to_str().unwrap()])
}

fn point(key: &Key) -> proto::SnapshotRead {
    let start = key.encode().unwrap();
    let mut end = start.clone();
    end.push(0);
    proto::SnapshotRead { ranges: vec![proto::ReadRange { start, end, limit: 1, reverse: false }] }
}

async fn eventual(kv: &RemoteKv, key: &Key) -> Result<Option<Vec<u8>>, String> {
    let output = kv.snapshot_read_raw(&point(key), Consistency::Eventual).await.map_err(|e| e.to_string())?;
    Ok(output.ranges[0].values.first().map(|e| e.value.clone()))
}

fn metrics(addr: &str) -> String {
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    write!(
        conn,
        "GET /metrics HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {TOKEN}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    text
}

/// The database id `addr`'s metadata exchange hands out.
fn database_id(addr: &str) -> String {
    let body = r#"{"supportedVersions":[3]}"#;
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    write!(
        conn,
        "POST / HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    text.split("\"databaseId\":\"").nth(1).unwrap().split('"').next().unwrap().to_owned()
}

fn counter(text: &str, name: &str) -> u64 {
    let line = text.lines().find(|l| l.starts_with(&format!("stampkv_edge_{name}_total "))).unwrap();
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_outlives_a_killed_primary_and_recovers_when_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    {
        let kv = Kv::open(dir.path(), KvOptions::default()).unwrap();
        for i in 0..20u64 {
            kv.set(&key!["k", i], &KvValue::Bytes(vec![i as u8; 3])).unwrap();
        }
        kv.close().unwrap();
    }
    let mut first = primary(dir.path(), "127.0.0.1:0");
    let primary_addr = first.addr.clone();
    let id_before = database_id(&primary_addr);
    let edge = spawn(&[
        "edge",
        "--upstream",
        &format!("http://{primary_addr}"),
        "--addr",
        "127.0.0.1:0",
        "--cache-ttl",
        "1s",
        "--stale-if-error",
        "1m",
    ]);
    let mut options = ConnectOptions::new(TOKEN);
    options.retry = Retry::NONE;
    let at_edge = RemoteKv::connect(&format!("http://{}", edge.addr), options).await.unwrap();
    for i in 0..10u64 {
        assert_eq!(eventual(&at_edge, &key!["k", i]).await.unwrap(), Some(vec![i as u8; 3]));
    }

    first.child.kill().unwrap();
    first.child.wait().unwrap();
    // Fresh entries: served as if nothing happened.
    for i in 0..10u64 {
        assert_eq!(eventual(&at_edge, &key!["k", i]).await.unwrap(), Some(vec![i as u8; 3]));
    }
    // A miss: a clear error naming the upstream.
    let miss = eventual(&at_edge, &key!["k", 15u64]).await.unwrap_err();
    assert!(miss.contains("503") && miss.contains("cannot reach its upstream"), "{miss}");
    // Expired entries (TTL 1 s): still served while the upstream is down, counted as stale.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    for i in 0..10u64 {
        assert_eq!(eventual(&at_edge, &key!["k", i]).await.unwrap(), Some(vec![i as u8; 3]));
    }
    let page = metrics(&edge.addr);
    assert!(counter(&page, "stale_served") >= 10, "{page}");
    assert!(counter(&page, "upstream_errors") >= 1, "{page}");

    // The primary comes back on the same address, with the same database id (clients such as
    // Deno's keep their metadata across the restart).
    let _second = primary(dir.path(), &primary_addr);
    assert_eq!(database_id(&primary_addr), id_before);
    let start = Instant::now();
    loop {
        match eventual(&at_edge, &key!["k", 15u64]).await {
            Ok(found) => {
                assert_eq!(found, Some(vec![15u8; 3]));
                break;
            }
            Err(e) => assert!(start.elapsed() < Duration::from_secs(10), "the edge did not recover: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Writes through the edge work again and are visible there at once.
    let write = proto::AtomicWrite {
        mutations: vec![proto::Mutation {
            key: key!["k", 3u64].encode().unwrap(),
            value: Some(proto::KvValue { data: b"new".to_vec(), encoding: proto::VE_BYTES }),
            mutation_type: proto::M_SET,
            ..Default::default()
        }],
        ..Default::default()
    };
    assert_eq!(at_edge.atomic_write_raw(&write).await.unwrap().status, proto::AW_SUCCESS);
    assert_eq!(eventual(&at_edge, &key!["k", 3u64]).await.unwrap(), Some(b"new".to_vec()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_started_before_its_upstream_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let upstream = format!("http://127.0.0.1:{port}");
    let args = ["edge", "--upstream", upstream.as_str(), "--addr", "127.0.0.1:0"];
    let edge = Command::new(env!("CARGO_BIN_EXE_stampkv"))
        .args(args)
        .env("STAMPKV_ACCESS_TOKEN", TOKEN)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let _primary = primary(dir.path(), &format!("127.0.0.1:{port}"));
    let edge = until_listening(edge, &args);
    let at_edge =
        RemoteKv::connect(&format!("http://{}", edge.addr), ConnectOptions::new(TOKEN)).await.unwrap();
    assert_eq!(eventual(&at_edge, &key!["nothing"]).await.unwrap(), None);
    // A refused token is not waited out: the edge stops with one clear line.
    let out = Command::new(env!("CARGO_BIN_EXE_stampkv"))
        .args([
            "edge",
            "--upstream",
            upstream.as_str(),
            "--addr",
            "127.0.0.1:0",
            "--upstream-token",
            "wrong-token-0123456",
        ])
        .env("STAMPKV_ACCESS_TOKEN", TOKEN)
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Invalid access token."), "{stderr}");
}
