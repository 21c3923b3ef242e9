//! The persisted delay queue: `enqueue` (alone or inside an atomic operation) and
//! `listen_queue`.
//!
//! - A message is stored in the engine, in the reserved key space (`record.rs`), by the same
//!   commit that enqueues it: atomic with the rest of the operation and durable under the
//!   same sync rule.
//! - Listener workers take the message with the earliest deadline that has come and that no
//!   other worker holds. Holding is an in-memory lease for the visibility timeout: only one
//!   process can open an engine database, so in-memory leases exclude every other worker,
//!   and a crash simply forgets them — on reopen every message still stored is delivered
//!   again, with the deadline it had. On a store several processes share (a cluster), a
//!   lease is also claimed by a commit that moves the message past the visibility timeout
//!   (`hub.rs`): one process wins it, and if that process dies the message is delivered
//!   again, by any of them, once the timeout has passed.
//! - Success deletes the message. Failure (an error or a panic in the handler) moves it to
//!   `now + next backoff interval` with the rest of the schedule; when the schedule is
//!   exhausted one commit writes the value to every `keys_if_undelivered` key and deletes
//!   the message. As in Deno these keys are not validated: the empty key and keys over the
//!   write limit are written too, and dead letters too large for one engine commit (over
//!   64 MiB) are written by several. These commits are not synced on their own: if a crash
//!   loses one, the message is delivered again (at-least-once), never lost.
//! - A handler that runs past the visibility timeout loses its lease and the message may be
//!   delivered again; its outcome is then applied only if the message is still stored.
//! - Messages with the same deadline are delivered in enqueue order; time comes from the
//!   engine's clock, so tests can move it.
//!
//! The record layout is in `record.rs`; the in-memory state the workers share (the index
//! of stored messages, the leases, the wake-ups) in `hub.rs`; here, the enqueue's checks,
//! the listener and its workers' commits.

pub(crate) mod hub;
pub(crate) mod record;

use crate::shared::Core;
use crate::storage_error::from_engine;
use crate::store::{Abort, CommitOptions, EngineStore, Store, Transaction};
use crate::{FromKvValue, Key, KvError, KvValue, ToKvValue};
use hub::{Leased, Outcome};
use record::{message_key, parse_message_key, MessageRecord};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Deno's default retry schedule, in milliseconds.
pub const DEFAULT_BACKOFF_MS: [u32; 5] = [100, 1_000, 5_000, 30_000, 60_000];
/// Longest delay: 30 days.
pub const MAX_DELAY: Duration = Duration::from_millis(2_592_000_000);
/// Most retry intervals in a schedule.
pub const MAX_BACKOFF_INTERVALS: usize = 5;
/// Longest retry interval: one hour.
pub const MAX_BACKOFF_INTERVAL: Duration = Duration::from_millis(3_600_000);

/// Options of an enqueue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnqueueOptions {
    /// Deliver no earlier than this long after the commit (at most 30 days).
    pub delay: Duration,
    /// Where the value goes if every delivery fails.
    pub keys_if_undelivered: Vec<Key>,
    /// Waits before each retry (at most 5, each at most an hour); `None` for the default
    /// `[100, 1000, 5000, 30000, 60000]` ms, `Some(vec![])` for no retry.
    pub backoff_schedule: Option<Vec<Duration>>,
}

/// An enqueue as built: what Deno checks when `enqueue()` is called (the delay, the
/// backoff schedule, the value's serialization) has passed. The rest is checked at commit
/// ([`PendingEnqueue::parse`], [`Enqueue::payload_size`]), in Deno's order.
#[derive(Debug, Clone)]
pub(crate) struct PendingEnqueue {
    payload: KvValue,
    delay_ms: u64,
    /// The schedule given; `None` for the default one.
    backoff_ms: Option<Vec<u32>>,
    keys_if_undelivered: Vec<Key>,
}

impl PendingEnqueue {
    /// Checks what Deno's `enqueue()` throws for, in its order: the delay, then the backoff
    /// schedule, then the value.
    pub fn new(
        value: &(impl ToKvValue + ?Sized),
        options: EnqueueOptions,
    ) -> Result<PendingEnqueue, KvError> {
        if options.delay > MAX_DELAY {
            return Err(KvError::InvalidEnqueue(format!(
                "Delay cannot be greater than 30 days: received {}",
                millis_text(options.delay)
            )));
        }
        let backoff_ms = match options.backoff_schedule {
            None => None,
            Some(schedule) => {
                if schedule.len() > MAX_BACKOFF_INTERVALS {
                    return Err(KvError::InvalidEnqueue(format!(
                        "Invalid backoffSchedule, max {MAX_BACKOFF_INTERVALS} intervals allowed"
                    )));
                }
                if let Some(index) = schedule.iter().position(|d| *d > MAX_BACKOFF_INTERVAL) {
                    return Err(KvError::InvalidEnqueue(format!(
                        "Invalid backoffSchedule, interval at index {index} is invalid"
                    )));
                }
                // At most an hour each, so they fit.
                Some(schedule.iter().map(|d| d.as_millis() as u32).collect())
            }
        };
        Ok(PendingEnqueue {
            payload: value.to_kv_value()?,
            // At most 30 days, so it fits.
            delay_ms: options.delay.as_millis() as u64,
            backoff_ms,
            keys_if_undelivered: options.keys_if_undelivered,
        })
    }

    /// Encodes the `keys_if_undelivered`; a key that cannot be encoded is Deno's
    /// `Invalid enqueue`. Empty and oversized keys are accepted, as Deno accepts them.
    pub fn parse(self) -> Result<Enqueue, KvError> {
        let keys_if_undelivered = self
            .keys_if_undelivered
            .iter()
            .map(|key| key.encode().map_err(KvError::InvalidEnqueueKey))
            .collect::<Result<_, _>>()?;
        Ok(Enqueue {
            payload: self.payload,
            delay_ms: self.delay_ms,
            counted_intervals: self.backoff_ms.as_ref().map_or(0, Vec::len),
            backoff_ms: self.backoff_ms.unwrap_or_else(|| DEFAULT_BACKOFF_MS.to_vec()),
            keys_if_undelivered,
        })
    }
}

/// The delay in milliseconds as JavaScript prints the number given (`2592000000.5`).
fn millis_text(delay: Duration) -> String {
    let fraction_ns = delay.subsec_nanos() % 1_000_000;
    if fraction_ns == 0 {
        return delay.as_millis().to_string();
    }
    let fraction = format!("{fraction_ns:06}");
    format!("{}.{}", delay.as_millis(), fraction.trim_end_matches('0'))
}

/// A parsed enqueue, ready to be written.
#[derive(Debug, Clone)]
pub(crate) struct Enqueue {
    pub payload: KvValue,
    pub delay_ms: u64,
    pub backoff_ms: Vec<u32>,
    /// Intervals Deno counts against the total mutation size: those of an explicit
    /// schedule (the default one is not sent with the enqueue, so it counts nothing).
    counted_intervals: usize,
    pub keys_if_undelivered: Vec<Vec<u8>>,
}

impl Enqueue {
    /// The payload's size as Deno measures it: Deno always sends an enqueued value
    /// V8-serialized, so a plain byte array counts as the `Uint8Array` V8 would write.
    pub fn payload_size(&self) -> usize {
        match &self.payload {
            KvValue::V8(bytes) => bytes.len(),
            KvValue::Bytes(bytes) => uint8array_v8_size(bytes.len()),
            KvValue::U64(_) => 8,
        }
    }

    /// Bytes Deno counts against the total mutation size.
    pub fn counted_bytes(&self) -> usize {
        self.payload_size() + 4 * self.counted_intervals
    }

    /// Adds the message to a commit whose sequence number is `sequence`; returns its key.
    pub fn write(&self, batch: &mut dyn Transaction, now_ms: u64, sequence: u64, index: u32) -> Vec<u8> {
        let record = MessageRecord {
            attempts: 0,
            payload: self.payload.clone(),
            backoff_ms: self.backoff_ms.clone(),
            keys_if_undelivered: self.keys_if_undelivered.clone(),
        };
        let key = message_key(now_ms.saturating_add(self.delay_ms), sequence, index);
        batch.put(&key, &record.encode(), None);
        key
    }
}

/// The size of V8's serialization of a `Uint8Array` of `len` bytes: the header (`FF 0F`),
/// the buffer (`B`, length, data), the view (`V`, `B`, offset 0, length, flags 0).
fn uint8array_v8_size(len: usize) -> usize {
    let varint = |n: usize| (usize::BITS - (n | 1).leading_zeros()).div_ceil(7) as usize;
    2 + 1 + varint(len) + len + 2 + 1 + varint(len) + 1
}

/// A message handed to a queue handler.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueMessage {
    /// The enqueued value.
    pub value: KvValue,
    /// 1 for the first delivery, then 2, 3, ... after failures.
    pub attempt: u32,
}

impl QueueMessage {
    /// The value as a given type (a [`crate::Value`], or a serde type with `serde`).
    pub fn value_as<T: FromKvValue>(&self) -> Result<T, KvError> {
        T::from_kv_value(self.value.clone())
    }
}

/// Options of a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenOptions {
    /// Worker threads running handlers concurrently (default 4).
    pub workers: usize,
    /// How long a message stays reserved for the worker handling it (default 60 s); a
    /// handler still running after that may see the message delivered again elsewhere.
    pub visibility_timeout: Duration,
    /// Longest a worker sleeps without looking at the clock again (default 1 s); lower it
    /// when the engine runs on a manual clock in tests.
    pub max_idle_wait: Duration,
}

impl Default for ListenOptions {
    fn default() -> Self {
        ListenOptions {
            workers: 4,
            visibility_timeout: Duration::from_secs(60),
            max_idle_wait: Duration::from_secs(1),
        }
    }
}

/// A running set of queue workers; see [`Kv::listen_queue`](super::Kv::listen_queue). Dropping the handle
/// leaves the workers running until the database closes.
pub struct QueueListener<S: Store = EngineStore> {
    stop: Arc<AtomicBool>,
    core: Arc<Core<S>>,
}

impl<S: Store> QueueListener<S> {
    /// Stops this listener's workers after their current handlers (the database stays open).
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.core.queue.notify();
    }

    /// Blocks until the database is closed (Deno's `listenQueue` promise).
    pub fn wait(self) {
        self.core.queue.wait_closed(&self.stop);
    }
}

/// A queue handler as the workers call it (its error already turned into text).
pub(crate) type Handler = Arc<dyn Fn(QueueMessage) -> Result<(), String> + Send + Sync>;

/// Queue bookkeeping commits are not synced on their own (see the module docs).
const BOOKKEEPING: CommitOptions = CommitOptions { sync: Some(false) };

/// Starts `options.workers` threads delivering the messages of `core` to `handler`; see
/// [`Kv::listen_queue`](super::Kv::listen_queue).
pub(crate) fn listen<S: Store>(
    core: &Arc<Core<S>>,
    options: ListenOptions,
    handler: Handler,
) -> Result<QueueListener<S>, KvError> {
    let stop = Arc::new(AtomicBool::new(false));
    core.queue.add_workers(options.workers.max(1), |n| {
        let worker = Worker { core: core.clone(), options, handler: handler.clone(), stop: stop.clone() };
        let spawned =
            std::thread::Builder::new().name(format!("stampkv-queue-{n}")).spawn(move || worker.run());
        spawned.map_err(|e| {
            from_engine(stampkv_engine::Error::Io { context: "starting a queue worker".into(), source: e })
        })
    })?;
    Ok(QueueListener { stop, core: core.clone() })
}

/// One worker thread of a listener.
struct Worker<S: Store> {
    core: Arc<Core<S>>,
    options: ListenOptions,
    handler: Handler,
    stop: Arc<AtomicBool>,
}

impl<S: Store> Worker<S> {
    fn run(self) {
        while let Some((key, token, record)) = self.next_message() {
            let message = QueueMessage { value: record.payload.clone(), attempt: record.attempts + 1 };
            let handler = &self.handler;
            let succeeded = matches!(catch_unwind(AssertUnwindSafe(|| handler(message))), Ok(Ok(())));
            // If the database closed meanwhile the message stays queued for the next open.
            let outcome = if succeeded { self.acknowledge(&key) } else { self.retry_or_dead_letter(&key) };
            self.core.queue.release(&key, token, outcome.unwrap_or(Outcome::Unchanged));
        }
    }

    /// Leases the next deliverable message; `None` once stopped or closed.
    fn next_message(&self) -> Option<Leased> {
        let ListenOptions { visibility_timeout, max_idle_wait, .. } = self.options;
        self.core.queue.lease_next(&self.core.store, &self.stop, visibility_timeout, max_idle_wait)
    }

    /// Deletes a handled message (if it is still stored).
    fn acknowledge(&self, key: &[u8]) -> Result<Outcome, KvError> {
        let outcome = self.core.store.commit(BOOKKEEPING, |view| {
            if view.get(key)?.is_none() {
                return Err(Abort::CheckFailed);
            }
            view.delete(key);
            Ok(())
        });
        match outcome {
            Ok(_) | Err(Abort::CheckFailed) => Ok(Outcome::Removed),
            Err(Abort::Failed(e)) => Err(e),
        }
    }

    /// Reschedules a failed message, or writes it to its dead-letter keys.
    ///
    /// Every `keys_if_undelivered` key is written, the empty key and keys over the write
    /// limit included (Deno writes them too). They normally go in one commit with the
    /// message's removal; should they exceed [`DEAD_LETTER_COMMIT_BYTES`] they are written
    /// in several commits, each storing the message again with the keys still to write, so
    /// the write never exceeds the engine's batch limit and a crash between two of them
    /// loses no key.
    fn retry_or_dead_letter(&self, key: &[u8]) -> Result<Outcome, KvError> {
        let Some((_, sequence, index)) = parse_message_key(key) else { return Ok(Outcome::Removed) };
        loop {
            let outcome = self.core.store.commit(BOOKKEEPING, |view| {
                let Some(entry) = view.get(key)? else { return Err(Abort::CheckFailed) };
                let mut record = MessageRecord::decode(&entry.value).map_err(Abort::Failed)?;
                if record.backoff_ms.is_empty() {
                    let stored = record.payload.encode_stored();
                    let fit = dead_letters_fitting(
                        &record.keys_if_undelivered,
                        stored.len(),
                        self.core.store.max_commit_bytes().min(DEAD_LETTER_COMMIT_BYTES),
                        // One write of the commit removes or rewrites the message.
                        self.core.store.max_commit_writes().saturating_sub(1),
                    );
                    let rest = record.keys_if_undelivered.split_off(fit);
                    for target in &record.keys_if_undelivered {
                        view.put(target, &stored, None);
                    }
                    let written = std::mem::replace(&mut record.keys_if_undelivered, rest);
                    if record.keys_if_undelivered.is_empty() {
                        view.delete(key);
                        return Ok((Some(Outcome::Removed), written));
                    }
                    view.put(key, &record.encode(), None);
                    return Ok((None, written));
                }
                view.delete(key);
                let wait_ms = u64::from(record.backoff_ms.remove(0));
                record.attempts += 1;
                let moved = message_key(view.now_ms().saturating_add(wait_ms), sequence, index);
                view.put(&moved, &record.encode(), None);
                Ok((Some(Outcome::Moved(moved)), Vec::new()))
            });
            match outcome {
                Ok((_, (result, dead_letters))) => {
                    self.core.watch.notify(&dead_letters);
                    if let Some(result) = result {
                        return Ok(result);
                    }
                }
                Err(Abort::CheckFailed) => return Ok(Outcome::Removed),
                Err(Abort::Failed(e)) => return Err(e),
            }
        }
    }
}

/// Most bytes of dead letters (keys and stored values) written by one commit: half the
/// engine's batch limit (128 MiB), leaving room for the batch's own bytes. Only dead letters
/// that one commit could not hold are split.
pub(crate) const DEAD_LETTER_COMMIT_BYTES: usize = 64 << 20;

/// How many of `keys` (at least one) fit one dead-letter commit of at most `max_bytes`
/// and `max_writes` writes, with a stored value of `value_len` bytes each.
fn dead_letters_fitting(keys: &[Vec<u8>], value_len: usize, max_bytes: usize, max_writes: usize) -> usize {
    let mut bytes = 0usize;
    let fitting = keys
        .iter()
        .take(max_writes)
        .take_while(|key| {
            bytes = bytes.saturating_add(key.len() + value_len);
            bytes <= max_bytes
        })
        .count();
    fitting.max(1).min(keys.len())
}
