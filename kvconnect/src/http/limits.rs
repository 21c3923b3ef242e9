//! KV Connect's request limits (Deno's), checked the same way by every front end.

use super::error::{bad, HttpError};
use crate as proto;

/// Most ranges one `snapshot_read` may ask for (Deno's `getMany` sends at most 10).
pub const MAX_READ_RANGES: usize = 10;
/// Largest `limit` of one read range (Deno's largest list batch).
pub const MAX_READ_LIMIT: i32 = 1000;
/// Most entries one `snapshot_read` may ask for, all its ranges together (Deno's limit).
pub const MAX_READ_ENTRIES: usize = 1000;
/// Longest encoded key a read range may carry as start or end (Deno's read key limit).
pub const MAX_READ_KEY_BYTES: usize = 2049;
/// Most keys one watch may name (Deno's limit).
pub const MAX_WATCHED_KEYS: usize = 10;
/// The text of a watch naming more keys than Deno allows.
pub const TOO_MANY_WATCHED_KEYS: &str = "Too many keys in one watch (max 10).";

/// Checks a `snapshot_read` against Deno's limits (every front end checks with this function):
/// at most 10 ranges, each limit in 1..=1000 and all limits together at most 1000 entries
/// (so an answer holds at most 1000 entries: about 67 MB with keys and values at their
/// largest), range keys of at most 2049 bytes.
pub fn check_read(request: &proto::SnapshotRead) -> Result<(), HttpError> {
    if request.ranges.len() > MAX_READ_RANGES {
        return Err(bad(format!("Too many ranges in one snapshot read (max {MAX_READ_RANGES}).")));
    }
    let mut total: usize = 0;
    for range in &request.ranges {
        if range.limit <= 0 || range.limit > MAX_READ_LIMIT {
            return Err(bad("The read range limit of the snapshot read request is invalid."));
        }
        if range.start.len() > MAX_READ_KEY_BYTES || range.end.len() > MAX_READ_KEY_BYTES {
            return Err(bad("A key exceeds the key size limit."));
        }
        total = total.saturating_add(usize::try_from(range.limit).unwrap_or(usize::MAX));
    }
    if total > MAX_READ_ENTRIES {
        return Err(bad(format!(
            "The read range limits of the snapshot read request add up to {total} entries (max {MAX_READ_ENTRIES})."
        )));
    }
    Ok(())
}
