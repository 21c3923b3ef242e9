//! Crash torture: the process-kill harness of the `crash_process` test for as many cycles as
//! asked. Each cycle runs a child that commits batches to an on-disk database, SIGKILLs it
//! at a random moment, reopens the database and verifies that every acknowledged batch is
//! there, whole, with nothing after a hole.
//!
//! `cargo run --release -p stampkv-engine --example crash_torture -- --cycles 1000
//!     [--seed N] [--max-delay-ms 400]`

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unreachable,
    reason = "a torture run stops at the first failed check"
)]

#[path = "../tests/support/crash_harness.rs"]
mod crash_harness;

const USAGE: &str = "usage: crash_torture [--cycles N] [--seed N] [--max-delay-ms N]";

fn main() {
    crash_harness::run_child_if_requested();
    let mut cycles = 100;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| fail(&format!("{flag} needs a value")));
        let number =
            value.parse::<u64>().unwrap_or_else(|_| fail(&format!("{flag} takes a number, not {value:?}")));
        match flag.as_str() {
            "--cycles" => cycles = number,
            // The harness reads these from its environment (also in its children).
            "--seed" => std::env::set_var("STAMPKV_CRASH_SEED", &value),
            "--max-delay-ms" => std::env::set_var("STAMPKV_CRASH_MAX_DELAY_MS", &value),
            other => fail(&format!("unknown argument {other}")),
        }
    }
    crash_harness::parent_with(cycles);
}

fn fail(message: &str) -> ! {
    eprintln!("{message}\n{USAGE}");
    std::process::exit(2);
}
