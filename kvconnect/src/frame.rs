//! The framing of a `watch` response body: a sequence of frames, each a `u32`
//! little-endian length followed by that many bytes of an encoded [`WatchOutput`]. A frame
//! of length 0 is a keep-alive ping and carries no message.
//!
//! ```
//! use stampkv_kvconnect::frame::{encode_frame, FrameDecoder, PING};
//! use stampkv_kvconnect::{WatchOutput, SR_SUCCESS};
//!
//! let output = WatchOutput { status: SR_SUCCESS, keys: vec![] };
//! let mut decoder = FrameDecoder::new();
//! decoder.push(&PING);
//! decoder.push(&encode_frame(&output));
//! assert_eq!(decoder.pop(), Some(Ok(None))); // the ping
//! assert_eq!(decoder.pop(), Some(Ok(Some(output))));
//! assert_eq!(decoder.pop(), None); // nothing more buffered
//! ```

use crate::WatchOutput;
use prost::Message;
use std::fmt;

/// A keep-alive frame: length 0, no message.
pub const PING: [u8; 4] = [0; 4];

/// The largest frame a [`FrameDecoder`] accepts: 64 MiB. A watch covers at most 10 keys of
/// at most 64 KiB values, so a real frame is below 1 MiB; a larger length means the
/// stream is not a watch stream.
pub const MAX_FRAME_BYTES: usize = 64 << 20;

/// Encodes one frame: the message's length (`u32` little-endian) and the message.
///
/// A message is at most a few hundred KiB (10 keys with their values), far below the
/// `u32` range the length field has.
pub fn encode_frame(output: &WatchOutput) -> Vec<u8> {
    let length = output.encoded_len();
    let mut frame = Vec::with_capacity(4 + length);
    frame.extend_from_slice(&u32::try_from(length).unwrap_or(u32::MAX).to_le_bytes());
    output.encode_raw(&mut frame);
    frame
}

/// Why a watch stream could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// A frame announces more than [`MAX_FRAME_BYTES`].
    TooLarge {
        /// The announced length.
        length: usize,
    },
    /// A frame's bytes are not a valid `WatchOutput` (prost's reason).
    Malformed(String),
    /// The stream ended inside a frame.
    Truncated {
        /// Bytes of the unfinished frame received (length field included).
        buffered: usize,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::TooLarge { length } => {
                write!(f, "watch frame of {length} bytes is larger than the limit of {MAX_FRAME_BYTES} bytes")
            }
            FrameError::Malformed(reason) => write!(f, "watch frame is not a valid WatchOutput: {reason}"),
            FrameError::Truncated { buffered } => {
                write!(f, "watch stream ended inside a frame ({buffered} bytes of it received)")
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// Splits a watch stream, received in pieces of any size, into frames.
///
/// [`FrameDecoder::push`] the bytes as they arrive, then [`FrameDecoder::pop`] until it
/// returns `None`. After an error the stream is unusable: every later `pop` returns the
/// same error.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buffer: Vec<u8>,
    /// Offset of the first byte not yet consumed.
    start: usize,
    failed: Option<FrameError>,
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> FrameDecoder {
        FrameDecoder::default()
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start >= self.buffer.len() / 2 {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        self.buffer.extend_from_slice(bytes);
    }

    /// Bytes received but not yet returned as a frame.
    pub fn buffered(&self) -> usize {
        self.buffer.len() - self.start
    }

    /// The next complete frame: `Some(Ok(Some(output)))` for a message, `Some(Ok(None))`
    /// for a ping, `None` when no complete frame is buffered.
    pub fn pop(&mut self) -> Option<Result<Option<WatchOutput>, FrameError>> {
        if let Some(error) = &self.failed {
            return Some(Err(error.clone()));
        }
        let pending = self.buffer.get(self.start..)?;
        let header: [u8; 4] = pending.get(..4)?.try_into().ok()?;
        let length = usize::try_from(u32::from_le_bytes(header)).unwrap_or(usize::MAX);
        if length > MAX_FRAME_BYTES {
            return Some(Err(self.fail(FrameError::TooLarge { length })));
        }
        let body = pending.get(4..4 + length)?;
        if length == 0 {
            self.start += 4;
            return Some(Ok(None));
        }
        let decoded = WatchOutput::decode(body);
        self.start += 4 + length;
        match decoded {
            Ok(output) => Some(Ok(Some(output))),
            Err(e) => Some(Err(self.fail(FrameError::Malformed(e.to_string())))),
        }
    }

    /// Checks the end of the stream: an error if it stopped inside a frame.
    pub fn finish(&self) -> Result<(), FrameError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        match self.buffered() {
            0 => Ok(()),
            buffered => Err(FrameError::Truncated { buffered }),
        }
    }

    fn fail(&mut self, error: FrameError) -> FrameError {
        self.failed = Some(error.clone());
        error
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        reason = "test code: a panic is a failed test"
    )]

    use super::*;
    use crate::{KvEntry, WatchKeyOutput, SR_SUCCESS, VE_V8};

    fn sample(n: u8) -> WatchOutput {
        WatchOutput {
            status: SR_SUCCESS,
            keys: vec![
                WatchKeyOutput {
                    changed: true,
                    entry_if_changed: Some(KvEntry {
                        key: vec![2, b'k', n, 0],
                        value: vec![0xff, 0x0f, 0x49, n],
                        encoding: VE_V8,
                        versionstamp: vec![0, 0, 0, 0, 0, 0, 0, n, 0, 0],
                    }),
                },
                WatchKeyOutput { changed: true, entry_if_changed: None },
            ],
        }
    }

    fn drain(decoder: &mut FrameDecoder) -> Vec<Option<WatchOutput>> {
        let mut out = Vec::new();
        while let Some(frame) = decoder.pop() {
            out.push(frame.unwrap());
        }
        out
    }

    #[test]
    fn frame_bytes_are_length_then_message() {
        let output = WatchOutput {
            status: SR_SUCCESS,
            keys: vec![WatchKeyOutput { changed: true, entry_if_changed: None }],
        };
        assert_eq!(encode_frame(&output), [6, 0, 0, 0, 0x08, 0x01, 0x12, 0x02, 0x08, 0x01]);
        assert_eq!(PING, [0, 0, 0, 0]);
    }

    #[test]
    fn decodes_frames_and_pings_in_one_push() {
        let mut stream = Vec::new();
        stream.extend_from_slice(&encode_frame(&sample(1)));
        stream.extend_from_slice(&PING);
        stream.extend_from_slice(&encode_frame(&sample(2)));
        let mut decoder = FrameDecoder::new();
        decoder.push(&stream);
        assert_eq!(drain(&mut decoder), vec![Some(sample(1)), None, Some(sample(2))]);
        assert_eq!(decoder.buffered(), 0);
        assert_eq!(decoder.finish(), Ok(()));
    }

    #[test]
    fn decodes_the_same_frames_for_every_split() {
        let mut stream = Vec::new();
        for n in 0..4 {
            stream.extend_from_slice(&encode_frame(&sample(n)));
            stream.extend_from_slice(&PING);
        }
        let expected: Vec<_> = (0..4).flat_map(|n| [Some(sample(n)), None]).collect();
        // Every piece size, including one byte at a time.
        for piece in 1..=stream.len() {
            let mut decoder = FrameDecoder::new();
            let mut got = Vec::new();
            for chunk in stream.chunks(piece) {
                decoder.push(chunk);
                got.extend(drain(&mut decoder));
            }
            assert_eq!(got, expected, "pieces of {piece} bytes");
            assert_eq!(decoder.finish(), Ok(()));
        }
        // Split at every single position into two pieces.
        for at in 0..=stream.len() {
            let mut decoder = FrameDecoder::new();
            decoder.push(&stream[..at]);
            let mut got = drain(&mut decoder);
            decoder.push(&stream[at..]);
            got.extend(drain(&mut decoder));
            assert_eq!(got, expected, "split at {at}");
        }
    }

    #[test]
    fn a_partial_frame_waits_and_is_reported_at_the_end() {
        let frame = encode_frame(&sample(7));
        let mut decoder = FrameDecoder::new();
        decoder.push(&frame[..frame.len() - 1]);
        assert_eq!(decoder.pop(), None);
        assert_eq!(decoder.finish(), Err(FrameError::Truncated { buffered: frame.len() - 1 }));
        decoder.push(&frame[frame.len() - 1..]);
        assert_eq!(decoder.pop(), Some(Ok(Some(sample(7)))));
        assert_eq!(decoder.finish(), Ok(()));
    }

    #[test]
    fn refuses_frames_over_the_limit_without_waiting_for_them() {
        let mut decoder = FrameDecoder::new();
        let length = u32::try_from(MAX_FRAME_BYTES + 1).unwrap();
        decoder.push(&length.to_le_bytes());
        let error = FrameError::TooLarge { length: MAX_FRAME_BYTES + 1 };
        assert_eq!(decoder.pop(), Some(Err(error.clone())));
        // The decoder stays failed.
        decoder.push(&PING);
        assert_eq!(decoder.pop(), Some(Err(error.clone())));
        assert_eq!(decoder.finish(), Err(error));
        // Exactly the limit is accepted (and waited for).
        let mut decoder = FrameDecoder::new();
        decoder.push(&u32::try_from(MAX_FRAME_BYTES).unwrap().to_le_bytes());
        assert_eq!(decoder.pop(), None);
    }

    #[test]
    fn a_frame_that_is_not_a_message_is_an_error() {
        let mut decoder = FrameDecoder::new();
        // Field 2 (keys) as a length-delimited field claiming 5 bytes but holding 1.
        decoder.push(&[3, 0, 0, 0, 0x12, 0x05, 0x08]);
        match decoder.pop() {
            Some(Err(FrameError::Malformed(reason))) => assert!(!reason.is_empty()),
            other => panic!("expected a malformed frame, got {other:?}"),
        }
        let text = decoder.finish().unwrap_err().to_string();
        assert!(text.starts_with("watch frame is not a valid WatchOutput: "), "{text}");
    }
}
