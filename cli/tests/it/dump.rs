//! `stampkv dump` and `stampkv load`: the round trip is exact (every key part, every value
//! kind, versionstamps, expiry, the queue), the options drop what they say, and every bad
//! input — truncated, altered or malformed dumps, wrong directories, non-empty targets — is
//! one error line, with nothing written.

use crate::dump_support::{arg, contents, fails, ok, run};
use stampkv::engine::{Options, SyncMode};
use stampkv::value::v8;
use stampkv::{
    key, EnqueueOptions, Key, KeyPart, Kv, KvBigInt, KvOptions, KvValue, SetOptions, Value, Versionstamp,
};
use std::path::Path;
use std::time::Duration;

fn fast() -> KvOptions {
    let mut engine = Options::default();
    engine.sync_mode = SyncMode::Buffered;
    KvOptions::with_engine(engine)
}

/// Every key part kind, edge values included.
fn sample_keys() -> Vec<Key> {
    vec![
        key![&b""[..]],
        key![&b"\x00\x01\xff"[..], "inner"],
        key![""],
        key!["plain"],
        key!["nul \u{0} and \u{1F995} and \"quotes\" \\ \n"],
        key![KvBigInt::from(-(1i64 << 40))],
        key![KvBigInt::from(0i64)],
        key![KvBigInt::from(7i64)],
        Key(vec![KeyPart::BigInt(KvBigInt::from_sign_magnitude(true, &[0x5A; 30]))]),
        Key(vec![KeyPart::BigInt(KvBigInt::from_sign_magnitude(false, &[0xA5; 255]))]),
        key![f64::NEG_INFINITY],
        key![-1.5e-300],
        key![-0.0],
        key![0.0],
        key![0.1],
        key![1e300],
        key![f64::INFINITY],
        key![f64::NAN],
        key![false],
        key![true],
        key!["users", 42.0, true, &b"id"[..], KvBigInt::from(-1i64)],
    ]
}

/// Every value kind: each structured-clone kind as stampkv writes it, V8 bytes as Deno 2.9.6
/// writes them (header `ff 10`), V8 content stampkv does not decode, raw bytes, KvU64.
fn sample_values() -> Vec<KvValue> {
    let v = |value: Value| KvValue::V8(v8::serialize(&value).unwrap());
    vec![
        v(Value::Undefined),
        v(Value::Null),
        v(Value::Bool(true)),
        v(Value::Bool(false)),
        v(Value::Number(42.0)),
        v(Value::Number(-0.0)),
        v(Value::Number(f64::NAN)),
        v(Value::Number(f64::NEG_INFINITY)),
        v(Value::Number(1.5e-300)),
        v(Value::BigInt("123456789012345678901234567890".parse().unwrap())),
        v(Value::BigInt(KvBigInt::from(-42i64))),
        v(Value::String("héllo \u{0} wörld 🦕".into())),
        v(Value::String(String::new())),
        v(Value::Bytes(vec![0, 1, 254, 255])),
        v(Value::Array(vec![Value::Number(1.0), Value::Array(vec![Value::String("x".into())])])),
        v(Value::Object(vec![
            ("z".into(), Value::Number(1.0)),
            ("a".into(), Value::Map(vec![(Value::String("k".into()), Value::Set(vec![Value::Null]))])),
        ])),
        v(Value::Map(vec![(Value::Number(1.0), Value::String("one".into()))])),
        v(Value::Set(vec![Value::String("a".into()), Value::BigInt(KvBigInt::from(2i64))])),
        v(Value::Date(1_709_210_096_789.0)),
        v(Value::Date(f64::NAN)),
        v(Value::RegExp { source: "ab+c\\/d".into(), flags: "gi".into() }),
        KvValue::V8(vec![0xff, 0x10, 0x22, 0x05, b'h', b'e', b'l', b'l', b'o']),
        KvValue::V8(vec![0xff, 0x10, 0x6f, 0x22, 0x01, b'a', 0x49, 0x02, 0x7b, 0x01]),
        KvValue::V8(vec![0xff, 0x10, 0x42, 0x02, 0x00, 0x00]),
        KvValue::V8(vec![0xff, 0x0f, 0x99, 0x01, 0x02]),
        KvValue::V8(vec![]),
        KvValue::Bytes(vec![]),
        KvValue::Bytes((0..=255).collect()),
        KvValue::U64(0),
        KvValue::U64(u64::MAX),
    ]
}

/// A database with every key part and value kind, entries written by separate commits
/// (distinct versionstamps, not in key order), expiring entries and queued messages.
fn populate(dir: &Path) {
    let kv = Kv::open(dir, fast()).unwrap();
    let keys = sample_keys();
    // Written in reverse key order: versionstamps descend along the keys.
    for (i, k) in keys.iter().enumerate().rev() {
        kv.set(k, &KvValue::U64(i as u64)).unwrap();
    }
    for (i, value) in sample_values().into_iter().enumerate() {
        kv.set(&key!["values", i as f64], &value).unwrap();
    }
    kv.atomic()
        .set(&key!["shared", 1], &KvValue::U64(1))
        .set(&key!["shared", 2], &KvValue::U64(2))
        .commit()
        .unwrap();
    let hour = SetOptions { expire_in: Some(Duration::from_secs(3600)) };
    kv.set_with(&key!["expiring", "soon"], &KvValue::Bytes(b"e".to_vec()), hour).unwrap();
    let gone = SetOptions { expire_in: Some(Duration::ZERO) };
    kv.set_with(&key!["expiring", "gone"], &KvValue::Bytes(b"g".to_vec()), gone).unwrap();
    kv.delete(&key!["shared", 2]).unwrap();
    for (i, value) in
        [Value::from("later"), Value::Map(vec![]), Value::BigInt(KvBigInt::from(3i64))].iter().enumerate()
    {
        let options = EnqueueOptions {
            delay: Duration::from_secs(3600 + 60 * (3 - i as u64)),
            keys_if_undelivered: vec![key!["dead", i as f64], Key::default()],
            backoff_schedule: (i == 1).then(|| vec![Duration::from_millis(5), Duration::from_secs(3600)]),
        };
        kv.enqueue(value, options).unwrap();
    }
    kv.enqueue(
        &KvValue::Bytes(vec![9]),
        EnqueueOptions { delay: Duration::from_secs(3600), ..Default::default() },
    )
    .unwrap();
    kv.close().unwrap();
}

fn write_file(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
}

/// A dump built from lines, with a correct end line unless the test breaks it.
fn craft(lines: &[&str], entries: u64, messages: u64) -> Vec<u8> {
    let mut body = String::new();
    for line in lines {
        body.push_str(line);
        body.push('\n');
    }
    let crc = crc32fast::hash(body.as_bytes());
    body.push_str(&format!(
        "{{\"end\":{{\"entries\":{entries},\"messages\":{messages},\"crc32\":\"{crc:08x}\"}}}}\n"
    ));
    body.into_bytes()
}

const HEADER: &str = r#"{"stampkv-dump":{"version":1,"versionstamps":true,"expiry":true,"queue":true,"lastVersionstamp":"00000000000000640000"}}"#;

#[test]
fn the_round_trip_is_exact_for_every_key_part_value_kind_versionstamp_expiry_and_queued_message() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    populate(&source);
    let before = contents(&source);
    assert_eq!(before.entries.len(), sample_keys().len() + sample_values().len() + 2);
    assert_eq!(before.messages.len(), 4);
    assert!(before.entries.iter().any(|e| e.expires_at_ms.is_some()));
    let dump = ok(&["dump", "--path", arg(&source)]);
    let text = String::from_utf8(dump.clone()).unwrap();
    assert_eq!(text.lines().count(), before.entries.len() + before.messages.len() + 2);
    assert!(text.contains(r#""show":"\"héllo \\u0000 wörld 🦕\"""#), "a readable hint: {text}");
    let file = dir.path().join("db.dump");
    write_file(&file, &dump);

    let target = dir.path().join("target");
    ok(&["load", arg(&file), "--path", arg(&target)]);
    let after = contents(&target);
    assert_eq!(after, before);
    // Dumping the loaded database gives the same bytes.
    assert_eq!(ok(&["dump", "--path", arg(&target)]), dump);
    // --output writes the same as standard output.
    let out = dir.path().join("again.dump");
    ok(&["dump", "--path", arg(&target), "--output", arg(&out)]);
    assert_eq!(std::fs::read(&out).unwrap(), dump);
    // New commits in the loaded database get newer versionstamps.
    let kv = Kv::open(&target, fast()).unwrap();
    assert!(kv.set(&key!["new"], &KvValue::U64(1)).unwrap() > before.last);
    kv.close().unwrap();
    // Standard input works too.
    let piped = dir.path().join("piped");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_stampkv"))
        .args(["load", "-", "--path", arg(&piped)])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &dump).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(contents(&piped), before);
}

#[test]
fn versionstamps_expiry_and_the_queue_are_left_out_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    populate(&source);
    let before = contents(&source);

    let bare = dir.path().join("bare.dump");
    ok(&[
        "dump",
        "--path",
        arg(&source),
        "-o",
        arg(&bare),
        "--no-versionstamps",
        "--no-expiry",
        "--no-queue",
    ]);
    let text = std::fs::read_to_string(&bare).unwrap();
    assert!(
        !text.contains("versionstamp\":\"0") && !text.contains("expireAt") && !text.contains("\"message\"")
    );
    let target = dir.path().join("from-bare");
    ok(&["load", arg(&bare), "--path", arg(&target)]);
    let after = contents(&target);
    assert!(after.messages.is_empty());
    assert_eq!(after.entries.len(), before.entries.len());
    let own = after.entries[0].versionstamp;
    for (a, b) in after.entries.iter().zip(&before.entries) {
        assert_eq!((&a.key, &a.value, a.expires_at_ms), (&b.key, &b.value, None));
        assert_eq!(a.versionstamp, own, "one new versionstamp for the whole load");
    }
    assert_eq!(own, Versionstamp::from_sequence(1));

    // The same from a full dump, by the load's options.
    let full = dir.path().join("full.dump");
    ok(&["dump", "--path", arg(&source), "-o", arg(&full)]);
    let target = dir.path().join("dropped-on-load");
    ok(&["load", arg(&full), "--path", arg(&target), "--new-versionstamps", "--no-expiry", "--no-queue"]);
    let dropped = contents(&target);
    assert!(dropped.messages.is_empty());
    assert!(dropped.entries.iter().all(|e| e.expires_at_ms.is_none() && e.versionstamp == own));
    assert_eq!(dropped.entries.len(), before.entries.len());
}

#[test]
fn loading_into_a_database_with_data_is_refused_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    populate(&source);
    let file = dir.path().join("db.dump");
    ok(&["dump", "--path", arg(&source), "-o", arg(&file)]);
    let before = contents(&source);

    let target = dir.path().join("target");
    let kv = Kv::open(&target, fast()).unwrap();
    for i in 0..200 {
        kv.set(&key!["existing", i], &KvValue::U64(i as u64)).unwrap();
    }
    kv.close().unwrap();
    let existing = contents(&target);
    fails(&["load", arg(&file), "--path", arg(&target)], "already holds data: pass --force");
    assert_eq!(contents(&target), existing);
    // Forced, the recorded versionstamps are older than the database's last commit.
    fails(&["load", arg(&file), "--path", arg(&target), "--force"], "use --new-versionstamps");
    assert_eq!(contents(&target), existing);
    ok(&["load", arg(&file), "--path", arg(&target), "--force", "--new-versionstamps"]);
    let after = contents(&target);
    assert_eq!(after.entries.len(), existing.entries.len() + before.entries.len());
    assert_eq!(after.messages.len(), before.messages.len());
    let own = Versionstamp::from_sequence(existing.last.sequence() + 1);
    for entry in &after.entries {
        let expected = if entry
            .key
            .parts()
            .first()
            .is_some_and(|p| matches!(p, KeyPart::String(s) if s == "existing"))
        {
            existing.entries.iter().find(|e| e.key == entry.key).unwrap().versionstamp
        } else {
            own
        };
        assert_eq!(entry.versionstamp, expected, "{:?}", entry.key);
    }

    // A database whose entries were all deleted counts as empty: versionstamps are kept.
    let emptied = dir.path().join("emptied");
    let kv = Kv::open(&emptied, fast()).unwrap();
    for i in 0..50 {
        kv.set(&key!["tmp", i], &KvValue::U64(1)).unwrap();
    }
    kv.engine().flush().unwrap();
    for i in 0..50 {
        kv.delete(&key!["tmp", i]).unwrap();
    }
    kv.close().unwrap();
    ok(&["load", arg(&file), "--path", arg(&emptied)]);
    let loaded = contents(&emptied);
    assert_eq!(loaded.entries, before.entries);
    assert_eq!(loaded.messages, before.messages);
}

#[test]
fn a_truncated_dump_is_detected_and_nothing_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    populate(&source);
    let dump = ok(&["dump", "--path", arg(&source)]);
    let newlines: Vec<usize> =
        dump.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i).collect();
    let last_line_start = newlines[newlines.len() - 2] + 1;
    let cuts = [
        (dump.len() - 1, "cut off"),               // the end line without its newline
        (last_line_start, "without its end line"), // the end line missing
        (last_line_start + 5, "cut off"),          // the end line cut
        (newlines[3] + 1, "without its end line"), // whole lines missing
        (newlines[3] - 10, "cut off"),             // a line cut in the middle
        (newlines[0] + 1, "without its end line"), // the header only
        (0, "empty"),
    ];
    for (i, (cut, expected)) in cuts.into_iter().enumerate() {
        let file = dir.path().join(format!("cut{i}.dump"));
        write_file(&file, &dump[..cut]);
        let target = dir.path().join(format!("target{i}"));
        fails(&["load", arg(&file), "--path", arg(&target)], expected);
        if target.exists() {
            let kv = Kv::open(&target, fast()).unwrap();
            assert!(kv.bulk_snapshot().is_empty().unwrap(), "cut {cut}: something was loaded");
            kv.close().unwrap();
        }
    }
}

#[test]
fn altered_dumps_fail_their_checksum_or_counts() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    populate(&source);
    let text = String::from_utf8(ok(&["dump", "--path", arg(&source)])).unwrap();
    let target = dir.path().join("target");
    let cases = [
        // A value changed (still valid base64 and JSON).
        (text.replacen("\"u64\":\"1\"", "\"u64\":\"2\"", 1), "checksum mismatch"),
        // A whole line dropped, checksum and count then disagree.
        (
            {
                let mut lines: Vec<&str> = text.lines().collect();
                lines.remove(2);
                lines.join("\n") + "\n"
            },
            "the end line counts",
        ),
        // Something after the end line.
        (text.clone() + "{}\n", "data follows the end line"),
    ];
    for (i, (altered, expected)) in cases.into_iter().enumerate() {
        let file = dir.path().join(format!("altered{i}.dump"));
        write_file(&file, altered.as_bytes());
        fails(&["load", arg(&file), "--path", arg(&target)], expected);
        assert!(contents(&target).entries.is_empty());
    }
}

#[test]
fn malformed_lines_are_refused_with_their_line_number() {
    let dir = tempfile::tempdir().unwrap();
    let entry = |key: &str, value: &str| {
        format!(r#"{{"entry":{{"key":{key},"value":{value},"versionstamp":"00000000000000010000"}}}}"#)
    };
    let good_key = r#"[["string","a"]]"#;
    let good_value = r#"{"u64":"1"}"#;
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![entry(good_key, r#"{"v9":"AAAA"}"#)], "line 2: unknown value kind \"v9\""),
        (vec![entry(good_key, r#"{"v8":"AA","bytes":"AA"}"#)], "exactly one member"),
        (vec![entry(good_key, r#"{"v8":"A!=="}"#)], "not valid padded base64"),
        (vec![entry(good_key, r#"{"u64":"-1"}"#)], "u64 value"),
        (vec![entry(good_key, r#"{"u64":"18446744073709551616"}"#)], "u64 value"),
        (vec![entry(r#"[["symbol","a"]]"#, good_value)], "unknown key part kind \"symbol\""),
        (vec![entry(r#"[["number","one"]]"#, good_value)], "is not a number"),
        (vec![entry(r#"[["bigint","1.5"]]"#, good_value)], "is not an integer"),
        (vec![entry(r#"["a"]"#, good_value)], "[kind, data] pair"),
        (vec![r#"{"entry":{"key":[],"value":{"u64":"1"},"versionstamp":"00000000000000010000","extra":1}}"#.into()], "unknown member \"extra\""),
        (vec![r#"{"entry":{"key":[],"value":{"u64":"1"}}}"#.into()], "has no versionstamp"),
        (vec![r#"{"entry":{"key":[],"value":{"u64":"1"},"versionstamp":"0000000000000001000A"}}"#.into()], "lowercase hex"),
        (vec![r#"{"record":{}}"#.into()], "unknown record type \"record\""),
        (vec!["not json".into()], "line 2: not a JSON line"),
        (vec![entry(r#"[["string","b"]]"#, good_value), entry(good_key, good_value)], "line 3: entries must come in strictly ascending key order"),
        (
            vec![
                r#"{"message":{"deadline":5,"attempts":0,"backoff":[],"keysIfUndelivered":[],"value":{"u64":"1"}}}"#.into(),
                entry(good_key, good_value),
            ],
            "line 3: an entry after a queued message",
        ),
        (
            vec![r#"{"message":{"deadline":5,"attempts":0,"backoff":[4294967296],"keysIfUndelivered":[],"value":{"u64":"1"}}}"#.into()],
            "a backoff interval must be an integer from 0 to 2^32-1",
        ),
    ];
    for (i, (lines, expected)) in cases.iter().enumerate() {
        let mut all = vec![HEADER];
        all.extend(lines.iter().map(String::as_str));
        let file = dir.path().join(format!("bad{i}.dump"));
        write_file(&file, &craft(&all, lines.len() as u64, 0));
        let target = dir.path().join(format!("t{i}"));
        fails(&["load", arg(&file), "--path", arg(&target)], expected);
        assert!(contents(&target).entries.is_empty());
    }
    let headers = [
        (r#"{"other":{}}"#, "not a stampkv dump"),
        (
            r#"{"stampkv-dump":{"version":2,"versionstamps":false,"expiry":true,"queue":true}}"#,
            "format version 2",
        ),
        (
            r#"{"stampkv-dump":{"version":1,"versionstamps":true,"expiry":true,"queue":true}}"#,
            "no lastVersionstamp",
        ),
        ("[1,2]", "not a JSON object"),
    ];
    for (i, (header, expected)) in headers.into_iter().enumerate() {
        let file = dir.path().join(format!("header{i}.dump"));
        write_file(&file, &craft(&[header], 0, 0));
        fails(&["load", arg(&file), "--path", arg(&dir.path().join("h"))], expected);
    }
    // A crafted dump that is right loads.
    let file = dir.path().join("good.dump");
    let line = entry(good_key, good_value);
    write_file(&file, &craft(&[HEADER, &line], 1, 0));
    let target = dir.path().join("good");
    ok(&["load", arg(&file), "--path", arg(&target)]);
    let loaded = contents(&target);
    assert_eq!(loaded.entries.len(), 1);
    assert_eq!(loaded.last, Versionstamp::from_sequence(100));
    fails(&["load", arg(&dir.path().join("missing.dump")), "--path", arg(&target)], "cannot open");
}

#[test]
fn directories_that_are_not_databases_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    fails(&["dump", "--path", arg(&missing)], "does not exist");
    assert!(!missing.exists(), "dump must not create a database");
    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    write_file(&foreign.join("notes.txt"), b"not a database");
    fails(&["dump", "--path", arg(&foreign)], "is not a stampkv database");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    fails(&["dump", "--path", arg(&empty)], "is not a stampkv database");
    let file = dir.path().join("file");
    write_file(&file, b"x");
    fails(&["dump", "--path", arg(&file)], "is not a directory");

    let dump = dir.path().join("d.dump");
    write_file(&dump, &craft(&[HEADER], 0, 0));
    fails(&["load", arg(&dump), "--path", arg(&foreign)], "not a stampkv database and not empty");
    assert_eq!(std::fs::read_dir(&foreign).unwrap().count(), 1, "nothing written into a foreign directory");
    fails(&["load", arg(&dump), "--path", arg(&file)], "is not a directory");
    // A missing or empty directory becomes a database.
    ok(&["load", arg(&dump), "--path", arg(&empty)]);
    ok(&["load", arg(&dump), "--path", arg(&missing)]);
    assert!(contents(&missing).entries.is_empty());

    // A database another process holds open.
    let held = dir.path().join("held");
    let kv = Kv::open(&held, fast()).unwrap();
    fails(&["dump", "--path", arg(&held)], "cannot open the database");
    fails(&["load", arg(&dump), "--path", arg(&held)], "cannot open the database");
    kv.close().unwrap();
}

#[test]
fn a_failed_dump_to_a_file_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("no-such-dir").join("x.dump");
    let source = dir.path().join("source");
    populate(&source);
    fails(&["dump", "--path", arg(&source), "-o", arg(&out)], "cannot create");
    assert!(!out.exists());
    assert!(run(&["dump", "--path", arg(&source), "-o", arg(&dir.path().join("ok.dump"))]).status.success());
}
