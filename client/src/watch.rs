//! Watch streams: [`RawWatchStream`] (frames as sent, pings skipped) and the typed
//! [`WatchStream`] (the watched entries whenever one of them changes).

use crate::convert::entry_from_proto;
use crate::RemoteError;
use bytes::Bytes;
use futures_util::stream::{BoxStream, Stream, StreamExt};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use stampkv_kvconnect as proto;
use stampkv_kvconnect::frame::FrameDecoder;
use stampkv_model::{Key, KvEntryMaybe, KvValue, Versionstamp};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// The frames of a watch stream: one `WatchOutput` per item, keep-alive pings skipped. See
/// [`crate::RemoteKv::watch_raw`].
pub struct RawWatchStream {
    inner: BoxStream<'static, Result<proto::WatchOutput, RemoteError>>,
}

impl std::fmt::Debug for RawWatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RawWatchStream")
    }
}

/// What the stream reads from.
enum Source {
    Body(Incoming),
    Done,
}

struct Reader {
    source: Source,
    decoder: FrameDecoder,
    idle_timeout: Duration,
}

impl Reader {
    /// The next message frame; `None` at the end of the stream.
    async fn next(&mut self) -> Option<Result<proto::WatchOutput, RemoteError>> {
        loop {
            while let Some(frame) = self.decoder.pop() {
                match frame {
                    Ok(None) => continue,
                    Ok(Some(output)) => return Some(self.check(output)),
                    Err(e) => return Some(Err(self.fail(RemoteError::Decode(e.to_string())))),
                }
            }
            let Source::Body(body) = &mut self.source else {
                return None;
            };
            match tokio::time::timeout(self.idle_timeout, body.frame()).await {
                Err(_) => {
                    let idle = self.idle_timeout;
                    let last = format!("the watch stream sent nothing for {idle:?}");
                    return Some(Err(self.fail(RemoteError::Unavailable { attempts: 1, last })));
                }
                Ok(None) => {
                    self.source = Source::Done;
                    let end = self.decoder.finish().map_err(|e| RemoteError::Decode(e.to_string()));
                    return end.err().map(Err);
                }
                Ok(Some(Err(e))) => {
                    let last = format!("the watch stream broke: {e}");
                    return Some(Err(self.fail(RemoteError::Unavailable { attempts: 1, last })));
                }
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.decoder.push(&data);
                    }
                }
            }
        }
    }

    /// A frame's status, as Deno checks it.
    fn check(&mut self, output: proto::WatchOutput) -> Result<proto::WatchOutput, RemoteError> {
        match output.status {
            proto::SR_SUCCESS => Ok(output),
            proto::SR_READ_DISABLED => Err(self.fail(RemoteError::ReadDisabled)),
            other => Err(self.fail(RemoteError::UnspecifiedRead(other))),
        }
    }

    /// Ends the stream after `error`.
    fn fail(&mut self, error: RemoteError) -> RemoteError {
        self.source = Source::Done;
        self.decoder = FrameDecoder::new();
        error
    }
}

impl RawWatchStream {
    pub(crate) fn new(body: Incoming, idle_timeout: Duration) -> RawWatchStream {
        RawWatchStream::from_reader(Reader {
            source: Source::Body(body),
            decoder: FrameDecoder::new(),
            idle_timeout,
        })
    }

    /// A stream over a body already read whole.
    pub(crate) fn from_bytes(bytes: Bytes) -> RawWatchStream {
        let mut decoder = FrameDecoder::new();
        decoder.push(&bytes);
        RawWatchStream::from_reader(Reader { source: Source::Done, decoder, idle_timeout: Duration::ZERO })
    }

    fn from_reader(reader: Reader) -> RawWatchStream {
        let inner = futures_util::stream::unfold(reader, |mut reader| async move {
            reader.next().await.map(|item| (item, reader))
        });
        RawWatchStream { inner: inner.boxed() }
    }
}

impl Stream for RawWatchStream {
    type Item = Result<proto::WatchOutput, RemoteError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// The entries of watched keys, in the order the keys were given: the current state
/// first, then again whenever a commit changes the versionstamp of one of them (Deno's
/// non-raw watch). See [`crate::RemoteKv::watch`].
pub struct WatchStream {
    inner: BoxStream<'static, Result<Vec<KvEntryMaybe<KvValue>>, RemoteError>>,
}

impl std::fmt::Debug for WatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WatchStream")
    }
}

/// The typed stream's state: the entries as last known, and the versionstamps last
/// delivered.
struct Entries {
    raw: RawWatchStream,
    current: Vec<KvEntryMaybe<KvValue>>,
    delivered: Option<Vec<Option<Versionstamp>>>,
    failed: bool,
}

impl Entries {
    async fn next(&mut self) -> Option<Result<Vec<KvEntryMaybe<KvValue>>, RemoteError>> {
        if self.failed {
            return None;
        }
        loop {
            let output = match self.raw.next().await? {
                Ok(output) => output,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            };
            if let Err(e) = self.apply(output) {
                self.failed = true;
                return Some(Err(e));
            }
            let stamps: Vec<Option<Versionstamp>> = self.current.iter().map(|e| e.versionstamp).collect();
            if self.delivered.as_ref() != Some(&stamps) {
                self.delivered = Some(stamps);
                return Some(Ok(self.current.clone()));
            }
        }
    }

    fn apply(&mut self, output: proto::WatchOutput) -> Result<(), RemoteError> {
        if output.keys.len() != self.current.len() {
            return Err(RemoteError::Decode(format!(
                "a watch frame has {} keys, {} were watched",
                output.keys.len(),
                self.current.len()
            )));
        }
        for (slot, change) in self.current.iter_mut().zip(output.keys) {
            if !change.changed {
                continue;
            }
            match change.entry_if_changed {
                Some(entry) => {
                    let (_, value, versionstamp) = entry_from_proto(entry)?;
                    slot.value = Some(value);
                    slot.versionstamp = Some(versionstamp);
                }
                None => {
                    slot.value = None;
                    slot.versionstamp = None;
                }
            }
        }
        Ok(())
    }
}

impl WatchStream {
    pub(crate) fn new(raw: RawWatchStream, keys: &[Key]) -> WatchStream {
        let current = keys
            .iter()
            .map(|key| KvEntryMaybe { key: key.clone(), value: None, versionstamp: None })
            .collect();
        let state = Entries { raw, current, delivered: None, failed: false };
        let inner = futures_util::stream::unfold(state, |mut state| async move {
            state.next().await.map(|item| (item, state))
        });
        WatchStream { inner: inner.boxed() }
    }
}

impl Stream for WatchStream {
    type Item = Result<Vec<KvEntryMaybe<KvValue>>, RemoteError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}
