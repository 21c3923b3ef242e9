//! Plumbing of the process-kill tests: reading what a child printed, telling a SIGKILL
//! from another exit, and acting as a libtest binary for `harness = false` tests.

use std::io::{BufRead, BufReader, Read};
use std::process::ExitStatus;
use std::thread::JoinHandle;

/// Reads everything a child prints on `stream`, keeping complete lines only (a line cut
/// by the kill is dropped).
pub fn collect_lines(stream: impl Read + Send + 'static) -> JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut lines = Vec::new();
        let mut line = String::new();
        while matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
            if let Some(complete) = line.strip_suffix('\n') {
                lines.push(complete.to_owned());
            }
            line.clear();
        }
        lines
    })
}

/// Reads everything a child prints on `stream`, as text.
pub fn collect_text(mut stream: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stream.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Whether the process ended by SIGKILL (elsewhere than Unix: whether it failed).
pub fn killed_by_sigkill(status: &ExitStatus) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        status.signal() == Some(9)
    }
    #[cfg(not(unix))]
    {
        !status.success()
    }
}

/// For a `harness = false` test binary holding one test called `name`: answers `--list`
/// and applies libtest's name filters and `--skip` from the command line, so that
/// `cargo test <filter>` and test runners treat it like any other test. Returns whether
/// the test should run; prints why not when it should not.
pub fn libtest_selects(name: &str) -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("{name}: test");
        return false;
    }
    // Positional arguments are name filters; skip the values of libtest's options.
    let (mut filters, mut skips) = (Vec::new(), Vec::new());
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--skip" => skips.extend(rest.next()),
            "--test-threads" | "--format" | "--color" | "--logfile" | "--shuffle-seed" | "-Z" => {
                rest.next();
            }
            a if a.starts_with('-') => {}
            a => filters.push(a),
        }
    }
    let wanted = filters.is_empty() || filters.iter().any(|f| name.contains(f));
    if !wanted || skips.iter().any(|s| name.contains(s.as_str())) {
        println!("{name}: filtered out");
        return false;
    }
    true
}
