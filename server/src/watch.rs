//! `watch` (protocol 3): a length-prefixed stream of changes, with keep-alive pings, one
//! thread per stream, ended when the client goes away or the server stops.

use crate::errors::{bad, blocking, kv_error, unavailable, HttpError};
use crate::log::log;
use crate::proto;
use crate::read::entry_proto;
use crate::request::{data_path, decode, read_body, record};
use crate::service::Server;
use crate::write::decode_key;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use stampkv::remote::RawEntry;
use stampkv::Versionstamp;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Decrements the open watch count when a stream ends.
struct WatchSlot(Arc<Server>);

impl Drop for WatchSlot {
    fn drop(&mut self) {
        self.0.open_watches.fetch_sub(1, Ordering::SeqCst);
    }
}

pub(crate) async fn watch(State(server): State<Arc<Server>>, headers: HeaderMap, body: Body) -> Response {
    let result = watch_inner(&server, &headers, body).await;
    record(&server, "watch", result)
}

async fn watch_inner(server: &Arc<Server>, headers: &HeaderMap, body: Body) -> Result<Response, HttpError> {
    if data_path(server, headers)? < 3 {
        return Err(bad("Watch needs protocol version 3."));
    }
    let request: proto::Watch = decode(&read_body(server, body).await?)?;
    let raw: Vec<Vec<u8>> = request.keys.into_iter().map(|k| k.key).collect();
    let keys = raw.iter().map(|k| decode_key(k, "watch")).collect::<Result<Vec<_>, _>>()?;
    if server.shutting_down.load(Ordering::SeqCst) {
        return Err(unavailable());
    }
    if server.open_watches.fetch_add(1, Ordering::SeqCst) >= server.config.max_watches {
        server.open_watches.fetch_sub(1, Ordering::SeqCst);
        return Err(HttpError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            text: "Too many open watch streams.".into(),
        });
    }
    let slot = WatchSlot(server.clone());
    let kv = server.kv.clone();
    let watch = blocking(move || kv.watch(&keys).map_err(kv_error)).await?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    let spawned = std::thread::Builder::new()
        .name("stampkv-watch".into())
        .stack_size(256 << 10)
        .spawn(move || watch_loop(slot, watch, raw, tx));
    if spawned.is_err() {
        return Err(unavailable());
    }
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|frame| (Ok::<_, Infallible>(frame), rx))
    });
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], Body::from_stream(stream)).into_response())
}

/// Runs one watch stream on its own thread until the client goes away or the server stops.
fn watch_loop(
    slot: WatchSlot,
    mut watch: stampkv::Watch,
    raw: Vec<Vec<u8>>,
    tx: tokio::sync::mpsc::Sender<Bytes>,
) {
    let server = &slot.0;
    let mut last: Option<Vec<Option<Versionstamp>>> = None;
    let mut last_sent = Instant::now();
    while !server.shutting_down.load(Ordering::SeqCst) && !tx.is_closed() {
        let frame = match watch.next_timeout(Duration::from_millis(200)) {
            None if last_sent.elapsed() >= server.config.keepalive_interval => {
                Bytes::from_static(&proto::frame::PING)
            }
            None => continue,
            Some(Err(e)) => {
                log("warn", "watch ended", &format!("error={:?}", e.to_string()));
                break;
            }
            Some(Ok(entries)) => {
                let stamps: Vec<Option<Versionstamp>> = entries.iter().map(|e| e.versionstamp).collect();
                let keys = entries
                    .into_iter()
                    .zip(&raw)
                    .enumerate()
                    .map(|(i, (entry, key))| {
                        let changed = last.as_ref().and_then(|l| l.get(i)) != Some(&entry.versionstamp);
                        let entry_if_changed = match (changed, entry.value, entry.versionstamp) {
                            (true, Some(value), Some(versionstamp)) => {
                                Some(entry_proto(RawEntry { key: key.clone(), value, versionstamp }))
                            }
                            _ => None,
                        };
                        proto::WatchKeyOutput { changed, entry_if_changed }
                    })
                    .collect();
                last = Some(stamps);
                let output = proto::WatchOutput { status: proto::SR_SUCCESS, keys };
                Bytes::from(proto::frame::encode_frame(&output))
            }
        };
        if tx.blocking_send(frame).is_err() {
            break;
        }
        last_sent = Instant::now();
    }
}
