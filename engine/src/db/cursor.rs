//! A forward cursor that lends each entry instead of returning owned copies: the way to
//! scan many entries without an allocation per entry.

use super::read::{decode_visible, merged_iter};
use super::ReadState;
use crate::invariants::invariant;
use crate::iter::{head_prefix, InternalIterator, MergingIter, HEAD_BYTES};
use crate::key::{self, EntryKind};
use crate::Result;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// Where a cursor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Position {
    /// Before the first [`DbCursor::next`]: nothing sought yet.
    Unstarted,
    /// At a live entry: the merging iterator is on its visible version.
    At,
    /// Past the last entry of the range, or stopped by an error.
    Done,
}

/// A forward-only cursor over the live entries of a key range, in key order, in one
/// consistent view of the database ([`crate::Db::cursor`], [`crate::Snapshot::cursor`]).
///
/// Where [`crate::DbIter`] returns each entry as owned vectors, a cursor lends the current
/// entry: [`DbCursor::key`] from a buffer it reuses (a key of up to 16 bytes from the
/// merge's copy of its first 16 bytes, without a copy of its own), [`DbCursor::value`]
/// straight from the memtable or table block that holds it. Both borrows end at the next move, so a scan
/// allocates nothing per entry.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("stampkv-cursor-doc-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let db = stampkv_engine::Db::open(&dir, stampkv_engine::Options::default())?;
/// db.put(b"apple", b"1")?;
/// db.put(b"banana", b"2")?;
/// db.put(b"cherry", b"3")?;
/// let mut cursor = db.cursor(b"b".as_slice()..);
/// let mut seen = Vec::new();
/// while cursor.next()? {
///     seen.push((cursor.key().to_vec(), cursor.value().to_vec()));
/// }
/// assert_eq!(seen, [(b"banana".to_vec(), b"2".to_vec()), (b"cherry".to_vec(), b"3".to_vec())]);
/// # drop(cursor);
/// # db.close()?;
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), stampkv_engine::Error>(())
/// ```
pub struct DbCursor {
    iter: MergingIter,
    seq: u64,
    now_ms: u64,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    /// `head_prefix` of the upper bound's key (0 when unbounded).
    upper_prefix: u128,
    position: Position,
    /// The current entry's user key's first [`HEAD_BYTES`] bytes, big-endian and
    /// zero-padded (`head_prefix` of it): for telling the next entry's key apart cheaply,
    /// and, for a key no longer than that, the key itself.
    key_prefix: u128,
    /// `key_prefix` as bytes.
    short_key: [u8; HEAD_BYTES],
    /// The current user key's length.
    key_len: usize,
    /// The current user key if it is longer than [`HEAD_BYTES`] (stale otherwise).
    long_key: Vec<u8>,
    /// Bytes of the stored value before the user's value (an expiry), at `Position::At`.
    value_offset: usize,
    /// The current entry's sequence number and expiry.
    entry_seq: u64,
    expires_at_ms: Option<u64>,
}

impl DbCursor {
    pub(crate) fn new<K: AsRef<[u8]>, R: RangeBounds<K> + ?Sized>(
        state: &Arc<ReadState>,
        seq: u64,
        now_ms: u64,
        range: &R,
    ) -> DbCursor {
        let owned = |bound: Bound<&K>| bound.map(|k| k.as_ref().to_vec());
        let upper = owned(range.end_bound());
        let upper_prefix = match &upper {
            Bound::Included(k) | Bound::Excluded(k) => head_prefix(k),
            Bound::Unbounded => 0,
        };
        DbCursor {
            iter: merged_iter(state),
            seq,
            now_ms,
            lower: owned(range.start_bound()),
            upper,
            upper_prefix,
            position: Position::Unstarted,
            key_prefix: 0,
            short_key: [0; HEAD_BYTES],
            key_len: 0,
            long_key: Vec::new(),
            value_offset: 0,
            entry_seq: 0,
            expires_at_ms: None,
        }
    }

    /// Moves to the next live entry (the first one on the first call): `Ok(true)` if there
    /// is one, `Ok(false)` past the end of the range. After an error, or once past the
    /// end, every later call returns `Ok(false)`.
    #[allow(
        clippy::should_implement_trait,
        reason = "a lending cursor cannot be an Iterator: the entry borrows from the cursor"
    )]
    pub fn next(&mut self) -> Result<bool> {
        // Each arm returns its own result rather than copying the whole `Result` (the size
        // of an error) it matched on.
        match self.advance() {
            Ok(true) => {
                self.position = Position::At;
                Ok(true)
            }
            Ok(false) => {
                self.position = Position::Done;
                Ok(false)
            }
            Err(error) => {
                self.position = Position::Done;
                Err(error)
            }
        }
    }

    fn advance(&mut self) -> Result<bool> {
        match self.position {
            Position::Done => return Ok(false),
            Position::Unstarted => match &self.lower {
                Bound::Included(k) => self.iter.seek(k, key::seek_trailer(self.seq))?,
                // Every version of `k` sorts before (k, 0).
                Bound::Excluded(k) => self.iter.seek(k, 0)?,
                Bound::Unbounded => self.iter.seek_to_first()?,
            },
            Position::At => self.step_past_key()?,
        }
        self.find_live()
    }

    /// Moves past the entry the merge is on, a version of the current key, and past the
    /// key's remaining (older) versions.
    fn step_past_key(&mut self) -> Result<()> {
        self.iter.next()?;
        let key = current_key(&self.short_key, &self.long_key, self.key_len);
        // The merge compares its current key's head (first 16 bytes, length) with the
        // cursor's: a different key is told apart without asking the child for its key.
        while self.iter.current_user_key_is(key, self.key_prefix) {
            self.iter.next()?;
        }
        Ok(())
    }

    /// Whether the merge's current key, whose [`head_prefix`] is `key_prefix`, lies beyond
    /// the range. Keys whose first 16 bytes (zero-padded) differ from the bound's compare
    /// as those bytes do: where the padded bytes first differ, either both keys have real
    /// bytes there, or the shorter one ended (its padding zero is below any byte the other
    /// has there, a byte the padding could never exceed) and is a prefix of the other, so
    /// the smaller. Only keys that agree with the bound on those bytes are compared whole,
    /// which asks the child for the key.
    #[inline]
    fn beyond_upper(&self, key_prefix: u128) -> bool {
        if matches!(self.upper, Bound::Unbounded) {
            return false;
        }
        let beyond = match key_prefix.cmp(&self.upper_prefix) {
            std::cmp::Ordering::Less => false,
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Equal => above(&self.upper, self.iter.user_key()),
        };
        invariant!(
            beyond == above(&self.upper, self.iter.user_key()),
            "cursor: the head comparison with the upper bound disagrees with the whole keys"
        );
        beyond
    }

    /// From the iterator's position, finds the first key whose newest version in the view
    /// is live, and stops on that version.
    fn find_live(&mut self) -> Result<bool> {
        // The merge's copy of the key's head gives the trailer, and the key itself when it
        // is short: the child is asked for neither.
        while let Some((prefix, len, trailer)) = self.iter.current_head() {
            if self.beyond_upper(prefix) {
                return Ok(false);
            }
            if key::trailer_seq(trailer) > self.seq {
                self.iter.next()?;
                continue;
            }
            self.key_prefix = prefix;
            self.short_key = prefix.to_be_bytes();
            self.key_len = if len > HEAD_BYTES {
                self.long_key.clear();
                self.long_key.extend_from_slice(self.iter.user_key());
                self.long_key.len() // the head's length saturates
            } else {
                len
            };
            if key::trailer_kind(trailer) == EntryKind::Put as u8 {
                // A plain value, visible whatever the time: no need to look at it here.
                self.value_offset = 0;
                self.entry_seq = key::trailer_seq(trailer);
                self.expires_at_ms = None;
                return Ok(true);
            }
            let stored = self.iter.value();
            if let Some((value, expires_at_ms)) = decode_visible(trailer, stored, || self.now_ms)? {
                self.value_offset = stored.len() - value.len();
                self.entry_seq = key::trailer_seq(trailer);
                self.expires_at_ms = expires_at_ms;
                return Ok(true);
            }
            // A tombstone or an expired value: the key is absent, whatever older versions say.
            self.step_past_key()?;
        }
        Ok(false)
    }

    /// Whether the cursor is at an entry (the last [`DbCursor::next`] returned `Ok(true)`).
    pub fn valid(&self) -> bool {
        self.position == Position::At
    }

    /// The current entry's key; empty when not [`DbCursor::valid`].
    pub fn key(&self) -> &[u8] {
        if self.valid() {
            current_key(&self.short_key, &self.long_key, self.key_len)
        } else {
            &[]
        }
    }

    /// The current entry's value; empty when not [`DbCursor::valid`].
    pub fn value(&self) -> &[u8] {
        if self.valid() {
            self.iter.value().get(self.value_offset..).unwrap_or_default()
        } else {
            &[]
        }
    }

    /// The sequence number of the current entry's write; 0 when not [`DbCursor::valid`].
    pub fn seq(&self) -> u64 {
        if self.valid() {
            self.entry_seq
        } else {
            0
        }
    }

    /// When the current entry expires (ms since the epoch), if it was written with an
    /// expiry; `None` when not [`DbCursor::valid`].
    pub fn expires_at_ms(&self) -> Option<u64> {
        self.expires_at_ms.filter(|_| self.valid())
    }
}

/// The cursor's current key: the first `len` bytes of `short_key` if that holds it whole,
/// else `long_key`.
#[inline]
fn current_key<'a>(short_key: &'a [u8; HEAD_BYTES], long_key: &'a [u8], len: usize) -> &'a [u8] {
    short_key.get(..len).unwrap_or(long_key)
}

/// Whether `user_key` lies beyond the upper bound.
fn above(upper: &Bound<Vec<u8>>, user_key: &[u8]) -> bool {
    match upper {
        Bound::Included(u) => user_key > u.as_slice(),
        Bound::Excluded(u) => user_key >= u.as_slice(),
        Bound::Unbounded => false,
    }
}
