//! What a list reads: selectors, options, the byte range they resolve to, and cursors.
//!
//! Ranges, validation rules, error texts and the cursor format are Deno's:
//!
//! | selector | scanned range (start inclusive, end exclusive) |
//! |---|---|
//! | prefix `p` | `p ++ 00` .. `p ++ FF` |
//! | prefix `p`, start `s` | `s` .. `p ++ FF` (`s` must extend `p`) |
//! | prefix `p`, end `e` | `p ++ 00` .. `e` (`e` must extend `p`) |
//! | start `s`, end `e` | `s` .. `e` |
//!
//! A cursor is the URL-safe, padded base64 of an entry's encoded key without the selector's
//! common prefix (the prefix, or the longest common prefix of start and end). Resuming
//! forward scans from just after the cursor key; resuming in reverse scans up to it.

use crate::{Key, KvError};
use base64::engine::general_purpose::URL_SAFE;
use base64::Engine as _;

/// What to list: a prefix, optionally bounded by a start or an end, or a start and an end.
/// Other combinations are refused with Deno's messages when listing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector {
    /// Keys that extend this prefix (never the prefix itself).
    pub prefix: Option<Key>,
    /// First key (inclusive).
    pub start: Option<Key>,
    /// End key (exclusive).
    pub end: Option<Key>,
}

impl Selector {
    /// Every key extending `prefix` (`key![]` lists everything).
    pub fn prefix(prefix: Key) -> Self {
        Selector { prefix: Some(prefix), ..Selector::default() }
    }

    /// Keys from `start` (inclusive) to `end` (exclusive).
    pub fn range(start: Key, end: Key) -> Self {
        Selector { prefix: None, start: Some(start), end: Some(end) }
    }

    /// Adds a start key (inclusive).
    pub fn with_start(mut self, start: Key) -> Self {
        self.start = Some(start);
        self
    }

    /// Adds an end key (exclusive).
    pub fn with_end(mut self, end: Key) -> Self {
        self.end = Some(end);
        self
    }
}

/// Read consistency. On one node both are strong; a replicated store serves `Eventual`
/// from the nearest replica, which may lag behind the latest commits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Consistency {
    /// See every commit acknowledged before the read started.
    #[default]
    Strong,
    /// May miss the latest commits where the store has a cheaper such read; else `Strong`.
    Eventual,
}

/// Options of a list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// Yield at most this many entries (must be positive).
    pub limit: Option<usize>,
    /// Descending key order.
    pub reverse: bool,
    /// Resume after (or, in reverse, before) the entry this cursor names; `""` = none.
    pub cursor: Option<String>,
    /// Entries per batch (at most `max_read_entries`, 1000). One snapshot serves every
    /// batch, so this only bounds how much is read ahead.
    pub batch_size: Option<usize>,
    /// Consistency (see [`Consistency`]).
    pub consistency: Consistency,
}

/// The byte range a selector and cursor resolve to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedRange {
    /// First key of the range (inclusive).
    pub start: Vec<u8>,
    /// End of the range (exclusive).
    pub end: Vec<u8>,
    /// The bytes every key of the range starts with that a cursor leaves out.
    pub common_prefix: Vec<u8>,
}

fn key_in_prefix(key: &[u8], prefix: &[u8]) -> bool {
    key.len() > prefix.len() && key.starts_with(prefix)
}

fn with_byte(bytes: &[u8], byte: u8) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out.push(byte);
    out
}

/// Validates a selector and computes its range (before any cursor).
#[allow(clippy::indexing_slicing, reason = "`common` is at most the length of `start`")]
pub fn resolve_selector(selector: &Selector) -> Result<ResolvedRange, KvError> {
    let encode = |key: &Option<Key>| key.as_ref().map(Key::encode).transpose();
    let (prefix, start, end) = (encode(&selector.prefix)?, encode(&selector.start)?, encode(&selector.end)?);
    match (prefix, start, end) {
        (Some(_), Some(_), Some(_)) => Err(KvError::InvalidList(
            "Selector can not specify both 'start' and 'end' key when specifying 'prefix'",
        )),
        (Some(prefix), start, end) => {
            if start.as_ref().is_some_and(|s| !key_in_prefix(s, &prefix)) {
                return Err(KvError::InvalidList("Start key is not in the keyspace defined by prefix"));
            }
            if end.as_ref().is_some_and(|e| !key_in_prefix(e, &prefix)) {
                return Err(KvError::InvalidList("End key is not in the keyspace defined by prefix"));
            }
            Ok(ResolvedRange {
                start: start.unwrap_or_else(|| with_byte(&prefix, 0x00)),
                end: end.unwrap_or_else(|| with_byte(&prefix, 0xFF)),
                common_prefix: prefix,
            })
        }
        (None, Some(start), Some(end)) => {
            if start > end {
                return Err(KvError::InvalidList("Start key is greater than end key"));
            }
            let common = start.iter().zip(&end).take_while(|(a, b)| a == b).count();
            Ok(ResolvedRange { common_prefix: start[..common].to_vec(), start, end })
        }
        _ => Err(KvError::InvalidList("Selector must specify either 'prefix' or both 'start' and 'end' key")),
    }
}

/// Narrows a range by a cursor, as Deno does.
pub fn apply_cursor(
    range: &mut ResolvedRange,
    selector: &Selector,
    cursor: &str,
    reverse: bool,
) -> Result<(), KvError> {
    if cursor.is_empty() {
        return Ok(());
    }
    let suffix = decode_cursor(cursor)?;
    let mut position = range.common_prefix.clone();
    position.extend_from_slice(&suffix);
    if reverse {
        range.end = position;
    } else {
        position.push(0x00);
        range.start = position;
    }
    // Only explicit bounds are checked (a prefix alone has none).
    let explicit_start = selector.start.as_ref().map(Key::encode).transpose()?;
    let explicit_end = selector.end.as_ref().map(Key::encode).transpose()?;
    if explicit_start.is_some_and(|s| range.start < s) || explicit_end.is_some_and(|e| range.end > e) {
        return Err(KvError::CursorOutOfBounds);
    }
    Ok(())
}

/// The cursor naming the entry with encoded key `key` in a listing whose keys share
/// `common_prefix`: URL-safe padded base64 of the rest of the key.
pub fn encode_cursor(common_prefix: &[u8], key: &[u8]) -> String {
    URL_SAFE.encode(key.get(common_prefix.len()..).unwrap_or(&[]))
}

/// The key suffix a cursor names. Only canonical padded URL-safe base64 is accepted
/// (length a multiple of 4, padding only at the end, no stray bits), as Deno's.
pub fn decode_cursor(cursor: &str) -> Result<Vec<u8>, KvError> {
    URL_SAFE.decode(cursor).map_err(|_| KvError::InvalidCursor)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_non_canonical_text() {
        for suffix in [&b""[..], b"a", b"ab", b"abc", b"\xff\xfe\x00", b"\x02hello\x00"] {
            let cursor = encode_cursor(b"pp", &[b"pp", suffix].concat());
            assert_eq!(cursor.len() % 4, 0);
            assert_eq!(decode_cursor(&cursor).unwrap(), suffix);
        }
        assert_eq!(encode_cursor(b"", &[0xfb, 0xff]), "-_8=");
        for bad in ["a", "YQ", "YQ=", "Y===", "YR==", "Y Q=", "+/8=", "YQ==YQ=="] {
            assert!(matches!(decode_cursor(bad), Err(KvError::InvalidCursor)), "{bad:?}");
        }
    }
}
