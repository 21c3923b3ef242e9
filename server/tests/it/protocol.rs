//! KV Connect over real loopback sockets: every bad input (status and body) and the happy
//! paths of the metadata exchange, snapshot_read, atomic_write, watch and metrics.

use prost::Message;
use stampkv::{key, EnqueueOptions, Kv, KvOptions, KvValue, Value};
use stampkv_server::proto;
use stampkv_server::{serve, Config, Server};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TOKEN: &str = "test-token-0123456789";

struct Running {
    addr: String,
    server: Arc<Server>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn start_with(config: Config) -> Running {
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

async fn start() -> Running {
    start_with(Config::new(TOKEN)).await
}

/// A response: status, headers (lowercase names) and the de-chunked body.
struct Reply {
    status: u16,
    headers: String,
    body: Vec<u8>,
}

impl Reply {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(line_end) = data.windows(2).position(|w| w == b"\r\n") else { return out };
        let size = usize::from_str_radix(std::str::from_utf8(&data[..line_end]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[line_end + 2..line_end + 2 + size]);
        data = &data[line_end + 2 + size + 2..];
    }
}

async fn send(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    stream
}

async fn request(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut stream = send(addr, method, path, headers, body).await;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut raw)).await.unwrap().unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8(raw[..split].to_vec()).unwrap().to_lowercase();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let rest = &raw[split + 4..];
    let body = if head.contains("transfer-encoding: chunked") { dechunk(rest) } else { rest.to_vec() };
    Reply { status, headers: head, body }
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

async fn metadata(addr: &str, body: &str) -> Reply {
    request(
        addr,
        "POST",
        "/",
        &[("authorization", &bearer()), ("content-type", "application/json")],
        body.as_bytes(),
    )
    .await
}

/// A data path call with protocol version 3 headers.
async fn call(r: &Running, endpoint: &str, body: &[u8]) -> Reply {
    let auth = bearer();
    let headers = [
        ("authorization", auth.as_str()),
        ("x-denokv-database-id", r.server.database_id()),
        ("x-denokv-version", "3"),
        ("content-type", "application/x-protobuf"),
    ];
    request(&r.addr, "POST", &format!("/v2/{endpoint}"), &headers, body).await
}

fn range(start: &[u8], end: &[u8], limit: i32) -> proto::ReadRange {
    proto::ReadRange { start: start.to_vec(), end: end.to_vec(), limit, reverse: false }
}

fn set(key: &[u8], value: proto::KvValue) -> proto::Mutation {
    proto::Mutation {
        key: key.to_vec(),
        value: Some(value),
        mutation_type: proto::M_SET,
        ..Default::default()
    }
}

fn u64_value(n: u64) -> proto::KvValue {
    proto::KvValue { data: n.to_le_bytes().to_vec(), encoding: proto::VE_LE64 }
}

fn write(checks: Vec<proto::Check>, mutations: Vec<proto::Mutation>) -> Vec<u8> {
    proto::AtomicWrite { checks, mutations, enqueues: Vec::new() }.encode_to_vec()
}

async fn read(r: &Running, ranges: Vec<proto::ReadRange>) -> proto::SnapshotReadOutput {
    let reply = call(r, "snapshot_read", &proto::SnapshotRead { ranges }.encode_to_vec()).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    proto::SnapshotReadOutput::decode(&reply.body[..]).unwrap()
}

async fn commit(r: &Running, body: Vec<u8>) -> proto::AtomicWriteOutput {
    let reply = call(r, "atomic_write", &body).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    proto::AtomicWriteOutput::decode(&reply.body[..]).unwrap()
}

async fn assert_error(reply: Reply, status: u16, text: &str) {
    assert_eq!((reply.status, reply.text().as_str()), (status, text));
    assert!(reply.headers.contains("content-type: text/plain"), "{}", reply.headers);
}

/// A valid string key of 2102 bytes.
fn long_key() -> Vec<u8> {
    let mut key = vec![0x02];
    key.extend_from_slice(&[b'x'; 2100]);
    key.push(0x00);
    key
}

const KEY_A: &[u8] = &[0x02, b'a', 0x00];
const KEY_B: &[u8] = &[0x02, b'b', 0x00];

#[tokio::test]
async fn authorization_is_required_and_checked() {
    let r = start().await;
    let body = br#"{"supportedVersions":[3]}"#;
    let none = request(&r.addr, "POST", "/", &[], body).await;
    assert_error(none, 401, "Malformed authorization header.").await;
    let basic = request(&r.addr, "POST", "/", &[("authorization", "Basic abc")], body).await;
    assert_error(basic, 401, "Malformed authorization header.").await;
    let wrong =
        request(&r.addr, "POST", "/", &[("authorization", "Bearer test-token-0123456780")], body).await;
    assert_error(wrong, 401, "Invalid access token.").await;
    let short = request(&r.addr, "POST", "/v2/snapshot_read", &[("authorization", "Bearer x")], b"").await;
    assert_error(short, 401, "Invalid access token.").await;
}

#[tokio::test]
async fn metadata_exchange_negotiates_the_highest_version() {
    let r = start().await;
    let reply = metadata(&r.addr, r#"{"supportedVersions":[1,2,3]}"#).await;
    assert_eq!(reply.status, 200);
    let json: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(json["version"], 3);
    assert_eq!(json["databaseId"], r.server.database_id());
    assert_eq!(json["endpoints"], serde_json::json!([{"url": "/v2", "consistency": "strong"}]));
    assert_eq!(json["token"], TOKEN);
    assert!(json["expiresAt"].as_str().unwrap().ends_with('Z'));
    let v2: serde_json::Value =
        serde_json::from_slice(&metadata(&r.addr, r#"{"supportedVersions":[2]}"#).await.body).unwrap();
    assert_eq!((v2["version"].as_u64(), v2["endpoints"][0]["url"].as_str()), (Some(2), Some("/v2")));
    let v1: serde_json::Value =
        serde_json::from_slice(&metadata(&r.addr, r#"{"supportedVersions":[1]}"#).await.body).unwrap();
    assert_eq!(v1["version"], 1);
    assert_eq!(v1["endpoints"][0]["url"], format!("http://{}/v2", r.addr));
}

#[tokio::test]
async fn metadata_exchange_bad_input() {
    let r = start().await;
    assert_error(
        metadata(&r.addr, "").await,
        400,
        "The server requires at least protocol version 2. Use Deno 1.38.0 or newer.",
    )
    .await;
    assert_error(
        metadata(&r.addr, r#"{"supportedVersions":[4,5]}"#).await,
        400,
        "The server could not negotiate a protocol version. The server requires protocol version 1, 2 or 3.",
    )
    .await;
    let reply = metadata(&r.addr, "{not json").await;
    assert_eq!(reply.status, 400);
    assert!(reply.text().starts_with("Invalid metadata exchange request: "), "{}", reply.text());
    let reply = request(&r.addr, "GET", "/nowhere", &[], b"").await;
    assert_error(reply, 404, "Resource not found.").await;
}

#[tokio::test]
async fn data_path_headers_are_checked() {
    let r = start().await;
    let body = proto::SnapshotRead { ranges: vec![range(KEY_A, &[0x02, b'a', 0, 0], 1)] }.encode_to_vec();
    let auth = bearer();
    let missing = request(&r.addr, "POST", "/v2/snapshot_read", &[("authorization", &auth)], &body).await;
    assert_error(missing, 400, "Missing x-denokv-version header.").await;
    let headers =
        [("authorization", auth.as_str()), ("x-denokv-version", "3"), ("x-denokv-database-id", "nope")];
    let wrong_id = request(&r.addr, "POST", "/v2/snapshot_read", &headers, &body).await;
    assert_error(wrong_id, 400, "Invalid database id.").await;
    let headers = [
        ("authorization", auth.as_str()),
        ("x-denokv-version", "7"),
        ("x-denokv-database-id", r.server.database_id()),
    ];
    let bad_version = request(&r.addr, "POST", "/v2/snapshot_read", &headers, &body).await;
    assert_error(
        bad_version,
        400,
        "Unsupported protocol version \"7\" in x-denokv-version: this server takes 2 or 3 there \
         (protocol version 1 sends no x-denokv-version header).",
    )
    .await;
    // Version 1: the database id travels in x-transaction-domain-id.
    let headers = [("authorization", auth.as_str()), ("x-transaction-domain-id", r.server.database_id())];
    let v1 = request(&r.addr, "POST", "/v2/snapshot_read", &headers, &body).await;
    assert_eq!(v1.status, 200, "{}", v1.text());
    let headers = [
        ("authorization", auth.as_str()),
        ("x-transaction-domain-id", "00000000-0000-0000-0000-000000000000"),
    ];
    let v1_wrong = request(&r.addr, "POST", "/v2/snapshot_read", &headers, &body).await;
    assert_error(v1_wrong, 400, "Invalid database id.").await;
}

#[tokio::test]
async fn snapshot_read_bad_input() {
    let r = start().await;
    // An empty body is an empty message (Deno's `getMany([])`): no ranges, no entries.
    let empty = call(&r, "snapshot_read", b"").await;
    assert_eq!(empty.status, 200, "{}", empty.text());
    let output = proto::SnapshotReadOutput::decode(empty.body.as_slice()).unwrap();
    assert!(output.ranges.is_empty());
    // Deno refuses more than 1000 entries in one read, all ranges together.
    let body = proto::SnapshotRead { ranges: vec![range(KEY_A, KEY_B, 1000), range(KEY_A, KEY_B, 1)] }
        .encode_to_vec();
    assert_error(
        call(&r, "snapshot_read", &body).await,
        400,
        "The read range limits of the snapshot read request add up to 1001 entries (max 1000).",
    )
    .await;
    let body = proto::SnapshotRead { ranges: vec![range(KEY_A, KEY_B, 100); 10] }.encode_to_vec();
    assert_eq!(call(&r, "snapshot_read", &body).await.status, 200);
    let garbage = call(&r, "snapshot_read", &[0xff, 0xff, 0xff]).await;
    assert_eq!(garbage.status, 400);
    assert!(
        garbage.text().starts_with("The request body is not a valid protobuf message"),
        "{}",
        garbage.text()
    );
    for limit in [0, -1, 1001] {
        let body = proto::SnapshotRead { ranges: vec![range(KEY_A, KEY_B, limit)] }.encode_to_vec();
        assert_error(
            call(&r, "snapshot_read", &body).await,
            400,
            "The read range limit of the snapshot read request is invalid.",
        )
        .await;
    }
    let body = proto::SnapshotRead { ranges: vec![range(KEY_A, KEY_B, 1); 11] }.encode_to_vec();
    assert_error(
        call(&r, "snapshot_read", &body).await,
        400,
        "Too many ranges in one snapshot read (max 10).",
    )
    .await;
    let body = proto::SnapshotRead { ranges: vec![range(&[2; 2050], KEY_B, 1)] }.encode_to_vec();
    assert_error(call(&r, "snapshot_read", &body).await, 400, "A key exceeds the key size limit.").await;
}

#[tokio::test]
async fn write_then_read_many_ranges_from_one_snapshot() {
    let r = start().await;
    let out = commit(
        &r,
        write(
            vec![proto::Check { key: KEY_A.to_vec(), versionstamp: Vec::new() }],
            vec![
                set(KEY_A, u64_value(1)),
                set(KEY_B, proto::KvValue { data: vec![1, 2, 3], encoding: proto::VE_BYTES }),
                set(
                    &[0x02, b'c', 0x00],
                    proto::KvValue { data: vec![0xff, 0x0f, 0x22, 0x01, b'x'], encoding: proto::VE_V8 },
                ),
            ],
        ),
    )
    .await;
    assert_eq!(out.status, proto::AW_SUCCESS);
    assert_eq!(out.versionstamp.len(), 10);
    let output = read(
        &r,
        vec![
            range(KEY_A, &[0x02, b'a', 0, 0], 1),
            proto::ReadRange { start: vec![0x02], end: vec![0x03], limit: 2, reverse: true },
            range(&[0x02], &[0x03], 10),
        ],
    )
    .await;
    assert_eq!(output.status, proto::SR_SUCCESS);
    assert!(output.read_is_strongly_consistent);
    let a = &output.ranges[0].values[0];
    assert_eq!(
        (a.key.as_slice(), a.value.as_slice(), a.encoding),
        (KEY_A, &1u64.to_le_bytes()[..], proto::VE_LE64)
    );
    assert_eq!(a.versionstamp, out.versionstamp);
    let reversed: Vec<_> = output.ranges[1].values.iter().map(|e| e.key[1]).collect();
    assert_eq!(reversed, vec![b'c', b'b']);
    assert_eq!(output.ranges[2].values.len(), 3);
    assert_eq!(output.ranges[2].values[1].encoding, proto::VE_BYTES);
    assert_eq!(output.ranges[2].values[2].encoding, proto::VE_V8);
}

#[tokio::test]
async fn reads_never_reach_the_reserved_key_space() {
    let r = start().await;
    r.server
        .kv()
        .enqueue(&Value::Null, EnqueueOptions { delay: Duration::from_secs(3600), ..Default::default() })
        .unwrap();
    let output =
        read(&r, vec![range(&[], &[0xff, 0xff, 0xff], 500), range(&[0xff], &[0xff, 0xff], 500)]).await;
    assert!(output.ranges[0].values.is_empty());
    assert!(output.ranges[1].values.is_empty());
}

#[tokio::test]
async fn atomic_write_bad_input_writes_nothing() {
    let r = start().await;
    let check = proto::Check { key: KEY_A.to_vec(), versionstamp: Vec::new() };
    // An empty body is an empty atomic operation (Deno's `atomic().commit()` with nothing in
    // it): it commits, with a new versionstamp.
    let first = commit(&r, Vec::new()).await;
    let second = commit(&r, Vec::new()).await;
    assert_eq!((first.status, second.status), (proto::AW_SUCCESS, proto::AW_SUCCESS));
    assert!(second.versionstamp > first.versionstamp, "{first:?} then {second:?}");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (write(vec![check.clone(); 101], vec![]), "Too many checks included in atomic write."),
        (
            write(vec![], vec![set(KEY_A, u64_value(1)); 1001]),
            "Too many mutations / enqueues included in atomic write.",
        ),
        (
            proto::AtomicWrite {
                enqueues: vec![proto::Enqueue { payload: vec![1], ..Default::default() }],
                ..Default::default()
            }
            .encode_to_vec(),
            "Enqueue operations are not supported by this server.",
        ),
        (
            write(vec![proto::Check { key: KEY_A.to_vec(), versionstamp: vec![1, 2, 3] }], vec![]),
            "Invalid versionstamp.",
        ),
        (
            write(
                vec![],
                vec![
                    set(KEY_A, u64_value(1)),
                    proto::Mutation { mutation_type: 7, ..set(KEY_B, u64_value(1)) },
                ],
            ),
            "Unknown mutation type 7.",
        ),
        (
            write(
                vec![],
                vec![set(KEY_A, u64_value(1)), set(KEY_B, proto::KvValue { data: vec![1], encoding: 9 })],
            ),
            "Unknown value encoding 9.",
        ),
        (
            write(vec![], vec![set(KEY_A, proto::KvValue { data: vec![1, 2], encoding: proto::VE_LE64 })]),
            "A KvU64 value (encoding 2) must be 8 bytes.",
        ),
        (
            write(vec![], vec![proto::Mutation { value: None, ..set(KEY_A, u64_value(1)) }]),
            "Invalid mutation kind or arguments.",
        ),
        (
            write(
                vec![],
                vec![proto::Mutation {
                    mutation_type: proto::M_SUM,
                    sum_clamp: true,
                    ..set(KEY_A, u64_value(1))
                }],
            ),
            "Sum bounds (sum_min, sum_max, sum_clamp) are not supported by this server.",
        ),
        (
            write(vec![], vec![set(KEY_A, u64_value(1)), set(&long_key(), u64_value(1))]),
            "A key exceeds the key size limit.",
        ),
        (
            write(
                vec![],
                vec![set(KEY_A, proto::KvValue { data: vec![0; 65537], encoding: proto::VE_BYTES })],
            ),
            "A value exceeds the value size limit.",
        ),
        (
            write(
                vec![],
                vec![proto::Mutation {
                    mutation_type: proto::M_MIN,
                    ..set(KEY_A, proto::KvValue { data: vec![1], encoding: proto::VE_BYTES })
                }],
            ),
            "Failed to perform 'min' mutation on a non-U64 operand",
        ),
        (
            write(vec![], vec![proto::Mutation { expire_at_ms: -5, ..set(KEY_A, u64_value(1)) }]),
            "Invalid mutation kind or arguments.",
        ),
    ];
    for (body, text) in cases {
        assert_error(call(&r, "atomic_write", &body).await, 400, text).await;
    }
    let undecodable_key =
        call(&r, "atomic_write", &write(vec![], vec![set(&[0x99, 0x01], u64_value(1))])).await;
    assert_eq!(undecodable_key.status, 400);
    assert!(undecodable_key.text().starts_with("Invalid mutation key: "), "{}", undecodable_key.text());
    let undecodable_check = call(
        &r,
        "atomic_write",
        &write(vec![proto::Check { key: vec![0x02, b'x'], versionstamp: vec![] }], vec![]),
    )
    .await;
    assert_eq!(undecodable_check.status, 400);
    assert!(undecodable_check.text().starts_with("Invalid check key: "), "{}", undecodable_check.text());
    // A type mismatch after a valid set fails the whole write: nothing of it is stored.
    r.server.kv().set(&key!["s"], &Value::from("text")).unwrap();
    let sum = proto::Mutation { mutation_type: proto::M_SUM, ..set(&[0x02, b's', 0x00], u64_value(1)) };
    let reply = call(&r, "atomic_write", &write(vec![], vec![set(KEY_A, u64_value(1)), sum])).await;
    assert_error(reply, 400, "Failed to perform 'sum' mutation on a non-U64 value in the database").await;
    let output = read(&r, vec![range(&[0x02], &[0x03], 100)]).await;
    assert_eq!(output.ranges[0].values.len(), 1, "only the pre-existing string");
}

#[tokio::test]
async fn checks_mutation_kinds_and_expiry() {
    let r = start().await;
    let first = commit(&r, write(vec![], vec![set(KEY_A, u64_value(10))])).await;
    // A failing check: AW_CHECK_FAILURE, the failed check's index, nothing applied.
    let failed = commit(
        &r,
        write(
            vec![
                proto::Check { key: KEY_A.to_vec(), versionstamp: first.versionstamp.clone() },
                proto::Check { key: KEY_A.to_vec(), versionstamp: Vec::new() },
            ],
            vec![set(KEY_B, u64_value(1))],
        ),
    )
    .await;
    assert_eq!(
        (failed.status, failed.failed_checks.clone(), failed.versionstamp.len()),
        (proto::AW_CHECK_FAILURE, vec![1], 0)
    );
    let mutation = |kind, n| proto::Mutation { mutation_type: kind, ..set(KEY_A, u64_value(n)) };
    let ok = commit(
        &r,
        write(
            vec![proto::Check { key: KEY_A.to_vec(), versionstamp: first.versionstamp.clone() }],
            vec![
                mutation(proto::M_SUM, 5),
                mutation(proto::M_MAX, 12),
                mutation(proto::M_MIN, 14),
                proto::Mutation {
                    mutation_type: proto::M_SET_SUFFIX_VERSIONSTAMPED_KEY,
                    ..set(&[0x02, b'v', 0x00], u64_value(3))
                },
                proto::Mutation { expire_at_ms: 1, ..set(KEY_B, u64_value(1)) },
                proto::Mutation { expire_at_ms: 4_000_000_000_000, ..set(&[0x02, b'e', 0x00], u64_value(2)) },
                proto::Mutation {
                    mutation_type: proto::M_DELETE,
                    value: Some(proto::KvValue { data: vec![], encoding: 3 }),
                    ..set(&[0x02, b'z', 0x00], u64_value(0))
                },
            ],
        ),
    )
    .await;
    assert_eq!(ok.status, proto::AW_SUCCESS);
    let kv = r.server.kv();
    assert_eq!(kv.get::<KvValue>(&key!["a"]).unwrap().value, Some(KvValue::U64(14)));
    assert!(!kv.get::<KvValue>(&key!["b"]).unwrap().exists(), "expired in the past");
    assert!(kv.get::<KvValue>(&key!["e"]).unwrap().exists());
    let stamp: [u8; 10] = ok.versionstamp.clone().try_into().unwrap();
    let versioned = stampkv::Key::from(vec![
        stampkv::KeyPart::from("v"),
        stampkv::KeyPart::from(stampkv::Versionstamp(stamp).to_hex()),
    ]);
    assert_eq!(kv.get::<KvValue>(&versioned).unwrap().value, Some(KvValue::U64(3)));
}

#[tokio::test]
async fn oversized_bodies_get_413() {
    let mut config = Config::new(TOKEN);
    config.net.max_body_bytes = 1024;
    let r = start_with(config).await;
    let reply = call(
        &r,
        "atomic_write",
        &write(vec![], vec![set(KEY_A, proto::KvValue { data: vec![0; 4096], encoding: 3 })]),
    )
    .await;
    assert_error(reply, 413, "The request body is too large (max 1024 bytes).").await;
}

/// Reads watch frames from a streaming response as they arrive.
struct Frames {
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl Frames {
    async fn open(r: &Running, version: &str, keys: &[&[u8]]) -> Result<Frames, Reply> {
        let body = proto::Watch { keys: keys.iter().map(|k| proto::WatchKey { key: k.to_vec() }).collect() }
            .encode_to_vec();
        let auth = bearer();
        let headers = [
            ("authorization", auth.as_str()),
            ("x-denokv-database-id", r.server.database_id()),
            ("x-denokv-version", version),
        ];
        let mut stream = send(&r.addr, "POST", "/v2/watch", &headers, &body).await;
        let mut buffer = Vec::new();
        while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "connection closed before the headers");
            buffer.extend_from_slice(&chunk[..n]);
        }
        let split = buffer.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8(buffer[..split].to_vec()).unwrap().to_lowercase();
        let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
        let rest = buffer[split + 4..].to_vec();
        if status != 200 {
            let mut all = rest;
            stream.read_to_end(&mut all).await.unwrap();
            let body = if head.contains("chunked") { dechunk(&all) } else { all };
            return Err(Reply { status, headers: head, body });
        }
        assert!(head.contains("content-type: application/octet-stream"), "{head}");
        Ok(Frames { stream, buffer: rest })
    }

    /// The next chunk's payload (frames are written one per chunk); `None` at the end.
    async fn chunk(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(line_end) = self.buffer.windows(2).position(|w| w == b"\r\n") {
                let size =
                    usize::from_str_radix(std::str::from_utf8(&self.buffer[..line_end]).unwrap().trim(), 16)
                        .unwrap();
                if size == 0 {
                    return None;
                }
                if self.buffer.len() >= line_end + 2 + size + 2 {
                    let data = self.buffer[line_end + 2..line_end + 2 + size].to_vec();
                    self.buffer.drain(..line_end + 2 + size + 2);
                    return Some(data);
                }
            }
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout(Duration::from_secs(20), self.stream.read(&mut chunk))
                .await
                .unwrap()
                .unwrap();
            if n == 0 {
                return None;
            }
            self.buffer.extend_from_slice(&chunk[..n]);
        }
    }

    async fn frame(&mut self) -> Option<proto::WatchOutput> {
        loop {
            let data = self.chunk().await?;
            let length = u32::from_le_bytes(data[..4].try_into().unwrap()) as usize;
            assert_eq!(length, data.len() - 4);
            if length > 0 {
                return Some(proto::WatchOutput::decode(&data[4..]).unwrap());
            }
        }
    }
}

#[tokio::test]
async fn watch_streams_changes_and_pings() {
    let mut config = Config::new(TOKEN);
    config.net.keepalive_interval = Duration::from_millis(300);
    config.net.max_watches = 1;
    let r = start_with(config).await;
    let v2 = Frames::open(&r, "2", &[KEY_A]).await.err().unwrap();
    assert_error(v2, 400, "Watch needs protocol version 3.").await;
    let mut frames = Frames::open(&r, "3", &[KEY_A, KEY_B]).await.ok().unwrap();
    let first = frames.frame().await.unwrap();
    assert_eq!(first.status, proto::SR_SUCCESS);
    assert_eq!(first.keys, vec![proto::WatchKeyOutput { changed: true, entry_if_changed: None }; 2]);
    // One stream is the limit here.
    let busy = Frames::open(&r, "3", &[KEY_A]).await.err().unwrap();
    assert_error(busy, 503, "Too many open watch streams.").await;
    // A keep-alive ping arrives when nothing changes.
    let ping = frames.chunk().await.unwrap();
    assert_eq!(ping, vec![0, 0, 0, 0]);
    let out = commit(&r, write(vec![], vec![set(KEY_B, u64_value(9))])).await;
    let change = frames.frame().await.unwrap();
    // Every frame carries the whole state: Deno's client reads a key without an entry as
    // absent, even when it is marked unchanged.
    assert!(change.keys[0].changed && change.keys[0].entry_if_changed.is_none());
    assert!(change.keys[1].changed);
    let entry = change.keys[1].entry_if_changed.as_ref().unwrap();
    assert_eq!((entry.key.as_slice(), entry.versionstamp.clone()), (KEY_B, out.versionstamp));
    let refused = request(&r.addr, "GET", "/metrics", &[], b"").await;
    assert_error(refused, 401, "Malformed authorization header.").await;
    let auth = bearer();
    let metrics = request(&r.addr, "GET", "/metrics", &[("authorization", auth.as_str())], b"").await.text();
    assert!(metrics.contains("stampkv_open_watches 1"), "{metrics}");
    assert!(metrics.contains("stampkv_shared_watches 1"), "{metrics}");
    assert!(metrics.contains("stampkv_requests_total{kind=\"watch\",status=\"503\"} 1"), "{metrics}");
    assert!(metrics.contains("stampkv_commit_seconds_count 1"), "{metrics}");
    assert!(metrics.contains("stampkv_engine_commits"), "{metrics}");
    assert!(metrics.contains("stampkv_engine_max_stall_micros 0"), "{metrics}");
    // The client goes away: the stream's slot is freed.
    drop(frames);
    let mut reopened = None;
    for _ in 0..50 {
        if let Ok(frames) = Frames::open(&r, "3", &[KEY_A]).await {
            reopened = Some(frames);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut frames = reopened.expect("the closed stream's slot was never freed");
    assert!(frames.frame().await.is_some());
    // Shutdown ends the open stream and the server returns.
    let Running { stop, task, .. } = r;
    stop.unwrap().send(()).unwrap();
    while frames.frame().await.is_some() {}
    tokio::time::timeout(Duration::from_secs(20), task).await.unwrap().unwrap().unwrap();
}

#[test]
fn short_tokens_are_refused() {
    let kv = Kv::open_in_memory(KvOptions::default()).unwrap();
    assert!(Server::new(kv, Config::new("elevenchars")).is_err());
}
