//! Raw access for network front ends (a KV Connect server): reads of encoded-key ranges
//! from one snapshot, with stored values and versionstamps as they are.
//!
//! Nothing here writes, and nothing here reaches stampkv's own records: every range is cut
//! at the reserved `0xFF` prefix, where no user key encodes.

use crate::store::{Store, StoreCursor, StoreSnapshot};
use crate::{Kv, KvError, KvValue, Versionstamp};

/// The first byte of stampkv's reserved engine key space (the queue's records).
const RESERVED_PREFIX: u8 = 0xFF;

/// A range of encoded keys: `start` included, `end` excluded, as KV Connect's `ReadRange`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRange {
    /// The first encoded key of the range (included).
    pub start: Vec<u8>,
    /// The end of the range (excluded).
    pub end: Vec<u8>,
    /// At most this many entries (0 or less: none).
    pub limit: usize,
    /// Read from the end of the range backwards.
    pub reverse: bool,
}

/// An entry found by [`Kv::snapshot_read`]: its encoded key, value and versionstamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEntry {
    /// The key's tuple encoding.
    pub key: Vec<u8>,
    /// The stored value.
    pub value: KvValue,
    /// The versionstamp of the commit that wrote it.
    pub versionstamp: Versionstamp,
}

impl<S: Store> Kv<S> {
    /// Reads every range from one snapshot: the entries of each range, in key
    /// order (reversed if asked), at most `limit` of them. Expired entries are skipped, and
    /// the reserved `0xFF` key space is never read (a range reaching into it is cut there).
    pub fn snapshot_read(&self, ranges: &[RawRange]) -> Result<Vec<Vec<RawEntry>>, KvError> {
        read_ranges(&self.inner.store.snapshot(), ranges)
    }

    /// Reads every range as [`Kv::snapshot_read`] does, from the store's
    /// [eventual snapshot](Store::eventual_snapshot) when it has one (which may lag behind
    /// the latest commits). Also says whether the read was strongly consistent.
    pub fn snapshot_read_eventual(&self, ranges: &[RawRange]) -> Result<(Vec<Vec<RawEntry>>, bool), KvError> {
        match self.inner.store.eventual_snapshot() {
            Some(snapshot) => Ok((read_ranges(&snapshot, ranges)?, false)),
            None => Ok((self.snapshot_read(ranges)?, true)),
        }
    }
}

/// Reads every range from `snapshot` (see [`Kv::snapshot_read`]).
fn read_ranges<Snap: StoreSnapshot>(
    snapshot: &Snap,
    ranges: &[RawRange],
) -> Result<Vec<Vec<RawEntry>>, KvError> {
    let reserved: &[u8] = &[RESERVED_PREFIX];
    let mut out = Vec::with_capacity(ranges.len());
    for range in ranges {
        let end = if range.end.as_slice() > reserved { reserved } else { range.end.as_slice() };
        if range.limit == 0 || range.start.as_slice() >= end {
            out.push(Vec::new());
            continue;
        }
        if is_point(range) {
            // `[key, key ++ 0x00)` holds `key` alone: a point lookup, which the
            // tables' filters answer without a merging iterator over every level.
            let found = snapshot.get(&range.start)?;
            let entries = match found {
                Some(entry) => vec![RawEntry {
                    value: KvValue::decode_stored(&entry.value)?,
                    versionstamp: Versionstamp::from_sequence(entry.version),
                    key: range.start.clone(),
                }],
                None => Vec::new(),
            };
            out.push(entries);
            continue;
        }
        let mut cursor = snapshot.cursor(&range.start, end, range.reverse);
        let mut entries = Vec::new();
        while entries.len() < range.limit && cursor.advance()? {
            entries.push(RawEntry {
                value: KvValue::decode_stored(cursor.value())?,
                versionstamp: Versionstamp::from_sequence(cursor.version()),
                key: cursor.key().to_vec(),
            });
        }
        out.push(entries);
    }
    Ok(out)
}

/// Whether `range` is `[key, key ++ 0x00)`, the range Deno's `get` sends: exactly one key.
fn is_point(range: &RawRange) -> bool {
    range.end.len() == range.start.len() + 1
        && range.end.last() == Some(&0)
        && range.end.starts_with(&range.start)
}
