//! `stampkv serve` as a process: SIGTERM while commits are in flight. A commit whose request
//! had begun before the signal still completes with a 200 and is on disk afterwards; every
//! acknowledged commit of a continuous writer survives; watch streams end; the process exits
//! 0 after closing the database. Plain HTTP/1.1 over loopback sockets.

use prost::Message;
use stampkv::{key, Key, Kv, KvOptions, KvValue};
use stampkv_server::proto;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

const TOKEN: &str = "shutdown-test-token-0123";

/// Where requests go: the server's address and database id.
#[derive(Clone)]
struct Target {
    addr: String,
    database_id: String,
}

/// A running `stampkv serve` and its log lines; killed when dropped (a failed test leaves
/// no server behind).
struct Serving {
    child: Child,
    target: Target,
    log: mpsc::Receiver<String>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &std::path::Path) -> Serving {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stampkv"))
        .args(["serve", "--addr", "127.0.0.1:0", "--sync", "always", "--path"])
        .arg(dir)
        .env("STAMPKV_ACCESS_TOKEN", TOKEN)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, log) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let listening = log.recv_timeout(Duration::from_secs(30)).unwrap();
    assert!(listening.contains("msg=\"listening\""), "{listening}");
    let addr = listening.split("addr=").nth(1).unwrap().split(' ').next().unwrap().to_owned();
    let mut target = Target { addr, database_id: String::new() };
    let body = br#"{"supportedVersions":[2,3]}"#;
    let mut conn = TcpStream::connect(&target.addr).unwrap();
    let (status, reply) = exchange(&mut conn, &target, "/", "application/json", body);
    assert_eq!(status, 200);
    let reply = String::from_utf8(reply).unwrap();
    let id = reply.split("\"databaseId\":\"").nth(1).unwrap().split('"').next().unwrap();
    target.database_id = id.to_owned();
    Serving { child, target, log }
}

fn head(target: &Target, path: &str, content_type: &str, length: usize) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {TOKEN}\r\n\
         x-denokv-database-id: {}\r\nx-denokv-version: 3\r\ncontent-type: {content_type}\r\n\
         content-length: {length}\r\n\r\n",
        target.addr, target.database_id
    )
}

/// Reads one response with a `content-length` body: (status, body).
fn read_response(conn: &mut impl Read) -> std::io::Result<(u16, Vec<u8>)> {
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let status: u16 =
        line.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or(std::io::ErrorKind::InvalidData)?;
    let mut length = 0;
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let lower = line.to_ascii_lowercase();
        if let Some(value) = lower.strip_prefix("content-length:") {
            length = value.trim().parse().map_err(|_| std::io::ErrorKind::InvalidData)?;
        }
        if line == "\r\n" || line.is_empty() {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok((status, body))
}

fn exchange(
    conn: &mut TcpStream,
    target: &Target,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, Vec<u8>) {
    conn.write_all(head(target, path, content_type, body.len()).as_bytes()).unwrap();
    conn.write_all(body).unwrap();
    read_response(conn).unwrap()
}

fn set_body(key: &Key, n: u64) -> Vec<u8> {
    let mutation = proto::Mutation {
        key: key.encode().unwrap(),
        value: Some(proto::KvValue { data: n.to_le_bytes().to_vec(), encoding: proto::VE_LE64 }),
        mutation_type: proto::M_SET,
        ..Default::default()
    };
    proto::AtomicWrite { checks: Vec::new(), mutations: vec![mutation], enqueues: Vec::new() }.encode_to_vec()
}

fn committed(status: u16, body: &[u8]) -> bool {
    status == 200 && proto::AtomicWriteOutput::decode(body).unwrap().status == proto::AW_SUCCESS
}

fn sigterm(child: &Child) {
    let status = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().unwrap();
    assert!(status.success());
}

#[test]
fn sigterm_lets_in_flight_commits_finish_and_closes_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut serving = start(dir.path());

    // Continuous writers on keep-alive connections, each recording what was acknowledged.
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..8u64)
        .map(|w| {
            let target = serving.target.clone();
            let mut conn = TcpStream::connect(&target.addr).unwrap();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                for i in 0u64.. {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let body = set_body(&key!["w", w, i], i);
                    let head = head(&target, "/v2/atomic_write", "application/x-protobuf", body.len());
                    if conn.write_all(head.as_bytes()).and_then(|()| conn.write_all(&body)).is_err() {
                        break;
                    }
                    match read_response(&mut conn) {
                        Ok((status, reply)) => {
                            assert!(status < 500, "a writer got status {status} during shutdown");
                            if !committed(status, &reply) {
                                break;
                            }
                            acked.push(i);
                        }
                        Err(_) => break, // the connection closed: shutdown under way
                    }
                }
                acked
            })
        })
        .collect();

    // A watch stream, which must end when the server stops.
    let mut watch_conn = TcpStream::connect(&serving.target.addr).unwrap();
    let watch = proto::Watch { keys: vec![proto::WatchKey { key: key!["watched"].encode().unwrap() }] };
    let watch_body = watch.encode_to_vec();
    watch_conn
        .write_all(head(&serving.target, "/v2/watch", "application/x-protobuf", watch_body.len()).as_bytes())
        .unwrap();
    watch_conn.write_all(&watch_body).unwrap();

    // A commit in flight at the signal: its headers and half its body are sent before
    // SIGTERM, the rest after.
    let slow_key = key!["in flight"];
    let slow_body = set_body(&slow_key, 42);
    let mut slow = TcpStream::connect(&serving.target.addr).unwrap();
    slow.write_all(
        head(&serving.target, "/v2/atomic_write", "application/x-protobuf", slow_body.len()).as_bytes(),
    )
    .unwrap();
    let (first, rest) = slow_body.split_at(slow_body.len() / 2);
    slow.write_all(first).unwrap();

    std::thread::sleep(Duration::from_millis(700));
    sigterm(&serving.child);
    let signalled = Instant::now();
    // The server is shutting down; the request it was reading completes.
    std::thread::sleep(Duration::from_millis(500));
    slow.write_all(rest).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let (status, reply) = read_response(&mut slow).unwrap();
    assert!(committed(status, &reply), "the in-flight commit got status {status}");

    // The watch stream ends (EOF) rather than holding the server open.
    watch_conn.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut sink = Vec::new();
    let _ = watch_conn.read_to_end(&mut sink);
    assert!(signalled.elapsed() < Duration::from_secs(15), "the watch stream outlived the shutdown");

    stop.store(true, Ordering::SeqCst);
    let acked: Vec<Vec<u64>> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let status = serving.child.wait().unwrap();
    assert!(status.success(), "the server exited with {status}");
    // The log reader thread may still be forwarding the last lines: read until it ends
    // (the server's stderr closed) or 10 s pass.
    let mut log = Vec::new();
    while let Ok(line) = serving.log.recv_timeout(Duration::from_secs(10)) {
        log.push(line);
    }
    assert!(log.iter().any(|l| l.contains("msg=\"stopped\"")), "no clean stop in the log: {log:?}");

    let kv = Kv::open(dir.path(), KvOptions::default()).unwrap();
    let slow_entry = kv.get::<KvValue>(&slow_key).unwrap();
    assert_eq!(slow_entry.value, Some(KvValue::U64(42)), "the in-flight commit is not on disk");
    let total: usize = acked.iter().map(Vec::len).sum();
    assert!(total > 0, "the writers committed nothing before the signal");
    for (w, acked) in acked.iter().enumerate() {
        for &i in acked {
            let entry = kv.get::<KvValue>(&key!["w", w as u64, i]).unwrap();
            assert_eq!(entry.value, Some(KvValue::U64(i)), "acknowledged commit w{w}/{i} is missing");
        }
    }
    kv.close().unwrap();
}
