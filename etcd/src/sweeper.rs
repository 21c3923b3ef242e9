//! The expiry sweeper: deletes entries whose expiry time has passed, so that they stop
//! taking space under etcd's storage quota (reads hide them from their expiry time on;
//! the sweeper only reclaims the space).
//!
//! Every commit that puts an entry with an expiry also puts its index entry
//! `R x <expiry> <key>` (FORMAT.md). Every [`SWEEP_INTERVAL`] (plus a random part, so that
//! servers spread out) each server reads the index up to now, [`SWEEP_BATCH`] entries at a
//! time, reads the entries they name in one read-only transaction, and deletes in one
//! transaction every entry that still has that expiry, on the condition that none of them
//! changed since it was read (its `mod_revision`), with their index entries; index entries
//! whose entry is gone or was written again with another expiry are deleted too. A
//! condition that fails (a commit wrote one of the keys meanwhile, or another server swept
//! first) deletes nothing; the next round reads again.
//!
//! The deletions do not move the commit counter: they change nothing a read can see, so
//! they take no versionstamp and no commit waits for them.

use crate::error::storage_error;
use crate::layout::Envelope;
use crate::store::{random_u128, Shared};
use etcd_client::{Compare, CompareOp, GetOptions, TxnOp, TxnOpResponse};
use stampkv::KvError;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How often each server sweeps.
pub(crate) const SWEEP_INTERVAL: Duration = Duration::from_secs(1);
/// The most index entries one round reads (each costs up to three operations).
const SWEEP_BATCH: i64 = 500;

/// Starts the sweeper thread of a store; it ends when the store is closed or dropped.
pub(crate) fn start(shared: &Arc<Shared>) -> std::io::Result<()> {
    let weak = Arc::downgrade(shared);
    std::thread::Builder::new().name("stampkv-etcd-sweeper".into()).spawn(move || run(weak)).map(|_| ())
}

fn run(shared: Weak<Shared>) {
    loop {
        let jitter = Duration::from_millis((random_u128() % 500) as u64);
        std::thread::sleep(SWEEP_INTERVAL + jitter);
        let Some(shared) = shared.upgrade() else { return };
        if shared.is_closed() {
            return;
        }
        // After a full batch, sweep on at once.
        while matches!(sweep_once(&shared), Ok(true)) && !shared.is_closed() {}
    }
}

/// One round: reads the expired part of the index and deletes what it names. `Ok(true)`
/// when the batch was full.
pub(crate) fn sweep_once(shared: &Shared) -> Result<bool, KvError> {
    let layout = &shared.layout;
    let now_ms = shared.options.clock.now_ms();
    let (start, end) = layout.expired_until(now_ms);
    let index = shared.read(
        start,
        GetOptions::new().with_range(end).with_keys_only().with_limit(SWEEP_BATCH),
        "read the expiry index",
    )?;
    let found: Vec<(Vec<u8>, u64, Vec<u8>)> = index
        .kvs()
        .iter()
        .filter_map(|kv| {
            let (at, key) = layout.parse_expiry(kv.key())?;
            Some((kv.key().to_vec(), at, layout.data(key)))
        })
        .collect();
    if found.is_empty() {
        return Ok(false);
    }
    let gets: Vec<TxnOp> = found.iter().map(|(_, _, data)| TxnOp::get(data.clone(), None)).collect();
    let current =
        shared.txn(etcd_client::Txn::new().and_then(gets))?.map_err(|e| storage_error("sweep", e))?;
    let mut compares = Vec::new();
    let mut deletes = Vec::new();
    let mut expired = 0u64;
    for ((index_key, at, data), answer) in found.iter().zip(current.op_responses()) {
        let TxnOpResponse::Get(get) = answer else { continue };
        if let Some(kv) = get.kvs().first() {
            let still_expiring =
                Envelope::decode(kv.value()).is_some_and(|(_, expiry, _)| expiry == Some(*at));
            if still_expiring {
                compares.push(Compare::mod_revision(data.clone(), CompareOp::Equal, kv.mod_revision()));
                deletes.push(TxnOp::delete(data.clone(), None));
                expired += 1;
            }
        }
        deletes.push(TxnOp::delete(index_key.clone(), None));
    }
    let txn = etcd_client::Txn::new().when(compares).and_then(deletes);
    let answer = shared.txn(txn)?.map_err(|e| storage_error("sweep", e))?;
    if answer.succeeded() {
        shared.metrics.expired_swept.add(expired);
    }
    Ok(found.len() as i64 == SWEEP_BATCH && answer.succeeded())
}
