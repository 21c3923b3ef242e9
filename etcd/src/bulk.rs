//! The store's bulk load ([`stampkv::store::BulkLoad`]): a whole database written with the
//! versions it had (`stampkv load`, `import-deno`).
//!
//! etcd cannot take a whole database in one transaction (`--max-txn-ops`,
//! `--max-request-bytes`), so the load is written in batches, each one transaction that
//! compares the commit counter's `mod_revision` with the one the load started from and
//! puts up to [`BATCH_OPS`] entries. The batches become visible as they land; the last
//! step raises the counter to cover every loaded version. What that gives:
//!
//! - No commit can interleave unnoticed: a commit moves the counter, the next batch's
//!   compare fails, and the load stops with an error that says how many entries it had
//!   written (they stay).
//! - A batch whose answer was lost is sent again: its puts write the same envelopes, so
//!   applying it twice changes nothing.
//! - A load that stops early (an error, the process killed) leaves the batches written so
//!   far, without the counter raised: the next commit's versions may then be older than
//!   some loaded ones. Load into an empty prefix, and load again with `--force` after a
//!   failure.

use crate::error::{error, storage_error, write_outcome, WriteOutcome};
use crate::layout::{Envelope, SeqRecord};
use crate::store::{random_u128, Shared};
use etcd_client::{Compare, CompareOp, GetOptions, TxnOp};
use stampkv::store::{BulkLoad, BulkLoadSummary};
use stampkv::{KvError, StorageErrorKind};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most entries one batch transaction puts (the store requires `--max-txn-ops` of
/// at least 2,048).
pub(crate) const BATCH_OPS: usize = 1000;
/// The most bytes of keys and values one batch carries (etcd refuses requests over
/// `--max-request-bytes`, 1.5 MiB by default).
const BATCH_BYTES: usize = 1 << 20;

/// A bulk load into etcd in progress; see the module documentation.
pub(crate) struct EtcdBulkLoad {
    shared: Arc<Shared>,
    /// The counter's version and `mod_revision` when the load began.
    base_version: u64,
    seq_mod: i64,
    /// Whether the database held an entry when the load began.
    held_data: bool,
    batch: Vec<TxnOp>,
    batch_bytes: usize,
    last_key: Option<Vec<u8>>,
    max_version: u64,
    /// Entries added (sent or batched).
    written: u64,
    /// Entries in etcd.
    landed: u64,
}

impl EtcdBulkLoad {
    /// Starts a load on the latest state.
    pub(crate) fn start(shared: Arc<Shared>) -> Result<EtcdBulkLoad, KvError> {
        let (point, seq_mod) = shared.latest()?;
        let (start, end) = shared.layout.data_range(&[], &[]);
        let any = shared.read(
            start,
            GetOptions::new().with_range(end).with_keys_only().with_limit(1).with_revision(point.revision),
            "check whether the database is empty",
        )?;
        Ok(EtcdBulkLoad {
            shared,
            base_version: point.version,
            seq_mod,
            held_data: !any.kvs().is_empty(),
            batch: Vec::new(),
            batch_bytes: 0,
            last_key: None,
            max_version: 0,
            written: 0,
            landed: 0,
        })
    }

    /// Sends the batch as one transaction, again while its answer is lost (its puts are
    /// idempotent) until the settle timeout.
    fn send(&mut self, ops: Vec<TxnOp>, entries: u64) -> Result<(), KvError> {
        let shared = &self.shared;
        let deadline = Instant::now() + shared.options.settle_timeout;
        let mut pause = Duration::from_millis(20);
        loop {
            let txn = etcd_client::Txn::new()
                .when([Compare::mod_revision(shared.layout.seq(), CompareOp::Equal, self.seq_mod)])
                .and_then(ops.clone())
                .or_else([TxnOp::get(shared.layout.seq(), None)]);
            match shared.txn(txn)? {
                Ok(response) if response.succeeded() => {
                    self.landed += entries;
                    return Ok(());
                }
                Ok(_) => {
                    return Err(KvError::InvalidRestore(format!(
                        "a commit was made while the load ran: stopped after {} entries, which stay in the database",
                        self.landed
                    )))
                }
                Err(e) if write_outcome(&e) == WriteOutcome::Unknown && Instant::now() + pause < deadline => {
                    shared.metrics.retries.add(1);
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                Err(e) => {
                    return Err(storage_error(
                        &format!("write a batch of the load (after {} entries, which stay)", self.landed),
                        e,
                    ))
                }
            }
        }
    }

    fn flush(&mut self) -> Result<(), KvError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let ops = std::mem::take(&mut self.batch);
        self.batch_bytes = 0;
        let entries = self.written - self.landed;
        self.send(ops, entries)
    }
}

impl BulkLoad for EtcdBulkLoad {
    fn base_version(&self) -> u64 {
        self.base_version
    }

    fn put(
        &mut self,
        key: &[u8],
        value: &[u8],
        version: u64,
        expires_at_ms: Option<u64>,
    ) -> Result<(), KvError> {
        if version == 0 {
            return Err(KvError::InvalidRestore("version 0 is never given to an entry".into()));
        }
        if self.held_data && version <= self.base_version {
            return Err(KvError::InvalidRestore(format!(
                "versionstamp {} is not newer than the database's last commit ({}), and the database holds data",
                stampkv::Versionstamp::from_sequence(version),
                stampkv::Versionstamp::from_sequence(self.base_version)
            )));
        }
        if self.last_key.as_deref().is_some_and(|last| key <= last) {
            return Err(KvError::InvalidRestore("entries must come in strictly ascending key order".into()));
        }
        let etcd_key = self.shared.layout.data(key);
        let envelope = Envelope::encode(version, expires_at_ms, value);
        let bytes = etcd_key.len() + envelope.len();
        if !self.batch.is_empty() && (self.batch.len() >= BATCH_OPS || self.batch_bytes + bytes > BATCH_BYTES)
        {
            self.flush()?;
        }
        self.batch.push(TxnOp::put(etcd_key, envelope, None));
        if let Some(at) = expires_at_ms {
            self.batch.push(TxnOp::put(self.shared.layout.expiry(at, key), Vec::new(), None));
        }
        self.batch_bytes += bytes;
        self.last_key = Some(key.to_vec());
        self.max_version = self.max_version.max(version);
        self.written += 1;
        Ok(())
    }

    fn written(&self) -> u64 {
        self.written
    }

    fn finish(mut self: Box<Self>, floor: u64) -> Result<BulkLoadSummary, KvError> {
        self.flush()?;
        let last_version = floor.max(self.max_version).max(self.base_version);
        if last_version > self.base_version {
            let seq = SeqRecord { version: last_version, commit_id: random_u128() };
            let put = TxnOp::put(self.shared.layout.seq(), seq.encode(), None);
            self.send(vec![put], 0).map_err(|e| match e {
                KvError::InvalidRestore(_) => error(
                    StorageErrorKind::Other,
                    "etcd: a commit was made before the load could raise the commit counter: every entry was written, but later commits may get older versionstamps than loaded ones",
                ),
                other => other,
            })?;
        }
        Ok(BulkLoadSummary { entries: self.written, last_version })
    }
}
