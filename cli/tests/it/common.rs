//! What the command-line tests share: running the `stampkv` binary.

use std::process::Command;

/// Runs `stampkv` with `args`: (exit code, stdout, stderr).
pub fn stampkv(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stampkv")).args(args).output().unwrap();
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (out.status.code().unwrap_or(-1), text(out.stdout), text(out.stderr))
}

/// Asserts a failure: exit 1 and one line on stderr containing `needle`.
pub fn fails_with(result: (i32, String, String), needle: &str) {
    let (code, stdout, stderr) = result;
    assert_eq!(code, 1, "stdout {stdout:?} stderr {stderr:?}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.starts_with("stampkv: error: ") && stderr.contains(needle), "{stderr:?}");
}
