//! Report commands whose reader goes away (`stampkv stats | head -1`) end quietly with status
//! 0: no panic message about a broken pipe.

use std::process::{Command, Stdio};

#[test]
fn a_closed_standard_output_ends_report_commands_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let bin = env!("CARGO_BIN_EXE_stampkv");
    let set =
        Command::new(bin).args(["set", "--create", "--path"]).arg(&db).args(["[1]", "1"]).output().unwrap();
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    for command in ["stats", "verify"] {
        let mut child = Command::new(bin)
            .arg(command)
            .arg("--path")
            .arg(&db)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Close the reading end before the command has opened the database and printed.
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{command}: {:?} {stderr}", output.status);
        assert!(!stderr.contains("panicked"), "{command}: {stderr}");
    }
}
