//! Helpers shared by the `dump`/`load` and `import-deno`/`export-deno` tests: running the
//! binary, and reading a database directory whole.

use stampkv::{BulkEntry, Kv, KvOptions, QueuedMessage, Versionstamp};
use std::path::Path;
use std::process::{Command, Output};

/// Runs `stampkv` with `args`.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stampkv")).args(args).output().expect("run stampkv")
}

/// Runs `stampkv`, which must succeed quietly; returns its standard output.
pub fn ok(args: &[&str]) -> Vec<u8> {
    let out = run(args);
    assert!(out.status.success(), "stampkv {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.stderr.is_empty(),
        "stampkv {args:?} wrote to stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Runs `stampkv`, which must fail with exit status 1 and one line on standard error that
/// contains `expected`; returns that line.
pub fn fails(args: &[&str], expected: &str) -> String {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "stampkv {args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "stampkv {args:?} panicked: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "stampkv {args:?}: not one line: {stderr}");
    assert!(lines[0].starts_with("stampkv: error: "), "{stderr}");
    assert!(lines[0].contains(expected), "stampkv {args:?}: {stderr:?} does not contain {expected:?}");
    lines[0].to_owned()
}

/// Everything a database holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contents {
    pub entries: Vec<BulkEntry>,
    pub messages: Vec<QueuedMessage>,
    pub last: Versionstamp,
}

/// Reads a database directory whole (and closes it).
pub fn contents(dir: &Path) -> Contents {
    let kv = Kv::open(dir, KvOptions::default()).expect("open the database");
    let snapshot = kv.bulk_snapshot();
    let entries = snapshot.entries().collect::<Result<Vec<_>, _>>().expect("read entries");
    let messages = snapshot.messages().collect::<Result<Vec<_>, _>>().expect("read messages");
    let last = snapshot.last_versionstamp();
    drop(snapshot);
    kv.close().expect("close");
    Contents { entries, messages, last }
}

/// A path as a `&str` argument.
pub fn arg(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}
