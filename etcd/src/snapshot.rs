//! Snapshot reads: one etcd revision per snapshot, point reads and paged range cursors at
//! that revision.

use crate::error::{error, storage_error};
use crate::layout::Envelope;
use crate::store::Shared;
use etcd_client::{GetOptions, GetResponse, SortOrder, SortTarget};
use stampkv::store::{StoreCursor, StoreSnapshot, StoredEntry};
use stampkv::{KvError, StorageErrorKind};
use std::collections::VecDeque;
use std::sync::Arc;

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

/// A consistent view of the database at one etcd revision.
///
/// Taking a snapshot asks etcd for the latest revision; if that fails, the snapshot keeps
/// the error and every read through it returns it (the seam's `snapshot()` cannot fail).
pub struct EtcdSnapshot {
    shared: Arc<Shared>,
    at: Result<ReadPoint, (StorageErrorKind, String)>,
    read_time_ms: u64,
}

impl std::fmt::Debug for EtcdSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdSnapshot")
            .field("at", &self.at)
            .field("read_time_ms", &self.read_time_ms)
            .finish()
    }
}

impl EtcdSnapshot {
    pub(crate) fn new(
        shared: Arc<Shared>,
        at: Result<ReadPoint, KvError>,
        read_time_ms: u64,
    ) -> EtcdSnapshot {
        let at = at.map_err(|e| match e {
            KvError::Storage(e) => (e.kind(), e.to_string()),
            other => (StorageErrorKind::Other, other.to_string()),
        });
        EtcdSnapshot { shared, at, read_time_ms }
    }

    /// The read point, or the error taking the snapshot met.
    pub(crate) fn read_point(&self) -> Result<ReadPoint, KvError> {
        self.at.clone().map_err(|(kind, message)| error(kind, message))
    }
}

impl StoreSnapshot for EtcdSnapshot {
    type Cursor = EtcdCursor;

    fn version(&self) -> u64 {
        self.at.as_ref().map(|at| at.version).unwrap_or(0)
    }

    fn read_time_ms(&self) -> u64 {
        self.read_time_ms
    }

    fn get(&self, key: &[u8]) -> Result<Option<StoredEntry>, KvError> {
        let at = self.read_point()?;
        let etcd_key = self.shared.layout.data(key);
        let options = GetOptions::new().with_revision(at.revision);
        let response = self.shared.read(etcd_key, options, "read a key")?;
        match response.kvs().first() {
            None => Ok(None),
            Some(kv) => decode(kv.value(), self.read_time_ms, kv.key()),
        }
    }

    fn cursor(&self, start: &[u8], end: &[u8], reverse: bool) -> EtcdCursor {
        let (start, end) = self.shared.layout.data_range(start, end);
        EtcdCursor {
            shared: self.shared.clone(),
            at: self.read_point(),
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
    at: Result<ReadPoint, KvError>,
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
        let at = match &self.at {
            Ok(at) => *at,
            Err(e) => return Err(error(StorageErrorKind::Unavailable, e.to_string())),
        };
        if self.start >= self.end {
            self.exhausted = true;
            return Ok(());
        }
        let mut options =
            GetOptions::new().with_range(self.end.clone()).with_limit(self.page).with_revision(at.revision);
        if self.reverse {
            options = options.with_sort(SortTarget::Key, SortOrder::Descend);
        }
        let response: GetResponse = self.shared.read(self.start.clone(), options, "read a range")?;
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
