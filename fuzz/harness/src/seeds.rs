//! The seed corpus: valid inputs for every target, written by the real writers.
//!
//! `cargo run -p stampkv-fuzz-harness --example write_seeds` writes them to
//! `fuzz/corpus/<target>/seed-*` (the files committed); `tests/corpus.rs` also runs them
//! straight from here, so they stay valid inputs whether or not they were rewritten.

use crate::util::{filler, SplitMix64};
use prost::Message;
use stampkv::value::v8;
use stampkv::{BulkEntry, Key, KeyPart, KvBigInt, KvValue, QueuedMessage, Value, Versionstamp};
use stampkv_cli::transfer::dumpfile::{DumpWriter, Header};
use stampkv_server::proto;
use stampkv_sstable::{Compression, TableBuilder, TableOptions};
use stampkv_wal::{LogWriter, MemLogFile, WalOptions};

/// One seed: target, file name (starting with `seed-`), contents.
pub type Seed = (&'static str, String, Vec<u8>);

/// Every seed of every target.
pub fn all() -> Vec<Seed> {
    let mut out = Vec::new();
    key_codec(&mut out);
    value_codec(&mut out);
    wal_recover(&mut out);
    sstable_read(&mut out);
    random(&mut out, "engine_model", 16, 64, 2048);
    random(&mut out, "kv_model", 16, 64, 2048);
    kvconnect_request(&mut out);
    metadata_json(&mut out);
    dump_reader(&mut out);
    key_syntax(&mut out);
    out
}

fn push(out: &mut Vec<Seed>, target: &'static str, name: &str, bytes: Vec<u8>) {
    out.push((target, format!("seed-{name}"), bytes));
}

/// `count` deterministic random inputs of `min..max` bytes (they decode into structured
/// inputs: operation sequences, entries and damage).
fn random(out: &mut Vec<Seed>, target: &'static str, count: u64, min: usize, max: usize) {
    let mut rng = SplitMix64::new(0x5EED_0000 + count + max as u64);
    for i in 0..count {
        // Lengths spread between min and max, small ones first.
        let len = min + (max - min) * (i as usize * i as usize) / (count as usize * count as usize);
        let mut bytes = filler(&mut rng, len);
        if target == "wal_recover" {
            bytes[0] |= 1; // the structured variant
        }
        if target == "sstable_read" {
            bytes[0] = 1 + (i % 2) as u8; // damaged, resealed
        }
        push(out, target, &format!("random-{i:02}"), bytes);
    }
}

fn key_codec(out: &mut Vec<Seed>) {
    let big = |negative: bool, len: usize| {
        KeyPart::BigInt(KvBigInt::from_sign_magnitude(negative, &vec![0x5A; len]))
    };
    let keys: Vec<(&str, Key)> = vec![
        ("users-42", Key(vec!["users".into(), KeyPart::Number(42.0)])),
        ("bytes-with-zeros", Key(vec![KeyPart::Bytes(vec![0, 1, 0, 0xFF, 0])])),
        ("strings", Key(vec!["".into(), "a\0b".into(), "é😀".into()])),
        (
            "numbers",
            Key(vec![KeyPart::Number(-0.0), KeyPart::Number(f64::NAN), KeyPart::Number(f64::INFINITY)]),
        ),
        ("number-fraction", Key(vec![KeyPart::Number(-1.5), KeyPart::Number(1e300)])),
        (
            "bigints-short",
            Key(vec![0i64.into(), 1i64.into(), (-1i64).into(), i64::MIN.into(), u64::MAX.into()]),
        ),
        ("bigint-9-bytes", Key(vec![big(false, 9), big(true, 9)])),
        ("bigint-255-bytes", Key(vec![big(false, 255)])),
        ("bigint-neg-255-bytes", Key(vec![big(true, 255)])),
        ("bools", Key(vec![false.into(), true.into()])),
        (
            "mixed",
            Key(vec![KeyPart::Bytes(vec![]), "x".into(), 7i64.into(), KeyPart::Number(7.0), true.into()]),
        ),
    ];
    for (name, key) in keys {
        push(out, "key_codec", name, key.encode().expect("seed keys encode"));
    }
    random(out, "key_codec", 6, 16, 256);
}

fn value_codec(out: &mut Vec<Seed>) {
    let object = Value::Object(vec![
        ("b".into(), Value::Number(1.0)),
        ("2".into(), "two".into()),
        ("4294967294".into(), Value::Null),
        ("a".into(), Value::Array(vec![Value::Undefined, Value::Bool(true)])),
    ]);
    let values: Vec<(&str, Value)> = vec![
        ("string", "hello".into()),
        ("two-byte-string", "€uro 😀".into()),
        (
            "numbers",
            Value::Array(vec![
                42.into(),
                (-1).into(),
                Value::Number(1.5),
                Value::Number(-0.0),
                Value::Number(f64::NAN),
            ]),
        ),
        (
            "bigints",
            Value::Array(vec![
                KvBigInt::from(0i64).into(),
                KvBigInt::from(-1i64).into(),
                KvBigInt::from(i128::MAX).into(),
            ]),
        ),
        ("object", object.clone()),
        (
            "map-set",
            Value::Array(vec![
                Value::Map(vec![(1.into(), "x".into())]),
                Value::Set(vec![object.clone(), Value::Null]),
            ]),
        ),
        (
            "date-regexp",
            Value::Array(vec![
                Value::Date(1.7e12),
                Value::RegExp { source: "a/b[/]\n".into(), flags: "gimsuyd".into() },
            ]),
        ),
        ("nested-bytes", Value::Object(vec![("data".into(), Value::Bytes(vec![1, 2, 3]))])),
        ("deep", (0..40).fold(Value::Null, |v, _| Value::Array(vec![v]))),
    ];
    for (name, value) in values {
        let bytes = v8::serialize(&value).expect("seed values serialize");
        push(out, "value_codec", &format!("v8-{name}"), bytes.clone());
        push(out, "value_codec", &format!("stored-{name}"), KvValue::V8(bytes).encode_stored());
    }
    // Forms only read (V8 writes them; stampkv does not), version 13 and 16 headers.
    let read_only: [(&str, &[u8]); 10] = [
        ("uint32", b"\xff\x0dU\x80\x01"),
        ("utf8", b"\xff\x0eS\x03\xe2\x82\xac"),
        ("verify-count", b"\xff\x0f?\x02A\x01T$\x00\x01"),
        ("reference", b"\xff\x0fA\x02o\"\x01a\x49\x02{\x01^\x01$\x00\x02"),
        ("sparse-array", b"\xff\x10a\x02I\x00I\x02I\x02\"\x01x@\x02\x02"),
        ("cycle", b"\xff\x0fo\"\x01s^\x00{\x01"),
        ("int8-view", b"\xff\x10B\x04\x01\x02\x03\x04Vb\x00\x04\x00"),
        ("holes", b"\xff\x0fA\x02-I\x02$\x00\x02"),
        ("error", b"\xff\x0fr.\x00"),
        ("padding", b"\xff\x0f\x00\x00c\x02\xac\x20\x00"),
    ];
    for (name, bytes) in read_only {
        push(out, "value_codec", &format!("v8-{name}"), bytes.to_vec());
    }
    push(out, "value_codec", "stored-u64", KvValue::U64(258).encode_stored());
    push(out, "value_codec", "stored-bytes", KvValue::Bytes(vec![1, 2, 3]).encode_stored());
    // A sum: the first byte cuts the rest into a stored value and an operand.
    let mut sum = vec![10u8];
    sum.extend(KvValue::V8(v8::serialize(&Value::Number(1.5)).expect("number")).encode_stored());
    sum.extend(KvValue::V8(v8::serialize(&Value::Number(2.0)).expect("number")).encode_stored());
    push(out, "value_codec", "sum-numbers", sum);
    random(out, "value_codec", 6, 16, 512);
}

fn wal_segment(number: u64, records: &[Vec<u8>], sync_every: usize, seal: bool) -> Vec<u8> {
    let file = MemLogFile::new();
    let mut w =
        LogWriter::create(&file, number, WalOptions { preallocate_bytes: 0, ..WalOptions::default() })
            .expect("create");
    for (i, r) in records.iter().enumerate() {
        w.add_record(r).expect("add");
        if sync_every > 0 && i % sync_every == sync_every - 1 {
            w.sync().expect("sync");
        }
    }
    if seal {
        w.seal().expect("seal");
    }
    let mut bytes = vec![0u8]; // the raw variant
    bytes.extend(file.contents());
    bytes
}

fn wal_recover(out: &mut Vec<Seed>) {
    let mut rng = SplitMix64::new(7);
    let small: Vec<Vec<u8>> = (0..12).map(|i| filler(&mut rng, i * 17 % 90)).collect();
    push(out, "wal_recover", "unsealed", wal_segment(1, &small, 0, false));
    push(out, "wal_recover", "sealed", wal_segment(1, &small, 0, true));
    push(out, "wal_recover", "synced", wal_segment(1, &small, 3, true));
    push(out, "wal_recover", "empty-records", wal_segment(1, &[vec![], vec![], vec![1]], 1, false));
    push(out, "wal_recover", "other-segment", wal_segment(2, &small[..3], 0, true));
    push(out, "wal_recover", "header-only", wal_segment(1, &[], 0, false));
    // A record across two blocks (a FIRST and a LAST chunk).
    push(
        out,
        "wal_recover",
        "fragmented",
        wal_segment(1, &[filler(&mut rng, 100), filler(&mut rng, 33_000)], 1, true),
    );
    let mut torn = wal_segment(1, &small, 4, false);
    let len = torn.len();
    torn.truncate(len - 20);
    push(out, "wal_recover", "torn", torn);
    let mut damaged = wal_segment(1, &small, 2, false);
    damaged[200] ^= 0x10;
    push(out, "wal_recover", "damaged-synced", damaged);
    random(out, "wal_recover", 12, 16, 400);
}

fn sstable_read(out: &mut Vec<Seed>) {
    let table = |entries: usize, block_size: usize, restart_interval: usize, bloom: u32, lz4: bool| {
        let compression = if lz4 { Compression::Lz4 } else { Compression::None };
        let options = TableOptions {
            block_size,
            restart_interval,
            bloom_bits_per_key: bloom,
            compression,
            restart_bytes: 64,
            index_restart_interval: 2,
        };
        let mut builder = TableBuilder::new(Vec::new(), options);
        let mut rng = SplitMix64::new(entries as u64);
        for i in 0..entries {
            let key = format!("key-{:03}", i / 3);
            // Runs of repeated bytes (compress) and of random bytes (stay uncompressed).
            let value = if i % 20 < 10 {
                vec![b'a' + (i % 26) as u8; i % 11 * 3]
            } else {
                filler(&mut rng, i % 11 * 3)
            };
            builder.add(key.as_bytes(), 1000 - i as u64, &value).expect("in order");
        }
        let (_, bytes) = builder.finish(&[("origin", b"seed")]).expect("finish");
        let mut file = vec![0u8]; // the raw variant
        file.extend(bytes);
        file
    };
    push(out, "sstable_read", "tiny-blocks", table(40, 64, 1, 10, false));
    push(out, "sstable_read", "no-filter", table(60, 200, 4, 0, false));
    push(out, "sstable_read", "one-block", table(10, 4096, 16, 10, false));
    push(out, "sstable_read", "empty", table(0, 4096, 16, 10, false));
    push(out, "sstable_read", "lz4-tiny-blocks", table(40, 64, 1, 10, true));
    push(out, "sstable_read", "lz4-mixed-blocks", table(80, 200, 4, 10, true));
    random(out, "sstable_read", 14, 32, 700);
}

// ---------------------------------------------------------------------------------------
// The network targets (real Deno traffic is recorded by fuzz/seeds/capture.mjs as deno-*)
// ---------------------------------------------------------------------------------------

fn encoded(key: &Key) -> Vec<u8> {
    key.encode().expect("seed keys encode")
}

/// A key's point range, as Deno's `get` asks for it: `[key, key ++ 00)`.
fn point(key: &Key, limit: i32) -> proto::ReadRange {
    let start = encoded(key);
    let mut end = start.clone();
    end.push(0);
    proto::ReadRange { start, end, limit, reverse: false }
}

/// A key prefix's range, as Deno's `list({ prefix })` asks for it: `[prefix ++ 00, prefix ++ ff)`.
fn prefix(key: &Key, limit: i32, reverse: bool) -> proto::ReadRange {
    let base = encoded(key);
    let mut start = base.clone();
    start.push(0);
    let mut end = base;
    end.push(0xFF);
    proto::ReadRange { start, end, limit, reverse }
}

fn v8_value(value: &Value) -> proto::KvValue {
    proto::KvValue { data: v8::serialize(value).expect("seed values serialize"), encoding: proto::VE_V8 }
}

fn mutation(
    key: &Key,
    mutation_type: i32,
    value: Option<proto::KvValue>,
    expire_at_ms: i64,
) -> proto::Mutation {
    proto::Mutation { key: encoded(key), value, mutation_type, expire_at_ms, ..proto::Mutation::default() }
}

fn kvconnect_request(out: &mut Vec<Seed>) {
    const T: &str = "kvconnect_request";
    let request = |selector: u8, body: Vec<u8>| {
        let mut input = vec![selector];
        input.extend(body);
        input
    };
    let users = Key(vec!["users".into()]);
    let alice = Key(vec!["users".into(), "alice".into()]);
    let counter = Key(vec!["counters".into(), KeyPart::Number(1.0)]);
    let bytes_key =
        Key(vec![KeyPart::Bytes(vec![0, 1, 0xFF]), KeyPart::BigInt(KvBigInt::from(-7i64)), true.into()]);
    let u64_value = |n: u64| proto::KvValue { data: n.to_le_bytes().to_vec(), encoding: proto::VE_LE64 };

    // Metadata exchange (selector 0).
    push(out, T, "metadata-v123", request(0, br#"{"supportedVersions":[1,2,3]}"#.to_vec()));
    push(out, T, "metadata-v1-only", request(0, br#"{"supportedVersions":[1]}"#.to_vec()));

    // snapshot_read (selector 1).
    let reads = [
        ("get", vec![point(&alice, 1)]),
        ("get-many", vec![point(&alice, 1), point(&counter, 1), point(&bytes_key, 1)]),
        ("list", vec![prefix(&users, 100, false)]),
        ("list-reverse", vec![prefix(&Key::new(), 5, true)]),
        (
            "list-range",
            vec![proto::ReadRange {
                start: encoded(&users),
                end: encoded(&counter),
                limit: 1000,
                reverse: false,
            }],
        ),
        (
            "everything",
            vec![proto::ReadRange { start: vec![], end: vec![0xFF, 0xFF], limit: 1000, reverse: false }],
        ),
    ];
    for (name, ranges) in reads {
        push(out, T, &format!("read-{name}"), request(1, proto::SnapshotRead { ranges }.encode_to_vec()));
    }

    // atomic_write (selector 2).
    let object = Value::Object(vec![("name".into(), "alice".into()), ("visits".into(), 1.into())]);
    let writes = [
        ("set-v8", vec![], vec![mutation(&alice, proto::M_SET, Some(v8_value(&object)), 0)]),
        (
            "set-every-encoding",
            vec![],
            vec![
                mutation(&counter, proto::M_SET, Some(u64_value(41)), 0),
                mutation(
                    &bytes_key,
                    proto::M_SET,
                    Some(proto::KvValue { data: vec![1, 2, 3], encoding: proto::VE_BYTES }),
                    0,
                ),
                mutation(&users, proto::M_SET, Some(v8_value(&Value::String("x".repeat(300)))), 0),
            ],
        ),
        (
            "sum-min-max",
            vec![],
            vec![
                mutation(&counter, proto::M_SUM, Some(u64_value(1)), 0),
                mutation(&counter, proto::M_MIN, Some(u64_value(5)), 0),
                mutation(&counter, proto::M_MAX, Some(u64_value(u64::MAX)), 0),
            ],
        ),
        (
            "checked-delete",
            vec![proto::Check { key: encoded(&alice), versionstamp: vec![] }],
            vec![mutation(&alice, proto::M_DELETE, None, 0)],
        ),
        (
            "failed-check",
            vec![proto::Check { key: encoded(&counter), versionstamp: vec![0, 0, 0, 0, 0, 0, 0, 1, 0, 0] }],
            vec![mutation(&counter, proto::M_SET, Some(u64_value(0)), 0)],
        ),
        (
            "expiring-and-versionstamped",
            vec![],
            vec![
                mutation(&alice, proto::M_SET, Some(v8_value(&Value::Null)), 4_102_444_800_000),
                mutation(
                    &users,
                    proto::M_SET_SUFFIX_VERSIONSTAMPED_KEY,
                    Some(v8_value(&Value::Bool(true))),
                    0,
                ),
            ],
        ),
    ];
    for (name, checks, mutations) in writes {
        let body = proto::AtomicWrite { checks, mutations, enqueues: vec![] }.encode_to_vec();
        push(out, T, &format!("write-{name}"), request(2, body));
    }
    let enqueue = proto::AtomicWrite {
        checks: vec![],
        mutations: vec![],
        enqueues: vec![proto::Enqueue {
            payload: v8::serialize(&Value::Null).expect("null"),
            deadline_ms: 1,
            keys_if_undelivered: vec![encoded(&alice)],
            backoff_schedule: vec![100, 1000],
        }],
    };
    push(out, T, "write-enqueue", request(2, enqueue.encode_to_vec()));

    // watch (selector 3).
    let watch = proto::Watch {
        keys: [&alice, &counter, &bytes_key]
            .into_iter()
            .map(|k| proto::WatchKey { key: encoded(k) })
            .collect(),
    };
    push(out, T, "watch", request(3, watch.encode_to_vec()));

    // The other protocol versions: 2 (selector bits 0b110 << 2) and 1 (0b111 << 2).
    let get = proto::SnapshotRead { ranges: vec![point(&alice, 1)] }.encode_to_vec();
    push(out, T, "read-protocol-2", request(6 << 2 | 1, get.clone()));
    push(out, T, "read-protocol-1", request(7 << 2 | 1, get));
    push(out, T, "watch-protocol-2", request(6 << 2 | 3, watch.encode_to_vec()));
}

fn metadata_json(out: &mut Vec<Seed>) {
    let bodies: [(&str, &str); 16] = [
        ("deno", r#"{"supportedVersions":[1,2,3]}"#),
        ("v2-v3", r#"{"supportedVersions":[2,3]}"#),
        ("v1", r#"{"supportedVersions":[1]}"#),
        ("unknown-versions", r#"{"supportedVersions":[0,4,99]}"#),
        ("empty-versions", r#"{"supportedVersions":[]}"#),
        ("float-versions", r#"{"supportedVersions":[3.0,2e0,-1]}"#),
        ("string-versions", r#"{"supportedVersions":"3"}"#),
        ("huge-version", r#"{"supportedVersions":[18446744073709551619,1e400]}"#),
        (
            "extra-members",
            r#"{"supportedVersions":[3],"client":{"name":"deno","tags":[null,true,false]},"x":"\u00e9\ud83d\ude00"}"#,
        ),
        ("duplicate-member", r#"{"supportedVersions":[1],"supportedVersions":[3]}"#),
        ("empty-object", "{}"),
        ("array", "[1,2,3]"),
        ("null", "null"),
        ("whitespace", " \t\r\n"),
        ("trailing-text", r#"{"supportedVersions":[3]} x"#),
        ("lone-surrogate", r#"{"supportedVersions":[3],"s":"\ud800"}"#),
    ];
    for (name, body) in bodies {
        push(out, "metadata_json", name, body.as_bytes().to_vec());
    }
    let deep = format!(r#"{{"supportedVersions":[3],"deep":{}{}}}"#, "[".repeat(200), "]".repeat(200));
    push(out, "metadata_json", "deep-nesting", deep.into_bytes());
}

fn dump_reader(out: &mut Vec<Seed>) {
    let keys = [
        Key(vec!["users".into(), "alice".into()]),
        Key(vec!["users".into(), KeyPart::Number(-0.0), KeyPart::Number(f64::NAN), KeyPart::Number(1e300)]),
        Key(vec![KeyPart::BigInt(KvBigInt::from(i128::MIN)), false.into(), true.into()]),
        Key(vec![KeyPart::Bytes(vec![0, 0xFF, 0x10]), "é😀\n\"".into()]),
    ];
    let values = [
        KvValue::V8(v8::serialize(&Value::Object(vec![("id".into(), 0.into())])).expect("object")),
        KvValue::U64(u64::MAX),
        KvValue::Bytes(vec![1, 2, 3]),
        KvValue::V8(v8::serialize(&Value::Map(vec![(1.into(), "x".into())])).expect("map")),
    ];
    let dump = |header: Header, entries: usize, messages: usize| {
        let mut writer = DumpWriter::new(Vec::new(), header).expect("to memory");
        for (i, (key, value)) in keys.iter().zip(values.iter().cycle()).take(entries).enumerate() {
            let entry = BulkEntry {
                key: key.clone(),
                value: value.clone(),
                versionstamp: Versionstamp::from_sequence(i as u64 + 1),
                expires_at_ms: (i % 2 == 1).then_some(1_796_156_998_620),
            };
            writer.entry(&entry).expect("to memory");
        }
        for i in 0..messages {
            let message = QueuedMessage {
                deadline_ms: 1_796_160_598_000 + i as u64,
                attempts: i as u32,
                value: values.get(i % values.len()).cloned().unwrap_or(KvValue::U64(0)),
                backoff_ms: vec![100, 1000, 5000],
                keys_if_undelivered: keys.iter().take(i).cloned().collect(),
            };
            writer.message(&message).expect("to memory");
        }
        writer.finish().expect("to memory")
    };
    let full = Header {
        versionstamps: true,
        expiry: true,
        queue: true,
        last_versionstamp: Some(Versionstamp::from_sequence(9)),
    };
    let plain = Header { versionstamps: false, expiry: false, queue: false, last_versionstamp: None };
    push(out, "dump_reader", "full", dump(full, 4, 3));
    push(out, "dump_reader", "plain", dump(plain, 4, 0));
    push(out, "dump_reader", "empty", dump(plain, 0, 0));
    push(out, "dump_reader", "queue-only", dump(full, 0, 2));
    // Without the end line (the target gives it the right one), and cut inside a line.
    let mut open = dump(full, 3, 1);
    let end = open.iter().take(open.len() - 1).rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    open.truncate(end);
    push(out, "dump_reader", "no-end-line", open.clone());
    open.truncate(open.len() - 7);
    push(out, "dump_reader", "cut-off", open);
}

fn key_syntax(out: &mut Vec<Seed>) {
    // The examples of cli/src/key_syntax.rs (its documentation and tests), cli/FORMAT.md and
    // cli/tests/it/data.rs.
    let texts: [&str; 32] = [
        r#"["users", 42n, true, 1.5, "é"]"#,
        "[]",
        "  [ 'a' , `b`, ]  ",
        "[false, -0, 1e3, .5, 0x10, 0o17, 0b101, 1_000]",
        "[Infinity, -Infinity, NaN]",
        "[-7n, 0xffn, 0n, -0n, 0o17n, 0b101n]",
        "[123456789012345678901234567890n]",
        "[\"n\", 42, -0, 1.5, 1e21, -2.5e-7, Infinity, -Infinity, NaN, 0x10]",
        "[new Uint8Array([1, 2, 3])]",
        "[Uint8Array(3) [ 1, 2, 3 ]]",
        "[Uint8Array.fromHex('010203')]",
        "[new Uint8Array([0x01, 2, 3,])]",
        "[new Uint8Array(), Uint8Array(0) [], new Uint8Array(2)]",
        "[\n  Uint8Array(8) [\n    1, 2, 3, 4,\n    5, 6, 7, 8\n  ]\n]",
        r#"["a\nb\t\"\\\x41\u0042\u{1F600}\0"]"#,
        r#"["\uD83D\uDE00", 'it\'s', "\q"]"#,
        "[`two\nlines`, \"a\\\nb\"]",
        r#"[{"type":"string","value":"users"},{"type":"bigint","value":"42"}]"#,
        r#"[{"type":"number","value":1.5},{"type":"boolean","value":true},{"type":"Uint8Array","value":"AQID"},{"type":"number","value":"NaN"}]"#,
        r#"["users" 42]"#,
        "[\"abc]",
        "[1,,2]",
        "[[1]]",
        "[null]",
        "[new Uint8Array([256])]",
        "[Uint8Array(3) [ 1, 2 ]]",
        "[1.5n]",
        "[012]",
        "[12abc]",
        r#"["\uD800"]"#,
        "[`${x}`]",
        "[Uint8Array(101) [ 0, ... 100 more items ]]",
    ];
    for (i, text) in texts.iter().enumerate() {
        push(out, "key_syntax", &format!("text-{i:02}"), text.as_bytes().to_vec());
    }
}
