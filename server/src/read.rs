//! `snapshot_read`: many ranges, one snapshot.

use crate::errors::{bad, blocking, kv_error, HttpError};
use crate::proto;
use crate::request::{data_path, decode, protobuf, read_body, record};
use crate::service::Server;
use crate::{MAX_READ_KEY_BYTES, MAX_READ_LIMIT, MAX_READ_RANGES};
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
    data_path(server, headers)?;
    let request: proto::SnapshotRead = decode(&read_body(server, body).await?)?;
    if request.ranges.len() > MAX_READ_RANGES {
        return Err(bad(format!("Too many ranges in one snapshot read (max {MAX_READ_RANGES}).")));
    }
    let mut ranges = Vec::with_capacity(request.ranges.len());
    for range in request.ranges {
        if range.limit <= 0 || range.limit > MAX_READ_LIMIT {
            return Err(bad("The read range limit of the snapshot read request is invalid."));
        }
        if range.start.len() > MAX_READ_KEY_BYTES || range.end.len() > MAX_READ_KEY_BYTES {
            return Err(bad("A key exceeds the key size limit."));
        }
        let limit = usize::try_from(range.limit).unwrap_or(0);
        ranges.push(RawRange { start: range.start, end: range.end, limit, reverse: range.reverse });
    }
    let total_limit: usize = ranges.iter().map(|r| r.limit).sum();
    let found = if total_limit <= server.config.inline_read_limit {
        // Small reads (`get`, `getMany`, short lists) run on the runtime thread: a few
        // lookups in memory cost less than the two thread hand-offs of the blocking pool.
        server.kv.snapshot_read(&ranges).map_err(kv_error)?
    } else {
        let kv = server.kv.clone();
        blocking(move || kv.snapshot_read(&ranges).map_err(kv_error)).await?
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
