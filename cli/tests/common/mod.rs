//! What the command-line tests share: running the `stampkv` binary.

use std::process::Command;

/// Runs `stampkv` with `args`: (exit code, stdout, stderr).
pub fn stampkv(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stampkv")).args(args).output().unwrap();
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (out.status.code().unwrap_or(-1), text(out.stdout), text(out.stderr))
}
