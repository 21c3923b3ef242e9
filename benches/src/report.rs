//! What the side-by-side runners share: each engine runs its workloads in a child process
//! that prints `RESULT <workload> <numbers>` and `INFO <name> <text>` lines; the parent
//! gathers them over runs ([`ChildReports`]) and prints medians.

use std::collections::BTreeMap;
use std::time::Duration;

/// One workload's outcome: units (operations, keys or messages) per second, and latency
/// percentiles in microseconds.
pub struct Sample {
    /// Units per second.
    pub rate: f64,
    /// Median latency of one call, in microseconds.
    pub p50_us: f64,
    /// 99th-percentile latency of one call, in microseconds.
    pub p99_us: f64,
}

impl Sample {
    /// `units` done in `elapsed`, with the latency of every call.
    pub fn new(units: u64, elapsed: Duration, mut latencies: Vec<Duration>) -> Sample {
        latencies.sort_unstable();
        let at = |q: usize| latencies.get(latencies.len() * q / 100).map_or(0.0, |d| d.as_secs_f64() * 1e6);
        Sample { rate: units as f64 / elapsed.as_secs_f64(), p50_us: at(50), p99_us: at(99) }
    }
}

/// Prints the `RESULT <name> <rate> <p50> <p99>` line a parent reads.
pub fn emit(name: &str, sample: &Sample) {
    println!("RESULT {name} {} {} {}", sample.rate, sample.p50_us, sample.p99_us);
}

/// The `RESULT` and `INFO` lines of every child run, by (engine, name).
#[derive(Default)]
pub struct ChildReports {
    /// Up to three numbers per `RESULT` line (rate, p50, p99), one value per run each.
    pub results: BTreeMap<(String, String), [Vec<f64>; 3]>,
    /// The text of each `INFO` line, one per run.
    pub infos: BTreeMap<(String, String), Vec<String>>,
}

impl ChildReports {
    /// Gathers the lines of one child's standard output; other lines are ignored.
    pub fn add_output(&mut self, engine: &str, stdout: &[u8]) {
        for line in String::from_utf8_lossy(stdout).lines() {
            let mut parts = line.splitn(3, ' ');
            match (parts.next(), parts.next(), parts.next()) {
                (Some("RESULT"), Some(name), Some(values)) => {
                    let slot = self.results.entry((engine.to_owned(), name.to_owned())).or_default();
                    for (column, v) in slot.iter_mut().zip(values.split(' ')) {
                        column.push(v.parse().expect("RESULT values are numbers"));
                    }
                }
                (Some("INFO"), Some(name), Some(value)) => self.add_info(engine, name, value.to_owned()),
                _ => {}
            }
        }
    }

    /// Records one more `INFO` value.
    pub fn add_info(&mut self, engine: &str, name: &str, value: String) {
        self.infos.entry((engine.to_owned(), name.to_owned())).or_default().push(value);
    }

    /// Removes and returns the columns of `engine`'s `workload` (empty if it never ran).
    pub fn take(&mut self, engine: &str, workload: &str) -> [Vec<f64>; 3] {
        self.results.remove(&(engine.to_owned(), workload.to_owned())).unwrap_or_default()
    }

    /// Prints every `INFO` value, runs separated by `|`.
    pub fn print_infos(&self) {
        for ((engine, name), values) in &self.infos {
            println!("{engine} {name}: {}", values.join(" | "));
        }
    }
}

/// The median of `values` (the upper one of an even count); 0 for none.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` gives them (empty elsewhere).
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A rate for a table: `1234/s`, or `12.34 M/s` from ten million up.
pub fn rate_text(rate: f64) -> String {
    if rate >= 10_000_000.0 {
        format!("{:.2} M/s", rate / 1e6)
    } else {
        format!("{rate:.0}/s")
    }
}
