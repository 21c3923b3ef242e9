//! Damaged files: every single-byte change is either detected or harmless, never
//! returns different data, never panics; every truncation fails at open.

use std::sync::Arc;

use stampkv_sstable::{Compression, ReadAt, Table, TableError, TableOptions};

use crate::common::{build, Entry};

fn small_table() -> (Vec<u8>, Vec<Entry>) {
    let entries: Vec<Entry> = (0..60u64)
        .map(|i| {
            let user = format!("user-{:03}", i / 3).into_bytes();
            (user, 500 - i, vec![b'a' + (i % 26) as u8; (i % 9) as usize * 3])
        })
        .collect();
    let options = TableOptions { block_size: 128, restart_interval: 4, ..TableOptions::default() };
    (build(&entries, options), entries)
}

/// Damage must be reported as corruption of the named file.
fn assert_corruption(err: &TableError) {
    match err {
        TableError::Corruption { file, .. } => assert_eq!(file, "damaged.sst"),
        other => panic!("damage reported as {other}"),
    }
}

/// Reads everything; asserts that whatever came back before an error is original data.
/// Returns whether any error was seen.
fn check_damaged(bytes: Vec<u8>, entries: &[Entry]) -> bool {
    let file: Arc<dyn ReadAt> = Arc::new(bytes);
    let table = match Table::open(file, 7, "damaged.sst".into(), None) {
        Ok(table) => table,
        Err(e) => {
            assert_corruption(&e);
            return true;
        }
    };
    let mut failed = false;
    let mut it = table.iter();
    let mut got = Vec::new();
    let mut step = it.seek_to_first();
    while step.is_ok() && it.valid() {
        got.push((it.user_key().to_vec(), it.trailer(), it.value().to_vec()));
        step = it.next();
    }
    if let Err(e) = &step {
        assert_corruption(e);
        assert!(!it.valid(), "iterator still valid after an error");
        failed = true;
    }
    assert!(got.len() <= entries.len() && got[..] == entries[..got.len()]);
    assert!(step.is_err() || got.len() == entries.len(), "silently short forward scan");

    got.clear();
    let mut step = it.seek_to_last();
    while step.is_ok() && it.valid() {
        got.push((it.user_key().to_vec(), it.trailer(), it.value().to_vec()));
        step = it.prev();
    }
    if let Err(e) = &step {
        assert_corruption(e);
        assert!(!it.valid(), "iterator still valid after an error");
        failed = true;
    }
    assert!(got.iter().eq(entries.iter().rev().take(got.len())));
    assert!(step.is_err() || got.len() == entries.len(), "silently short reverse scan");

    for (user, trailer, value) in entries {
        match table.get(user, *trailer) {
            Ok(found) => assert_eq!(found, Some((*trailer, value.clone()))),
            Err(e) => {
                assert_corruption(&e);
                failed = true;
            }
        }
    }
    failed
}

#[test]
fn every_byte_flip_is_detected_or_harmless() {
    let (file, entries) = small_table();
    assert!(file.len() > 1500 && file.len() < 8192, "size {}", file.len());
    assert!(!check_damaged(file.clone(), &entries), "the intact table must read cleanly");
    for pos in 0..file.len() {
        let original = file[pos];
        for damaged_byte in [original ^ 0x01, 0x00, 0xff] {
            if damaged_byte == original {
                continue;
            }
            let mut damaged = file.clone();
            damaged[pos] = damaged_byte;
            // Every byte of the file is covered by a checksum or the magic number, and
            // CRC-32 catches every single-byte change, so each one must be reported.
            assert!(check_damaged(damaged, &entries), "undetected change at byte {pos}");
        }
    }
}

#[test]
fn every_truncation_fails_at_open() {
    let (file, _) = small_table();
    for len in 0..file.len() {
        let bytes: Arc<dyn ReadAt> = Arc::new(file[..len].to_vec());
        match Table::open(bytes, 1, "short.sst".into(), None) {
            Err(TableError::Corruption { file, .. }) => assert_eq!(file, "short.sst"),
            Err(e) => panic!("truncated to {len}: unexpected error {e}"),
            Ok(_) => panic!("truncated to {len}: opened"),
        }
    }
}

/// A data block copied over the next one (same size, valid checksum for its own
/// offset) is caught by the offset in the checksum.
#[test]
fn misplaced_block_is_detected() {
    // Restart interval 1 and equal-length entries: every block holds 3 entries and has
    // the same size.
    let entries: Vec<Entry> =
        (0..39u64).map(|i| (format!("k{i:04}").into_bytes(), 1, vec![b'v'; 20])).collect();
    let options = TableOptions {
        block_size: 100,
        restart_interval: 1,
        bloom_bits_per_key: 0,
        compression: Compression::None,
        restart_bytes: 0,
        index_restart_interval: 1,
    };
    let mut file = build(&entries, options);
    let props = crate::common::open(file.clone(), 1, None).properties().clone();
    assert_eq!(props.data_block_count, 13);
    let block_len = (props.data_bytes / props.data_block_count) as usize;
    let (first, rest) = file.split_at_mut(block_len);
    rest[..block_len].copy_from_slice(first);
    assert!(check_damaged(file, &entries));
}
