//! `list`: the iterator over a selector's range (see [`stampkv_model::select`] for the
//! selectors, ranges and cursors, which are Deno's).
//!
//! **Better than Deno:** the whole iteration reads one consistent snapshot, however many
//! batches it spans.

use crate::db::Kv;
use crate::entry::decode_entry_after;
use crate::key::DecodedPrefix;
use crate::select::{apply_cursor, encode_cursor, resolve_selector, Consistency, ListOptions, Selector};
use crate::store::{EngineStore, Store, StoreCursor, StoreSnapshot};
use crate::{FromKvValue, KvEntry, KvError};
use std::marker::PhantomData;

/// The store cursor a listing of a `Kv<S>` reads from.
type Source<S> = <<S as Store>::Snapshot as StoreSnapshot>::Cursor;

/// Iterates over listed entries; see [`Kv::list`].
pub struct ListIter<T, S: Store = EngineStore> {
    /// `None` once exhausted or after an error (or for an empty range).
    source: Option<Source<S>>,
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

impl<T: FromKvValue, S: Store> ListIter<T, S> {
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
        Ok(encode_cursor(&self.common_prefix, last))
    }
}

impl<T: FromKvValue, S: Store> Iterator for ListIter<T, S> {
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
        match source.advance() {
            Ok(true) => {
                count_one(&mut self.remaining);
                remember(&mut self.last_key, source.key());
                Some(decode_entry_after(&self.decoded_prefix, source.key(), source.value(), source.version()))
            }
            Ok(false) => self.end(),
            Err(e) => self.fail(e),
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

impl<T, S: Store> ListIter<T, S> {
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

impl<S: Store> Kv<S> {
    /// Lists entries by selector, in key order (or reverse), from one snapshot.
    ///
    /// Errors come in Deno's order: a zero `limit`, a zero `batch_size`, the selector,
    /// the cursor, the size of the range's ends, and last a `batch_size` over
    /// `max_read_entries` (`Too many entries (max 1000)`).
    pub fn list<T: FromKvValue>(
        &self,
        selector: &Selector,
        options: &ListOptions,
    ) -> Result<ListIter<T, S>, KvError> {
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
        // A store cursor reads one consistent state however long it lives: one snapshot.
        // An eventual list reads the store's eventual snapshot where it has a cheaper one.
        let store = &self.inner.store;
        let source = (range.start < range.end).then(|| {
            let eventual = match options.consistency {
                Consistency::Eventual => store.eventual_snapshot(),
                Consistency::Strong => None,
            };
            match eventual {
                Some(snapshot) => snapshot.cursor(&range.start, &range.end, options.reverse),
                None => store.cursor(&range.start, &range.end, options.reverse),
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
