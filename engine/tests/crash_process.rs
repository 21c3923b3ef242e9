//! Process-kill test (see `support/crash_harness.rs` for what it proves). A
//! `harness = false` test that re-executes itself as the child (sled's pattern).
//! Longer: `STAMPKV_CRASH_CYCLES=300 cargo test -p stampkv-engine --test crash_process`, or
//! `cargo run --release -p stampkv-engine --example crash_torture -- --cycles 1000`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unreachable,
    reason = "test code: a panic is a failed test"
)]

mod support {
    pub mod crash_harness;
}

use support::crash_harness;

fn main() {
    crash_harness::run_child_if_requested();
    // Behave like a libtest binary for `cargo test <filter>` and test runners.
    if stampkv_testkit::process::libtest_selects("process_kill_recovery") {
        crash_harness::parent();
    }
}
