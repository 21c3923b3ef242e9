//! `list`: selectors, options, cursors and the iterator.
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
//!
//! **Better than Deno:** the whole iteration reads one consistent snapshot, however many
//! batches it spans.

use crate::db::{decode_entry_after, Kv};
use crate::entry::{FromKvValue, KvEntry};
use crate::key::DecodedPrefix;
use crate::{base64, Key, KvError};
use stampkv_engine::{DbCursor, DbIter};
use std::marker::PhantomData;

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

/// Read consistency; on one node both are strong.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Consistency {
    /// See every commit acknowledged before the read started.
    #[default]
    Strong,
    /// Accepted for compatibility; served like `Strong`.
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
    /// Consistency (both are strong here).
    pub consistency: Consistency,
}

/// The byte range a selector and cursor resolve to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResolvedRange {
    pub start: Vec<u8>,
    pub end: Vec<u8>,
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
pub(crate) fn resolve_selector(selector: &Selector) -> Result<ResolvedRange, KvError> {
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
pub(crate) fn apply_cursor(
    range: &mut ResolvedRange,
    selector: &Selector,
    cursor: &str,
    reverse: bool,
) -> Result<(), KvError> {
    if cursor.is_empty() {
        return Ok(());
    }
    let suffix = base64::decode(cursor).ok_or(KvError::InvalidCursor)?;
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

/// Where a listing reads from: forward, a cursor that lends each entry, decoded straight
/// from the block; in reverse, the double-ended iterator.
enum Source {
    Forward(DbCursor),
    Reverse(DbIter),
}

/// Iterates over listed entries; see [`Kv::list`].
pub struct ListIter<T> {
    /// `None` once exhausted or after an error (or for an empty range).
    source: Option<Source>,
    remaining: Option<usize>,
    common_prefix: Vec<u8>,
    /// The whole key parts of `common_prefix`, decoded once for every entry's key.
    decoded_prefix: DecodedPrefix,
    /// `None` before the first entry; then the encoded key of the last entry yielded.
    last_key: Option<Vec<u8>>,
    started: bool,
    exhausted: bool,
    _values: PhantomData<fn() -> T>,
}

impl<T: FromKvValue> ListIter<T> {
    /// The cursor: the position after the last entry yielded, `""` once the listing is
    /// exhausted. Before the first `next()` an error.
    pub fn cursor(&self) -> Result<String, KvError> {
        if !self.started {
            return Err(KvError::CursorBeforeFirstIteration);
        }
        if self.exhausted {
            return Ok(String::new());
        }
        let last = self.last_key.as_deref().unwrap_or(&[]);
        Ok(base64::encode(last.get(self.common_prefix.len()..).unwrap_or(&[])))
    }
}

impl<T: FromKvValue> Iterator for ListIter<T> {
    type Item = Result<KvEntry<T>, KvError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.started = true;
        if self.remaining == Some(0) {
            return None;
        }
        let Some(source) = self.source.as_mut() else {
            self.exhausted = true;
            return None;
        };
        // Each arm ends in the decode, so that the entry is built where the caller wants it
        // rather than on this frame's stack and copied (72 bytes per entry). An entry that
        // does not decode is yielded as an error and counts against the limit; the listing
        // goes on after it.
        match source {
            Source::Forward(cursor) => match cursor.next() {
                Ok(true) => {
                    count_one(&mut self.remaining);
                    remember(&mut self.last_key, cursor.key());
                    Some(decode_entry_after(&self.decoded_prefix, cursor.key(), cursor.value(), cursor.seq()))
                }
                Ok(false) => self.end(),
                Err(e) => self.fail(e.into()),
            },
            Source::Reverse(iter) => match iter.next_back() {
                Some(Ok(entry)) => {
                    count_one(&mut self.remaining);
                    remember(&mut self.last_key, &entry.key);
                    Some(decode_entry_after(&self.decoded_prefix, &entry.key, &entry.value, entry.seq))
                }
                Some(Err(e)) => self.fail(e.into()),
                None => self.end(),
            },
        }
    }
}

/// Counts an entry yielded against the limit, if there is one.
#[inline]
fn count_one(remaining: &mut Option<usize>) {
    if let Some(remaining) = remaining.as_mut() {
        *remaining -= 1;
    }
}

impl<T> ListIter<T> {
    /// The range is exhausted: the cursor becomes `""`.
    fn end(&mut self) -> Option<Result<KvEntry<T>, KvError>> {
        self.exhausted = true;
        self.source = None;
        None
    }

    /// The engine failed: the error is yielded and the listing stops.
    #[cold]
    fn fail(&mut self, error: KvError) -> Option<Result<KvEntry<T>, KvError>> {
        self.source = None;
        Some(Err(error))
    }
}

/// Records `key` as the last one yielded, reusing the buffer.
fn remember(last_key: &mut Option<Vec<u8>>, key: &[u8]) {
    match last_key {
        Some(buffer) => {
            buffer.clear();
            buffer.extend_from_slice(key);
        }
        None => *last_key = Some(key.to_vec()),
    }
}

impl Kv {
    /// Lists entries by selector, in key order (or reverse), from one snapshot.
    ///
    /// Errors come in Deno's order: a zero `limit`, a zero `batch_size`, the selector,
    /// the cursor, the size of the range's ends, and last a `batch_size` over
    /// `max_read_entries` (`Too many entries (max 1000)`).
    pub fn list<T: FromKvValue>(
        &self,
        selector: &Selector,
        options: &ListOptions,
    ) -> Result<ListIter<T>, KvError> {
        let limits = &self.inner.limits;
        if let Some(0) = options.limit {
            return Err(KvError::InvalidLimit { received: 0 });
        }
        if let Some(0) = options.batch_size {
            return Err(KvError::InvalidBatchSize { received: 0 });
        }
        let mut range = resolve_selector(selector)?;
        if let Some(cursor) = &options.cursor {
            apply_cursor(&mut range, selector, cursor, options.reverse)?;
        }
        let max_read = limits.max_read_key_bytes;
        if range.start.len() > max_read || range.end.len() > max_read {
            return Err(KvError::KeyTooLargeForRead { max: max_read });
        }
        // Deno checks the batch size against the read limit last, after the selector, the
        // cursor and the key sizes.
        if options.batch_size.is_some_and(|n| n > limits.max_read_entries) {
            return Err(KvError::TooManyEntries { max: limits.max_read_entries });
        }
        // A cursor or range iterator holds the memtables and tables it started with: one
        // snapshot.
        let bounds = range.start.clone()..range.end.clone();
        let source = (range.start < range.end).then(|| {
            if options.reverse {
                Source::Reverse(self.inner.db.range(bounds))
            } else {
                Source::Forward(self.inner.db.cursor(bounds))
            }
        });
        Ok(ListIter {
            source,
            remaining: options.limit,
            decoded_prefix: DecodedPrefix::new(&range.common_prefix),
            common_prefix: range.common_prefix,
            last_key: None,
            started: false,
            exhausted: false,
            _values: PhantomData,
        })
    }
}
