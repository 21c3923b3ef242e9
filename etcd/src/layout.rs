//! Where the store keeps things in etcd, and the bytes of each record (FORMAT.md).
//!
//! Under one root prefix `R` (default `stampkv/default/`):
//! - `R d <key>`: an entry, its value an [`Envelope`];
//! - `R m seq`: the commit counter (8 bytes big-endian) and the id of the commit that wrote
//!   it (16 bytes): every commit compares its `mod_revision` and writes it, so commits are
//!   serialised by etcd and versions increase in commit order across all servers;
//! - `R m meta`: the layout version and the database id, written once by the first server;
//! - `R m r <server id>`: the id of that server's last commit (its receipt), read when the
//!   outcome of a commit is unknown;
//! - `R x <expiry> <key>`: the expiry index, one empty value for every entry written with
//!   an expiry (the time in milliseconds, 8 bytes big-endian), read by the sweeper that
//!   deletes expired entries.

use stampkv::store::StoredEntry;

/// The envelope format this build writes and reads.
const ENVELOPE_FORMAT: u8 = 1;
/// Bytes of an envelope before the value: format, version, expiry.
pub const ENVELOPE_HEADER_BYTES: usize = ENVELOPE_HEADER;
/// Bytes of an envelope before the value (crate-internal name).
pub(crate) const ENVELOPE_HEADER: usize = 1 + 8 + 8;
/// The layout version kept in `R m meta`.
pub const LAYOUT_VERSION: u32 = 1;

/// The keys of one database, all under its root prefix.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    root: Vec<u8>,
}

impl Layout {
    /// The layout under `root` (which should end with `/`).
    pub(crate) fn new(root: &str) -> Layout {
        Layout { root: root.as_bytes().to_vec() }
    }

    fn key(&self, parts: &[&[u8]]) -> Vec<u8> {
        let mut key = self.root.clone();
        for part in parts {
            key.extend_from_slice(part);
        }
        key
    }

    /// The etcd key of entry `key`.
    pub(crate) fn data(&self, key: &[u8]) -> Vec<u8> {
        self.key(&[b"d", key])
    }

    /// The first etcd key after every entry key (the end of the data range).
    pub(crate) fn data_end(&self) -> Vec<u8> {
        self.key(&[b"e"])
    }

    /// The entry key of an etcd data key, if it is one.
    pub(crate) fn entry_key<'a>(&self, etcd_key: &'a [u8]) -> Option<&'a [u8]> {
        etcd_key.strip_prefix(self.root.as_slice())?.strip_prefix(b"d")
    }

    /// The etcd range `[start, end)` of the entry range `start..end` (an empty `end` is the
    /// end of the key space).
    pub(crate) fn data_range(&self, start: &[u8], end: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let end = if end.is_empty() { self.data_end() } else { self.data(end) };
        (self.data(start), end)
    }

    /// The expiry index entry of entry `key` expiring at `at_ms`.
    pub(crate) fn expiry(&self, at_ms: u64, key: &[u8]) -> Vec<u8> {
        self.key(&[b"x", &at_ms.to_be_bytes(), key])
    }

    /// The etcd range of the index entries expiring at or before `now_ms`.
    pub(crate) fn expired_until(&self, now_ms: u64) -> (Vec<u8>, Vec<u8>) {
        (self.key(&[b"x"]), self.key(&[b"x", &now_ms.saturating_add(1).to_be_bytes()]))
    }

    /// The expiry and entry key of an expiry index key, if it is one.
    pub(crate) fn parse_expiry<'a>(&self, etcd_key: &'a [u8]) -> Option<(u64, &'a [u8])> {
        let rest = etcd_key.strip_prefix(self.root.as_slice())?.strip_prefix(b"x")?;
        let at = u64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
        Some((at, rest.get(8..)?))
    }

    /// The commit counter.
    pub(crate) fn seq(&self) -> Vec<u8> {
        self.key(&[b"m", b"seq"])
    }

    /// The database's identity record.
    pub(crate) fn meta(&self) -> Vec<u8> {
        self.key(&[b"m", b"meta"])
    }

    /// The receipt of server `server_id`.
    pub(crate) fn receipt(&self, server_id: &str) -> Vec<u8> {
        self.key(&[b"m", b"r", server_id.as_bytes()])
    }
}

/// The value of `R m seq`: the version of the last commit and the id of the commit (or
/// fence) that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SeqRecord {
    pub(crate) version: u64,
    pub(crate) commit_id: u128,
}

impl SeqRecord {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24);
        out.extend_from_slice(&self.version.to_be_bytes());
        out.extend_from_slice(&self.commit_id.to_be_bytes());
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<SeqRecord> {
        let version = u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?);
        let commit_id = u128::from_be_bytes(bytes.get(8..24)?.try_into().ok()?);
        (bytes.len() == 24).then_some(SeqRecord { version, commit_id })
    }
}

/// An entry's value in etcd: format byte, version (8 bytes big-endian), expiry in
/// milliseconds since the Unix epoch (8 bytes big-endian, 0 for none), then the value.
pub(crate) struct Envelope;

impl Envelope {
    pub(crate) fn encode(version: u64, expires_at_ms: Option<u64>, value: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(ENVELOPE_HEADER + value.len());
        out.push(ENVELOPE_FORMAT);
        out.extend_from_slice(&version.to_be_bytes());
        out.extend_from_slice(&expires_at_ms.unwrap_or(0).to_be_bytes());
        out.extend_from_slice(value);
        out
    }

    /// The version, expiry and value of an envelope; `None` if the bytes are not one.
    pub(crate) fn decode(bytes: &[u8]) -> Option<(u64, Option<u64>, &[u8])> {
        if *bytes.first()? != ENVELOPE_FORMAT {
            return None;
        }
        let version = u64::from_be_bytes(bytes.get(1..9)?.try_into().ok()?);
        let expires = u64::from_be_bytes(bytes.get(9..17)?.try_into().ok()?);
        let value = bytes.get(ENVELOPE_HEADER..)?;
        Some((version, (expires != 0).then_some(expires), value))
    }

    /// The entry an envelope holds, or `None` when it has expired at `now_ms`.
    pub(crate) fn visible(bytes: &[u8], now_ms: u64) -> Result<Option<StoredEntry>, ()> {
        let (version, expires_at_ms, value) = Self::decode(bytes).ok_or(())?;
        if expires_at_ms.is_some_and(|at| at <= now_ms) {
            return Ok(None);
        }
        Ok(Some(StoredEntry { value: value.to_vec(), version, expires_at_ms }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn envelopes_and_seq_records_round_trip() {
        let bytes = Envelope::encode(7, Some(99), b"abc");
        assert_eq!(bytes.len(), ENVELOPE_HEADER + 3);
        assert_eq!(Envelope::decode(&bytes), Some((7, Some(99), &b"abc"[..])));
        assert_eq!(Envelope::decode(&Envelope::encode(1, None, b"")), Some((1, None, &b""[..])));
        assert_eq!(Envelope::decode(&bytes[..10]), None);
        assert_eq!(Envelope::visible(&bytes, 99).unwrap(), None);
        assert!(Envelope::visible(&bytes, 98).unwrap().is_some());
        let seq = SeqRecord { version: u64::MAX - 1, commit_id: 42 };
        assert_eq!(SeqRecord::decode(&seq.encode()), Some(seq));
        assert_eq!(SeqRecord::decode(&seq.encode()[..23]), None);
    }

    #[test]
    fn data_keys_sort_inside_their_range() {
        let layout = Layout::new("db/");
        assert_eq!(layout.data(b"\x02a"), b"db/d\x02a");
        assert!(layout.data(&[0xff; 8]) < layout.data_end());
        assert_eq!(layout.entry_key(b"db/d\x02a"), Some(&b"\x02a"[..]));
        assert_eq!(layout.entry_key(b"db/m/seq"), None);
        assert_eq!(layout.data_range(b"a", b""), (b"db/da".to_vec(), b"db/e".to_vec()));
    }
}
