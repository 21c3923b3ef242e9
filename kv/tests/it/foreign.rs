//! A store shared by several servers: the commits another server makes reach this
//! process's watches and queue listeners only through the store's foreign-commit sink
//! ([`Store::subscribe_foreign_commits`]), never through a local commit's notification.

use parking_lot::Mutex;
use stampkv::engine::Clock;
use stampkv::store::{
    Abort, CommitOptions, MemoryCursor, MemorySnapshot, MemoryStore, Store, StoreCursor, StoredEntry,
    Transaction,
};
use stampkv::{
    key, EnqueueOptions, ForeignCommitSink, FromKvValue, Kv, KvError, KvValue, Limits, ListenOptions,
    QueueMessage, Value, WatchPoll,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A [`MemoryStore`] that other servers share: it delegates everything, keeps the sink a
/// `Kv` registers, and lets the test announce another server's commit by hand.
struct SharedStore {
    inner: MemoryStore,
    sink: Mutex<Option<ForeignCommitSink>>,
}

impl std::fmt::Debug for SharedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedStore").field("inner", &self.inner).finish()
    }
}

impl SharedStore {
    fn new(inner: MemoryStore) -> Self {
        SharedStore { inner, sink: Mutex::new(None) }
    }

    /// Tells the subscribed `Kv` that another server committed `keys`.
    fn announce(&self, keys: &[Vec<u8>]) {
        let sink = self.sink.lock().clone().expect("the Kv subscribed when it opened");
        sink(keys);
    }

    /// The raw keys stored in `start..end`.
    fn keys_in(&self, start: &[u8], end: &[u8]) -> Vec<Vec<u8>> {
        let mut cursor = self.inner.cursor(start, end, false);
        let mut keys = Vec::new();
        while cursor.advance().unwrap() {
            keys.push(cursor.key().to_vec());
        }
        keys
    }
}

impl Store for SharedStore {
    type Snapshot = MemorySnapshot;

    fn snapshot(&self) -> MemorySnapshot {
        self.inner.snapshot()
    }

    fn get(&self, key: &[u8]) -> Result<Option<StoredEntry>, KvError> {
        self.inner.get(key)
    }

    fn cursor(&self, start: &[u8], end: &[u8], reverse: bool) -> MemoryCursor {
        self.inner.cursor(start, end, reverse)
    }

    fn commit<T>(
        &self,
        options: CommitOptions,
        build: impl FnMut(&mut dyn Transaction) -> Result<T, Abort>,
    ) -> Result<(u64, T), Abort> {
        self.inner.commit(options, build)
    }

    fn clock(&self) -> &Arc<dyn Clock> {
        self.inner.clock()
    }

    fn close(&self) -> Result<(), KvError> {
        self.inner.close()
    }

    fn subscribe_foreign_commits(&self, sink: ForeignCommitSink) {
        *self.sink.lock() = Some(sink);
    }
}

/// Two servers on one store: `here` (subscribed) and `elsewhere`, whose commits `here`
/// learns of only when the test announces them.
fn two_servers() -> (Kv<SharedStore>, Kv<MemoryStore>) {
    let memory = MemoryStore::default();
    let here = Kv::with_store(SharedStore::new(memory.clone()), Limits::default());
    let elsewhere = Kv::with_store(memory, Limits::default());
    (here, elsewhere)
}

#[test]
fn a_foreign_commit_wakes_the_watches_of_its_keys() {
    let (here, elsewhere) = two_servers();
    let watched = key!["config", "mode"];
    let mut watch = here.watch(std::slice::from_ref(&watched)).unwrap();
    match watch.poll().unwrap() {
        WatchPoll::Changed(entries) => assert_eq!(entries[0].versionstamp, None),
        other => panic!("first poll: {other:?}"),
    }
    let versionstamp = elsewhere.set(&watched, &Value::from("fast")).unwrap();
    // The commit was made elsewhere: nothing here marked the watch.
    assert!(matches!(watch.poll().unwrap(), WatchPoll::Pending));
    here.store().announce(&[watched.encode().unwrap()]);
    match watch.poll().unwrap() {
        WatchPoll::Changed(entries) => {
            assert_eq!(entries[0].versionstamp, Some(versionstamp));
            let value = entries[0].value.clone().expect("the value set elsewhere");
            assert_eq!(Value::from_kv_value(value).unwrap(), Value::from("fast"));
        }
        other => panic!("after the announcement: {other:?}"),
    }
    // A foreign commit of other keys marks nothing.
    here.store().announce(&[key!["config", "other"].encode().unwrap()]);
    assert!(matches!(watch.poll().unwrap(), WatchPoll::Pending));
}

#[test]
fn a_foreign_enqueue_reaches_a_running_listener() {
    let (here, elsewhere) = two_servers();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let options =
        ListenOptions { workers: 1, max_idle_wait: Duration::from_millis(5), ..ListenOptions::default() };
    let _listener = here
        .listen_queue(options, move |message: QueueMessage| {
            sink.lock().push(message.value);
            Ok::<_, String>(())
        })
        .unwrap();
    // A local message first: once it is delivered the listener has loaded its index of
    // stored messages, which from then on only commits keep up to date.
    here.enqueue(&KvValue::U64(1), EnqueueOptions::default()).unwrap();
    wait_for(|| seen.lock().len() == 1, "the local message");

    elsewhere.enqueue(&KvValue::U64(2), EnqueueOptions::default()).unwrap();
    let queue_keys = here.store().keys_in(&[0xFF, b'q'], &[0xFF, b'q', 0xFF]);
    assert_eq!(queue_keys.len(), 1, "the foreign message is stored");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(seen.lock().len(), 1, "unannounced, the foreign message is not in the listener's index");

    here.store().announce(&queue_keys);
    wait_for(|| seen.lock().len() == 2, "the foreign message");
    assert_eq!(*seen.lock(), vec![KvValue::U64(1), KvValue::U64(2)]);
    here.close().unwrap();
}

/// Waits up to ten seconds for `done`.
fn wait_for(done: impl Fn() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}
