//! Snapshot reads: one etcd revision per snapshot, point reads and paged range cursors at
//! that revision.

use crate::error::{error, storage_error};
use crate::layout::{Envelope, SeqRecord};
use crate::store::Shared;
use etcd_client::{GetOptions, GetResponse, SortOrder, SortTarget};
use parking_lot::Mutex;
use stampkv::store::{StoreCursor, StoreSnapshot, StoredEntry};
use stampkv::{KvError, StorageErrorKind};
use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

/// The first page a cursor asks for; later pages grow fourfold up to [`MAX_PAGE`].
const FIRST_PAGE: i64 = 32;
/// The largest page a cursor asks for.
const MAX_PAGE: i64 = 1024;

/// Where a snapshot reads: the etcd revision and the commit version it saw.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadPoint {
    /// The etcd revision every read of the snapshot uses.
    pub(crate) revision: i64,
    /// The version of the last commit at that revision.
    pub(crate) version: u64,
}

/// How a snapshot's etcd revision is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Consistency {
    /// By its first read, linearizable (a quorum round): it sees every commit acknowledged
    /// before the snapshot was taken.
    Strong,
    /// By its first read, serializable (any member, no quorum round): it may lag.
    Eventual,
}

/// A snapshot's read point, shared with its cursors: fixed when the snapshot is made (a
/// commit's base), or chosen by the snapshot's first read, whose answer carries the
/// revision every later read then uses. A point read thus costs one etcd call.
#[derive(Debug)]
struct Point {
    consistency: Consistency,
    /// The revision (and, when known, the commit version) once chosen; or why it could not be.
    chosen: Mutex<Option<Result<ReadPoint, (StorageErrorKind, String)>>>,
    /// The commit version at the revision, read on first use where the first read did not
    /// give it.
    version: OnceLock<u64>,
}

impl Point {
    /// Reads `key` with `options` at the snapshot's revision, choosing the revision with
    /// this read if none is chosen yet.
    fn read(
        &self,
        shared: &Shared,
        key: Vec<u8>,
        options: GetOptions,
        what: &str,
    ) -> Result<GetResponse, KvError> {
        let mut chosen = self.chosen.lock();
        match &*chosen {
            Some(Ok(point)) => {
                let revision = point.revision;
                drop(chosen);
                read_at(shared, key, options, revision, what)
            }
            Some(Err((kind, message))) => Err(error(*kind, message.clone())),
            None => {
                let options = match self.consistency {
                    Consistency::Strong => options,
                    Consistency::Eventual => options.with_serializable(),
                };
                match shared.read(key, options, what) {
                    Ok(response) => {
                        let revision = response.header().map(|h| h.revision()).unwrap_or(0);
                        *chosen = Some(Ok(ReadPoint { revision, version: 0 }));
                        Ok(response)
                    }
                    Err(e) => {
                        *chosen = Some(Err(kind_and_text(&e)));
                        Err(e)
                    }
                }
            }
        }
    }

    /// The commit version at the snapshot's revision (choosing the revision if needed).
    fn version(&self, shared: &Shared) -> Result<u64, KvError> {
        if let Some(version) = self.version.get() {
            return Ok(*version);
        }
        let response =
            self.read(shared, shared.layout.seq(), GetOptions::new(), "read the commit counter")?;
        let version = match response.kvs().first() {
            None => 0,
            Some(kv) => {
                SeqRecord::decode(kv.value())
                    .ok_or_else(|| {
                        error(StorageErrorKind::Corruption, "etcd: the commit counter does not parse")
                    })?
                    .version
            }
        };
        Ok(*self.version.get_or_init(|| version))
    }
}

/// A read at `revision`: serializable (any member answers, no quorum round: the revision is
/// already committed), or linearizable where the member has not applied it yet.
fn read_at(
    shared: &Shared,
    key: Vec<u8>,
    options: GetOptions,
    revision: i64,
    what: &str,
) -> Result<GetResponse, KvError> {
    let at = options.with_revision(revision);
    match shared.read(key.clone(), at.clone().with_serializable(), what) {
        Err(e) if e.to_string().contains(FUTURE_REVISION) => shared.read(key, at, what),
        other => other,
    }
}

/// etcd's answer to a serializable read of a revision the member has not applied yet.
const FUTURE_REVISION: &str = "required revision is a future revision";

fn kind_and_text(e: &KvError) -> (StorageErrorKind, String) {
    match e {
        KvError::Storage(e) => (e.kind(), e.to_string()),
        other => (StorageErrorKind::Other, other.to_string()),
    }
}

/// A consistent view of the database at one etcd revision.
///
/// The revision is fixed when the snapshot is made (a commit's base) or chosen by its first
/// read. A failed first read is kept: every later read of the snapshot returns its error
/// (the seam's `snapshot()` cannot fail).
pub struct EtcdSnapshot {
    shared: Arc<Shared>,
    point: Arc<Point>,
    read_time_ms: u64,
}

impl std::fmt::Debug for EtcdSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdSnapshot")
            .field("point", &self.point.chosen.lock())
            .field("read_time_ms", &self.read_time_ms)
            .finish()
    }
}

impl EtcdSnapshot {
    /// A snapshot at a known read point.
    pub(crate) fn at(shared: Arc<Shared>, at: ReadPoint, read_time_ms: u64) -> EtcdSnapshot {
        let version = OnceLock::new();
        let _ = version.set(at.version);
        let point = Point { consistency: Consistency::Strong, chosen: Mutex::new(Some(Ok(at))), version };
        EtcdSnapshot { shared, point: Arc::new(point), read_time_ms }
    }

    /// A snapshot whose revision its first read chooses, with `consistency`.
    pub(crate) fn lazy(shared: Arc<Shared>, consistency: Consistency, read_time_ms: u64) -> EtcdSnapshot {
        let point = Point { consistency, chosen: Mutex::new(None), version: OnceLock::new() };
        EtcdSnapshot { shared, point: Arc::new(point), read_time_ms }
    }
}

impl StoreSnapshot for EtcdSnapshot {
    type Cursor = EtcdCursor;

    fn version(&self) -> u64 {
        self.point.version(&self.shared).unwrap_or(0)
    }

    fn read_time_ms(&self) -> u64 {
        self.read_time_ms
    }

    fn get(&self, key: &[u8]) -> Result<Option<StoredEntry>, KvError> {
        let etcd_key = self.shared.layout.data(key);
        let response = self.point.read(&self.shared, etcd_key, GetOptions::new(), "read a key")?;
        match response.kvs().first() {
            None => Ok(None),
            Some(kv) => decode(kv.value(), self.read_time_ms, kv.key()),
        }
    }

    fn cursor(&self, start: &[u8], end: &[u8], reverse: bool) -> EtcdCursor {
        let (start, end) = self.shared.layout.data_range(start, end);
        EtcdCursor {
            shared: self.shared.clone(),
            point: self.point.clone(),
            start,
            end,
            reverse,
            read_time_ms: self.read_time_ms,
            page: FIRST_PAGE,
            buffer: VecDeque::new(),
            exhausted: false,
            current: None,
        }
    }
}

/// The entry an envelope holds (`None` if it expired at `now_ms`); a value that is not an
/// envelope is corruption.
fn decode(bytes: &[u8], now_ms: u64, etcd_key: &[u8]) -> Result<Option<StoredEntry>, KvError> {
    Envelope::visible(bytes, now_ms).map_err(|()| {
        error(
            StorageErrorKind::Corruption,
            format!("etcd key {} does not hold a stampkv entry envelope", String::from_utf8_lossy(etcd_key)),
        )
    })
}

/// A cursor over a range of an [`EtcdSnapshot`], reading pages of entries as it goes.
pub struct EtcdCursor {
    shared: Arc<Shared>,
    point: Arc<Point>,
    /// The etcd range still to read: `[start, end)`.
    start: Vec<u8>,
    end: Vec<u8>,
    reverse: bool,
    read_time_ms: u64,
    page: i64,
    buffer: VecDeque<(Vec<u8>, StoredEntry)>,
    exhausted: bool,
    current: Option<(Vec<u8>, StoredEntry)>,
}

impl std::fmt::Debug for EtcdCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdCursor")
            .field("reverse", &self.reverse)
            .field("exhausted", &self.exhausted)
            .finish()
    }
}

impl EtcdCursor {
    /// Reads the next page of the range into the buffer.
    fn fill(&mut self) -> Result<(), KvError> {
        if self.start >= self.end {
            self.exhausted = true;
            return Ok(());
        }
        let mut options = GetOptions::new().with_range(self.end.clone()).with_limit(self.page);
        if self.reverse {
            options = options.with_sort(SortTarget::Key, SortOrder::Descend);
        }
        let response: GetResponse =
            self.point.read(&self.shared, self.start.clone(), options, "read a range")?;
        let kvs = response.kvs();
        if (kvs.len() as i64) < self.page || !response.more() {
            self.exhausted = true;
        }
        if let Some(last) = kvs.last() {
            if self.reverse {
                // The next page ends (exclusively) at the last key read.
                self.end = last.key().to_vec();
            } else {
                let mut next = last.key().to_vec();
                next.push(0);
                self.start = next;
            }
        } else {
            self.exhausted = true;
        }
        for kv in kvs {
            let Some(key) = self.shared.layout.entry_key(kv.key()) else {
                continue;
            };
            if let Some(entry) = decode(kv.value(), self.read_time_ms, kv.key())? {
                self.buffer.push_back((key.to_vec(), entry));
            }
        }
        self.page = (self.page * 4).min(MAX_PAGE);
        Ok(())
    }
}

impl StoreCursor for EtcdCursor {
    fn advance(&mut self) -> Result<bool, KvError> {
        while self.buffer.is_empty() && !self.exhausted {
            self.fill()?;
        }
        self.current = self.buffer.pop_front();
        Ok(self.current.is_some())
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map(|(k, _)| k.as_slice()).unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map(|(_, e)| e.value.as_slice()).unwrap_or_default()
    }

    fn version(&self) -> u64 {
        self.current.as_ref().map(|(_, e)| e.version).unwrap_or(0)
    }

    fn expires_at_ms(&self) -> Option<u64> {
        self.current.as_ref().and_then(|(_, e)| e.expires_at_ms)
    }
}

/// Whether an etcd read failure is worth retrying (anything but a refused request).
pub(crate) fn read_retryable(e: &etcd_client::Error) -> bool {
    crate::error::write_outcome(e) == crate::error::WriteOutcome::Unknown
        || matches!(e, etcd_client::Error::GRpcStatus(s) if s.code() == tonic::Code::Unavailable)
}

/// The error of a read that failed for good.
pub(crate) fn read_error(what: &str, e: etcd_client::Error) -> KvError {
    storage_error(what, e)
}
