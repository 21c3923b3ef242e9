//! `watch` (protocol 3): a length-prefixed stream of frames with keep-alive pings.
//!
//! Streams are async, not threads. Every stream watching the same keys (the same encoded
//! key list) shares one [`SharedWatch`]: a task that holds the database's watch, sleeps
//! until a commit to one of the keys wakes it (or an expiry comes due), reads the keys once
//! from one snapshot on the blocking pool, and publishes the new state as one encoded frame
//! on a `tokio::sync::watch` channel. Each stream sends the latest frame when it can, so a
//! slow client skips states instead of queueing them, and a hot key costs one read per
//! change however many streams watch it. Frames of one shared watch are at least
//! `watch_frame_interval` (25 ms) apart: faster changes coalesce into the next frame, so
//! a key written thousands of times a second costs each stream at most 40 frames a second.
//!
//! **Frame shape.** Every frame carries every key as `changed: true` with its entry (none:
//! absent). Deno's built-in client reads a key output without an entry as a deletion even
//! when it is marked unchanged; the full state is understood by every client (Deno's, the
//! Rust `denokv_remote` client, `@deno/kv`'s cache), and each of them compares
//! versionstamps itself to decide what to emit.
//!
//! A watch of no keys gets one empty frame and then only pings: the protocol has no way to
//! end a watch (clients reconnect when a stream ends), so it stays open like a watch whose
//! keys never change.

use crate::backend::ServedStore;
use crate::errors::{bad, kv_error, HttpError};
use crate::proto;
use crate::read::entry_proto;
use crate::request::{data_request, decode, record};
use crate::service::Server;
use crate::write::decode_key;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use stampkv::remote::RawEntry;
use stampkv::{Key, WatchPoll};
use stampkv_kvconnect::http::{Connection, ConnectionWatchSlot, MAX_WATCHED_KEYS, TOO_MANY_WATCHED_KEYS};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch as channel, Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// Longest sleep while an expiry is pending (the database's clock may jump in tests).
const EXPIRY_POLL: Duration = Duration::from_secs(1);

/// The latest frame of a shared watch; `None` before its first read.
type Latest = Option<Bytes>;

/// The shared watches of a server, by encoded key list, and the bound on open streams.
#[derive(Debug)]
pub(crate) struct WatchRegistry {
    shared: Mutex<HashMap<Vec<Vec<u8>>, channel::Sender<Latest>>>,
    slots: Arc<Semaphore>,
    max: usize,
}

impl WatchRegistry {
    pub(crate) fn new(max_streams: usize) -> WatchRegistry {
        WatchRegistry {
            shared: Mutex::new(HashMap::new()),
            slots: Arc::new(Semaphore::new(max_streams)),
            max: max_streams,
        }
    }

    /// Watch streams open now.
    pub(crate) fn open(&self) -> usize {
        self.max.saturating_sub(self.slots.available_permits())
    }

    /// Shared watches running now (distinct key lists).
    pub(crate) fn shared(&self) -> usize {
        self.shared.lock().len()
    }
}

pub(crate) async fn watch<S: ServedStore>(
    State(server): State<Arc<Server<S>>>,
    connection: Option<Extension<Arc<Connection>>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = watch_inner(&server, connection.map(|c| c.0), &headers, body).await;
    record(&server, "watch", result)
}

async fn watch_inner<S: ServedStore>(
    server: &Arc<Server<S>>,
    connection: Option<Arc<Connection>>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    let (version, body) = data_request(server, headers, body).await?;
    if version < 3 {
        return Err(bad("Watch needs protocol version 3."));
    }
    let request: proto::Watch = decode(&body)?;
    if request.keys.len() > MAX_WATCHED_KEYS {
        return Err(bad(TOO_MANY_WATCHED_KEYS));
    }
    let raw: Vec<Vec<u8>> = request.keys.into_iter().map(|k| k.key).collect();
    let keys = raw.iter().map(|k| decode_key(k, "watch")).collect::<Result<Vec<_>, _>>()?;
    if server.stopping.is_cancelled() {
        return Err(HttpError::unavailable());
    }
    let global = server.watches.slots.clone().try_acquire_owned().map_err(|_| HttpError {
        status: StatusCode::SERVICE_UNAVAILABLE,
        text: "Too many open watch streams.".into(),
    })?;
    let per_connection = match &connection {
        Some(c) => {
            Some(c.try_add_watch(server.config.net.max_watches_per_connection).ok_or_else(|| HttpError {
                status: StatusCode::TOO_MANY_REQUESTS,
                text: format!(
                    "Too many watch streams on one connection (max {}).",
                    server.config.net.max_watches_per_connection
                ),
            })?)
        }
        None => None,
    };
    let (latest, keep_open) = if raw.is_empty() {
        // The empty watch never changes: its own channel, held open by the stream.
        let frame =
            proto::frame::encode_frame(&proto::WatchOutput { status: proto::SR_SUCCESS, keys: vec![] });
        let (sender, mut receiver) = channel::channel(Some(Bytes::from(frame)));
        receiver.mark_changed();
        (receiver, Some(sender))
    } else {
        (subscribe(server, raw, keys)?, None)
    };
    let stream = Stream {
        latest,
        ping: tokio::time::interval_at(
            tokio::time::Instant::now() + server.config.net.keepalive_interval,
            server.config.net.keepalive_interval,
        ),
        stopping: server.stopping.clone(),
        _slots: (global, per_connection),
        _keep_open: keep_open,
    };
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], Body::from_stream(stream.frames()))
        .into_response())
}

/// Joins the shared watch of `raw`, starting it if none runs.
fn subscribe<S: ServedStore>(
    server: &Arc<Server<S>>,
    raw: Vec<Vec<u8>>,
    keys: Vec<Key>,
) -> Result<channel::Receiver<Latest>, HttpError> {
    let mut shared = server.watches.shared.lock();
    if let Some(sender) = shared.get(&raw) {
        let mut receiver = sender.subscribe();
        // A stream starts with the current state, if it is known.
        receiver.mark_changed();
        return Ok(receiver);
    }
    let watch = server.kv.watch(&keys).map_err(kv_error)?;
    let (sender, receiver) = channel::channel(None);
    shared.insert(raw.clone(), sender.clone());
    drop(shared);
    tokio::spawn(drive(server.clone(), raw, watch, sender));
    Ok(receiver)
}

/// Runs one shared watch until no stream uses it, the database closes or the server stops.
async fn drive<S: ServedStore>(
    server: Arc<Server<S>>,
    raw: Vec<Vec<u8>>,
    watch: stampkv::Watch<S>,
    sender: channel::Sender<Latest>,
) {
    let woken = Arc::new(Notify::new());
    {
        let woken = woken.clone();
        watch.set_waker(move || woken.notify_one());
    }
    let mut watch = Some(watch);
    let mut last_frame: Option<tokio::time::Instant> = None;
    loop {
        // Changes within the frame interval coalesce into the next frame.
        if let Some(at) = last_frame {
            tokio::select! {
                () = tokio::time::sleep_until(at + server.config.watch_frame_interval) => {}
                () = server.stopping.cancelled() => break,
            }
        }
        let Some(mut taken) = watch.take() else { break };
        let polled = crate::errors::blocking(&server, move || {
            let polled = taken.poll();
            Ok((taken, polled))
        })
        .await;
        let (returned, polled) = match polled {
            Ok(pair) => pair,
            Err(_) => break,
        };
        match polled {
            Ok(WatchPoll::Changed(entries)) => {
                let keys = entries
                    .into_iter()
                    .zip(&raw)
                    .map(|(entry, key)| {
                        let entry_if_changed = match (entry.value, entry.versionstamp) {
                            (Some(value), Some(versionstamp)) => {
                                Some(entry_proto(RawEntry { key: key.clone(), value, versionstamp }))
                            }
                            _ => None,
                        };
                        proto::WatchKeyOutput { changed: true, entry_if_changed }
                    })
                    .collect();
                let frame =
                    proto::frame::encode_frame(&proto::WatchOutput { status: proto::SR_SUCCESS, keys });
                sender.send_replace(Some(Bytes::from(frame)));
                last_frame = Some(tokio::time::Instant::now());
            }
            Ok(WatchPoll::Pending) => {}
            Ok(WatchPoll::Closed) => break,
            Err(e) => {
                tracing::warn!(error = %e, "a watch ended");
                break;
            }
        }
        let expiry = returned.next_expiry_in().map(|d| d.min(EXPIRY_POLL));
        watch = Some(returned);
        let wake = wait_for_change(&woken, expiry, &sender, &server.stopping);
        match wake.await {
            Wake::Changed => {}
            Wake::Unused => {
                let mut shared = server.watches.shared.lock();
                if sender.receiver_count() == 0 {
                    shared.remove(&raw);
                    return;
                }
            }
            Wake::Stop => break,
        }
    }
    let mut shared = server.watches.shared.lock();
    if shared.get(&raw).is_some_and(|s| s.same_channel(&sender)) {
        shared.remove(&raw);
    }
}

enum Wake {
    Changed,
    Unused,
    Stop,
}

async fn wait_for_change(
    woken: &Notify,
    expiry: Option<Duration>,
    sender: &channel::Sender<Latest>,
    stopping: &CancellationToken,
) -> Wake {
    let expiry = async {
        match expiry {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = woken.notified() => Wake::Changed,
        () = expiry => Wake::Changed,
        () = sender.closed() => Wake::Unused,
        () = stopping.cancelled() => Wake::Stop,
    }
}

/// One client's stream: the latest frame of its shared watch, pings, its slots.
struct Stream {
    latest: channel::Receiver<Latest>,
    ping: tokio::time::Interval,
    stopping: CancellationToken,
    _slots: (OwnedSemaphorePermit, Option<ConnectionWatchSlot>),
    /// The sender of a channel of the stream's own (the empty watch).
    _keep_open: Option<channel::Sender<Latest>>,
}

impl Stream {
    fn frames(self) -> impl futures_util::Stream<Item = Result<Bytes, Infallible>> + Send {
        futures_util::stream::unfold(self, |mut stream| async move {
            let frame = stream.next_frame().await?;
            Some((Ok(frame), stream))
        })
    }

    /// The next frame to send: a new state, or a ping when nothing happened for a while;
    /// `None` once the stream ends.
    async fn next_frame(&mut self) -> Option<Bytes> {
        loop {
            tokio::select! {
                biased;
                () = self.stopping.cancelled() => return None,
                changed = self.latest.changed() => {
                    changed.ok()?;
                    let frame = self.latest.borrow_and_update().clone();
                    if let Some(frame) = frame {
                        self.ping.reset();
                        return Some(frame);
                    }
                }
                _ = self.ping.tick() => return Some(Bytes::from_static(&proto::frame::PING)),
            }
        }
    }
}
