//! Builder contract: ordering, empty tables, sizes, real files.

use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

use stampkv_sstable::{Compression, ReadAt, Table, TableBuilder, TableError, TableIter, TableOptions};

use crate::common::{build, fixed_entries, open};

#[test]
fn rejects_out_of_order_and_duplicates() {
    let mut b = TableBuilder::new(Vec::new(), TableOptions::default());
    b.add(b"b", 10, b"1").unwrap();
    // Same version again.
    assert!(matches!(b.add(b"b", 10, b"2"), Err(TableError::OutOfOrder)));
    // Older user key.
    assert!(matches!(b.add(b"a", 99, b"2"), Err(TableError::OutOfOrder)));
    // Same user key, newer trailer (must come first).
    assert!(matches!(b.add(b"b", 11, b"2"), Err(TableError::OutOfOrder)));
    // The rejected calls changed nothing: continuing works.
    b.add(b"b", 9, b"3").unwrap();
    b.add(b"b\x00", u64::MAX, b"4").unwrap();
    assert_eq!(b.entry_count(), 3);
    let (summary, bytes) = b.finish(&[]).unwrap();
    assert_eq!(summary.entry_count, 3);
    assert_eq!((summary.smallest_key.as_slice(), summary.smallest_trailer), (&b"b"[..], 10));
    assert_eq!((summary.largest_key.as_slice(), summary.largest_trailer), (&b"b\x00"[..], u64::MAX));
    assert_eq!(summary.file_size, bytes.len() as u64);
    let table = open(bytes, 1, None);
    assert_eq!(table.get(b"b", 9).unwrap(), Some((9, b"3".to_vec())));
    assert_eq!(table.get(b"b", 8).unwrap(), None);
}

#[test]
fn empty_table() {
    let (summary, bytes) = TableBuilder::new(Vec::new(), TableOptions::default()).finish(&[]).unwrap();
    assert_eq!(summary.entry_count, 0);
    assert!(summary.smallest_key.is_empty() && summary.largest_key.is_empty());
    let table = open(bytes, 1, None);
    assert_eq!(table.entry_count(), 0);
    assert_eq!(table.get(b"", 0).unwrap(), None);
    let mut it = table.iter();
    assert!(!it.valid());
    it.seek_to_first().unwrap();
    assert!(!it.valid());
    it.seek_to_last().unwrap();
    assert!(!it.valid());
    it.seek(b"", u64::MAX).unwrap();
    assert!(!it.valid());
    it.seek_for_prev(b"\xff", 0).unwrap();
    assert!(!it.valid());
    it.next().unwrap();
    it.prev().unwrap();
    assert!(!it.valid());
    assert_eq!(table.properties().smallest, None);
}

#[test]
fn estimated_size_tracks_output() {
    let options = TableOptions { compression: Compression::None, ..TableOptions::default() };
    let mut b = TableBuilder::new(Vec::new(), options);
    let mut last = 0;
    for (user, trailer, value) in fixed_entries(2000, 100) {
        b.add(&user, trailer, &value).unwrap();
        let size = b.estimated_size();
        assert!(size >= last);
        last = size;
    }
    let (summary, _) = b.finish(&[]).unwrap();
    assert!(last <= summary.file_size && summary.file_size < last + 4096 * 4);
}

/// With compression the block being built counts at its uncompressed size, so the
/// estimate can drop when a block is written; it stays within a block of the output.
#[test]
fn estimated_size_tracks_compressed_output() {
    let mut b = TableBuilder::new(Vec::new(), TableOptions::default());
    let mut last = 0;
    for (user, trailer, value) in fixed_entries(2000, 100) {
        b.add(&user, trailer, &value).unwrap();
        last = b.estimated_size();
    }
    let (summary, _) = b.finish(&[]).unwrap();
    assert!(summary.properties.data_bytes * 2 < summary.properties.uncompressed_data_bytes);
    assert!(last <= summary.file_size + 4096 * 2 && summary.file_size < last + 4096 * 4);
}

#[test]
fn iterator_runs_off_both_ends_and_comes_back() {
    let entries = fixed_entries(100, 10);
    let options = TableOptions { block_size: 64, ..TableOptions::default() };
    let table = open(build(&entries, options), 1, None);
    let mut it = table.iter();
    it.seek_to_last().unwrap();
    it.next().unwrap();
    assert!(!it.valid());
    it.seek_to_first().unwrap();
    it.prev().unwrap();
    assert!(!it.valid());
    it.seek(b"", 0).unwrap();
    assert_eq!(it.user_key(), entries[0].0.as_slice());
    it.seek(b"zzz", 0).unwrap();
    assert!(!it.valid());
    it.seek_for_prev(b"zzz", 0).unwrap();
    assert_eq!(it.user_key(), entries[99].0.as_slice());
    it.seek_for_prev(b"", u64::MAX).unwrap();
    assert!(!it.valid());
}

#[test]
fn real_file_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.sst");
    let file = std::fs::File::create(&path).unwrap();
    let mut b = TableBuilder::new(BufWriter::new(file), TableOptions::default());
    let entries = fixed_entries(5000, 50);
    for (user, trailer, value) in &entries {
        b.add(user, *trailer, value).unwrap();
    }
    let (summary, writer) = b.finish(&[]).unwrap();
    let file = writer.into_inner().unwrap();
    file.sync_all().unwrap();
    assert_eq!(file.metadata().unwrap().len(), summary.file_size);
    let file: Arc<dyn ReadAt> = Arc::new(std::fs::File::open(&path).unwrap());
    let table = Table::open(file, 1, "000001.sst".into(), None).unwrap();
    for (user, trailer, value) in entries.iter().step_by(7) {
        assert_eq!(table.get(user, *trailer).unwrap(), Some((*trailer, value.clone())));
    }
}

/// A writer that fails after `budget` bytes.
struct FailingWriter {
    budget: usize,
}

impl Write for FailingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() > self.budget {
            return Err(std::io::Error::other("disk full"));
        }
        self.budget -= buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn write_errors_poison_the_builder() {
    let options = TableOptions { block_size: 256, ..TableOptions::default() };
    let mut b = TableBuilder::new(FailingWriter { budget: 1000 }, options);
    let mut saw_error = false;
    for (user, trailer, value) in fixed_entries(100, 50) {
        match b.add(&user, trailer, &value) {
            Ok(()) => assert!(!saw_error, "add succeeded after a write error"),
            Err(TableError::Io(_)) => saw_error = true,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert!(saw_error);
    assert!(matches!(b.finish(&[]), Err(TableError::Io(_))));
}

/// Reads fail at one offset while `fail` is set.
struct FlakyFile {
    bytes: Vec<u8>,
    fail_at: u64,
    fail: AtomicBool,
}

impl ReadAt for FlakyFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        if offset == self.fail_at && self.fail.load(SeqCst) {
            return Err(std::io::Error::other("injected read error"));
        }
        self.bytes.read_exact_at(buf, offset)
    }

    fn size(&self) -> std::io::Result<u64> {
        Ok(self.bytes.len() as u64)
    }
}

#[test]
fn read_errors_surface_from_the_moving_call() {
    let entries = fixed_entries(300, 40);
    let options = TableOptions { block_size: 512, ..TableOptions::default() };
    let flaky = Arc::new(FlakyFile {
        bytes: build(&entries, options),
        fail_at: 0, // the first data block
        fail: AtomicBool::new(false),
    });
    let table = Table::open(flaky.clone(), 1, "flaky.sst".into(), None).unwrap();
    assert!(table.properties().data_block_count > 3);

    flaky.fail.store(true, SeqCst);
    let mut it = table.iter();
    match it.seek_to_first() {
        Err(TableError::Io(e)) => {
            let msg = e.to_string();
            assert!(msg.contains("flaky.sst") && msg.contains("offset 0"), "{msg}");
        }
        other => panic!("expected an I/O error, got {other:?}"),
    }
    assert!(!it.valid());
    assert!(table.get(&entries[0].0, entries[0].1).is_err());

    // Reads work again: the same iterator recovers with a new seek.
    flaky.fail.store(false, SeqCst);
    it.seek_to_first().unwrap();
    assert_eq!(it.user_key(), entries[0].0.as_slice());

    // Walking back from a later block into the unreadable first block fails in `prev`.
    it.seek(&entries[150].0, entries[150].1).unwrap();
    flaky.fail.store(true, SeqCst);
    let mut result = Ok(());
    while result.is_ok() && it.valid() {
        result = it.prev();
    }
    assert!(matches!(result, Err(TableError::Io(_))));
    assert!(!it.valid());
}

#[test]
fn public_types_are_thread_safe() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Table>();
    send_sync::<TableIter>();
    send_sync::<stampkv_sstable::BlockCache>();
    send_sync::<TableError>();
}
