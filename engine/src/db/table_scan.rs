//! A tolerant reader of one table file (`sstable/FORMAT.md`): what `verify` reports and what
//! `repair` salvages.
//!
//! The table reader the engine serves reads with ([`stampkv_sstable::Table`]) refuses a
//! file whose footer, index or meta blocks are damaged, and stops at the first bad data
//! block. This reader instead locates every data block it can and checks each one on its
//! own:
//!
//! - With an intact footer and index, the index lists the data blocks; each is checked
//!   (checksum, then structure), so one damaged block costs only its own entries.
//! - If the footer or the index is damaged, the data blocks are found by following the
//!   chain of blocks from offset 0: blocks are contiguous, and each is followed by a
//!   trailer whose checksum covers the block's bytes, its type and its offset, so the end
//!   of the block starting at `s` is the first `e` where `bytes[e]` is a known block type
//!   `t` and `crc(bytes[s..e] ++ t ++ s)` matches the four bytes after it (a false match
//!   has odds of 2^-32 per position). The data region
//!   ends where the metaindex (from the footer, or as the second-last block of the chain)
//!   says the first meta block starts.
//!
//! Every byte of a table belongs to a block, a trailer or the footer, so checking all of
//! them, as this reader does, covers the whole file. Compressed blocks are decompressed
//! (by the table crate's checked decoder) after their checksum verifies.

use std::borrow::Cow;

use stampkv_coding::crc::mask;
use stampkv_coding::{get_u32_le, get_u64_le, get_varint32, get_varint64};
use stampkv_sstable::{decode_stored_block, is_known_block_type, FORMAT_VERSION, MIN_FORMAT_VERSION};

/// Bytes after every block: a type byte and a masked CRC-32.
const TRAILER: u64 = 5;
/// Size of the footer.
const FOOTER: usize = 56;
const MAGIC: &[u8; 8] = b"\x89STAMPKV";
const CHECKSUM_KIND: u8 = 1;

/// Where a block lies: its offset and its size without the trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub offset: u64,
    pub size: u64,
}

impl Span {
    /// The offset just past the block's trailer.
    pub(super) fn end(&self) -> u64 {
        self.offset.saturating_add(self.size).saturating_add(TRAILER)
    }
}

/// One entry of a data block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableEntry {
    pub key: Vec<u8>,
    pub trailer: u64,
    pub value: Vec<u8>,
}

/// What a scan found in one table file.
#[derive(Debug, Default)]
pub(crate) struct TableScan {
    /// The data blocks located, in file order, each with the outcome of its checks.
    pub blocks: Vec<(Span, Result<(), String>)>,
    /// Damage outside the data blocks (footer, index, meta blocks, layout), by offset.
    pub problems: Vec<(u64, String)>,
    /// A part of the data region whose blocks could not be located: (start, end).
    pub unlocated: Option<(u64, u64)>,
    /// The filter and properties blocks, when the metaindex could be read.
    pub meta_blocks: Vec<Span>,
}

impl TableScan {
    /// Whether every check passed.
    pub(super) fn is_clean(&self) -> bool {
        self.problems.is_empty() && self.unlocated.is_none() && self.blocks.iter().all(|(_, r)| r.is_ok())
    }
}

/// Scans a whole table file held in memory.
pub(crate) fn scan_table(data: &[u8]) -> TableScan {
    let mut scan = TableScan::default();
    let len = data.len() as u64;
    let footer_offset = len.saturating_sub(FOOTER as u64);
    let footer = match data.len().checked_sub(FOOTER).and_then(|at| data.get(at..)) {
        Some(bytes) => parse_footer(bytes, footer_offset),
        None => Err("file too short for a footer".to_owned()),
    };
    let (index, metaindex) = match footer {
        Ok((metaindex, index)) => (Some(index), Some(metaindex)),
        Err(reason) => {
            scan.problems.push((footer_offset, reason));
            // Find the index and metaindex as the last two blocks of the chain.
            let (chain, stopped) = chain_scan(data, 0, footer_offset);
            match (stopped, chain.as_slice()) {
                (None, [.., metaindex, index]) => (Some(*index), Some(*metaindex)),
                _ => (None, None),
            }
        }
    };
    let handles = index.and_then(|span| match read_index(data, span) {
        Ok(handles) => Some(handles),
        Err(reason) => {
            scan.problems.push((span.offset, reason));
            None
        }
    });
    let data_end = metaindex.and_then(|span| match read_metaindex(data, span) {
        Ok((filter, properties)) => {
            scan.check_meta_blocks(data, filter, properties, span);
            Some(filter.map_or(properties.offset, |f| f.offset))
        }
        Err(reason) => {
            scan.problems.push((span.offset, reason));
            None
        }
    });
    match (handles, data_end) {
        (Some(handles), end) => scan.check_listed_blocks(data, &handles, end),
        (None, Some(end)) => {
            let (chain, stopped) = chain_scan(data, 0, end);
            scan.blocks =
                chain.into_iter().map(|span| (span, check_data_block(data, span).map(|_| ()))).collect();
            scan.unlocated = stopped.map(|at| (at, end));
        }
        (None, None) => scan.unlocated = Some((0, footer_offset)),
    }
    scan
}

impl TableScan {
    /// Checks the filter and properties blocks' checksums and that the meta region is
    /// contiguous: [filter] properties metaindex.
    fn check_meta_blocks(&mut self, data: &[u8], filter: Option<Span>, properties: Span, metaindex: Span) {
        if properties.end() != metaindex.offset || filter.is_some_and(|f| f.end() != properties.offset) {
            self.problems.push((metaindex.offset, "meta blocks are not contiguous".to_owned()));
        }
        for span in filter.into_iter().chain([properties]) {
            self.meta_blocks.push(span);
            if let Err(reason) = checked_block(data, span) {
                self.problems.push((span.offset, reason));
            }
        }
    }

    /// Checks the data blocks the index lists: they must tile `[0, data_end)` (when the
    /// metaindex says where the data region ends).
    fn check_listed_blocks(&mut self, data: &[u8], handles: &[(Vec<u8>, Span)], data_end: Option<u64>) {
        let mut expected = 0;
        for (_, span) in handles {
            if span.offset != expected || data_end.is_some_and(|end| span.end() > end) {
                self.problems.push((span.offset, "index lists a block out of place".to_owned()));
            }
            expected = span.end();
            self.blocks.push((*span, check_data_block(data, *span).map(|_| ())));
        }
        if data_end.is_some_and(|end| end != expected) {
            self.problems.push((expected, "the index does not cover the whole data region".to_owned()));
        }
    }
}

/// Decodes the footer: (metaindex, index).
fn parse_footer(bytes: &[u8], offset: u64) -> Result<(Span, Span), String> {
    if bytes.get(48..56) != Some(&MAGIC[..]) {
        return Err("footer: bad magic number".into());
    }
    let stored = get_u32_le(bytes, 44).unwrap_or_default();
    if mask(crc32fast::hash(bytes.get(..44).unwrap_or_default())) != stored {
        return Err("footer checksum mismatch".into());
    }
    let version = get_u32_le(bytes, 32).unwrap_or_default();
    if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) || bytes.get(36) != Some(&CHECKSUM_KIND) {
        return Err("footer: unknown format version or checksum kind".into());
    }
    let field = |at| get_u64_le(bytes, at).unwrap_or(u64::MAX);
    let metaindex = Span { offset: field(0), size: field(8) };
    let index = Span { offset: field(16), size: field(24) };
    if index.end() != offset || metaindex.end() != index.offset {
        return Err("footer: index and metaindex are not where they belong".into());
    }
    Ok((metaindex, index))
}

/// The contents of the block at `span` (decompressed if it is stored compressed), after
/// its checksum verified.
pub(crate) fn checked_block(data: &[u8], span: Span) -> Result<Cow<'_, [u8]>, String> {
    let start = usize::try_from(span.offset).map_err(|_| "block offset out of range")?;
    let size = usize::try_from(span.size).map_err(|_| "block size out of range")?;
    let end = start.checked_add(size).ok_or("block size out of range")?;
    let (Some(block), Some(trailer)) = (data.get(start..end), data.get(end..end.saturating_add(5))) else {
        return Err("block extends past the end of the file".into());
    };
    verified_contents(block, trailer, span.offset)
}

/// Checks a block's trailer (checksum over the stored bytes, type and offset), then
/// decodes the stored bytes as the type byte says.
fn verified_contents<'a>(stored: &'a [u8], trailer: &[u8], offset: u64) -> Result<Cow<'a, [u8]>, String> {
    let block_type = trailer.first().copied().unwrap_or(u8::MAX);
    if block_crc(stored, block_type, offset) != get_u32_le(trailer, 1).unwrap_or_default() {
        return Err("block checksum mismatch".into());
    }
    decode_stored_block(block_type, stored)
}

fn block_crc(block: &[u8], block_type: u8, offset: u64) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(block);
    hasher.update(&[block_type]);
    hasher.update(&offset.to_le_bytes());
    mask(hasher.finalize())
}

/// Follows the chain of blocks from `start` up to `limit`: the blocks found, and where the
/// chain broke if it did not reach `limit`.
fn chain_scan(data: &[u8], start: u64, limit: u64) -> (Vec<Span>, Option<u64>) {
    let mut spans = Vec::new();
    let mut pos = start;
    while pos < limit {
        match find_block_end(data, pos, limit) {
            Some(end) => {
                let span = Span { offset: pos, size: end - pos };
                spans.push(span);
                pos = span.end();
            }
            None => return (spans, Some(pos)),
        }
    }
    (spans, None)
}

/// The end (trailer offset) of the block starting at `start`, if a trailer that verifies
/// lies before `limit`.
fn find_block_end(data: &[u8], start: u64, limit: u64) -> Option<u64> {
    let begin = usize::try_from(start).ok()?;
    let limit = usize::try_from(limit).ok()?.min(data.len());
    let mut hasher = crc32fast::Hasher::new();
    let mut end = begin;
    while end + 5 <= limit {
        let byte = *data.get(end)?;
        if is_known_block_type(byte) {
            let mut at_end = hasher.clone();
            at_end.update(&[byte]);
            at_end.update(&start.to_le_bytes());
            if Some(mask(at_end.finalize())) == get_u32_le(data, end + 1) {
                return Some(end as u64);
            }
        }
        hasher.update(&[byte]);
        end += 1;
    }
    None
}

/// The index block's entries: (separator key, data block).
fn read_index(data: &[u8], span: Span) -> Result<Vec<(Vec<u8>, Span)>, String> {
    let block = checked_block(data, span)?;
    let entries = parse_block(&block).map_err(|r| format!("index block: {r}"))?;
    entries
        .into_iter()
        .map(|(key, value)| Ok((key, decode_handle(value).ok_or("index block: bad block handle")?)))
        .collect()
}

/// The metaindex block's filter (if any) and properties handles.
fn read_metaindex(data: &[u8], span: Span) -> Result<(Option<Span>, Span), String> {
    let block = checked_block(data, span)?;
    let entries = parse_block(&block).map_err(|r| format!("metaindex block: {r}"))?;
    let mut filter = None;
    let mut properties = None;
    for (key, value) in entries {
        let handle = decode_handle(value).ok_or("metaindex block: bad block handle")?;
        match key.as_slice() {
            b"filter" => filter = Some(handle),
            b"properties" => properties = Some(handle),
            _ => {}
        }
    }
    let properties = properties.ok_or("metaindex block: no properties block")?;
    Ok((filter, properties))
}

fn decode_handle(value: &[u8]) -> Option<Span> {
    let (offset, n) = get_varint64(value)?;
    let (size, m) = get_varint64(value.get(n..)?)?;
    (n + m == value.len()).then_some(Span { offset, size })
}

/// Verifies and decodes the data block at `span` of the file `data`: its entries, in order.
pub(crate) fn check_data_block(data: &[u8], span: Span) -> Result<Vec<TableEntry>, String> {
    decode_data_block(&checked_block(data, span)?)
}

/// [`check_data_block`] for a block read on its own: `bytes` holds the block and its
/// trailer, read from `span`.
pub(crate) fn check_read_block(bytes: &[u8], span: Span) -> Result<Vec<TableEntry>, String> {
    let size = usize::try_from(span.size).map_err(|_| "block size out of range")?;
    let (Some(block), Some(trailer)) = (bytes.get(..size), bytes.get(size..size.saturating_add(5))) else {
        return Err("block extends past the end of the file".into());
    };
    decode_data_block(&verified_contents(block, trailer, span.offset)?)
}

fn decode_data_block(block: &[u8]) -> Result<Vec<TableEntry>, String> {
    let entries = parse_block(block)?;
    if entries.is_empty() {
        return Err("empty data block".into());
    }
    let mut out: Vec<TableEntry> = Vec::with_capacity(entries.len());
    for (stored, value) in entries {
        let user_len = stored.len().checked_sub(8).ok_or("stored key shorter than its trailer")?;
        let (user, encoded) = stored.split_at(user_len);
        let trailer = !u64::from_be_bytes(encoded.try_into().map_err(|_| "bad trailer")?);
        if let Some(last) = out.last() {
            let ordered = crate::key::compare(&last.key, last.trailer, user, trailer).is_lt();
            if !ordered {
                return Err("entries out of order in a data block".into());
            }
        }
        out.push(TableEntry { key: user.to_vec(), trailer, value: value.to_vec() });
    }
    Ok(out)
}

/// An entry of a block: (full stored key, value).
type BlockEntry<'a> = (Vec<u8>, &'a [u8]);

/// Decodes a block's entries as (full key, value), checking its structure.
fn parse_block(block: &[u8]) -> Result<Vec<BlockEntry<'_>>, &'static str> {
    let count_at = block.len().checked_sub(4).ok_or("block shorter than its restart count")?;
    let restarts = get_u32_le(block, count_at).ok_or("block too short")? as usize;
    let array_len = restarts.checked_mul(4).filter(|&n| restarts >= 1 && n <= count_at);
    let array_len = array_len.ok_or("bad restart count")?;
    let entries_end = count_at - array_len;
    let points: Vec<usize> = (0..restarts)
        .map(|i| get_u32_le(block, entries_end + 4 * i).map_or(usize::MAX, |p| p as usize))
        .collect();
    let ordered = points.first() == Some(&0) && points.windows(2).all(|w| w.first() < w.get(1));
    if !ordered || points.iter().any(|&p| p >= entries_end && entries_end > 0) {
        return Err("bad restart points");
    }
    let mut out = Vec::new();
    let mut key: Vec<u8> = Vec::new();
    let mut pos = 0;
    let mut next_restart = points.iter().peekable();
    while pos < entries_end {
        let rest = block.get(pos..entries_end).ok_or("entry out of range")?;
        let (shared, a) = get_varint32(rest).ok_or("bad entry header")?;
        let (unshared, b) = get_varint32(rest.get(a..).unwrap_or_default()).ok_or("bad entry header")?;
        let (value_len, c) = get_varint32(rest.get(a + b..).unwrap_or_default()).ok_or("bad entry header")?;
        let header = a + b + c;
        let (shared, unshared, value_len) = (shared as usize, unshared as usize, value_len as usize);
        let delta = rest.get(header..header + unshared).ok_or("entry key out of range")?;
        let value =
            rest.get(header + unshared..header + unshared + value_len).ok_or("entry value out of range")?;
        if next_restart.peek() == Some(&&pos) {
            next_restart.next();
            if shared != 0 {
                return Err("restart entry shares a prefix");
            }
        }
        if shared > key.len() {
            return Err("entry shares more than the previous key");
        }
        key.truncate(shared);
        key.extend_from_slice(delta);
        out.push((key.clone(), value));
        pos += header + unshared + value_len;
    }
    if next_restart.next().is_some() {
        return Err("restart point not at an entry");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code")]

    use super::*;
    use stampkv_sstable::{Compression, TableBuilder, TableOptions};

    fn table(bloom: u32, compression: Compression) -> (Vec<u8>, Vec<TableEntry>) {
        let options = TableOptions {
            block_size: 256,
            restart_interval: 4,
            bloom_bits_per_key: bloom,
            compression,
            ..TableOptions::default()
        };
        let mut builder = TableBuilder::new(Vec::new(), options);
        let mut entries = Vec::new();
        for i in 0..300u64 {
            let key = format!("key{i:05}").into_bytes();
            let value = format!("value {i} {}", "x".repeat((i % 13) as usize)).into_bytes();
            builder.add(&key, (i + 1) << 8 | 1, &value).unwrap();
            entries.push(TableEntry { key, trailer: (i + 1) << 8 | 1, value });
        }
        (builder.finish(&[]).unwrap().1, entries)
    }

    fn entries_of(data: &[u8], scan: &TableScan) -> Vec<TableEntry> {
        scan.blocks.iter().filter_map(|(span, _)| check_data_block(data, *span).ok()).flatten().collect()
    }

    /// How many data blocks of a scanned table are stored compressed (type byte 1).
    fn compressed_blocks(data: &[u8], scan: &TableScan) -> usize {
        scan.blocks.iter().filter(|(span, _)| data[(span.offset + span.size) as usize] == 1).count()
    }

    #[test]
    fn a_clean_table_scans_clean() {
        for compression in [Compression::None, Compression::Lz4] {
            for bloom in [0, 10] {
                let (data, entries) = table(bloom, compression);
                let scan = scan_table(&data);
                assert!(scan.is_clean(), "{:?}", scan.problems);
                assert_eq!(entries_of(&data, &scan), entries);
                let compressed = compressed_blocks(&data, &scan);
                assert_eq!(compressed > 10, compression == Compression::Lz4, "{compressed} compressed");
            }
        }
    }

    /// With the footer gone, the data blocks are found by following the chain of
    /// trailers, compressed blocks (type 1) included.
    #[test]
    fn the_block_chain_is_followed_through_compressed_blocks() {
        let (mut data, entries) = table(10, Compression::Lz4);
        let len = data.len();
        data[len - 1] ^= 1; // the magic number
        let scan = scan_table(&data);
        assert!(!scan.is_clean());
        assert!(scan.unlocated.is_none() && compressed_blocks(&data, &scan) > 10);
        assert_eq!(entries_of(&data, &scan), entries);
    }

    /// A table written by format version 1 (no compression) still scans clean.
    #[test]
    fn a_format_version_1_table_scans_clean() {
        let data =
            include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../sstable/tests/data/format_v1.sst"));
        let scan = scan_table(data);
        assert!(scan.is_clean(), "{:?}", scan.problems);
        assert_eq!(entries_of(data, &scan).len(), 40);
    }

    #[test]
    fn every_flipped_byte_is_found_and_costs_at_most_one_block() {
        for compression in [Compression::None, Compression::Lz4] {
            every_flipped_byte_is_found_with(compression);
        }
    }

    fn every_flipped_byte_is_found_with(compression: Compression) {
        let (data, entries) = table(10, compression);
        let clean = scan_table(&data);
        assert!(clean.blocks.len() > 10);
        for pos in 0..data.len() {
            let mut bad = data.clone();
            bad[pos] ^= 0x10;
            let scan = scan_table(&bad);
            assert!(!scan.is_clean(), "flip at {pos} not found");
            let found = entries_of(&bad, &scan);
            for entry in &found {
                assert!(entries.contains(entry), "flip at {pos} invented {entry:?}");
            }
            let lost = entries.len() - found.len();
            assert!(lost <= 20, "flip at {pos} lost {lost} entries");
            let in_data = pos < clean.blocks.last().unwrap().0.end() as usize;
            if !in_data {
                assert_eq!(lost, 0, "flip at {pos} outside the data blocks lost entries");
            }
        }
    }
}
