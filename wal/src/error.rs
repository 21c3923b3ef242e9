//! The error type of the crate.

use std::fmt;
use std::io;

/// Errors of the log.
#[derive(Debug)]
pub enum WalError {
    /// Damage in the log that is not a torn tail.
    Corruption {
        /// Segment file (as given in [`crate::SegmentInfo::name`]).
        file: String,
        /// Byte offset of the damaged chunk within the segment.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// Unknown format version / checksum kind in a segment header (the
    /// `version` field holds the format version found in the header).
    Unsupported {
        /// Segment file (as given in [`crate::SegmentInfo::name`]).
        file: String,
        /// Format version found in the segment header.
        version: u32,
    },
    /// An I/O error.
    Io(io::Error),
    /// A previous write or sync failed; the log refuses further work.
    Poisoned,
    /// A payload larger than the maximum record size ([`crate::MAX_RECORD_SIZE`]).
    RecordTooLarge {
        /// Length of the rejected payload.
        len: usize,
    },
    /// The record does not fit in the current segment, which must stay below
    /// [`crate::MAX_SEGMENT_SIZE`] bytes; rotate to a new segment.
    SegmentFull {
        /// Offset in the segment where the record would have started.
        offset: u64,
        /// Length of the rejected payload.
        len: usize,
    },
    /// The segment or log was already sealed / closed.
    Closed,
}

impl fmt::Display for WalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WalError::Corruption { file, offset, reason } => {
                write!(f, "log corruption in {file} at offset {offset}: {reason}")
            }
            WalError::Unsupported { file, version } => {
                write!(f, "unsupported log segment format in {file} (format version {version})")
            }
            WalError::Io(e) => write!(f, "log I/O error: {e}"),
            WalError::Poisoned => f.write_str("log is poisoned by an earlier failed write or sync"),
            WalError::RecordTooLarge { len } => {
                write!(f, "log record of {len} bytes exceeds the maximum of {} bytes", crate::MAX_RECORD_SIZE)
            }
            WalError::SegmentFull { offset, len } => {
                write!(f, "log record of {len} bytes at offset {offset} does not fit in the segment")
            }
            WalError::Closed => f.write_str("log segment is already sealed or closed"),
        }
    }
}

impl std::error::Error for WalError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WalError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for WalError {
    fn from(e: io::Error) -> Self {
        WalError::Io(e)
    }
}
