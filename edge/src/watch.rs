//! `watch` on either endpoint, fanned out: every client watching the same keys at this edge
//! shares one upstream watch stream.
//!
//! A shared watch keeps the latest state of its keys. A client joining late first gets that
//! state as one frame with every key marked changed (what a new watch stream starts with),
//! then the changes as they come. Frames are recomputed against the kept state, so a
//! reconnect upstream (whose first frame repeats every key) wakes no client unless
//! something changed meanwhile. Changes also update this edge's cache.

use crate::read::{record, upstream_error};
use crate::service::Edge;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use parking_lot::Mutex;
use stampkv_client::RemoteError;
use stampkv_kvconnect as proto;
use stampkv_kvconnect::frame::{encode_frame, PING};
use stampkv_kvconnect::http::{check_data_path, checked_body, decode};
use stampkv_kvconnect::http::{Connection, HttpError, MAX_READ_KEY_BYTES};
use stampkv_kvconnect::http::{MAX_WATCHED_KEYS, TOO_MANY_WATCHED_KEYS};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;
use tokio::task::AbortHandle;

/// Frames a slow client may fall behind before it is sent the whole state instead.
const FRAME_BACKLOG: usize = 64;

/// The shared watches, by their list of encoded keys.
#[derive(Debug, Default)]
pub(crate) struct WatchHub {
    shared: Mutex<HashMap<Vec<Vec<u8>>, Arc<SharedWatch>>>,
}

impl WatchHub {
    /// How many upstream watches are shared now.
    pub(crate) fn len(&self) -> usize {
        self.shared.lock().len()
    }
}

/// One upstream watch and what its clients share.
#[derive(Debug)]
pub(crate) struct SharedWatch {
    keys: Vec<Vec<u8>>,
    state: Mutex<SharedState>,
    frames: broadcast::Sender<Bytes>,
    task: Mutex<Option<AbortHandle>>,
    /// Whether the upstream has answered the watch yet, and how.
    upstream: tokio::sync::watch::Sender<UpstreamAnswer>,
}

/// How the upstream answered a shared watch.
#[derive(Debug, Clone)]
enum UpstreamAnswer {
    /// No frame and no refusal yet.
    Waiting,
    /// Frames are arriving.
    Streaming,
    /// The upstream refused the watch with a 4xx: the same answer for the clients.
    Refused(HttpError),
}

/// How long a client's first watch request waits for the upstream's first answer before
/// its stream starts anyway (with pings until a frame comes).
const FIRST_ANSWER_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
struct SharedState {
    /// The latest entry of every key (`None` inside: absent); `None` before the first frame.
    entries: Option<Vec<Option<proto::KvEntry>>>,
    subscribers: usize,
}

impl SharedWatch {
    /// A frame marking every key changed with its kept state, if the state is known.
    fn full_frame(&self) -> Option<Bytes> {
        full_state_frame(&self.state.lock())
    }

    /// The kept state as a first frame (if known) and a receiver of every frame after it,
    /// taken together under the state lock (`take_in` sends under it too): no frame is
    /// missed and none is sent twice.
    fn subscribe(&self) -> (Option<Bytes>, broadcast::Receiver<Bytes>) {
        let state = self.state.lock();
        (full_state_frame(&state), self.frames.subscribe())
    }

    /// Takes in one upstream frame (whole, or with unchanged keys left out as `denokv`
    /// sends them): updates the kept state and the edge's cache, and sends the clients the
    /// whole kept state if anything changed (every key `changed` with its entry, the shape
    /// every client reads right; see `stampkv_kvconnect::http::watch`).
    fn take_in(&self, edge: &Edge, output: proto::WatchOutput) {
        if output.status != proto::SR_SUCCESS || output.keys.len() != self.keys.len() {
            return;
        }
        self.upstream.send_if_modified(|answer| {
            let waiting = matches!(answer, UpstreamAnswer::Waiting);
            *answer = UpstreamAnswer::Streaming;
            waiting
        });
        let mut state = self.state.lock();
        let first = state.entries.is_none();
        let mut entries = state.entries.take().unwrap_or_else(|| vec![None; self.keys.len()]);
        let mut any_change = first;
        for ((key, update), kept) in self.keys.iter().zip(output.keys).zip(entries.iter_mut()) {
            let stamp = |e: &Option<proto::KvEntry>| e.as_ref().map(|e| e.versionstamp.clone());
            let changed = update.changed && (first || stamp(&update.entry_if_changed) != stamp(kept));
            if changed {
                edge.apply_change(key, update.entry_if_changed.clone(), false);
                *kept = update.entry_if_changed;
                any_change = true;
            }
        }
        let keys = entries
            .iter()
            .map(|entry| proto::WatchKeyOutput { changed: true, entry_if_changed: entry.clone() })
            .collect();
        state.entries = Some(entries);
        if any_change {
            let frame = encode_frame(&proto::WatchOutput { status: proto::SR_SUCCESS, keys });
            // No receiver is fine: the last client may just have left.
            let _ = self.frames.send(Bytes::from(frame));
        }
    }
}

/// A frame marking every key changed with its entry from `state`, if the state is known.
fn full_state_frame(state: &SharedState) -> Option<Bytes> {
    let entries = state.entries.as_ref()?;
    let keys = entries
        .iter()
        .map(|entry| proto::WatchKeyOutput { changed: true, entry_if_changed: entry.clone() })
        .collect();
    Some(Bytes::from(encode_frame(&proto::WatchOutput { status: proto::SR_SUCCESS, keys })))
}

/// Follows the upstream watch for as long as the shared watch has clients, reconnecting
/// with a growing delay (100 ms to 5 s) when it fails.
async fn follow_upstream(edge: Arc<Edge>, shared: Arc<SharedWatch>) {
    let mut delay = Duration::from_millis(100);
    loop {
        match edge.upstream.watch_raw(shared.keys.clone()).await {
            Ok(mut stream) => {
                edge.metrics.upstream_watches.add(1);
                while let Some(Ok(output)) = stream.next().await {
                    delay = Duration::from_millis(100);
                    shared.take_in(&edge, output);
                }
            }
            // A refusal is final: the clients get it, and the next client starts afresh.
            Err(e @ RemoteError::Http { .. }) => {
                shared.upstream.send_replace(UpstreamAnswer::Refused(upstream_error(&edge, &e)));
                let mut hub = edge.watches.shared.lock();
                if hub.get(&shared.keys).is_some_and(|s| Arc::ptr_eq(s, &shared)) {
                    hub.remove(&shared.keys);
                }
                return;
            }
            Err(_) => {}
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// A client's place in a shared watch; leaving last stops the upstream watch.
struct Subscription {
    edge: Arc<Edge>,
    shared: Arc<SharedWatch>,
}

impl Subscription {
    fn join(edge: &Arc<Edge>, keys: Vec<Vec<u8>>) -> Subscription {
        let mut hub = edge.watches.shared.lock();
        let shared = hub
            .entry(keys.clone())
            .or_insert_with(|| {
                let (frames, _) = broadcast::channel(FRAME_BACKLOG);
                let shared = Arc::new(SharedWatch {
                    keys,
                    state: Mutex::new(SharedState::default()),
                    frames,
                    task: Mutex::new(None),
                    upstream: tokio::sync::watch::Sender::new(UpstreamAnswer::Waiting),
                });
                let task = tokio::spawn(follow_upstream(edge.clone(), shared.clone()));
                *shared.task.lock() = Some(task.abort_handle());
                shared
            })
            .clone();
        shared.state.lock().subscribers += 1;
        Subscription { edge: edge.clone(), shared }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.edge.open_watches.fetch_sub(1, Ordering::SeqCst);
        let mut hub = self.edge.watches.shared.lock();
        let mut state = self.shared.state.lock();
        state.subscribers = state.subscribers.saturating_sub(1);
        if state.subscribers == 0 {
            if hub.get(&self.shared.keys).is_some_and(|s| Arc::ptr_eq(s, &self.shared)) {
                hub.remove(&self.shared.keys);
            }
            if let Some(task) = self.shared.task.lock().take() {
                task.abort();
            }
        }
    }
}

/// `POST /v2/watch` and `/eventual/watch`.
pub(crate) async fn watch(
    State(edge): State<Arc<Edge>>,
    connection: Option<Extension<Arc<Connection>>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = watch_inner(&edge, connection.map(|c| c.0), &headers, body).await;
    record(&edge, "watch", result)
}

async fn watch_inner(
    edge: &Arc<Edge>,
    connection: Option<Arc<Connection>>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    let net = &edge.config.net;
    let checked = check_data_path(&net.access_token, &edge.database_id, headers);
    let (version, body) =
        checked_body(checked, headers, body, net.max_body_bytes, net.body_read_timeout).await?;
    if version < 3 {
        return Err(HttpError::bad("Watch needs protocol version 3."));
    }
    let request: proto::Watch = decode(&body)?;
    if request.keys.len() > MAX_WATCHED_KEYS {
        return Err(HttpError::bad(TOO_MANY_WATCHED_KEYS));
    }
    let mut keys = Vec::with_capacity(request.keys.len());
    for key in request.keys {
        if key.key.len() > MAX_READ_KEY_BYTES {
            return Err(HttpError::bad("A key exceeds the key size limit."));
        }
        stampkv_model::Key::decode(&key.key)
            .map_err(|e| HttpError::bad(format!("Invalid watch key: {e}.")))?;
        keys.push(key.key);
    }
    if edge.stopping.is_cancelled() {
        return Err(HttpError::unavailable());
    }
    let per_connection = match &connection {
        Some(c) => Some(c.try_add_watch(net.max_watches_per_connection).ok_or_else(|| HttpError {
            status: StatusCode::TOO_MANY_REQUESTS,
            text: format!(
                "Too many watch streams on one connection (max {}).",
                net.max_watches_per_connection
            ),
        })?),
        None => None,
    };
    if edge.open_watches.fetch_add(1, Ordering::SeqCst) >= net.max_watches {
        edge.open_watches.fetch_sub(1, Ordering::SeqCst);
        return Err(HttpError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            text: "Too many open watch streams.".into(),
        });
    }
    edge.metrics.client_watches.add(1);
    let subscription = Subscription::join(edge, keys);
    // A watch the upstream refuses is refused here too, with the upstream's answer.
    let mut answer = subscription.shared.upstream.subscribe();
    let settled = answer.wait_for(|a| !matches!(a, UpstreamAnswer::Waiting));
    if let Ok(Ok(settled)) = tokio::time::timeout(FIRST_ANSWER_WAIT, settled).await {
        if let UpstreamAnswer::Refused(e) = &*settled {
            return Err(e.clone());
        }
    }
    // The first frame and the receiver only now, together: a frame that came while waiting
    // is in the first frame and not sent again.
    let (first, receiver) = subscription.shared.subscribe();
    let keepalive = net.keepalive_interval;
    let stopping = edge.stopping.clone();
    let stream = futures_util::stream::unfold(
        (subscription, receiver, first, per_connection),
        move |(subscription, mut receiver, mut first, slot)| {
            let stopping = stopping.clone();
            async move {
                if let Some(frame) = first.take() {
                    return Some((Ok::<_, Infallible>(frame), (subscription, receiver, first, slot)));
                }
                let frame = tokio::select! {
                    () = stopping.cancelled() => return None,
                    received = receiver.recv() => match received {
                        Ok(frame) => frame,
                        // Fallen behind: the whole state says everything the skipped frames did.
                        Err(broadcast::error::RecvError::Lagged(_)) => {
                            subscription.shared.full_frame().unwrap_or_else(|| Bytes::from_static(&PING))
                        }
                        Err(broadcast::error::RecvError::Closed) => return None,
                    },
                    () = tokio::time::sleep(keepalive) => Bytes::from_static(&PING),
                };
                Some((Ok(frame), (subscription, receiver, first, slot)))
            }
        },
    );
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], Body::from_stream(stream)).into_response())
}
