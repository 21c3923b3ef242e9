//! Runs every committed corpus input (`fuzz/corpus/<target>/*`: the seeds and the
//! regression inputs) and every generated seed through its target on the stable toolchain,
//! plus named regression cases for what the fuzzers found.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unreachable,
    reason = "test code: a panic is a failed test"
)]

use std::path::Path;

use stampkv::value::v8;
use stampkv::{key, Key, Kv, KvOptions, ListOptions, Selector, Value};
use stampkv_fuzz_harness::TARGETS;

fn run_target(target: &str, data: &[u8]) {
    let run = TARGETS.iter().find(|(t, _)| *t == target).expect("known target").1;
    run(data);
}

fn corpus_file(target: &str, name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus").join(target).join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn committed_corpus() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus");
    for (target, run) in TARGETS {
        let dir = corpus.join(target);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("directory entry").path())
            .filter(|path| path.is_file())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{target}: no corpus files in {}", dir.display());
        for path in files {
            let data = std::fs::read(&path).expect("read corpus file");
            if let Err(panic) = std::panic::catch_unwind(|| run(&data)) {
                let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
                panic!("{target}: {} failed: {message}", path.display());
            }
        }
    }
}

#[test]
fn generated_seeds() {
    for (target, name, data) in stampkv_fuzz_harness::seeds::all() {
        if let Err(panic) = std::panic::catch_unwind(|| run_target(target, &data)) {
            let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
            panic!("{target}: seed {name} failed: {message}");
        }
    }
}

/// Inputs too short for any variant still run.
#[test]
fn tiny_inputs() {
    for (_, run) in TARGETS {
        for data in [&[][..], &[0], &[1], &[2], &[0xFF; 3]] {
            run(data);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Named regressions
// ---------------------------------------------------------------------------------------

fn nest(levels: usize, leaf: Value) -> Value {
    (0..levels).fold(leaf, |value, _| Value::Array(vec![value]))
}

/// Finding V8-DEPTH-WRITE (value_codec, fixed): a value nested `MAX_DEPTH` (256) containers
/// deep around a leaf was written by `v8::serialize` (so `kv.set` stored it) but refused by
/// `v8::deserialize` ("values nested deeper than 256 levels"), so `kv.get::<Value>` could not
/// read it back: the reader counted every value as a level, the writer only containers. Both
/// now count containers.
#[test]
fn regression_v8_depth_write_then_read() {
    let leaves = [
        Value::Number(1.0),
        Value::String("x".into()),
        Value::RegExp { source: "a".into(), flags: "".into() },
        Value::Object(vec![("k".into(), Value::Null)]),
    ];
    for leaf in leaves {
        // 256 containers in all, the innermost one possibly the leaf itself.
        let levels = if matches!(leaf, Value::Object(_)) { 255 } else { 256 };
        let value = nest(levels, leaf);
        let bytes = v8::serialize(&value).expect("256 levels are written");
        assert_eq!(v8::deserialize(&bytes).expect("and read back"), value);
        let too_deep = Value::Array(vec![value]);
        assert!(v8::serialize(&too_deep).is_err(), "257 levels are refused");
    }
    let data = corpus_file("value_codec", "regression-v8-depth-write");
    run_target("value_codec", &data);
}

/// Finding V8-DEPTH-REFS (value_codec, fixed): `v8::deserialize` resolved a shared reference
/// by copying the referenced object without counting the copy's depth, so it accepted data
/// whose value is nested deeper than `MAX_DEPTH`, which `v8::serialize` (and `kv.set`) then
/// refused. The input: `[X, [^1]]` with X 255 arrays deep (256 with the outer one, the most
/// the writer allows): the copy of X in `[^1]` would be 257 deep. It is now refused as
/// unrepresentable, like any value nested too deep.
#[test]
fn regression_v8_depth_through_references() {
    let data = corpus_file("value_codec", "regression-v8-depth-refs");
    match v8::deserialize(&data) {
        Err(stampkv::ValueError::Unrepresentable(why)) => assert!(why.contains("deeper"), "{why}"),
        other => panic!("expected a too-deep error, got {other:?}"),
    }
    run_target("value_codec", &data);
}

/// The input of V8-DEPTH-REFS, built from the writer's own output (it is committed as
/// `fuzz/corpus/value_codec/regression-v8-depth-refs`).
fn v8_depth_refs_input() -> Vec<u8> {
    let x = nest(254, Value::Array(vec![]));
    let bytes = v8::serialize(&Value::Array(vec![x, Value::Array(vec![Value::String("@@".into())])]))
        .expect("256 levels serialize");
    let placeholder = b"\"\x02@@";
    let at = bytes.windows(placeholder.len()).position(|w| w == placeholder).expect("placeholder");
    // `^ 01`: a reference to object 1 (X; object 0 is the outer array).
    [&bytes[..at], b"^\x01", &bytes[at + placeholder.len()..]].concat()
}

#[test]
fn regression_v8_depth_refs_input_is_committed() {
    assert_eq!(corpus_file("value_codec", "regression-v8-depth-refs"), v8_depth_refs_input());
    run_target("value_codec", &v8_depth_refs_input());
}

/// kv_model found this edge of the reference's cursor rule (Deno does the same; not a
/// bug): for a range whose start encodes to a byte prefix of its end, the cursor of the
/// start key is the key minus the common prefix — empty — so `""`, which also means "no
/// cursor" and "exhausted": paging with `limit: 1` stops after the first entry. The model
/// accepts exactly this; the input is `fuzz/corpus/kv_model/regression-cursor-common-prefix`.
#[test]
fn regression_cursor_of_the_common_prefix_key_is_empty() {
    let kv = Kv::open_in_memory(KvOptions::default()).expect("open");
    kv.set(&key![false], &Value::Null).expect("set");
    kv.set(&key![false, 1], &Value::Null).expect("set");
    let selector = Selector::range(key![false], key![false, 3, 3]);
    let options = ListOptions { limit: Some(1), ..ListOptions::default() };
    let mut iter = kv.list::<Value>(&selector, &options).expect("list");
    let first: Vec<Key> = iter.by_ref().map(|e| e.expect("entry").key).collect();
    assert_eq!(first, vec![key![false]]);
    assert_eq!(iter.cursor().expect("cursor"), "", "the reference's cursor for the common-prefix key");
    run_target("kv_model", &corpus_file("kv_model", "regression-cursor-common-prefix"));
}

/// Finding KEY-SYNTAX-TEMPLATE (key_syntax, fixed in `cli/src/value_display.rs`): a string key
/// part holding `"` and `'` (and no backtick) was printed in backticks with its `${` as it
/// was, a template substitution the key parser refuses, so `stampkv list` printed such a key
/// in a form that could not be pasted back. The printer now escapes the `$` (`\${`).
#[test]
fn regression_printed_key_with_template_substitution() {
    let key = key!["'\"${"];
    let typed = stampkv_cli::value_json::key_json(&key);
    assert_eq!(stampkv_cli::key_syntax::parse_key(&typed), Ok(key.clone()), "{typed}");
    let printed = stampkv_cli::value_display::inspect_key(&key);
    assert_eq!(printed, "[ `'\"\\${` ]");
    assert_eq!(stampkv_cli::key_syntax::parse_key(&printed), Ok(key.clone()), "{printed}");
    run_target("key_syntax", &corpus_file("key_syntax", "regression-printed-template-substitution"));
}
