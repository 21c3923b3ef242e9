//! A whole database out and back in: every entry with its versionstamp and expiry time, and
//! every queued message, read from one snapshot ([`Kv::bulk_snapshot`]) and restored
//! ([`Kv::restore`]) — what text dumps and other stores' files are made of.
//!
//! A restore keeps versionstamps: an entry written with versionstamp `v` reads back with
//! `v`, which ordinary commits cannot do (each gets the next one). It uses the store's bulk
//! load ([`Store::bulk_load`]). On the engine that is its bulk ingestion
//! ([`stampkv_engine::Ingest`]): entries go in key order straight to table files, and
//! [`Restore::finish`] installs them all at once, or nothing if it fails or the restore is
//! dropped. A store that cannot write a whole database in one step (etcd: one transaction
//! holds a bounded number of operations) makes the entries visible batch by batch and
//! says so in its documentation. The rules:
//!
//! - Entries come in strictly ascending key order, then queued messages in delivery order
//!   (ascending deadline).
//! - An entry may keep a recorded versionstamp (whose last two bytes are `00 00`, as every
//!   versionstamp stampkv and Deno's SQLite backend make) or take the restore's own: the
//!   versionstamp the next commit would have had ([`Restore::versionstamp`]), shared by
//!   everything the restore writes with it, queued messages included.
//! - Into a database that holds no data (a new one, or one emptied and compacted), any
//!   versionstamps can be kept. Into one that holds data, every kept versionstamp must be
//!   newer than its last commit (the restore is then like one more commit); the store
//!   refuses otherwise.
//! - No commit may happen while a restore runs: the store fails the restore if one did.
//! - Afterwards the database's last versionstamp is at least the one given to `finish` (a
//!   dump records the last versionstamp of its database), so later commits get newer ones.
//! - Watches re-read their keys, and queue listeners see the restored messages.

use crate::queue::record::{message_key, parse_message_key, MessageRecord, QUEUE_PREFIX};
use crate::store::{BulkLoad, EngineStore, Store, StoreCursor, StoreSnapshot, StoredEntry};
use crate::{Key, Kv, KvError, KvValue, Versionstamp};

/// The first byte of stampkv's reserved engine key space (the queue's records).
const RESERVED_PREFIX: u8 = 0xFF;

/// An entry with everything a restore needs to recreate it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkEntry {
    /// The key.
    pub key: Key,
    /// The stored value, exactly as stored.
    pub value: KvValue,
    /// The versionstamp of the commit that wrote it.
    pub versionstamp: Versionstamp,
    /// When it expires (milliseconds since the Unix epoch, on the engine's clock), if it does.
    pub expires_at_ms: Option<u64>,
}

/// A message waiting in the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedMessage {
    /// When it is due (milliseconds since the Unix epoch, on the engine's clock).
    pub deadline_ms: u64,
    /// Deliveries that failed so far.
    pub attempts: u32,
    /// The enqueued value.
    pub value: KvValue,
    /// The retry intervals left, in milliseconds, next first.
    pub backoff_ms: Vec<u32>,
    /// Where the value goes if every delivery fails.
    pub keys_if_undelivered: Vec<Key>,
}

/// A consistent read-only view of a whole database; see [`Kv::bulk_snapshot`].
pub struct BulkSnapshot<S: Store = EngineStore> {
    snapshot: S::Snapshot,
}

impl<S: Store> std::fmt::Debug for BulkSnapshot<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BulkSnapshot").field("version", &self.snapshot.version()).finish()
    }
}

/// The raw entries of a store cursor, as an iterator (ending after an error).
struct RawEntries<C: StoreCursor> {
    cursor: C,
    done: bool,
}

impl<C: StoreCursor> Iterator for RawEntries<C> {
    type Item = Result<(Vec<u8>, StoredEntry), KvError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.cursor.advance() {
            Ok(true) => Some(Ok((
                self.cursor.key().to_vec(),
                StoredEntry {
                    value: self.cursor.value().to_vec(),
                    version: self.cursor.version(),
                    expires_at_ms: self.cursor.expires_at_ms(),
                },
            ))),
            Ok(false) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl<S: Store> BulkSnapshot<S> {
    /// The versionstamp of the last commit the snapshot sees.
    pub fn last_versionstamp(&self) -> Versionstamp {
        Versionstamp::from_sequence(self.snapshot.version())
    }

    /// The time expiry is evaluated at: entries expired then are not listed.
    pub fn read_time_ms(&self) -> u64 {
        self.snapshot.read_time_ms()
    }

    /// Every live entry, in key order.
    pub fn entries(&self) -> impl Iterator<Item = Result<BulkEntry, KvError>> + use<S> {
        let cursor = self.snapshot.cursor(&[], &[RESERVED_PREFIX], false);
        RawEntries { cursor, done: false }.map(|found| {
            let (key, entry) = found?;
            Ok(BulkEntry {
                key: Key::decode(&key)?,
                value: KvValue::decode_stored(&entry.value)?,
                versionstamp: Versionstamp::from_sequence(entry.version),
                expires_at_ms: entry.expires_at_ms,
            })
        })
    }

    /// Every queued message, in delivery order (by deadline, then enqueue order).
    pub fn messages(&self) -> impl Iterator<Item = Result<QueuedMessage, KvError>> + use<S> {
        let mut end = QUEUE_PREFIX.to_vec();
        end.push(0xFF);
        let cursor = self.snapshot.cursor(&QUEUE_PREFIX, &end, false);
        RawEntries { cursor, done: false }.filter_map(|found| {
            let (key, entry) = match found {
                Ok(found) => found,
                Err(e) => return Some(Err(e)),
            };
            let (deadline_ms, _, _) = parse_message_key(&key)?;
            Some(MessageRecord::decode(&entry.value).and_then(|record| {
                let keys_if_undelivered =
                    record.keys_if_undelivered.iter().map(|k| Key::decode(k)).collect::<Result<_, _>>()?;
                Ok(QueuedMessage {
                    deadline_ms,
                    attempts: record.attempts,
                    value: record.payload,
                    backoff_ms: record.backoff_ms,
                    keys_if_undelivered,
                })
            }))
        })
    }

    /// Whether the database holds no entry and no queued message.
    pub fn is_empty(&self) -> Result<bool, KvError> {
        Ok(self.entries().next().transpose()?.is_none() && self.messages().next().transpose()?.is_none())
    }
}

/// A restore in progress; see the [module docs](self). On the engine nothing is visible
/// until [`Restore::finish`], and dropping it leaves the database unchanged.
pub struct Restore<'a, S: Store = EngineStore> {
    kv: &'a Kv<S>,
    load: Box<dyn BulkLoad + 'a>,
    own_seq: u64,
    own_used: bool,
    next_index: u32,
    in_messages: bool,
    last_deadline: u64,
    last_key: Option<Vec<u8>>,
    stored: Vec<u8>,
}

impl<S: Store> std::fmt::Debug for Restore<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Restore")
            .field("base_version", &self.load.base_version())
            .field("written", &self.load.written())
            .finish_non_exhaustive()
    }
}

/// What a restore wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestoreSummary {
    /// Entries restored.
    pub entries: u64,
    /// Queued messages restored.
    pub messages: u64,
    /// The database's last versionstamp afterwards.
    pub last_versionstamp: Versionstamp,
}

fn invalid(text: impl Into<String>) -> KvError {
    KvError::InvalidRestore(text.into())
}

impl<S: Store> Kv<S> {
    /// A consistent view of the whole database, for export.
    pub fn bulk_snapshot(&self) -> BulkSnapshot<S> {
        BulkSnapshot { snapshot: self.inner.store.snapshot() }
    }

    /// Starts a restore; see [`Restore`].
    pub fn restore(&self) -> Result<Restore<'_, S>, KvError> {
        let load = self.inner.store.bulk_load()?;
        let own_seq = load.base_version() + 1;
        Ok(Restore {
            kv: self,
            load,
            own_seq,
            own_used: false,
            next_index: 0,
            in_messages: false,
            last_deadline: 0,
            last_key: None,
            stored: Vec::new(),
        })
    }
}

impl<S: Store> Restore<'_, S> {
    /// The restore's own versionstamp: what an entry restored without one reads back with.
    pub fn versionstamp(&self) -> Versionstamp {
        Versionstamp::from_sequence(self.own_seq)
    }

    /// Entries and messages added so far.
    pub fn written(&self) -> u64 {
        self.load.written()
    }

    /// Adds an entry: `key` with `value`, reading back with `versionstamp` (`None`: the
    /// restore's own), expiring at `expires_at_ms` (milliseconds since the Unix epoch) if
    /// given. Keys must be strictly ascending and come before every message.
    pub fn entry(
        &mut self,
        key: &Key,
        value: &KvValue,
        versionstamp: Option<Versionstamp>,
        expires_at_ms: Option<u64>,
    ) -> Result<(), KvError> {
        let encoded = key.encode()?;
        self.put_entry(&encoded, value, versionstamp, expires_at_ms)
    }

    /// [`Restore::entry`] for a key given by its encoding, which must decode as a key.
    pub fn entry_encoded(
        &mut self,
        key: &[u8],
        value: &KvValue,
        versionstamp: Option<Versionstamp>,
        expires_at_ms: Option<u64>,
    ) -> Result<(), KvError> {
        Key::decode(key)?;
        self.put_entry(key, value, versionstamp, expires_at_ms)
    }

    fn put_entry(
        &mut self,
        key: &[u8],
        value: &KvValue,
        versionstamp: Option<Versionstamp>,
        expires_at_ms: Option<u64>,
    ) -> Result<(), KvError> {
        if self.in_messages {
            return Err(invalid("entries must come before every queued message"));
        }
        if self.last_key.as_deref().is_some_and(|last| key <= last) {
            return Err(invalid("entries must come in strictly ascending key order"));
        }
        let seq = match versionstamp {
            Some(versionstamp) => {
                if Versionstamp::from_sequence(versionstamp.sequence()) != versionstamp {
                    return Err(invalid(format!(
                        "versionstamp {versionstamp} does not end in 0000, as every stored versionstamp does"
                    )));
                }
                if versionstamp.sequence() == 0 {
                    return Err(invalid("versionstamp 00000000000000000000 is never given to an entry"));
                }
                versionstamp.sequence()
            }
            None => {
                self.own_used = true;
                self.own_seq
            }
        };
        self.stored.clear();
        self.stored.extend_from_slice(&value.encode_stored());
        self.load.put(key, &self.stored, seq, expires_at_ms)?;
        match &mut self.last_key {
            Some(last) => {
                last.clear();
                last.extend_from_slice(key);
            }
            None => self.last_key = Some(key.to_vec()),
        }
        Ok(())
    }

    /// Adds a queued message, after every entry; messages come in delivery order (their
    /// deadlines ascending). Messages with equal deadlines are delivered in the order they
    /// are added.
    pub fn message(&mut self, message: &QueuedMessage) -> Result<(), KvError> {
        if self.in_messages && message.deadline_ms < self.last_deadline {
            return Err(invalid("queued messages must come in delivery order (ascending deadlines)"));
        }
        let keys_if_undelivered =
            message.keys_if_undelivered.iter().map(Key::encode).collect::<Result<Vec<_>, _>>()?;
        let record = MessageRecord {
            attempts: message.attempts,
            payload: message.value.clone(),
            backoff_ms: message.backoff_ms.clone(),
            keys_if_undelivered,
        };
        let index = self.next_index;
        self.next_index =
            index.checked_add(1).ok_or_else(|| invalid("more than 2^32 queued messages in one restore"))?;
        let key = message_key(message.deadline_ms, self.own_seq, index);
        self.load.put(&key, &record.encode(), self.own_seq, None)?;
        self.in_messages = true;
        self.own_used = true;
        self.last_deadline = message.deadline_ms;
        Ok(())
    }

    /// Makes everything added visible and durable at once. Afterwards the database's last
    /// versionstamp is at least `last_versionstamp` (if given), every kept versionstamp,
    /// and the restore's own if something used it. Fails, changing nothing, as the
    /// [module docs](self) say.
    pub fn finish(self, last_versionstamp: Option<Versionstamp>) -> Result<RestoreSummary, KvError> {
        let messages = u64::from(self.next_index);
        let floor = last_versionstamp.map_or(0, |v| v.sequence());
        let floor = if self.own_used { floor.max(self.own_seq) } else { floor };
        let kv = self.kv;
        let summary = self.load.finish(floor)?;
        kv.inner.watch.notify_all();
        if messages > 0 {
            kv.inner.queue.reload();
        }
        Ok(RestoreSummary {
            entries: summary.entries - messages,
            messages,
            last_versionstamp: Versionstamp::from_sequence(summary.last_version),
        })
    }
}
