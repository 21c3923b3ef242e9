//! `atomic_write`: checks and mutations decoded and validated, then one all-or-nothing commit.

use crate::backend::ServedStore;
use crate::errors::{bad, blocking, kv_error, HttpError};
use crate::proto;
use crate::request::{data_request, decode, protobuf, record};
use crate::service::Server;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use stampkv::{
    AtomicOperation, CommitResult, Key, Kv, KvError, KvValue, Mutation, MutationKind, StorageErrorKind,
    Versionstamp,
};
use std::sync::Arc;
use std::time::Instant;

pub(crate) fn decode_key(bytes: &[u8], what: &str) -> Result<Key, HttpError> {
    Key::decode(bytes).map_err(|e| bad(format!("Invalid {what} key: {e}.")))
}

fn decode_value(value: Option<proto::KvValue>) -> Result<KvValue, HttpError> {
    let value = value.ok_or_else(|| bad("Invalid mutation kind or arguments."))?;
    proto::value_from_proto(value.data, value.encoding).map_err(|e| bad(e.to_string()))
}

/// An atomic write decoded and validated: checks, then mutations with their expiry.
struct DecodedWrite {
    checks: Vec<(Key, Option<Versionstamp>)>,
    mutations: Vec<(Mutation, Option<u64>)>,
}

fn decode_write(write: proto::AtomicWrite, kv: &Kv<impl ServedStore>) -> Result<DecodedWrite, HttpError> {
    let limits = kv.limits();
    if write.checks.len() > limits.max_checks {
        return Err(bad("Too many checks included in atomic write."));
    }
    if write.mutations.len() + write.enqueues.len() > limits.max_mutations {
        return Err(bad("Too many mutations / enqueues included in atomic write."));
    }
    if !write.enqueues.is_empty() {
        return Err(bad("Enqueue operations are not supported by this server."));
    }
    let mut checks = Vec::with_capacity(write.checks.len());
    for check in write.checks {
        let versionstamp = match check.versionstamp.len() {
            0 => None,
            10 => {
                let mut stamp = [0u8; 10];
                stamp.copy_from_slice(&check.versionstamp);
                Some(Versionstamp(stamp))
            }
            _ => return Err(bad("Invalid versionstamp.")),
        };
        checks.push((decode_key(&check.key, "check")?, versionstamp));
    }
    let mut mutations = Vec::with_capacity(write.mutations.len());
    for m in write.mutations {
        let key = decode_key(&m.key, "mutation")?;
        let kind = match m.mutation_type {
            proto::M_SET => MutationKind::Set(decode_value(m.value)?),
            proto::M_DELETE => MutationKind::Delete,
            proto::M_SUM => {
                if !m.sum_min.is_empty() || !m.sum_max.is_empty() || m.sum_clamp {
                    return Err(bad(
                        "Sum bounds (sum_min, sum_max, sum_clamp) are not supported by this server.",
                    ));
                }
                MutationKind::Sum(decode_value(m.value)?)
            }
            proto::M_MIN => MutationKind::Min(decode_value(m.value)?),
            proto::M_MAX => MutationKind::Max(decode_value(m.value)?),
            proto::M_SET_SUFFIX_VERSIONSTAMPED_KEY => {
                MutationKind::SetSuffixVersionstampedKey(decode_value(m.value)?)
            }
            other => return Err(bad(format!("Unknown mutation type {other}."))),
        };
        let expires_at = match m.expire_at_ms {
            0 | -1 => None,
            ms if ms > 0 => Some(ms.unsigned_abs()),
            _ => return Err(bad("Invalid mutation kind or arguments.")),
        };
        mutations.push((Mutation { key, kind, expire_in: None }, expires_at));
    }
    Ok(DecodedWrite { checks, mutations })
}

/// The atomic operation of a decoded write's checks and mutations.
fn operation<'a, S: ServedStore>(
    kv: &'a Kv<S>,
    checks: &[(Key, Option<Versionstamp>)],
    mutations: Vec<(Mutation, Option<u64>)>,
) -> AtomicOperation<'a, S> {
    let mut op = kv.atomic();
    for (key, versionstamp) in checks {
        op = op.check(key, *versionstamp);
    }
    for (mutation, expires_at) in mutations {
        op = match expires_at {
            Some(at) => op.mutate_expiring_at(mutation, at),
            None => op.mutate(mutation),
        };
    }
    op
}

/// The answer to a commit's outcome; on a check failure, also reports which checks do not
/// hold now.
///
/// A commit whose outcome could not be learned (a networked store that lost its cluster
/// with the commit in flight) is answered `AW_UNSPECIFIED`, which clients report as an
/// error and never retry: a 5xx would make them send again a write that may have applied.
fn output(
    kv: &Kv<impl ServedStore>,
    checks: &[(Key, Option<Versionstamp>)],
    outcome: Result<CommitResult, KvError>,
) -> Result<proto::AtomicWriteOutput, HttpError> {
    let committed = match outcome {
        Err(KvError::Storage(e)) if e.kind() == StorageErrorKind::OutcomeUnknown => {
            tracing::error!(error = %e, "a commit's outcome is unknown");
            return Ok(proto::AtomicWriteOutput {
                status: proto::AW_UNSPECIFIED,
                versionstamp: Vec::new(),
                failed_checks: Vec::new(),
            });
        }
        other => other.map_err(kv_error)?,
    };
    match committed {
        CommitResult::Committed(versionstamp) => Ok(proto::AtomicWriteOutput {
            status: proto::AW_SUCCESS,
            versionstamp: versionstamp.0.to_vec(),
            failed_checks: Vec::new(),
        }),
        CommitResult::CheckFailed => {
            let mut failed_checks = Vec::new();
            for (index, (key, expected)) in checks.iter().enumerate() {
                let current = kv.get::<KvValue>(key).map_err(kv_error)?.versionstamp;
                if current != *expected {
                    failed_checks.push(u32::try_from(index).unwrap_or(u32::MAX));
                }
            }
            Ok(proto::AtomicWriteOutput {
                status: proto::AW_CHECK_FAILURE,
                versionstamp: Vec::new(),
                failed_checks,
            })
        }
    }
}

/// Commits a decoded write, waiting on this thread (a blocking-pool thread).
fn commit(kv: &Kv<impl ServedStore>, write: DecodedWrite) -> Result<proto::AtomicWriteOutput, HttpError> {
    let outcome = operation(kv, &write.checks, write.mutations).commit();
    output(kv, &write.checks, outcome)
}

/// Commits a decoded write from the runtime thread without blocking it: the commit is
/// applied here, and its acknowledgement arrives from the store's durability thread once
/// the commit is durable (for a store that may not block now: see
/// [`Kv::commit_may_block`]).
async fn commit_deferred<S: ServedStore>(
    kv: &Kv<S>,
    write: DecodedWrite,
) -> Result<proto::AtomicWriteOutput, HttpError> {
    let (done, outcome) = tokio::sync::oneshot::channel();
    operation(kv, &write.checks, write.mutations).commit_then(move |result| {
        let _ = done.send(result);
    });
    let outcome = outcome.await.map_err(|_| HttpError {
        status: axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        text: "Internal server error.".into(),
    })?;
    output(kv, &write.checks, outcome)
}

pub(crate) async fn atomic_write<S: ServedStore>(
    State(server): State<Arc<Server<S>>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = atomic_write_inner(&server, &headers, body).await;
    record(&server, "atomic_write", result)
}

async fn atomic_write_inner<S: ServedStore>(
    server: &Arc<Server<S>>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    let (_, body) = data_request(server, headers, body).await?;
    let request: proto::AtomicWrite = decode(&body)?;
    let write = decode_write(request, &server.kv)?;
    let started = Instant::now();
    let output = if server.kv.commit_may_block() {
        let kv = server.kv.clone();
        blocking(server, move || commit(&kv, write)).await
    } else {
        // Two thread hand-offs per commit (to a blocking thread and back) cost more CPU than
        // the commit itself; the durability thread acknowledges a whole group at once.
        commit_deferred(&server.kv, write).await
    };
    server.metrics.commit(started.elapsed());
    Ok(protobuf(&output?))
}
