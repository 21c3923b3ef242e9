//! Process-kill test (see `support/crash_harness.rs` for what it proves). A
//! `harness = false` test that re-executes itself as the child (sled's pattern).
//! Longer: `STAMPKV_CRASH_CYCLES=300 cargo test -p stampkv-engine --test crash_process`, or
//! `cargo run --release -p stampkv-engine --example crash_torture -- --cycles 1000`.

mod support {
    pub mod crash_harness;
}

use support::crash_harness;

fn main() {
    crash_harness::run_child_if_requested();
    // Enough of libtest's command line for `cargo test <filter>` and test runners.
    const NAME: &str = "process_kill_recovery";
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("{NAME}: test");
        return;
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
    let wanted = filters.is_empty() || filters.iter().any(|f| NAME.contains(f));
    if !wanted || skips.iter().any(|s| NAME.contains(s.as_str())) {
        println!("crash_process: {NAME} filtered out");
        return;
    }
    crash_harness::parent();
}
