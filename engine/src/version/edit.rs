//! Version edits: the records of the manifest.
//!
//! ```text
//! edit  := field*
//! field := tag: varint, body
//!   1 log_number       varint   WAL segments below this number are fully in tables
//!   2 next_file_number varint   no file number at or above this was handed out
//!   3 last_sequence    varint   every sequence number up to this was used
//!   4 deleted_file     level: varint, number: varint
//!   5 added_file       level: varint, number: varint, size: varint, entry_count: varint,
//!                      smallest_key: varint length + bytes, smallest_trailer: varint,
//!                      largest_key: varint length + bytes, largest_trailer: varint
//!   6 format_version   varint   (= 1) first field of the first record of a manifest
//! ```
//! Unknown tags are corruption: a newer writer must bump `format_version`.

use super::{FileDesc, NUM_LEVELS};
use stampkv_coding::{put_length_prefixed, put_varint64, Reader};

/// The manifest format this code writes and reads.
pub(super) const MANIFEST_FORMAT_VERSION: u64 = 1;

const TAG_LOG_NUMBER: u64 = 1;
const TAG_NEXT_FILE: u64 = 2;
const TAG_LAST_SEQ: u64 = 3;
const TAG_DELETED: u64 = 4;
const TAG_ADDED: u64 = 5;
const TAG_FORMAT: u64 = 6;

/// A change to the live file set and counters, applied atomically.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct VersionEdit {
    /// Format version (set on the first record of a manifest).
    pub format_version: Option<u64>,
    /// New log number.
    pub log_number: Option<u64>,
    /// New next file number.
    pub next_file_number: Option<u64>,
    /// New last sequence number.
    pub last_seq: Option<u64>,
    /// Files removed: (level, number).
    pub deleted: Vec<(usize, u64)>,
    /// Files added: (level, description).
    pub added: Vec<(usize, FileDesc)>,
}

impl VersionEdit {
    /// Encodes the edit.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let counters = [
            (TAG_FORMAT, self.format_version),
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_NEXT_FILE, self.next_file_number),
            (TAG_LAST_SEQ, self.last_seq),
        ];
        for (tag, value) in counters {
            if let Some(value) = value {
                put_varint64(&mut out, tag);
                put_varint64(&mut out, value);
            }
        }
        for &(level, number) in &self.deleted {
            put_varint64(&mut out, TAG_DELETED);
            put_varint64(&mut out, level as u64);
            put_varint64(&mut out, number);
        }
        for (level, desc) in &self.added {
            put_varint64(&mut out, TAG_ADDED);
            put_varint64(&mut out, *level as u64);
            put_varint64(&mut out, desc.number);
            put_varint64(&mut out, desc.size);
            put_varint64(&mut out, desc.entry_count);
            put_length_prefixed(&mut out, &desc.smallest_key);
            put_varint64(&mut out, desc.smallest_trailer);
            put_length_prefixed(&mut out, &desc.largest_key);
            put_varint64(&mut out, desc.largest_trailer);
        }
        out
    }

    /// Decodes an edit; the error says what was malformed.
    pub(crate) fn decode(data: &[u8]) -> Result<VersionEdit, &'static str> {
        let mut reader = Reader::new(data);
        let mut edit = VersionEdit::default();
        while !reader.is_empty() {
            let tag = reader.varint().ok_or("truncated tag")?;
            match tag {
                TAG_FORMAT => edit.format_version = Some(reader.varint().ok_or("truncated format")?),
                TAG_LOG_NUMBER => edit.log_number = Some(reader.varint().ok_or("truncated log number")?),
                TAG_NEXT_FILE => {
                    edit.next_file_number = Some(reader.varint().ok_or("truncated file number")?)
                }
                TAG_LAST_SEQ => edit.last_seq = Some(reader.varint().ok_or("truncated sequence")?),
                TAG_DELETED => {
                    let level = decode_level(&mut reader)?;
                    edit.deleted.push((level, reader.varint().ok_or("truncated deleted file")?));
                }
                TAG_ADDED => {
                    let level = decode_level(&mut reader)?;
                    edit.added.push((level, decode_file(&mut reader).ok_or("truncated added file")?));
                }
                _ => return Err("unknown manifest field"),
            }
        }
        Ok(edit)
    }
}

fn decode_level(reader: &mut Reader<'_>) -> Result<usize, &'static str> {
    let level = reader.varint().ok_or("truncated level")?;
    usize::try_from(level).ok().filter(|l| *l < NUM_LEVELS).ok_or("level out of range")
}

fn decode_file(reader: &mut Reader<'_>) -> Option<FileDesc> {
    Some(FileDesc {
        number: reader.varint()?,
        size: reader.varint()?,
        entry_count: reader.varint()?,
        smallest_key: reader.length_prefixed()?.to_vec(),
        smallest_trailer: reader.varint()?,
        largest_key: reader.length_prefixed()?.to_vec(),
        largest_trailer: reader.varint()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> VersionEdit {
        VersionEdit {
            format_version: Some(1),
            log_number: Some(12),
            next_file_number: Some(40),
            last_seq: Some(u64::MAX >> 8),
            deleted: vec![(0, 3), (4, 9)],
            added: vec![(
                1,
                FileDesc {
                    number: 17,
                    size: 4096,
                    entry_count: 100,
                    smallest_key: b"a".to_vec(),
                    smallest_trailer: 0x0105,
                    largest_key: b"zz\0".to_vec(),
                    largest_trailer: 7,
                },
            )],
        }
    }

    #[test]
    fn edits_round_trip() {
        let edit = sample();
        assert_eq!(VersionEdit::decode(&edit.encode()), Ok(edit));
        assert_eq!(VersionEdit::decode(&[]), Ok(VersionEdit::default()));
    }

    #[test]
    fn malformed_edits_never_panic_and_bad_fields_are_rejected() {
        let encoded = sample().encode();
        for len in 0..encoded.len() {
            let _ = VersionEdit::decode(&encoded[..len]);
        }
        for i in 0..encoded.len() {
            let mut bad = encoded.clone();
            bad[i] ^= 0x80;
            let _ = VersionEdit::decode(&bad);
        }
        // Cut inside the added file's key: must be an error, not a shorter key.
        assert!(VersionEdit::decode(&encoded[..encoded.len() - 6]).is_err());
        assert_eq!(VersionEdit::decode(&[99, 1]), Err("unknown manifest field"));
        assert_eq!(VersionEdit::decode(&[4, 7, 1]), Err("level out of range"));
    }
}
