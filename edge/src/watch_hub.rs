//! The watch registry: every client watching the same keys at this edge shares one
//! upstream watch stream.
//!
//! A shared watch keeps the latest state of its keys. A client joining late first gets that
//! state as one frame with every key marked changed (what a new watch stream starts with),
//! then the changes as they come. Frames are recomputed against the kept state, so a
//! reconnect upstream (whose first frame repeats every key) wakes no client unless
//! something changed meanwhile. Changes also update this edge's cache.

use crate::metrics::EdgeMetrics;
use crate::store::Store;
use crate::upstream::upstream_error;
use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use futures_util::StreamExt;
use parking_lot::Mutex;
use stampkv_client::{RemoteError, RemoteKv};
use stampkv_kvconnect as proto;
use stampkv_kvconnect::frame::{encode_frame, PING};
use stampkv_kvconnect::http::{ConnectionWatchSlot, HttpError};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

/// Frames a slow client may fall behind before it is sent the whole state instead.
const FRAME_BACKLOG: usize = 64;

/// The watch streams' limits and timing, from the configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WatchLimits {
    /// Most client watch streams open at once.
    pub(crate) max_watches: usize,
    /// How long a stream stays silent before a ping is sent.
    pub(crate) keepalive: Duration,
}

/// The shared watches, by their list of encoded keys, and what following them upstream
/// needs.
#[derive(Debug)]
pub(crate) struct WatchHub {
    shared: Mutex<HashMap<Vec<Vec<u8>>, Arc<SharedWatch>>>,
    /// Client watch streams open now.
    open: AtomicUsize,
    limits: WatchLimits,
    /// Where watched changes update the cache.
    store: Arc<Store>,
    upstream: RemoteKv,
    /// The upstream's URL, named in errors.
    upstream_url: String,
    metrics: Arc<EdgeMetrics>,
    /// Cancelled once shutdown began: every stream ends.
    stopping: CancellationToken,
}

impl WatchHub {
    /// A registry following watches on `upstream` (at `upstream_url`), applying their changes
    /// to `store`, counting in `metrics`; its streams end when `stopping` is cancelled.
    pub(crate) fn new(
        limits: WatchLimits,
        store: Arc<Store>,
        upstream: RemoteKv,
        upstream_url: String,
        metrics: Arc<EdgeMetrics>,
        stopping: CancellationToken,
    ) -> WatchHub {
        WatchHub {
            shared: Mutex::new(HashMap::new()),
            open: AtomicUsize::new(0),
            limits,
            store,
            upstream,
            upstream_url,
            metrics,
            stopping,
        }
    }

    /// How many upstream watches are shared now.
    pub(crate) fn len(&self) -> usize {
        self.shared.lock().len()
    }

    /// Whether shutdown began: no new stream is opened.
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.is_cancelled()
    }

    /// Opens a client's watch stream of encoded `keys` (checked by the caller), holding
    /// `per_connection` (its place among its connection's watches) for as long as it runs:
    /// joins the shared watch of those keys, waits up to [`FIRST_ANSWER_WAIT`] for the
    /// upstream's first answer (a refusal is this stream's refusal too), then streams the
    /// kept state and every change, with pings while nothing changes.
    pub(crate) async fn open(
        self: &Arc<Self>,
        keys: Vec<Vec<u8>>,
        per_connection: Option<ConnectionWatchSlot>,
    ) -> Result<Body, HttpError> {
        if self.open.fetch_add(1, Ordering::SeqCst) >= self.limits.max_watches {
            self.open.fetch_sub(1, Ordering::SeqCst);
            return Err(HttpError {
                status: StatusCode::SERVICE_UNAVAILABLE,
                text: "Too many open watch streams.".into(),
            });
        }
        self.metrics.client_watches.add(1);
        let subscription = Subscription::join(self, keys);
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
        let keepalive = self.limits.keepalive;
        let stopping = self.stopping.clone();
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
        Ok(Body::from_stream(stream))
    }
}

/// One upstream watch and what its clients share.
#[derive(Debug)]
struct SharedWatch {
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

/// What a shared watch keeps under its lock.
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
    fn take_in(&self, store: &Store, output: proto::WatchOutput) {
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
                store.apply_change(key, update.entry_if_changed.clone(), false);
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
async fn follow_upstream(hub: Arc<WatchHub>, shared: Arc<SharedWatch>) {
    let mut delay = Duration::from_millis(100);
    loop {
        match hub.upstream.watch_raw(shared.keys.clone()).await {
            Ok(mut stream) => {
                hub.metrics.upstream_watches.add(1);
                while let Some(Ok(output)) = stream.next().await {
                    delay = Duration::from_millis(100);
                    shared.take_in(&hub.store, output);
                }
            }
            // A refusal is final: the clients get it, and the next client starts afresh.
            Err(e @ RemoteError::Http { .. }) => {
                shared.upstream.send_replace(UpstreamAnswer::Refused(upstream_error(&hub.upstream_url, &e)));
                let mut shared_watches = hub.shared.lock();
                if shared_watches.get(&shared.keys).is_some_and(|s| Arc::ptr_eq(s, &shared)) {
                    shared_watches.remove(&shared.keys);
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
    hub: Arc<WatchHub>,
    shared: Arc<SharedWatch>,
}

impl Subscription {
    /// Joins the shared watch of `keys`, starting it (and its upstream watch) if there is none.
    fn join(hub: &Arc<WatchHub>, keys: Vec<Vec<u8>>) -> Subscription {
        let mut shared_watches = hub.shared.lock();
        let shared = shared_watches
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
                let task = tokio::spawn(follow_upstream(hub.clone(), shared.clone()));
                *shared.task.lock() = Some(task.abort_handle());
                shared
            })
            .clone();
        shared.state.lock().subscribers += 1;
        Subscription { hub: hub.clone(), shared }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.hub.open.fetch_sub(1, Ordering::SeqCst);
        let mut shared_watches = self.hub.shared.lock();
        let mut state = self.shared.state.lock();
        state.subscribers = state.subscribers.saturating_sub(1);
        if state.subscribers == 0 {
            if shared_watches.get(&self.shared.keys).is_some_and(|s| Arc::ptr_eq(s, &self.shared)) {
                shared_watches.remove(&self.shared.keys);
            }
            if let Some(task) = self.shared.task.lock().take() {
                task.abort();
            }
        }
    }
}
