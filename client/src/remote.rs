//! [`RemoteKv`]: the connection (metadata, endpoints, transport) and the raw calls, which
//! send and return KV Connect's protobuf messages as they are.

use crate::metadata::{check_scheme, Metadata, SUPPORTED_VERSIONS};
use crate::stats::{ClientStats, Kind};
use crate::transport::{data_headers, metadata_headers, Answer, Transport};
use crate::watch::RawWatchStream;
use crate::{ConnectOptions, RemoteError};
use bytes::Bytes;
use prost::Message;
use stampkv_kvconnect as proto;
use stampkv_model::Consistency;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Instant, SystemTime};
use url::Url;

/// A KV Connect database: a stampkv server, `denokv`, or any other server of the protocol.
///
/// Cheap to clone: every clone shares the connection pool, the metadata and the counters.
/// See the crate documentation for an example.
#[derive(Debug, Clone)]
pub struct RemoteKv {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    /// The metadata URL given to `connect`.
    url: Url,
    pub(crate) transport: Transport,
    state: RwLock<Arc<State>>,
    /// Held while a metadata exchange runs, so that concurrent calls wait for one.
    refreshing: tokio::sync::Mutex<()>,
}

/// The metadata in use, and how many exchanges replaced it before.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) metadata: Metadata,
    generation: u64,
}

/// Where a data path call goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Strong,
    Eventual,
}

impl RemoteKv {
    /// Connects to the KV Connect database at `url` (the metadata URL, e.g.
    /// `http://127.0.0.1:4512`): exchanges metadata, offering protocol versions 1, 2 and 3,
    /// and keeps the answer (database id, token, endpoints) for later calls.
    ///
    /// Only `http` URLs are supported: there is no TLS. A 4xx answer, an answer that is
    /// not valid metadata, a protocol version other than 1, 2 or 3 or metadata without a
    /// strong endpoint fail with [`RemoteError::Metadata`]; a 5xx or network error is
    /// retried as `options.retry` says, then fails with [`RemoteError::Unavailable`].
    pub async fn connect(url: &str, options: ConnectOptions) -> Result<RemoteKv, RemoteError> {
        let url = Url::parse(url).map_err(|e| RemoteError::Protocol(format!("invalid URL `{url}`: {e}")))?;
        check_scheme(&url)?;
        let transport = Transport::new(options);
        let metadata = exchange(&url, &transport).await?;
        let state = RwLock::new(Arc::new(State { metadata, generation: 0 }));
        Ok(RemoteKv {
            inner: Arc::new(Inner { url, transport, state, refreshing: tokio::sync::Mutex::new(()) }),
        })
    }

    /// Requests sent so far by this client and its clones.
    pub fn stats(&self) -> ClientStats {
        self.inner.transport.counters.snapshot()
    }

    /// The endpoints in use, as absolute URLs: the strong one (strong reads, atomic
    /// writes) and the eventual one if the metadata lists one (eventual reads, watches;
    /// without one they go to the strong endpoint), exactly as the `@deno/kv` client
    /// chooses.
    pub fn endpoints(&self) -> (String, Option<String>) {
        let state = self.state();
        (state.metadata.strong.clone(), state.metadata.eventual.clone())
    }

    /// The protocol version negotiated by the last metadata exchange (1, 2 or 3).
    pub fn protocol_version(&self) -> u8 {
        self.state().metadata.version
    }

    /// Sends a `SnapshotRead` as it is: to the strong endpoint for
    /// [`Consistency::Strong`], else to the eventual one.
    ///
    /// A strong read answered as not strongly consistent refreshes the metadata and is
    /// sent once more, then fails with [`RemoteError::NotStronglyConsistent`]. Reads
    /// disabled: [`RemoteError::ReadDisabled`]; any status but success:
    /// [`RemoteError::UnspecifiedRead`]. Entries are returned undecoded.
    pub async fn snapshot_read_raw(
        &self,
        request: &proto::SnapshotRead,
        consistency: Consistency,
    ) -> Result<proto::SnapshotReadOutput, RemoteError> {
        let route = match consistency {
            Consistency::Strong => Route::Strong,
            Consistency::Eventual => Route::Eventual,
        };
        let body = Bytes::from(request.encode_to_vec());
        let mut refreshed_for_consistency = false;
        loop {
            let (answer, generation) = self.call(Kind::SnapshotRead, route, body.clone(), false).await?;
            let output = decode::<proto::SnapshotReadOutput>(answer)?;
            if output.read_disabled || output.status == proto::SR_READ_DISABLED {
                return Err(RemoteError::ReadDisabled);
            }
            if output.status != proto::SR_SUCCESS {
                return Err(RemoteError::UnspecifiedRead(output.status));
            }
            if route == Route::Strong && !output.read_is_strongly_consistent {
                if refreshed_for_consistency {
                    return Err(RemoteError::NotStronglyConsistent);
                }
                refreshed_for_consistency = true;
                self.refresh(generation).await?;
                continue;
            }
            return Ok(output);
        }
    }

    /// Sends an `AtomicWrite` as it is, to the strong endpoint. A success or a check
    /// failure is returned as answered (a success's versionstamp checked to be 10 bytes);
    /// writes disabled: [`RemoteError::WriteDisabled`]; any other status:
    /// [`RemoteError::UnspecifiedWrite`].
    ///
    /// Like Deno's clients, a write whose answer was lost to a network error is sent
    /// again: if the first one was applied, it is applied twice (guard with a check when
    /// that matters).
    pub async fn atomic_write_raw(
        &self,
        request: &proto::AtomicWrite,
    ) -> Result<proto::AtomicWriteOutput, RemoteError> {
        let body = Bytes::from(request.encode_to_vec());
        let (answer, _) = self.call(Kind::AtomicWrite, Route::Strong, body, false).await?;
        let output = decode::<proto::AtomicWriteOutput>(answer)?;
        match output.status {
            proto::AW_SUCCESS if output.versionstamp.len() != 10 => Err(RemoteError::Decode(format!(
                "a commit's versionstamp must be 10 bytes, not {}",
                output.versionstamp.len()
            ))),
            proto::AW_SUCCESS | proto::AW_CHECK_FAILURE => Ok(output),
            proto::AW_WRITE_DISABLED => Err(RemoteError::WriteDisabled),
            other => Err(RemoteError::UnspecifiedWrite(other)),
        }
    }

    /// Opens a watch stream over encoded `keys` (protocol version 3 only), at the eventual
    /// endpoint (or the strong one without it). Keep-alive pings are skipped; each item is
    /// one `WatchOutput` frame as sent. The stream ends when the server closes it; a broken
    /// frame, or no bytes for `request_timeout`, ends it with an error.
    pub async fn watch_raw(&self, keys: Vec<Vec<u8>>) -> Result<RawWatchStream, RemoteError> {
        let version = self.current().await?.metadata.version;
        if version < 3 {
            return Err(RemoteError::Protocol(format!(
                "watch needs KV Connect protocol version 3; the server negotiated version {version}"
            )));
        }
        let request = proto::Watch { keys: keys.into_iter().map(|key| proto::WatchKey { key }).collect() };
        let body = Bytes::from(request.encode_to_vec());
        match self.call(Kind::Watch, Route::Eventual, body, true).await? {
            (Answer::Stream(response), _) => {
                Ok(RawWatchStream::new(response.into_body(), self.inner.transport.options.request_timeout))
            }
            (Answer::Body(bytes), _) => Ok(RawWatchStream::from_bytes(bytes)),
        }
    }

    fn state(&self) -> Arc<State> {
        self.inner.state.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The metadata to use now: the current one, or a fresh one once it is due.
    async fn current(&self) -> Result<Arc<State>, RemoteError> {
        let state = self.state();
        if Instant::now() < state.metadata.refresh_at {
            return Ok(state);
        }
        self.refresh(state.generation).await
    }

    /// Exchanges metadata again, unless another call already replaced generation `seen`.
    async fn refresh(&self, seen: u64) -> Result<Arc<State>, RemoteError> {
        let _one_at_a_time = self.inner.refreshing.lock().await;
        let state = self.state();
        if state.generation != seen {
            return Ok(state);
        }
        let metadata = exchange(&self.inner.url, &self.inner.transport).await?;
        let fresh = Arc::new(State { metadata, generation: seen + 1 });
        *self.inner.state.write().unwrap_or_else(PoisonError::into_inner) = fresh.clone();
        Ok(fresh)
    }

    /// One data path call. A 401, or a 400 `Invalid database id.` (a restarted server has
    /// a new id), refreshes the metadata and sends the call once more.
    async fn call(
        &self,
        kind: Kind,
        route: Route,
        body: Bytes,
        streaming: bool,
    ) -> Result<(Answer, u64), RemoteError> {
        let mut state = self.current().await?;
        let mut refreshed = false;
        loop {
            let metadata = &state.metadata;
            let base = match route {
                Route::Strong => metadata.strong.as_str(),
                Route::Eventual => metadata.eventual_or_strong(),
            };
            if route == Route::Eventual && metadata.eventual.is_some() {
                self.inner.transport.counters.eventual();
            }
            let url = format!("{base}/{}", kind.path());
            let headers = data_headers(metadata.version, &metadata.token, &metadata.database_id);
            match self.inner.transport.post(kind, &url, &headers, body.clone(), streaming).await {
                Err(RemoteError::Http { status, body: text })
                    if !refreshed
                        && (status == 401 || (status == 400 && text.trim() == "Invalid database id.")) =>
                {
                    refreshed = true;
                    state = self.refresh(state.generation).await?;
                }
                Err(e) => return Err(e),
                Ok(answer) => return Ok((answer, state.generation)),
            }
        }
    }
}

/// The metadata exchange: `POST <url>` with `{"supportedVersions":[1,2,3]}`.
async fn exchange(url: &Url, transport: &Transport) -> Result<Metadata, RemoteError> {
    let body = serde_json::json!({ "supportedVersions": SUPPORTED_VERSIONS }).to_string();
    let headers = metadata_headers(&transport.options.access_token);
    let answer = transport.post(Kind::Metadata, url.as_str(), &headers, Bytes::from(body), false).await;
    match answer {
        Ok(Answer::Body(body)) => Metadata::parse(&body, url, Instant::now(), SystemTime::now()),
        Ok(Answer::Stream(_)) => Err(RemoteError::Metadata("unexpected streamed answer".into())),
        Err(RemoteError::Http { status, body }) => {
            Err(RemoteError::Metadata(format!("{url} responded with status {status}: {}", body.trim())))
        }
        Err(e) => Err(e),
    }
}

fn decode<M: Message + Default>(answer: Answer) -> Result<M, RemoteError> {
    match answer {
        Answer::Body(bytes) => M::decode(bytes).map_err(|e| RemoteError::Decode(e.to_string())),
        Answer::Stream(_) => Err(RemoteError::Decode("unexpected streamed answer".into())),
    }
}
