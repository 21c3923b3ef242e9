//! `snapshot_read`: many ranges, one snapshot.

use crate::errors::{bad, blocking, kv_error, HttpError};
use crate::proto;
use crate::request::{data_request, decode, protobuf, record};
use crate::service::Server;
use crate::{MAX_READ_ENTRIES, MAX_READ_KEY_BYTES, MAX_READ_LIMIT, MAX_READ_RANGES};
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use stampkv::remote::{RawEntry, RawRange};
use stampkv::KvValue;
use std::sync::Arc;

pub(crate) fn entry_proto(entry: RawEntry) -> proto::KvEntry {
    let (value, encoding) = value_proto(entry.value);
    proto::KvEntry { key: entry.key, value, encoding, versionstamp: entry.versionstamp.0.to_vec() }
}

fn value_proto(value: KvValue) -> (Vec<u8>, i32) {
    match value {
        KvValue::V8(data) => (data, proto::VE_V8),
        KvValue::U64(n) => (n.to_le_bytes().to_vec(), proto::VE_LE64),
        KvValue::Bytes(data) => (data, proto::VE_BYTES),
    }
}

/// Checks a `snapshot_read` against Deno's limits (the edge checks with the same function):
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

pub(crate) async fn snapshot_read(
    State(server): State<Arc<Server>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = snapshot_read_inner(&server, &headers, body).await;
    record(&server, "snapshot_read", result)
}

async fn snapshot_read_inner(
    server: &Arc<Server>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    let (_, body) = data_request(server, headers, body).await?;
    let request: proto::SnapshotRead = decode(&body)?;
    check_read(&request)?;
    let ranges: Vec<RawRange> = request
        .ranges
        .into_iter()
        .map(|range| RawRange {
            start: range.start,
            end: range.end,
            limit: usize::try_from(range.limit).unwrap_or(0),
            reverse: range.reverse,
        })
        .collect();
    let total_limit: usize = ranges.iter().map(|r| r.limit).sum();
    let found = if total_limit <= server.config.inline_read_limit {
        // Small reads (`get`, `getMany`, short lists) run on the runtime thread: a few
        // lookups in memory cost less than the two thread hand-offs of the blocking pool.
        server.kv.snapshot_read(&ranges).map_err(kv_error)?
    } else {
        let kv = server.kv.clone();
        blocking(server, move || kv.snapshot_read(&ranges).map_err(kv_error)).await?
    };
    let output = proto::SnapshotReadOutput {
        ranges: found
            .into_iter()
            .map(|entries| proto::ReadRangeOutput { values: entries.into_iter().map(entry_proto).collect() })
            .collect(),
        read_disabled: false,
        read_is_strongly_consistent: true,
        status: proto::SR_SUCCESS,
    };
    Ok(protobuf(&output))
}
