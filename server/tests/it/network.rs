//! The network tier against misbehaving clients, over real loopback sockets: silent and
//! idle connections, the connection cap, slow, short, malformed and oversized bodies,
//! refused requests on keep-alive connections, watch caps and shared watches, shutdown
//! with hostile connections open.

use prost::Message;
use stampkv::{Kv, KvOptions};
use stampkv_server::proto;
use stampkv_server::{serve, Config, Server};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TOKEN: &str = "test-token-0123456789";

struct Running {
    addr: String,
    server: Arc<Server>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// Stops the server; returns how long `serve` took to return.
    async fn stop(mut self) -> Duration {
        let started = Instant::now();
        self.stop.take().unwrap().send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(30), &mut self.task).await.unwrap().unwrap().unwrap();
        started.elapsed()
    }
}

async fn start(tune: impl FnOnce(&mut Config)) -> Running {
    let mut config = Config::new(TOKEN);
    tune(&mut config);
    let kv = Kv::open_in_memory(KvOptions::default()).unwrap();
    let server = Server::new(kv, config).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve(listener, server.clone(), async move {
        let _ = stopped.await;
    }));
    Running { addr, server, stop: Some(stop), task }
}

fn data_head(r: &Running, endpoint: &str, extra: &str) -> String {
    format!(
        "POST /v2/{endpoint} HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {TOKEN}\r\nx-denokv-version: 3\r\n\
         x-denokv-database-id: {}\r\n{extra}\r\n",
        r.addr,
        r.server.database_id()
    )
}

/// Reads one HTTP/1.1 answer (with a `content-length`) from `stream`: status and body.
async fn read_reply(stream: &mut TcpStream) -> (u16, String) {
    let mut data = Vec::new();
    loop {
        if let Some(split) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..split]).to_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .map(|l| l.trim().parse().unwrap())
                .unwrap_or(0);
            if data.len() >= split + 4 + length {
                let status = head.split(' ').nth(1).unwrap().parse().unwrap();
                let body = String::from_utf8_lossy(&data[split + 4..split + 4 + length]).into_owned();
                data.drain(..split + 4 + length);
                return (status, body);
            }
        }
        let mut chunk = [0u8; 4096];
        let n =
            tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk)).await.unwrap().unwrap();
        assert!(n > 0, "the connection closed before an answer: {:?}", String::from_utf8_lossy(&data));
        data.extend_from_slice(&chunk[..n]);
    }
}

/// Whether the server closes `stream` within `within`.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut chunk = [0u8; 1024];
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut chunk)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

/// A well-behaved read on a new connection: a `getMany([])`.
async fn good_read(r: &Running) -> u16 {
    let mut stream = TcpStream::connect(&r.addr).await.unwrap();
    let head = data_head(r, "snapshot_read", "content-length: 0\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    read_reply(&mut stream).await.0
}

#[tokio::test]
async fn silent_and_idle_connections_are_closed() {
    let r = start(|c| {
        c.net.header_read_timeout = Duration::from_millis(300);
        c.net.idle_timeout = Duration::from_millis(600);
    })
    .await;
    // A connection that never sends anything.
    let mut silent = TcpStream::connect(&r.addr).await.unwrap();
    // One that sends an HTTP/2 preface and then nothing.
    let mut preface = TcpStream::connect(&r.addr).await.unwrap();
    preface.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.unwrap();
    // A keep-alive connection that made one request and then idles.
    let mut idle = TcpStream::connect(&r.addr).await.unwrap();
    idle.write_all(data_head(&r, "snapshot_read", "content-length: 0\r\n").as_bytes()).await.unwrap();
    assert_eq!(read_reply(&mut idle).await.0, 200);
    let started = Instant::now();
    assert!(closed_within(&mut silent, Duration::from_secs(5)).await, "a silent connection stays open");
    assert!(
        closed_within(&mut preface, Duration::from_secs(5)).await,
        "a preface-only connection stays open"
    );
    assert!(closed_within(&mut idle, Duration::from_secs(5)).await, "an idle connection stays open");
    assert!(started.elapsed() >= Duration::from_millis(250), "closed before its timeout");
    r.stop().await;
}

#[tokio::test]
async fn at_the_cap_a_new_connection_replaces_the_longest_idle_one() {
    let r = start(|c| {
        c.net.max_connections = 4;
        c.net.header_read_timeout = Duration::from_secs(2);
    })
    .await;
    let mut silent = Vec::new();
    for _ in 0..8 {
        silent.push(TcpStream::connect(&r.addr).await.unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Every well-behaved client is served although idle sockets fill the table.
    for _ in 0..5 {
        assert_eq!(good_read(&r).await, 200);
    }
    // The first four were replaced as the others came; the rest meet the header timeout.
    for (i, stream) in silent.iter_mut().enumerate() {
        let within = if i < 4 { Duration::from_millis(900) } else { Duration::from_secs(5) };
        assert!(closed_within(stream, within).await, "idle socket {i} beyond the cap stays open");
    }
    r.stop().await;
}

#[tokio::test]
async fn at_the_cap_with_every_connection_busy_a_new_one_is_refused() {
    let r = start(|c| c.net.max_connections = 2).await;
    let body = proto::Watch { keys: vec![proto::WatchKey { key: vec![2, b'k', 0] }] }.encode_to_vec();
    let mut watches = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(&r.addr).await.unwrap();
        let head = data_head(&r, "watch", &format!("content-length: {}\r\n", body.len()));
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(&body).await.unwrap();
        let mut chunk = [0u8; 256];
        assert!(stream.read(&mut chunk).await.unwrap() > 0);
        watches.push(stream);
    }
    let mut refused = TcpStream::connect(&r.addr).await.unwrap();
    assert!(
        closed_within(&mut refused, Duration::from_secs(5)).await,
        "a connection beyond the cap is served"
    );
    drop(watches);
    r.stop().await;
}

#[tokio::test]
async fn bad_bodies_get_their_status() {
    let r = start(|c| {
        c.net.body_read_timeout = Duration::from_millis(400);
        c.net.max_body_bytes = 1000;
    })
    .await;
    // Too large by Content-Length: refused before a byte of the body is sent.
    let mut stream = TcpStream::connect(&r.addr).await.unwrap();
    stream.write_all(data_head(&r, "atomic_write", "content-length: 1000000\r\n").as_bytes()).await.unwrap();
    assert_eq!(
        read_reply(&mut stream).await,
        (413, "The request body is too large (max 1000 bytes).".into())
    );
    // A body that stops arriving.
    let mut stream = TcpStream::connect(&r.addr).await.unwrap();
    stream.write_all(data_head(&r, "atomic_write", "content-length: 100\r\n").as_bytes()).await.unwrap();
    stream.write_all(&[0; 10]).await.unwrap();
    let (status, text) = read_reply(&mut stream).await;
    assert_eq!((status, text.as_str()), (408, "The request body did not arrive within 400 ms."));
    // A never-ending chunked body grows beyond the limit: 413.
    let mut stream = TcpStream::connect(&r.addr).await.unwrap();
    stream
        .write_all(data_head(&r, "atomic_write", "transfer-encoding: chunked\r\n").as_bytes())
        .await
        .unwrap();
    for _ in 0..3 {
        stream.write_all(format!("1f4\r\n{}\r\n", "a".repeat(500)).as_bytes()).await.unwrap();
    }
    assert_eq!(read_reply(&mut stream).await.0, 413);
    // A malformed chunk size and an overflowing one: 400.
    for chunk in ["zz\r\nabc\r\n", "ffffffffffffffffffff\r\nabc\r\n"] {
        let mut stream = TcpStream::connect(&r.addr).await.unwrap();
        stream
            .write_all(data_head(&r, "atomic_write", "transfer-encoding: chunked\r\n").as_bytes())
            .await
            .unwrap();
        stream.write_all(chunk.as_bytes()).await.unwrap();
        let (status, text) = read_reply(&mut stream).await;
        assert_eq!(status, 400, "{chunk:?}: {text}");
        assert!(text.starts_with("The request body could not be read"), "{text}");
    }
    // A body shorter than its Content-Length, the client done sending: 400.
    let mut stream = TcpStream::connect(&r.addr).await.unwrap();
    stream.write_all(data_head(&r, "atomic_write", "content-length: 100\r\n").as_bytes()).await.unwrap();
    stream.write_all(&[0; 10]).await.unwrap();
    stream.shutdown().await.unwrap();
    assert_eq!(read_reply(&mut stream).await.0, 400);
    r.stop().await;
}

#[tokio::test]
async fn a_refused_request_leaves_its_keep_alive_connection_usable() {
    let r = start(|_| {}).await;
    let mut stream = TcpStream::connect(&r.addr).await.unwrap();
    let body = proto::SnapshotRead::default().encode_to_vec();
    let wrong = "POST /v2/snapshot_read HTTP/1.1\r\nhost: x\r\nauthorization: Bearer wrong-token-000\r\n\
         x-denokv-version: 3\r\ncontent-length: 5\r\n\r\nhello";
    stream.write_all(wrong.as_bytes()).await.unwrap();
    assert_eq!(read_reply(&mut stream).await, (401, "Invalid access token.".into()));
    let head = data_head(&r, "snapshot_read", &format!("content-length: {}\r\n", body.len()));
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body).await.unwrap();
    assert_eq!(read_reply(&mut stream).await.0, 200, "the second request on the connection is served");
    // 405 and 404 say what they are.
    stream.write_all(b"GET /v2/snapshot_read HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    assert_eq!(read_reply(&mut stream).await, (405, "Method not allowed.".into()));
    stream.write_all(b"GET /nowhere HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    assert_eq!(read_reply(&mut stream).await, (404, "Resource not found.".into()));
    r.stop().await;
}

#[tokio::test]
async fn protocol_1_refuses_a_forged_host() {
    let r = start(|_| {}).await;
    let body = r#"{"supportedVersions":[1]}"#;
    for (host, status) in
        [("127.0.0.1:4512", 200), ("evil.example/steal?x=", 400), ("user@evil.example", 400)]
    {
        let mut stream = TcpStream::connect(&r.addr).await.unwrap();
        let request = format!(
            "POST / HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {TOKEN}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let (got, text) = read_reply(&mut stream).await;
        assert_eq!(got, status, "{host}: {text}");
        if status == 200 {
            assert!(text.contains("\"url\":\"http://127.0.0.1:4512/v2\""), "{text}");
        }
    }
    r.stop().await;
}

/// An HTTP/2 connection (prior knowledge, as Deno's client) for the watch tests.
async fn h2(r: &Running) -> hyper::client::conn::http2::SendRequest<http_body_util::Full<bytes::Bytes>> {
    let stream = TcpStream::connect(&r.addr).await.unwrap();
    let (send, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    send
}

async fn open_watch(
    r: &Running,
    send: &mut hyper::client::conn::http2::SendRequest<http_body_util::Full<bytes::Bytes>>,
    key: &[u8],
) -> hyper::Response<hyper::body::Incoming> {
    let body = proto::Watch { keys: vec![proto::WatchKey { key: key.to_vec() }] }.encode_to_vec();
    let request = hyper::Request::post(format!("http://{}/v2/watch", r.addr))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("x-denokv-version", "3")
        .header("x-denokv-database-id", r.server.database_id())
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap();
    send.ready().await.unwrap();
    send.send_request(request).await.unwrap()
}

/// The next non-ping frame of a watch answer.
async fn next_frame(
    response: &mut hyper::Response<hyper::body::Incoming>,
    buffer: &mut Vec<u8>,
) -> proto::WatchOutput {
    use http_body_util::BodyExt;
    loop {
        while buffer.len() >= 4 {
            let length = u32::from_le_bytes(buffer[..4].try_into().unwrap()) as usize;
            if buffer.len() < 4 + length {
                break;
            }
            let frame: Vec<u8> = buffer.drain(..4 + length).skip(4).collect();
            if length > 0 {
                return proto::WatchOutput::decode(frame.as_slice()).unwrap();
            }
        }
        let frame = tokio::time::timeout(Duration::from_secs(10), response.body_mut().frame())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let Ok(data) = frame.into_data() {
            buffer.extend_from_slice(&data);
        }
    }
}

#[tokio::test]
async fn watches_are_capped_per_connection_and_share_one_read_per_key_set() {
    let r = start(|c| c.net.max_watches_per_connection = 40).await;
    let key = [2, b'h', b'o', b't', 0];
    let mut first = h2(&r).await;
    let mut second = h2(&r).await;
    let mut streams = Vec::new();
    for _ in 0..40 {
        let response = open_watch(&r, &mut first, &key).await;
        assert_eq!(response.status(), 200);
        streams.push(response);
    }
    let refused = open_watch(&r, &mut first, &key).await;
    assert_eq!(refused.status(), 429, "a 41st watch on one connection");
    // Another connection still gets watch streams.
    for _ in 0..10 {
        let response = open_watch(&r, &mut second, &key).await;
        assert_eq!(response.status(), 200);
        streams.push(response);
    }
    assert_eq!(r.server.watch_counts(), (50, 1), "50 streams share one watch");
    let mut buffers = vec![Vec::new(); streams.len()];
    for (stream, buffer) in streams.iter_mut().zip(&mut buffers) {
        let frame = next_frame(stream, buffer).await;
        assert!(frame.keys[0].changed && frame.keys[0].entry_if_changed.is_none());
    }
    r.server.kv().set(&stampkv::key!["hot"], &stampkv::Value::from("v")).unwrap();
    for (stream, buffer) in streams.iter_mut().zip(&mut buffers) {
        let frame = next_frame(stream, buffer).await;
        assert!(frame.keys[0].entry_if_changed.is_some(), "every stream sees the change");
    }
    drop(streams);
    let deadline = Instant::now() + Duration::from_secs(10);
    while r.server.watch_counts() != (0, 0) {
        assert!(Instant::now() < deadline, "closed streams were not released: {:?}", r.server.watch_counts());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    r.stop().await;
}

#[tokio::test]
async fn shutdown_finishes_within_its_grace_with_hostile_connections_open() {
    let r = start(|c| {
        c.net.shutdown_grace = Duration::from_millis(500);
        c.net.body_read_timeout = Duration::from_secs(60);
    })
    .await;
    let mut hostile = Vec::new();
    for _ in 0..20 {
        hostile.push(TcpStream::connect(&r.addr).await.unwrap());
    }
    // A body that never finishes keeps its request in flight.
    let mut slow = TcpStream::connect(&r.addr).await.unwrap();
    slow.write_all(data_head(&r, "atomic_write", "content-length: 100000\r\n").as_bytes()).await.unwrap();
    slow.write_all(&[0; 10]).await.unwrap();
    let mut watcher = h2(&r).await;
    let mut watch = open_watch(&r, &mut watcher, &[2, b'w', 0]).await;
    let mut buffer = Vec::new();
    next_frame(&mut watch, &mut buffer).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let took = r.stop().await;
    assert!(took < Duration::from_secs(5), "shutdown took {took:?}");
    drop(hostile);
}
