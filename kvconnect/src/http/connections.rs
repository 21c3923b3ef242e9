//! The open connections: how many there may be, which one is idle, and what each holds.
//!
//! Every accepted connection gets a [`Connection`] record in the [`ConnectionTable`]. The
//! request wrapper of [`super::serve_router`] counts the requests in flight on it (a request is
//! in flight until its answer's body has been sent or dropped, so a watch stream keeps its
//! connection busy) and the time of its last activity. From these the table decides:
//! - **admission**: at `max_connections`, a new connection takes the place of the one idle
//!   the longest (no request in flight), which is told to close; if every connection is
//!   busy, the new one is refused;
//! - **idle timeouts**: a connection with nothing in flight for `idle_timeout` closes, and
//!   one that has not started a request within `header_read_timeout` of its opening too;
//! - **closing sockets**: an idle connection told to close keeps its socket for a moment
//!   (to send an HTTP/2 GOAWAY). The table counts those, and the accept loop accepts no new
//!   connection while more than a few are closing ([`ConnectionTable::wait_for_room`]), so
//!   an attacker reconnecting at once cannot hold descriptors far above the cap. A closing
//!   connection that still has requests in flight stops counting (it is busy, not lingering).

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// One open connection, as the request handlers and the table see it.
#[derive(Debug)]
pub struct Connection {
    id: u64,
    opened: Instant,
    /// Requests whose answers are not finished.
    in_flight: AtomicUsize,
    /// Requests started on this connection.
    requests: AtomicU64,
    /// Milliseconds after `opened` of the last request start or end.
    last_active_ms: AtomicU64,
    /// Watch streams open on this connection.
    watches: AtomicUsize,
    /// Cancelled when the connection must close (evicted, idle, shutting down).
    close: CancellationToken,
    /// Counted among the table's closing connections.
    counted_closing: AtomicBool,
}

impl Connection {
    fn new(id: u64) -> Connection {
        Connection {
            id,
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            last_active_ms: AtomicU64::new(0),
            watches: AtomicUsize::new(0),
            close: CancellationToken::new(),
            counted_closing: AtomicBool::new(false),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_active_ms.store(ms, Ordering::Relaxed);
    }

    /// A request started: the connection is busy until the returned guard is dropped.
    pub(crate) fn begin_request(self: &Arc<Connection>) -> RequestGuard {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.touch();
        RequestGuard(self.clone())
    }

    /// Requests in flight on this connection now.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Takes one of this connection's watch slots if fewer than `max` are taken.
    pub fn try_add_watch(self: &Arc<Connection>, max: usize) -> Option<ConnectionWatchSlot> {
        let taken = self.watches.fetch_add(1, Ordering::SeqCst);
        if taken >= max {
            self.watches.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(ConnectionWatchSlot(self.clone()))
    }

    /// Resolves when the connection must close.
    pub(crate) async fn closing(&self) {
        self.close.cancelled().await;
    }

    /// Whether nothing is in flight and nothing happened for `idle` (or no request started
    /// within `first_request` of the opening).
    fn idle_expired(&self, now: Instant, idle: Duration, first_request: Duration) -> bool {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return false;
        }
        let age = now.saturating_duration_since(self.opened);
        if self.requests.load(Ordering::Relaxed) == 0 {
            return age >= first_request.min(idle);
        }
        let last = Duration::from_millis(self.last_active_ms.load(Ordering::Relaxed));
        age.saturating_sub(last) >= idle
    }
}

/// Marks a request finished when dropped.
#[derive(Debug)]
pub(crate) struct RequestGuard(Arc<Connection>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One watch slot of a connection, given back when dropped.
#[derive(Debug)]
pub struct ConnectionWatchSlot(Arc<Connection>);

impl Drop for ConnectionWatchSlot {
    fn drop(&mut self) {
        self.0.watches.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The open connections, bounded in number.
#[derive(Debug)]
pub(crate) struct ConnectionTable {
    max: usize,
    state: Mutex<TableState>,
    /// Signalled when a closing connection's socket is gone.
    room: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct TableState {
    next_id: u64,
    open: HashMap<u64, Arc<Connection>>,
    /// Connections told to close (evicted or idle) whose sockets are still open.
    closing: usize,
}

impl TableState {
    /// Takes `id` out of the open connections and tells it to close; it counts as closing
    /// until its socket is gone.
    fn close(&mut self, id: u64) {
        if let Some(connection) = self.open.remove(&id) {
            connection.counted_closing.store(true, Ordering::SeqCst);
            self.closing += 1;
            connection.close.cancel();
        }
    }
}

/// Why a new connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TableFull;

impl ConnectionTable {
    /// A table of at most `max` connections (at least 1).
    pub(crate) fn new(max: usize) -> ConnectionTable {
        ConnectionTable {
            max: max.max(1),
            state: Mutex::new(TableState::default()),
            room: tokio::sync::Notify::new(),
        }
    }

    /// Connections open now.
    pub(crate) fn len(&self) -> usize {
        self.state.lock().open.len()
    }

    /// Admits a new connection, closing the one idle the longest when the table is full;
    /// refuses it when every connection is busy.
    pub(crate) fn admit(&self) -> Result<Arc<Connection>, TableFull> {
        let mut state = self.state.lock();
        if state.open.len() >= self.max {
            let victim = state
                .open
                .values()
                .filter(|c| c.in_flight.load(Ordering::SeqCst) == 0)
                .min_by_key(|c| {
                    (c.opened + Duration::from_millis(c.last_active_ms.load(Ordering::Relaxed)), c.id)
                })
                .map(|c| c.id);
            let victim = victim.ok_or(TableFull)?;
            state.close(victim);
        }
        state.next_id += 1;
        let connection = Arc::new(Connection::new(state.next_id));
        state.open.insert(connection.id, connection.clone());
        Ok(connection)
    }

    /// Forgets a connection that has closed (its socket is gone).
    pub(crate) fn remove(&self, connection: &Connection) {
        self.state.lock().open.remove(&connection.id);
        self.stop_counting_closing(connection);
    }

    /// A connection told to close that has requests in flight: it is busy finishing them,
    /// and no longer counts as closing.
    pub(crate) fn stop_counting_closing(&self, connection: &Connection) {
        if connection.counted_closing.swap(false, Ordering::SeqCst) {
            let mut state = self.state.lock();
            state.closing = state.closing.saturating_sub(1);
            drop(state);
            self.room.notify_one();
        }
    }

    /// Connections told to close whose sockets are still open.
    pub(crate) fn closing(&self) -> usize {
        self.state.lock().closing
    }

    /// Waits until at most `slack` connections are closing.
    pub(crate) async fn wait_for_room(&self, slack: usize) {
        while self.closing() > slack {
            self.room.notified().await;
        }
    }

    /// Tells every connection idle beyond its timeouts to close; returns how many.
    pub(crate) fn close_idle(&self, idle: Duration, first_request: Duration) -> usize {
        let now = Instant::now();
        let mut state = self.state.lock();
        let expired: Vec<u64> =
            state.open.values().filter(|c| c.idle_expired(now, idle, first_request)).map(|c| c.id).collect();
        for id in &expired {
            state.close(*id);
        }
        expired.len()
    }

    /// Tells every connection to close (shutdown).
    pub(crate) fn close_all(&self) {
        for connection in self.state.lock().open.values() {
            connection.close.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]
    use super::*;

    #[test]
    fn a_full_table_evicts_the_longest_idle_connection() {
        let table = ConnectionTable::new(2);
        let first = table.admit().unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let second = table.admit().unwrap();
        second.touch();
        let third = table.admit().unwrap();
        assert!(first.close.is_cancelled(), "the longest idle connection is evicted");
        assert!(!second.close.is_cancelled());
        assert_eq!(table.len(), 2);
        // With every connection busy, a new one is refused.
        let _busy_second = second.begin_request();
        let _busy_third = third.begin_request();
        assert_eq!(table.admit().err(), Some(TableFull));
    }

    #[test]
    fn idle_connections_expire_and_busy_ones_do_not() {
        let table = ConnectionTable::new(10);
        let silent = table.admit().unwrap();
        let busy = table.admit().unwrap();
        let _guard = busy.begin_request();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(table.close_idle(Duration::from_secs(60), Duration::from_millis(10)), 1);
        assert!(silent.close.is_cancelled(), "no request within the header timeout");
        assert!(!busy.close.is_cancelled(), "a request in flight keeps a connection open");
    }

    #[test]
    fn watch_slots_are_bounded_per_connection() {
        let table = ConnectionTable::new(1);
        let connection = table.admit().unwrap();
        let first = connection.try_add_watch(2).unwrap();
        let _second = connection.try_add_watch(2).unwrap();
        assert!(connection.try_add_watch(2).is_none());
        drop(first);
        assert!(connection.try_add_watch(2).is_some());
    }
}
