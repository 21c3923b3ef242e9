//! `stampkv get`, `set`, `delete` and `list`, run as the built binary against temporary
//! database directories. Expected printed values were obtained from Deno 2.9.6
//! (`Deno.inspect(value)` with NO_COLOR=1) for the same values.

use stampkv::{key, Kv, KvBigInt, KvOptions, KvValue, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// What one run of the binary did.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    /// Asserts success and returns standard output.
    fn ok(self) -> String {
        assert_eq!(self.code, 0, "stderr: {}", self.stderr);
        assert!(self.stderr.is_empty(), "stderr: {}", self.stderr);
        self.stdout
    }

    /// Asserts a failure reported as one `stampkv: error:` line and nothing on standard
    /// output; returns the message.
    fn error(self) -> String {
        assert_eq!(self.code, 1, "stdout: {} stderr: {}", self.stdout, self.stderr);
        assert!(self.stdout.is_empty(), "stdout: {}", self.stdout);
        assert_eq!(self.stderr.lines().count(), 1, "one line: {:?}", self.stderr);
        self.stderr.strip_prefix("stampkv: error: ").expect(&self.stderr).trim_end().to_owned()
    }
}

fn stampkv(args: &[&str]) -> Run {
    stampkv_with_input(args, None)
}

fn stampkv_with_input(args: &[&str], input: Option<&[u8]>) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stampkv"))
        .args(args)
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = input {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    let output = child.wait_with_output().unwrap();
    Run {
        code: output.status.code().expect("exited, not killed"),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// A temporary directory with a fresh database in `db`.
fn new_db() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    Kv::open(&db, KvOptions::default()).unwrap().close().unwrap();
    let db = db.to_str().unwrap().to_owned();
    (dir, db)
}

fn set(db: &str, key: &str, flags: &[&str], value: &str) -> String {
    let mut args = vec!["set", "--path", db, key];
    args.extend_from_slice(flags);
    args.push(value);
    stampkv(&args).ok()
}

fn get(db: &str, key: &str) -> String {
    stampkv(&["get", "--path", db, key]).ok()
}

#[test]
fn every_key_part_kind_round_trips_and_lists_in_key_order() {
    let (_dir, db) = new_db();
    // (key as typed, key as printed back)
    let keys = [
        (
            r#"["s", 'single', "é", "say \"hi\"", "tab\t", "\u{1F600}"]"#,
            r#"[ "s", "single", "é", 'say "hi"', "tab\t", "😀" ]"#,
        ),
        (
            "[\"n\", 42, -0, 1.5, 1e21, -2.5e-7, Infinity, -Infinity, NaN, 0x10]",
            r#"[ "n", 42, -0, 1.5, 1e+21, -2.5e-7, Infinity, -Infinity, NaN, 16 ]"#,
        ),
        (
            "[\"b\", 42n, -7n, 0n, 123456789012345678901234567890n]",
            r#"[ "b", 42n, -7n, 0n, 123456789012345678901234567890n ]"#,
        ),
        ("[\"t\", true, false]", r#"[ "t", true, false ]"#),
        ("[\"u\", new Uint8Array([1, 2, 3])]", r#"[ "u", Uint8Array(3) [ 1, 2, 3 ] ]"#),
        ("[\"u\", Uint8Array(0) []]", r#"[ "u", Uint8Array(0) [] ]"#),
        ("[\"u\", Uint8Array.fromHex('ff00')]", r#"[ "u", Uint8Array(2) [ 255, 0 ] ]"#),
        ("[new Uint8Array([0, 255]), 'bytes first']", r#"[ Uint8Array(2) [ 0, 255 ], "bytes first" ]"#),
        ("[1n]", "[ 1n ]"),
        ("[1]", "[ 1 ]"),
        ("[false]", "[ false ]"),
    ];
    for (i, (key, _)) in keys.iter().enumerate() {
        assert!(!set(&db, key, &[], &i.to_string()).is_empty());
    }
    for (i, (key, printed)) in keys.iter().enumerate() {
        assert_eq!(get(&db, key), format!("{i}\n"), "{key}");
        // The printed key reads back as the same key.
        assert_eq!(get(&db, printed), format!("{i}\n"), "{printed}");
    }
    // Keys order by type (bytes < string < bigint < number < false < true), then value.
    let listed = stampkv(&["list", "--path", &db, "--keys-only"]).ok();
    let expected = [
        r#"[ Uint8Array(2) [ 0, 255 ], "bytes first" ]"#,
        r#"[ "b", 42n, -7n, 0n, 123456789012345678901234567890n ]"#,
        r#"[ "n", 42, -0, 1.5, 1e+21, -2.5e-7, Infinity, -Infinity, NaN, 16 ]"#,
        r#"[ "s", "single", "é", 'say "hi"', "tab\t", "😀" ]"#,
        r#"[ "t", true, false ]"#,
        r#"[ "u", Uint8Array(0) [] ]"#,
        r#"[ "u", Uint8Array(3) [ 1, 2, 3 ] ]"#,
        r#"[ "u", Uint8Array(2) [ 255, 0 ] ]"#,
        "[ 1n ]",
        "[ 1 ]",
        "[ false ]",
    ];
    assert_eq!(listed.lines().collect::<Vec<_>>(), expected);
    // The typed JSON keys of `list --json --keys-only` read back too.
    let typed_keys = stampkv(&["list", "--path", &db, "--json", "--keys-only"]).ok();
    assert_eq!(typed_keys.lines().count(), keys.len());
    for typed_key in typed_keys.lines() {
        assert!(typed_key.starts_with("[{\"type\":"), "{typed_key}");
        let value = get(&db, typed_key);
        assert!(!value.is_empty());
    }
    assert!(typed_keys.contains(r#"{"type":"number","value":-0}"#));
    assert!(typed_keys.contains(r#"{"type":"number","value":"NaN"}"#));
    assert!(typed_keys.contains(r#"{"type":"bigint","value":"123456789012345678901234567890"}"#));
    assert!(typed_keys.contains(r#"{"type":"Uint8Array","value":"_wA"}"#));
}

/// (typed JSON as `set --typed` takes and `get --json` prints it, what Deno 2.9.6 prints
/// for the value).
const VALUES: &[(&str, &str)] = &[
    (r#"{"type":"undefined"}"#, "undefined"),
    (r#"{"type":"null","value":null}"#, "null"),
    (r#"{"type":"boolean","value":true}"#, "true"),
    (r#"{"type":"number","value":0}"#, "0"),
    (r#"{"type":"number","value":-0}"#, "-0"),
    (r#"{"type":"number","value":1.5}"#, "1.5"),
    (r#"{"type":"number","value":"NaN"}"#, "NaN"),
    (r#"{"type":"number","value":"-Infinity"}"#, "-Infinity"),
    (r#"{"type":"bigint","value":"42"}"#, "42n"),
    (r#"{"type":"bigint","value":"-1180591620717411303424"}"#, "-1180591620717411303424n"),
    (r#"{"type":"string","value":""}"#, r#""""#),
    (r#"{"type":"string","value":"é"}"#, r#""é""#),
    (r#"{"type":"string","value":"say \"hi\""}"#, r#"'say "hi"'"#),
    (r#"{"type":"string","value":"line\nbreak"}"#, r#""line\nbreak""#),
    (r#"{"type":"Uint8Array","byteLength":3,"value":"AQID"}"#, "Uint8Array(3) [ 1, 2, 3 ]"),
    (r#"{"type":"Uint8Array","byteLength":0,"value":""}"#, "Uint8Array(0) []"),
    (
        r#"{"type":"json_array","value":[{"type":"number","value":1},{"type":"string","value":"a"},{"type":"boolean","value":true}]}"#,
        r#"[ 1, "a", true ]"#,
    ),
    (
        r#"{"type":"json_object","value":{"name":{"type":"string","value":"Ann"},"tags":{"type":"json_array","value":[{"type":"string","value":"a"}]}}}"#,
        r#"{ name: "Ann", tags: [ "a" ] }"#,
    ),
    (
        r#"{"type":"json_object","value":{"1":{"type":"string","value":"a"},"2":{"type":"string","value":"b"},"x":{"type":"number","value":1}}}"#,
        r#"{ "1": "a", "2": "b", x: 1 }"#,
    ),
    (
        r#"{"type":"json_map","value":[[{"type":"number","value":1},{"type":"number","value":2}],[{"type":"string","value":"k"},{"type":"json_set","value":[{"type":"number","value":1}]}]]}"#,
        r#"Map(2) { 1 => 2, "k" => Set(1) { 1 } }"#,
    ),
    (
        r#"{"type":"json_set","value":[{"type":"string","value":"a"},{"type":"bigint","value":"1"}]}"#,
        r#"Set(2) { "a", 1n }"#,
    ),
    (r#"{"type":"Date","value":"2017-07-14T02:40:00.000Z"}"#, "2017-07-14T02:40:00.000Z"),
    (r#"{"type":"Date","value":null}"#, "Invalid Date"),
    (r#"{"type":"RegExp","value":"/a\\/b/gi"}"#, r"/a\/b/gi"),
    (r#"{"type":"KvU64","value":"5"}"#, "[Deno.KvU64: 5n]"),
    (
        r#"{"type":"json_object","value":{"a":{"type":"json_object","value":{"b":{"type":"json_object","value":{"c":{"type":"json_object","value":{"d":{"type":"json_object","value":{"e":{"type":"number","value":1}}}}}}}}}}}"#,
        "{\n  a: {\n    b: { c: { d: { e: 1 } } }\n  }\n}",
    ),
    (
        r#"{"type":"json_object","value":{"u":{"type":"undefined"},"bytes":{"type":"Uint8Array","byteLength":1,"value":"CQ"}}}"#,
        "{ u: undefined, bytes: Uint8Array(1) [ 9 ] }",
    ),
];

#[test]
fn every_value_kind_round_trips_through_typed_json_and_prints_as_deno_does() {
    let (_dir, db) = new_db();
    let mut json_entries = String::new();
    for (i, (typed, deno)) in VALUES.iter().enumerate() {
        let key = format!("[\"v\", {i}]");
        let versionstamp = set(&db, &key, &["--typed"], typed);
        assert_eq!(versionstamp.trim_end().len(), 20, "{versionstamp}");
        assert_eq!(get(&db, &key), format!("{deno}\n"), "{typed}");
        let json = stampkv(&["get", "--path", &db, "--json", &key]).ok();
        let expected = format!(
            r#"{{"key":[{{"type":"string","value":"v"}},{{"type":"number","value":{i}}}],"value":{typed},"versionstamp":"{}"}}"#,
            versionstamp.trim_end()
        );
        assert_eq!(json.trim_end(), expected);
        json_entries.push_str(&json);
    }
    // `list` prints every entry on one line, in the same notation.
    let listed = stampkv(&["list", "--path", &db, "--prefix", r#"["v"]"#]).ok();
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), VALUES.len());
    assert_eq!(lines[0], r#"[ "v", 0 ] => undefined"#);
    assert_eq!(lines[19], r#"[ "v", 19 ] => Map(2) { 1 => 2, "k" => Set(1) { 1 } }"#);
    assert_eq!(lines[25], r#"[ "v", 25 ] => { a: { b: { c: { d: { e: 1 } } } } }"#);
    // The JSON lines of `list --json` are the entries `get --json` prints.
    assert_eq!(stampkv(&["list", "--path", &db, "--json"]).ok(), json_entries);
}

#[test]
fn values_written_by_the_library_print_as_deno_prints_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let kv = Kv::open(&db, KvOptions::default()).unwrap();
    let long: Vec<Value> = (0..150).map(|i| Value::Number(f64::from(i))).collect();
    kv.set(&key!["long"], &Value::Array(long)).unwrap();
    kv.set(&key!["big"], &Value::BigInt(KvBigInt::from(-42))).unwrap();
    kv.set(&key!["u64"], &KvValue::U64(u64::MAX)).unwrap();
    kv.set(
        &key!["nested"],
        &Value::Array(vec![Value::Array(vec![Value::Array(vec![Value::Array(vec![Value::Array(vec![
            Value::Array(vec![Value::Null]),
        ])])])])]),
    )
    .unwrap();
    // A V8 value a `Value` cannot hold: `new Int16Array([1, 2])` as Deno 2.9.6 stores it.
    let int16 = vec![0xFF, 0x10, 0x42, 0x04, 0x01, 0x00, 0x02, 0x00, 0x56, 0x77, 0x00, 0x04, 0x00];
    kv.set(&key!["int16"], &KvValue::V8(int16.clone())).unwrap();
    kv.close().unwrap();
    let db = db.to_str().unwrap();
    // Deno 2.9.6: Deno.inspect(Array.from({length: 150}, (_, i) => i)).
    let mut deno = String::from("[\n");
    for row in 0..8 {
        let cells: Vec<String> = (row * 12..row * 12 + 12).map(|i| format!("{i:>2}")).collect();
        deno.push_str(&format!("  {},\n", cells.join(", ")));
    }
    deno.push_str("  96, 97, 98, 99,\n  ... 50 more items\n]\n");
    assert_eq!(get(db, r#"["long"]"#), deno);
    // With --full nothing is elided (Deno.inspect with maxArrayLength: Infinity).
    let full = stampkv(&["get", "--path", db, "--full", r#"["long"]"#]).ok();
    assert!(full.starts_with("[\n    0,   1,   2,"), "{full}");
    assert!(full.ends_with("  144, 145, 146, 147, 148, 149\n]\n"), "{full}");
    assert_eq!(get(db, r#"["big"]"#), "-42n\n");
    assert_eq!(get(db, r#"["u64"]"#), "[Deno.KvU64: 18446744073709551615n]\n");
    // Deno 2.9.6: Deno.inspect([[[[[[null]]]]]]).
    assert_eq!(get(db, r#"["nested"]"#), "[\n  [\n    [ [ [ [Array] ] ] ]\n  ]\n]\n");
    let full = stampkv(&["get", "--path", db, "--full", r#"["nested"]"#]).ok();
    assert_eq!(full, "[\n  [\n    [\n      [ [ [ null ] ] ]\n    ]\n  ]\n]\n");
    // Undecodable V8 data is described, and kept byte for byte in typed JSON.
    let shown = get(db, r#"["int16"]"#);
    assert!(shown.starts_with("[undecodable V8 value, 13 bytes: value cannot be represented"), "{shown}");
    let json = stampkv(&["get", "--path", db, "--json", r#"["int16"]"#]).ok();
    let typed_start = json.find(r#"{"type":"V8""#).unwrap();
    let typed_end = json.rfind(r#","versionstamp""#).unwrap();
    let typed = &json[typed_start..typed_end];
    set(db, r#"["int16 copy"]"#, &["--typed"], typed);
    let kv = Kv::open(dir.path().join("db"), KvOptions::default()).unwrap();
    assert_eq!(kv.get::<KvValue>(&key!["int16 copy"]).unwrap().value, Some(KvValue::V8(int16)));
    kv.close().unwrap();
}

#[test]
fn set_takes_json_strings_u64s_and_bytes() {
    let (dir, db) = new_db();
    set(&db, r#"["json"]"#, &[], r#"{"b": 1, "2": [true, null], "a": "x", "b": 3}"#);
    // As JSON.parse: integer-like keys first, a repeated key keeps its place and its last value.
    assert_eq!(get(&db, r#"["json"]"#), "{ \"2\": [ true, null ], b: 3, a: \"x\" }\n");
    set(&db, r#"["json"]"#, &["--json"], "-5");
    assert_eq!(get(&db, r#"["json"]"#), "-5\n");
    set(&db, r#"["json"]"#, &[], "12345678901234567890123");
    assert_eq!(get(&db, r#"["json"]"#), "1.2345678901234568e+22\n");
    set(&db, r#"["string"]"#, &["--string"], "{not json}");
    assert_eq!(get(&db, r#"["string"]"#), "\"{not json}\"\n");
    set(&db, r#"["u64"]"#, &["--u64"], "18446744073709551615");
    assert_eq!(get(&db, r#"["u64"]"#), "[Deno.KvU64: 18446744073709551615n]\n");
    set(&db, r#"["u64"]"#, &["--u64"], "7n");
    assert_eq!(get(&db, r#"["u64"]"#), "[Deno.KvU64: 7n]\n");
    set(&db, r#"["hex"]"#, &["--bytes-hex"], "de ad BE EF");
    assert_eq!(get(&db, r#"["hex"]"#), "Uint8Array(4) [ 222, 173, 190, 239 ]\n");
    let file = dir.path().join("bytes.bin");
    std::fs::write(&file, [0u8, 1, 2]).unwrap();
    stampkv(&["set", "--path", &db, r#"["file"]"#, "--bytes-file", file.to_str().unwrap()]).ok();
    assert_eq!(get(&db, r#"["file"]"#), "Uint8Array(3) [ 0, 1, 2 ]\n");
    stampkv_with_input(&["set", "--path", &db, r#"["stdin"]"#, "--bytes-file", "-"], Some(b"hi")).ok();
    assert_eq!(get(&db, r#"["stdin"]"#), "Uint8Array(2) [ 104, 105 ]\n");
    // The versionstamps printed by set grow.
    let first = set(&db, r#"["vs"]"#, &[], "1");
    let second = set(&db, r#"["vs"]"#, &[], "2");
    assert!(second > first, "{first} {second}");
    let shown = stampkv(&["get", "--path", &db, "--versionstamp", r#"["vs"]"#]).ok();
    assert_eq!(shown, format!("{second}2\n"));
}

#[test]
fn bad_values_and_unknown_flags_are_refused() {
    let (_dir, db) = new_db();
    let refused = |flags: &[&str], value: &str| {
        let mut args = vec!["set", "--path", &db, r#"["k"]"#];
        args.extend_from_slice(flags);
        args.push(value);
        stampkv(&args).error()
    };
    assert_eq!(
        refused(&[], "{oops}"),
        "invalid VALUE: invalid JSON: key must be a string at line 1 column 2"
    );
    assert_eq!(
        refused(&["--u64"], "-1"),
        r#"invalid VALUE: "-1" is not an integer from 0 to 18446744073709551615"#
    );
    assert_eq!(
        refused(&["--u64"], "18446744073709551616"),
        r#"invalid VALUE: "18446744073709551616" is not an integer from 0 to 18446744073709551615"#
    );
    assert_eq!(refused(&["--bytes-hex"], "abc"), "invalid VALUE: odd number of hex digits (3)");
    assert_eq!(refused(&["--bytes-hex"], "zz"), "invalid VALUE: 'z' is not a hex digit");
    assert_eq!(
        refused(&["--typed"], r#"{"type":"Int16Array","value":"AQA"}"#),
        "invalid VALUE: at $: stampkv values cannot hold a Int16Array"
    );
    assert!(refused(&["--typed"], r#"{"type":"nope"}"#)
        .starts_with(r#"invalid VALUE: at $: unknown type "nope" (known: undefined"#));
    assert_eq!(
        refused(&["--typed"], r#"{"type":"json_array","value":[{"type":"number","value":"x"}]}"#),
        r#"invalid VALUE: at $.value[0]: the "value" of a "number" must be a number, "NaN", "Infinity" or "-Infinity""#
    );
    assert_eq!(
        refused(&["--typed"], r#"{"type":"json_array","value":[{"type":"KvU64","value":"1"}]}"#),
        "invalid VALUE: value not allowed: a KvU64 can only be stored as a whole value, not inside another value"
    );
    assert_eq!(
        refused(&["--typed"], r#"{"type":"Uint8Array","byteLength":2,"value":"AQID"}"#),
        "invalid VALUE: at $: byteLength does not match the 3 bytes of the value"
    );
    assert_eq!(
        refused(&["--typed"], r#"{"type":"Date","value":"2017-07-14T02:40:00"}"#),
        r#"invalid VALUE: at $: invalid date "2017-07-14T02:40:00": a date with a time needs 'Z' or an offset like +02:00"#
    );
    // Kinds of value are exclusive, unknown flags are refused by the argument parser.
    for args in [
        vec!["set", "--path", &db, r#"["k"]"#, "--string", "--u64", "1"],
        vec!["set", "--path", &db, r#"["k"]"#, "--bogus", "1"],
        vec!["set", "--path", &db, r#"["k"]"#],
        vec!["set", "--path", &db, r#"["k"]"#, "x", "--bytes-file", "f"],
        vec!["list", "--path", &db, "--json", "--versionstamp"],
    ] {
        let run = stampkv(&args);
        assert_eq!(run.code, 2, "{args:?}");
        assert!(run.stderr.starts_with("error: "), "{}", run.stderr);
        assert!(run.stdout.is_empty());
    }
    // Deno's own checks: the empty key cannot be written, a value has a size limit.
    assert_eq!(stampkv(&["set", "--path", &db, "[]", "1"]).error(), "cannot set []: key cannot be empty");
    let huge = format!("\"{}\"", "x".repeat(70_000));
    assert_eq!(
        stampkv(&["set", "--path", &db, r#"["k"]"#, &huge]).error(),
        r#"cannot set [ "k" ]: Value too large (max 65536 bytes)"#
    );
    assert_eq!(
        stampkv(&["get", "--path", &db, r#"["k"]"#]).error(),
        r#"no entry for key [ "k" ]"#,
        "nothing was written"
    );
}

#[test]
fn bad_key_syntax_is_one_line_with_the_column() {
    let (_dir, db) = new_db();
    let cases = [
        (r#"["users" 42]"#, "invalid KEY: expected ',' or ']', found '4' at column 10"),
        ("users", "invalid KEY: expected '[' (a key is an array in Deno's syntax, e.g. '[\"users\", 42]') at column 1"),
        ("[users]", "invalid KEY: unexpected 'users' (a string needs quotes) at column 2"),
        ("[\"abc]", "invalid KEY: unterminated string at column 2"),
        ("[{}]", "invalid KEY: invalid typed JSON key: at $[0]: missing \"type\""),
        ("[1.5n]", "invalid KEY: a bigint has no fraction or exponent at column 5"),
        ("[new Uint8Array([300])]", "invalid KEY: byte 300 is not an integer from 0 to 255 at column 18"),
    ];
    for (key, message) in cases {
        assert_eq!(stampkv(&["get", "--path", &db, key]).error(), message, "{key}");
    }
    assert_eq!(
        stampkv(&["list", "--path", &db, "--prefix", "[1,,2]"]).error(),
        "invalid --prefix: empty element (holes are not key parts) at column 4"
    );
    assert_eq!(
        stampkv(&["set", "--path", &db, "[null]", "1"]).error(),
        "invalid KEY: null is not a key part (parts are strings, numbers, bigints, booleans and Uint8Arrays) at column 2"
    );
}

#[test]
fn list_selects_by_prefix_start_end_reverse_and_limit() {
    let (_dir, db) = new_db();
    for i in 0..6 {
        set(&db, &format!("[\"a\", {i}]"), &[], &format!("{}", i * 10));
    }
    set(&db, r#"["a"]"#, &[], "\"the prefix itself\"");
    set(&db, r#"["b", 0]"#, &[], "\"b\"");
    let keys = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["list", "--path", &db, "--keys-only"];
        all.extend_from_slice(args);
        stampkv(&all).ok().lines().map(str::to_owned).collect()
    };
    let a = |i: i32| format!("[ \"a\", {i} ]");
    assert_eq!(keys(&[]).len(), 8);
    assert_eq!(keys(&["--prefix", r#"["a"]"#]), (0..6).map(a).collect::<Vec<_>>());
    assert_eq!(keys(&["--prefix", r#"["a"]"#, "--reverse", "--limit", "2"]), vec![a(5), a(4)]);
    assert_eq!(keys(&["--prefix", r#"["a"]"#, "--start", r#"["a", 4]"#]), vec![a(4), a(5)]);
    assert_eq!(keys(&["--prefix", r#"["a"]"#, "--end", r#"["a", 2]"#]), vec![a(0), a(1)]);
    assert_eq!(keys(&["--start", r#"["a", 1]"#, "--end", r#"["a", 3]"#]), vec![a(1), a(2)]);
    assert_eq!(keys(&["--start", r#"["a", 5]"#]), vec![a(5), "[ \"b\", 0 ]".to_owned()]);
    assert_eq!(keys(&["--end", r#"["a", 0]"#]), vec!["[ \"a\" ]".to_owned()]);
    assert_eq!(keys(&["--prefix", r#"["c"]"#]), Vec::<String>::new());
    let lines = stampkv(&["list", "--path", &db, "--prefix", r#"["b"]"#, "--versionstamp"]).ok();
    let (versionstamp, rest) = lines.trim_end().split_once(' ').unwrap();
    assert_eq!(versionstamp.len(), 20);
    assert_eq!(rest, r#"[ "b", 0 ] => "b""#);
    let json = stampkv(&["list", "--path", &db, "--prefix", r#"["a"]"#, "--limit", "1", "--json"]).ok();
    assert!(json.starts_with(r#"{"key":[{"type":"string","value":"a"},{"type":"number","value":0}],"value":{"type":"number","value":0},"versionstamp":""#), "{json}");
    assert_eq!(json.lines().count(), 1);
    // Deno's checks of the selector, and a limit of zero.
    let list_error = |args: &[&str]| {
        let mut all = vec!["list", "--path", &db];
        all.extend_from_slice(args);
        stampkv(&all).error()
    };
    assert_eq!(list_error(&["--limit", "0"]), "--limit must be a positive integer");
    assert_eq!(
        list_error(&["--prefix", r#"["a"]"#, "--start", r#"["b"]"#]),
        "cannot list: Start key is not in the keyspace defined by prefix"
    );
    assert_eq!(
        list_error(&["--start", r#"["b"]"#, "--end", r#"["a"]"#]),
        "cannot list: Start key is greater than end key"
    );
    assert_eq!(
        list_error(&["--prefix", r#"["a"]"#, "--start", r#"["a", 1]"#, "--end", r#"["a", 2]"#]),
        "cannot list: Selector can not specify both 'start' and 'end' key when specifying 'prefix'"
    );
}

#[test]
fn list_streams_and_stops_quietly_when_the_reader_goes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let kv = Kv::open(&db, KvOptions::default()).unwrap();
    for batch in 0..20 {
        let mut atomic = kv.atomic();
        for i in 0..1000 {
            atomic = atomic.set(&key!["n", batch * 1000 + i], &Value::from("x".repeat(100)));
        }
        assert!(atomic.commit().unwrap().ok());
    }
    kv.close().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_stampkv"))
        .args(["list", "--path", db.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    // The reader is dropped here: the pipe closes after one line of 20 000.
    assert!(first.starts_with(r#"[ "n", 0 ] => "xxx"#), "{first}");
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(output.stderr.is_empty(), "{}", String::from_utf8_lossy(&output.stderr));
    let all = stampkv(&["list", "--path", db.to_str().unwrap(), "--keys-only"]).ok();
    assert_eq!(all.lines().count(), 20_000);
    assert_eq!(all.lines().last(), Some(r#"[ "n", 19999 ]"#));
}

#[test]
fn get_and_delete_of_a_missing_key_exit_1() {
    let (_dir, db) = new_db();
    assert_eq!(stampkv(&["get", "--path", &db, r#"["none"]"#]).error(), r#"no entry for key [ "none" ]"#);
    assert_eq!(stampkv(&["get", "--path", &db, "--json", "[]"]).error(), "no entry for key []");
    assert_eq!(stampkv(&["delete", "--path", &db, r#"["none"]"#]).error(), r#"no entry for key [ "none" ]"#);
    assert_eq!(stampkv(&["delete", "--path", &db, "--force", r#"["none"]"#]).ok(), "");
    set(&db, r#"["here"]"#, &[], "1");
    assert_eq!(stampkv(&["delete", "--path", &db, r#"["here"]"#]).ok(), "");
    assert_eq!(stampkv(&["get", "--path", &db, r#"["here"]"#]).error(), r#"no entry for key [ "here" ]"#);
    assert_eq!(
        stampkv(&["delete", "--path", &db, "-f", "[]"]).error(),
        "cannot delete []: key cannot be empty"
    );
}

#[test]
fn expire_in_makes_the_entry_vanish() {
    let (_dir, db) = new_db();
    set(&db, r#"["soon"]"#, &["--expire-in", "1"], "1");
    set(&db, r#"["later"]"#, &["--expire-in", "3600000"], "2");
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(stampkv(&["get", "--path", &db, r#"["soon"]"#]).error(), r#"no entry for key [ "soon" ]"#);
    assert_eq!(get(&db, r#"["later"]"#), "2\n");
}

fn entries_of(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_directory_without_a_database_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let missing_path = missing.to_str().unwrap();
    for args in [
        vec!["get", "--path", missing_path, "[1]"],
        vec!["list", "--path", missing_path],
        vec!["delete", "--path", missing_path, "[1]"],
    ] {
        assert_eq!(
            stampkv(&args).error(),
            format!("no database at {missing_path}: the directory does not exist")
        );
    }
    assert_eq!(
        stampkv(&["set", "--path", missing_path, "[1]", "1"]).error(),
        format!(
            "no database at {missing_path}: the directory does not exist (--create makes a new database)"
        )
    );
    assert!(!missing.exists(), "nothing was created");

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let empty_path = empty.to_str().unwrap();
    assert_eq!(
        stampkv(&["get", "--path", empty_path, "[1]"]).error(),
        format!("no database at {empty_path}: the directory is empty")
    );
    assert!(entries_of(&empty).is_empty(), "not even a LOCK file");

    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "mine").unwrap();
    let other_path = other.to_str().unwrap();
    assert_eq!(
        stampkv(&["list", "--path", other_path]).error(),
        format!("{other_path} holds no stampkv database (it has no CURRENT file)")
    );
    assert_eq!(
        stampkv(&["set", "--path", other_path, "--create", "[1]", "1"]).error(),
        format!("{other_path} is not empty and holds no stampkv database")
    );
    assert_eq!(entries_of(&other), ["notes.txt"]);

    let file = other.join("notes.txt");
    assert_eq!(
        stampkv(&["get", "--path", file.to_str().unwrap(), "[1]"]).error(),
        format!("{} is not a database directory (it is a file)", file.display())
    );

    // --create makes a database in a missing or empty directory.
    stampkv(&["set", "--path", missing_path, "--create", "[1]", "1"]).ok();
    assert_eq!(get(missing_path, "[1]"), "1\n");
    stampkv(&["set", "--path", empty_path, "--create", "[1]", "2"]).ok();
    assert_eq!(get(empty_path, "[1]"), "2\n");
}

#[test]
fn a_database_open_in_another_process_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let kv = Kv::open(&db, KvOptions::default()).unwrap();
    kv.set(&key!["k"], &Value::from(1)).unwrap();
    let path = db.to_str().unwrap();
    // The writer (this test process) is named by its process id.
    let expected = format!(
        "the database in {path} is in use by another process (process {} holds its LOCK)",
        std::process::id()
    );
    for args in [
        vec!["get", "--path", path, r#"["k"]"#],
        vec!["set", "--path", path, r#"["k"]"#, "2"],
        vec!["delete", "--path", path, r#"["k"]"#],
        vec!["list", "--path", path],
    ] {
        assert_eq!(stampkv(&args).error(), expected, "{args:?}");
    }
    assert_eq!(kv.get::<Value>(&key!["k"]).unwrap().value, Some(Value::from(1)), "nothing was changed");
    kv.close().unwrap();
    assert_eq!(get(path, r#"["k"]"#), "1\n");
}
