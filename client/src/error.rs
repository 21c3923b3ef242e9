//! What a remote call can fail with. Every `Display` text is one line; texts Deno has for
//! the same failure are Deno's.

use stampkv_model::KvError;
use std::fmt;

/// Why a [`crate::RemoteKv`] call failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum RemoteError {
    /// The server answered with a 4xx status (final, not retried): its status and its
    /// plain-text body (e.g. `Failed to perform 'sum' mutation on a non-U64 value in the
    /// database`).
    Http {
        /// The HTTP status.
        status: u16,
        /// The answer's body.
        body: String,
    },
    /// The server kept answering 5xx, or could not be reached, for every attempt the
    /// [`crate::Retry`] policy allows.
    Unavailable {
        /// Requests sent.
        attempts: u32,
        /// The last failure (`status 503: ...`, `connection refused`, `timed out after 30s`).
        last: String,
    },
    /// An answer that is not what the protocol says (an undecodable protobuf body, a
    /// versionstamp that is not 10 bytes, a broken watch frame).
    Decode(String),
    /// The metadata exchange failed (the text says why).
    Metadata(String),
    /// Something this client cannot do with this server: an `https` URL (TLS is not
    /// supported), a watch with a protocol version below 3, ...
    Protocol(String),
    /// The server reported that reads are disabled for this database.
    ReadDisabled,
    /// The server reported that writes are disabled for this database.
    WriteDisabled,
    /// A strong read was answered with an eventually consistent one, even after a metadata
    /// refresh.
    NotStronglyConsistent,
    /// A read answered with a status that is neither success nor "read disabled".
    UnspecifiedRead(i32),
    /// An atomic write answered with a status that is neither success, check failure nor
    /// "write disabled".
    UnspecifiedWrite(i32),
    /// An entry whose value encoding is not 1, 2 or 3.
    UnknownEncoding(i32),
    /// A request refused before it was sent, with Deno's text: a key or value that
    /// cannot be encoded, a limit exceeded, a bad list selector or cursor, a value that
    /// cannot be read as the type asked for.
    Invalid(KvError),
}

impl From<KvError> for RemoteError {
    fn from(e: KvError) -> Self {
        RemoteError::Invalid(e)
    }
}

impl From<stampkv_model::KeyError> for RemoteError {
    fn from(e: stampkv_model::KeyError) -> Self {
        RemoteError::Invalid(KvError::Key(e))
    }
}

/// `text` on one line: line breaks become spaces, surrounding blanks go.
pub(crate) fn one_line(text: &str) -> String {
    text.trim().replace(['\r', '\n'], " ")
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoteError::Http { status, body } => {
                write!(f, "KV Connect request failed (status={status}): {}", one_line(body))
            }
            RemoteError::Unavailable { attempts, last } => {
                write!(f, "KV Connect server unavailable after {attempts} attempts: {}", one_line(last))
            }
            RemoteError::Decode(what) => {
                write!(f, "KV Connect failed to decode response: {}", one_line(what))
            }
            RemoteError::Metadata(what) => {
                write!(f, "KV Connect metadata exchange failed: {}", one_line(what))
            }
            RemoteError::Protocol(what) => f.write_str(&one_line(what)),
            RemoteError::ReadDisabled => f.write_str("Reads are disabled for this database"),
            RemoteError::WriteDisabled => f.write_str("Writes are disabled for this database"),
            RemoteError::NotStronglyConsistent => {
                f.write_str("Strong consistency reads are not available for this database")
            }
            RemoteError::UnspecifiedRead(code) => write!(f, "Unspecified read error (code={code})"),
            RemoteError::UnspecifiedWrite(code) => write!(f, "Unspecified write error (code={code})"),
            RemoteError::UnknownEncoding(n) => write!(f, "Unknown encoding {n}"),
            RemoteError::Invalid(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RemoteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RemoteError::Invalid(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_one_line() {
        let e = RemoteError::Http { status: 400, body: "first\nsecond\n".into() };
        assert_eq!(e.to_string(), "KV Connect request failed (status=400): first second");
        assert_eq!(
            RemoteError::NotStronglyConsistent.to_string(),
            "Strong consistency reads are not available for this database"
        );
        assert_eq!(RemoteError::UnknownEncoding(7).to_string(), "Unknown encoding 7");
        assert_eq!(
            RemoteError::from(KvError::TooManyRanges { max: 10 }).to_string(),
            "Too many ranges (max 10)"
        );
    }
}
