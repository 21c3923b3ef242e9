//! Structured log lines on standard error.

use std::time::{SystemTime, UNIX_EPOCH};

/// Writes one structured log line to stderr: `ts_ms=... level=... msg="..." <fields>`.
pub fn log(level: &str, msg: &str, fields: &str) {
    let ts = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    eprintln!("ts_ms={ts} level={level} msg={msg:?} {fields}");
}
