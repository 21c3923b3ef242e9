//! The seed corpus: valid inputs for every target, written by the real writers.
//!
//! `cargo run -p stampkv-fuzz-harness --example write_seeds` writes them to
//! `fuzz/corpus/<target>/seed-*` (the files committed); `tests/corpus.rs` also runs them
//! straight from here, so they stay valid inputs whether or not they were rewritten.

use crate::util::{filler, SplitMix64};
use stampkv::value::v8;
use stampkv::{Key, KeyPart, KvBigInt, KvValue, Value};
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
