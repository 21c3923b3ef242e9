//! Compressed data blocks: round trips, mixed tables, the skip rule, damage to compressed
//! blocks, the block cache holding uncompressed blocks, and format version 1 files.

use std::sync::Arc;

use stampkv_coding::{get_u64_le, get_varint32, get_varint64, put_varint32};
use stampkv_sstable::{
    BlockCache, Compression, ReadAt, Table, TableBuilder, TableError, TableOptions, FOOTER_SIZE,
    FORMAT_VERSION, MAX_UNCOMPRESSED_BLOCK,
};

use crate::common::{build, open, Entry, Rng};

/// A data block as the index lists it: (offset, size without trailer, type byte).
type BlockInfo = (usize, usize, u8);

/// The data blocks of a table file, read from its (uncompressed) index block.
fn data_blocks(file: &[u8]) -> Vec<BlockInfo> {
    let footer = file.len() - FOOTER_SIZE;
    let index_offset = get_u64_le(file, footer + 16).unwrap() as usize;
    let index_size = get_u64_le(file, footer + 24).unwrap() as usize;
    assert_eq!(file[index_offset + index_size], 0, "the index block is stored uncompressed");
    let index = &file[index_offset..index_offset + index_size];
    let restarts = u32::from_le_bytes(index[index.len() - 4..].try_into().unwrap()) as usize;
    let entries_end = index.len() - 4 - 4 * restarts;
    let mut blocks = Vec::new();
    let mut pos = 0;
    while pos < entries_end {
        let (shared, a) = get_varint32(&index[pos..]).unwrap();
        let (unshared, b) = get_varint32(&index[pos + a..]).unwrap();
        let (value_len, c) = get_varint32(&index[pos + a + b..]).unwrap();
        let _ = shared; // only the handles are needed, not the (prefix-compressed) keys
        let value = &index[pos + a + b + c + unshared as usize..][..value_len as usize];
        let (offset, n) = get_varint64(value).unwrap();
        let (size, _) = get_varint64(&value[n..]).unwrap();
        let (offset, size) = (offset as usize, size as usize);
        blocks.push((offset, size, file[offset + size]));
        pos += a + b + c + unshared as usize + value_len as usize;
    }
    blocks
}

/// Recomputes a block's trailer checksum after its bytes were changed in place (the
/// masked CRC-32 of stored bytes ++ type ++ u64 offset, as FORMAT.md spells it).
#[allow(clippy::manual_rotate, reason = "spelled as FORMAT.md spells it")]
fn reseal(file: &mut [u8], (offset, size, block_type): BlockInfo) {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&file[offset..offset + size]);
    hasher.update(&[block_type]);
    hasher.update(&(offset as u64).to_le_bytes());
    let crc = hasher.finalize();
    let masked = ((crc >> 15) | (crc << 17)).wrapping_add(0xa282_ead8);
    file[offset + size + 1..offset + size + 5].copy_from_slice(&masked.to_le_bytes());
}

/// JSON-like values: the same field names every time, a few varying digits.
fn json_value(i: u64) -> Vec<u8> {
    format!(
        "{{\"id\":{i},\"user\":\"user{:05}\",\"active\":true,\"tags\":[\"a\",\"b\"],\"score\":{}}}",
        i % 977,
        i * 7 % 100
    )
    .into_bytes()
}

fn entries(n: u64, value: impl Fn(u64, &mut Rng) -> Vec<u8>) -> Vec<Entry> {
    let mut rng = Rng::new(n);
    (0..n).map(|i| (format!("key{i:08}").into_bytes(), 1000 + i, value(i, &mut rng))).collect()
}

/// The tests count blocks and length-prefix bytes of 4 KiB blocks, whatever the default.
const BLOCK_SIZE: usize = 4096;

fn lz4() -> TableOptions {
    TableOptions { compression: Compression::Lz4, block_size: BLOCK_SIZE, ..TableOptions::default() }
}

fn uncompressed() -> TableOptions {
    TableOptions { compression: Compression::None, block_size: BLOCK_SIZE, ..TableOptions::default() }
}

fn assert_reads_back(table: &Arc<Table>, entries: &[Entry]) {
    for (user, trailer, value) in entries.iter().step_by(7) {
        assert_eq!(table.get(user, *trailer).unwrap(), Some((*trailer, value.clone())));
    }
    let mut it = table.iter();
    it.seek_to_first().unwrap();
    for (user, trailer, value) in entries {
        assert!(it.valid());
        assert_eq!((it.user_key(), it.trailer(), it.value()), (&user[..], *trailer, &value[..]));
        it.next().unwrap();
    }
    assert!(!it.valid());
}

#[test]
fn compressible_data_is_compressed_and_reads_back() {
    let entries = entries(3000, |i, _| json_value(i));
    let plain = build(&entries, uncompressed());
    let file = build(&entries, lz4());
    let blocks = data_blocks(&file);
    assert!(blocks.iter().all(|b| b.2 == 1), "every block compresses");
    assert!(data_blocks(&plain).iter().all(|b| b.2 == 0));
    let table = open(file.clone(), 1, None);
    let props = table.properties();
    assert_eq!(props.format_version, FORMAT_VERSION);
    assert_eq!(props.uncompressed_data_bytes, open(plain.clone(), 2, None).properties().data_bytes);
    assert!(props.data_bytes * 5 < props.uncompressed_data_bytes * 2, "ratio {props:?}");
    assert_eq!(
        table.uncompressed_size() - table.file_size(),
        props.uncompressed_data_bytes - props.data_bytes
    );
    assert!(file.len() * 2 < plain.len());
    assert_reads_back(&table, &entries);
}

#[test]
fn incompressible_data_is_stored_uncompressed() {
    let entries = entries(2000, |_, rng| rng.bytes(100));
    let file = build(&entries, lz4());
    assert!(data_blocks(&file).iter().all(|b| b.2 == 0), "random values do not shrink by 1/8");
    // Identical to a table written without compression, but for the recorded sizes.
    let table = open(file.clone(), 1, None);
    assert_eq!(table.properties().data_bytes, table.properties().uncompressed_data_bytes);
    assert_eq!(file.len(), build(&entries, uncompressed()).len());
    assert_reads_back(&table, &entries);
}

#[test]
fn one_table_mixes_compressed_and_uncompressed_blocks() {
    // Runs of compressible and random values, each a few blocks long.
    let entries = entries(3000, |i, rng| if (i / 200) % 2 == 0 { json_value(i) } else { rng.bytes(80) });
    let file = build(&entries, lz4());
    let blocks = data_blocks(&file);
    let compressed = blocks.iter().filter(|b| b.2 == 1).count();
    assert!(compressed > 10 && compressed + 10 < blocks.len(), "{compressed} of {}", blocks.len());
    let cache = Arc::new(BlockCache::new(16 << 20));
    let table = open(file, 1, Some(cache));
    assert_reads_back(&table, &entries);
    // Backwards too: stepping back across block boundaries of both kinds.
    let mut it = table.iter();
    it.seek_to_last().unwrap();
    for (user, trailer, _) in entries.iter().rev() {
        assert_eq!((it.user_key(), it.trailer()), (&user[..], *trailer));
        it.prev().unwrap();
    }
    assert!(!it.valid());
}

#[test]
fn the_cache_holds_and_charges_uncompressed_blocks() {
    let entries = entries(3000, |i, _| json_value(i));
    let file = build(&entries, lz4());
    let (_, stored_size, block_type) = data_blocks(&file)[3];
    assert_eq!(block_type, 1);
    let cache = Arc::new(BlockCache::new(16 << 20));
    let table = open(file, 1, Some(cache.clone()));
    let (user, trailer, value) = &entries[100];
    assert_eq!(table.get(user, *trailer).unwrap(), Some((*trailer, value.clone())));
    assert_eq!(cache.entry_count(), 1);
    // The charge is the decoded block (at least block_size), not the stored bytes.
    assert!(cache.usage_bytes() >= 4096 && stored_size * 2 < 4096, "{} {stored_size}", cache.usage_bytes());
    assert_eq!(table.get(user, *trailer).unwrap(), Some((*trailer, value.clone())));
    assert_eq!(cache.hit_stats(), (1, 1));
}

/// Reads every entry; returns the first error (which must be corruption of `t.sst` at
/// `offset`).
fn scan_error(file: Vec<u8>, offset: usize) -> String {
    let bytes: Arc<dyn ReadAt> = Arc::new(file);
    let table = Table::open(bytes, 1, "t.sst".into(), None).unwrap();
    let mut it = table.iter();
    let mut step = it.seek_to_first();
    while step.is_ok() && it.valid() {
        step = it.next();
    }
    match step {
        Err(TableError::Corruption { file, offset: at, reason }) => {
            assert_eq!((file.as_str(), at), ("t.sst", offset as u64), "{reason}");
            reason
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(()) => panic!("damage not detected"),
    }
}

fn compressed_table() -> (Vec<u8>, BlockInfo) {
    let file = build(&entries(3000, |i, _| json_value(i)), lz4());
    let block = data_blocks(&file)[5];
    assert_eq!(block.2, 1);
    (file, block)
}

#[test]
fn a_flipped_byte_in_a_compressed_block_fails_its_checksum() {
    let (file, (offset, size, _)) = compressed_table();
    for pos in [offset, offset + 1, offset + size / 2, offset + size - 1, offset + size] {
        let mut bad = file.clone();
        bad[pos] ^= 0x04;
        assert!(scan_error(bad, offset).contains("checksum"), "flip at {pos}");
    }
}

#[test]
fn a_compressed_block_with_a_bad_length_is_corruption() {
    let (file, block) = compressed_table();
    let (offset, _, _) = block;
    let (declared, prefix_len) = get_varint32(&file[offset..]).unwrap();
    assert_eq!(prefix_len, 2, "a 4 KiB block has a 2-byte length prefix");
    let mut cases: Vec<(Vec<u8>, &str)> = Vec::new();
    // A huge declared length (5-byte varint over the prefix and the first LZ4 bytes).
    let mut huge = Vec::new();
    put_varint32(&mut huge, u32::MAX);
    cases.push((huge, "exceeds"));
    // A declared length beyond the cap by one.
    let mut over_cap = Vec::new();
    put_varint32(&mut over_cap, MAX_UNCOMPRESSED_BLOCK as u32 + 1);
    cases.push((over_cap, "exceeds"));
    // A length prefix that never ends: the continuation bit on every byte.
    cases.push((vec![0x80; 6], "length prefix"));
    // Honest-looking lengths that do not match what the LZ4 bytes decode to.
    for wrong in [declared - 1, declared + 1, declared * 2] {
        let mut bytes = Vec::new();
        put_varint32(&mut bytes, wrong);
        assert_eq!(bytes.len(), prefix_len);
        cases.push((bytes, "compressed block"));
    }
    for (bytes, expected) in cases {
        let mut bad = file.clone();
        bad[offset..offset + bytes.len()].copy_from_slice(&bytes);
        reseal(&mut bad, block);
        let reason = scan_error(bad, offset);
        assert!(reason.contains(expected), "{bytes:?}: {reason}");
    }
}

#[test]
fn an_unknown_block_type_is_corruption() {
    let (mut file, (offset, size, _)) = compressed_table();
    file[offset + size] = 2;
    reseal(&mut file, (offset, size, 2));
    assert!(scan_error(file, offset).contains("unsupported block type 2"));
}

/// `tests/data/format_v1.sst` was written by the format version 1 writer (before block
/// compression) with these entries, block size 128, restart interval 4, 10 bloom bits per
/// key and the user property `origin`.
#[test]
fn format_version_1_files_read_unchanged() {
    let file = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/format_v1.sst")).unwrap();
    assert_eq!(file[file.len() - FOOTER_SIZE + 32..][..4], 1u32.to_le_bytes());
    let expected: Vec<Entry> = (0..40u64)
        .map(|i| {
            let key = format!("key{:03}", i / 2).into_bytes();
            (key, 1000 - i, format!("value {i} ").repeat((i % 5) as usize + 1).into_bytes())
        })
        .collect();
    assert!(data_blocks(&file).len() > 5 && data_blocks(&file).iter().all(|b| b.2 == 0));
    let table = open(file, 1, Some(Arc::new(BlockCache::new(1 << 20))));
    assert_eq!(table.format_version(), 1);
    let props = table.properties();
    assert_eq!(props.uncompressed_data_bytes, props.data_bytes);
    assert_eq!(table.uncompressed_size(), table.file_size());
    assert_eq!(table.user_property("origin"), Some(&b"format version 1"[..]));
    assert!(table.has_filter());
    assert_reads_back(&table, &expected);
    assert_eq!(table.get(b"key007", 985).unwrap(), Some((985, b"value 15 ".to_vec())));
    assert_eq!(table.get(b"key007", 984).unwrap(), None);
}

#[test]
fn tables_written_now_carry_version_2() {
    let file = build(&entries(10, |i, _| json_value(i)), uncompressed());
    assert_eq!(FORMAT_VERSION, 2);
    assert_eq!(file[file.len() - FOOTER_SIZE + 32..][..4], 2u32.to_le_bytes());
    let table = open(file, 1, None);
    assert_eq!(table.format_version(), 2);
}

#[test]
fn large_compressible_values_round_trip() {
    // Blocks far over block_size (one big value each), some compressible, some not.
    let mut builder = TableBuilder::new(Vec::new(), lz4());
    let mut rng = Rng::new(5);
    let mut expected = Vec::new();
    for i in 0..6u64 {
        let value = if i % 2 == 0 { json_value(i).repeat(5000) } else { rng.bytes(300_000) };
        builder.add(format!("big{i}").as_bytes(), 7, &value).unwrap();
        expected.push((format!("big{i}").into_bytes(), 7, value));
    }
    let (summary, file) = builder.finish(&[]).unwrap();
    let types: Vec<u8> = data_blocks(&file).iter().map(|b| b.2).collect();
    assert_eq!(types, [1, 0, 1, 0, 1, 0]);
    assert!(summary.properties.uncompressed_data_bytes > 2 * summary.properties.data_bytes);
    assert_reads_back(&open(file, 1, None), &expected);
}

/// After a run of blocks that do not compress the writer tries only every 8th block, but
/// compressible data after such a run is compressed again within 8 blocks.
#[test]
fn compression_resumes_after_a_long_incompressible_run() {
    let entries = entries(4000, |i, rng| if i < 2000 { rng.bytes(100) } else { json_value(i) });
    let file = build(&entries, lz4());
    // The random half alone makes this many blocks (the same cut points as in `file`).
    let random_blocks = data_blocks(&build(&entries[..2000], lz4())).len();
    assert!(random_blocks > 40, "{random_blocks}");
    let types: Vec<u8> = data_blocks(&file).iter().map(|b| b.2).collect();
    let raw_prefix = types.iter().take_while(|&&t| t == 0).count();
    let compressed_tail = types.iter().rev().take_while(|&&t| t == 1).count();
    assert_eq!(raw_prefix + compressed_tail, types.len(), "{types:?}");
    assert!(raw_prefix >= random_blocks - 1 && raw_prefix <= random_blocks + 8, "{raw_prefix} {types:?}");
    assert_reads_back(&open(file, 1, None), &entries);
}
