//! `snapshot_read`: many ranges, one snapshot.

use crate::backend::ServedStore;
use crate::errors::{blocking, kv_error, HttpError};
use crate::proto;
use crate::request::{data_request, decode, protobuf, record};
use crate::service::Server;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use stampkv::remote::{RawEntry, RawRange};
use stampkv::{Consistency, Kv};
use stampkv_kvconnect::http::check_read;
use std::sync::Arc;

pub(crate) fn entry_proto(entry: RawEntry) -> proto::KvEntry {
    let value = proto::value_to_proto(entry.value);
    proto::KvEntry {
        key: entry.key,
        value: value.data,
        encoding: value.encoding,
        versionstamp: entry.versionstamp.0.to_vec(),
    }
}

pub(crate) async fn snapshot_read<S: ServedStore>(
    State(server): State<Arc<Server<S>>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = snapshot_read_inner(&server, &headers, body, Consistency::Strong).await;
    record(&server, "snapshot_read", result)
}

/// `snapshot_read` on the `eventual` endpoint: served from the store's eventual snapshot
/// where it has one, and then answered `read_is_strongly_consistent: false`.
pub(crate) async fn eventual_snapshot_read<S: ServedStore>(
    State(server): State<Arc<Server<S>>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = snapshot_read_inner(&server, &headers, body, Consistency::Eventual).await;
    record(&server, "snapshot_read", result)
}

/// Reads all ranges of a request from one snapshot of `consistency`; says whether the
/// read was strongly consistent.
fn read(
    kv: &Kv<impl ServedStore>,
    ranges: &[RawRange],
    consistency: Consistency,
) -> Result<(Vec<Vec<RawEntry>>, bool), HttpError> {
    match consistency {
        Consistency::Strong => Ok((kv.snapshot_read(ranges).map_err(kv_error)?, true)),
        Consistency::Eventual => kv.snapshot_read_eventual(ranges).map_err(kv_error),
    }
}

async fn snapshot_read_inner<S: ServedStore>(
    server: &Arc<Server<S>>,
    headers: &HeaderMap,
    body: Body,
    consistency: Consistency,
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
    let (found, strong) = if !S::REMOTE_READS && total_limit <= server.config.inline_read_limit {
        // Small reads (`get`, `getMany`, short lists) of a local store run on the runtime
        // thread: a few lookups in memory cost less than the two thread hand-offs of the
        // blocking pool. A store that reads over the network always waits off the runtime.
        read(&server.kv, &ranges, consistency)?
    } else {
        let kv = server.kv.clone();
        blocking(server, move || read(&kv, &ranges, consistency)).await?
    };
    let output = proto::SnapshotReadOutput {
        ranges: found
            .into_iter()
            .map(|entries| proto::ReadRangeOutput { values: entries.into_iter().map(entry_proto).collect() })
            .collect(),
        read_disabled: false,
        read_is_strongly_consistent: strong,
        status: proto::SR_SUCCESS,
    };
    Ok(protobuf(&output))
}
