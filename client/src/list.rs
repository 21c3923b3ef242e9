//! `list`: Deno's selectors, options, batches and cursors over `snapshot_read`.
//!
//! Ranges and errors are those of `stampkv::Kv::list` (and Deno): a prefix `p` scans
//! `p ++ 00 .. p ++ FF`, a start or end replaces one side; a cursor is the URL-safe padded
//! base64 of an entry's key without the selector's common prefix. Each batch is one
//! `snapshot_read` of `batch_size` entries, so, as with Deno's remote client, batches are
//! not one snapshot.

use crate::convert::entry_from_proto;
use crate::{RemoteError, RemoteKv};
use futures_util::stream::Stream;
use stampkv_kvconnect as proto;
use stampkv_model::select::{apply_cursor, encode_cursor, resolve_selector, ResolvedRange};
use stampkv_model::{
    Consistency, FromKvValue, Key, KvEntry, KvError, KvValue, Limits, ListOptions, Selector, Versionstamp,
};
use std::collections::VecDeque;
use std::marker::PhantomData;

/// Entries per batch when neither `batch_size` nor `limit` is given (Deno's default).
const DEFAULT_BATCH: usize = 100;
/// Largest batch chosen from `limit` alone (Deno's cap).
const MAX_IMPLICIT_BATCH: usize = 500;

/// The entries of a list, fetched in batches. Pull them with [`RemoteList::next`], all at
/// once with [`RemoteList::collect`], or as a [`Stream`] with [`RemoteList::into_stream`].
#[derive(Debug)]
pub struct RemoteList<T> {
    kv: RemoteKv,
    consistency: Consistency,
    reverse: bool,
    batch_size: usize,
    remaining: Option<usize>,
    /// The range still to read.
    start: Vec<u8>,
    end: Vec<u8>,
    common_prefix: Vec<u8>,
    buffer: VecDeque<(Vec<u8>, Key, KvValue, Versionstamp)>,
    /// The encoded key of the last entry yielded.
    last_key: Option<Vec<u8>>,
    /// No batch to fetch any more (the last one was short, or the range is empty).
    drained: bool,
    started: bool,
    exhausted: bool,
    failed: bool,
    _values: PhantomData<fn() -> T>,
}

impl RemoteKv {
    /// Lists entries by selector, in key order (or reverse), `batch_size` entries per
    /// request (default: `limit`, or 100, at most 500; at most 1000 when given).
    ///
    /// Refused before anything is sent, with Deno's texts and in Deno's order: a zero
    /// `limit` or `batch_size`, a bad selector, a bad cursor, a range end over the read key
    /// limit, and a `batch_size` over 1000.
    pub fn list<T: FromKvValue>(
        &self,
        selector: &Selector,
        options: &ListOptions,
    ) -> Result<RemoteList<T>, RemoteError> {
        let limits = Limits::default();
        if options.limit == Some(0) {
            return Err(KvError::InvalidLimit { received: 0 }.into());
        }
        if options.batch_size == Some(0) {
            return Err(KvError::InvalidBatchSize { received: 0 }.into());
        }
        let mut range = resolve_selector(selector)?;
        apply_cursor(&mut range, selector, options.cursor.as_deref().unwrap_or(""), options.reverse)?;
        let ResolvedRange { start, end, common_prefix } = range;
        let max_read = limits.max_read_key_bytes;
        if start.len() > max_read || end.len() > max_read {
            return Err(KvError::KeyTooLargeForRead { max: max_read }.into());
        }
        if options.batch_size.is_some_and(|n| n > limits.max_read_entries) {
            return Err(KvError::TooManyEntries { max: limits.max_read_entries }.into());
        }
        let batch_size = options
            .batch_size
            .unwrap_or_else(|| options.limit.unwrap_or(DEFAULT_BATCH).min(MAX_IMPLICIT_BATCH));
        Ok(RemoteList {
            kv: self.clone(),
            consistency: options.consistency,
            reverse: options.reverse,
            batch_size,
            remaining: options.limit,
            drained: start >= end,
            start,
            end,
            common_prefix,
            buffer: VecDeque::new(),
            last_key: None,
            started: false,
            exhausted: false,
            failed: false,
            _values: PhantomData,
        })
    }
}

impl<T: FromKvValue> RemoteList<T> {
    /// The next entry; `None` at the end (or after an error).
    pub async fn next(&mut self) -> Option<Result<KvEntry<T>, RemoteError>> {
        self.started = true;
        if self.failed || self.remaining == Some(0) {
            return None;
        }
        loop {
            if let Some((encoded, key, value, versionstamp)) = self.buffer.pop_front() {
                if let Some(remaining) = self.remaining.as_mut() {
                    *remaining -= 1;
                }
                self.last_key = Some(encoded);
                return Some(match T::from_kv_value(value) {
                    Ok(value) => Ok(KvEntry { key, value, versionstamp }),
                    Err(e) => Err(e.into()),
                });
            }
            if self.drained {
                self.exhausted = true;
                return None;
            }
            if let Err(e) = self.fetch().await {
                self.failed = true;
                return Some(Err(e));
            }
        }
    }

    /// The cursor: the position after the last entry yielded, `""` once the list is
    /// exhausted (`Cannot get cursor before first iteration` before the first `next`).
    /// Passing it as `ListOptions::cursor` resumes the list there.
    pub fn cursor(&self) -> Result<String, RemoteError> {
        if !self.started {
            return Err(KvError::CursorBeforeFirstIteration.into());
        }
        if self.exhausted {
            return Ok(String::new());
        }
        let last = self.last_key.as_deref().unwrap_or(&[]);
        Ok(encode_cursor(&self.common_prefix, last))
    }

    /// Every remaining entry.
    pub async fn collect(mut self) -> Result<Vec<KvEntry<T>>, RemoteError> {
        let mut entries = Vec::new();
        while let Some(entry) = self.next().await {
            entries.push(entry?);
        }
        Ok(entries)
    }

    /// The remaining entries as a stream.
    pub fn into_stream(self) -> impl Stream<Item = Result<KvEntry<T>, RemoteError>> + Send + 'static
    where
        T: Send + 'static,
    {
        futures_util::stream::unfold(
            self,
            |mut list| async move { list.next().await.map(|item| (item, list)) },
        )
    }

    /// Reads the next batch into the buffer.
    async fn fetch(&mut self) -> Result<(), RemoteError> {
        let limit = i32::try_from(self.batch_size).unwrap_or(i32::MAX);
        let range = proto::ReadRange {
            start: self.start.clone(),
            end: self.end.clone(),
            limit,
            reverse: self.reverse,
        };
        let output =
            self.kv.snapshot_read_raw(&proto::SnapshotRead { ranges: vec![range] }, self.consistency).await?;
        let entries = output.ranges.into_iter().next().map(|r| r.values).unwrap_or_default();
        if entries.len() < self.batch_size {
            self.drained = true;
        }
        for entry in entries {
            let encoded = entry.key.clone();
            let (key, value, versionstamp) = entry_from_proto(entry)?;
            self.buffer.push_back((encoded, key, value, versionstamp));
        }
        match self.buffer.back() {
            Some((last, ..)) if self.reverse => self.end = last.clone(),
            Some((last, ..)) => {
                let mut next = last.clone();
                next.push(0);
                self.start = next;
            }
            None => self.drained = true,
        }
        if self.start >= self.end {
            self.drained = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code: a panic is a failed test")]

    use super::*;
    use stampkv_model::key;

    #[test]
    fn selectors_resolve_like_deno() {
        let range = resolve_selector(&Selector::prefix(key!["a"])).unwrap();
        assert_eq!(
            (range.start, range.end, range.common_prefix),
            (vec![2, b'a', 0, 0], vec![2, b'a', 0, 0xff], vec![2, b'a', 0])
        );
        let range = resolve_selector(&Selector::range(key!["a", 2], key!["c"])).unwrap();
        assert_eq!(range.common_prefix, vec![2]);
        let text = |s: Selector| resolve_selector(&s).unwrap_err().to_string();
        assert_eq!(
            text(Selector::prefix(key!["a"]).with_start(key!["a"])),
            "Start key is not in the keyspace defined by prefix"
        );
        assert_eq!(text(Selector::range(key!["b"], key!["a"])), "Start key is greater than end key");
        assert_eq!(
            text(Selector { start: Some(key!["a"]), ..Selector::default() }),
            "Selector must specify either 'prefix' or both 'start' and 'end' key"
        );
    }
}
