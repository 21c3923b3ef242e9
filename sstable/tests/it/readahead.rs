//! Readahead in table iterators: a forward scan reads the file in growing windows instead
//! of one read per block and returns exactly the table's entries; seeks still read single
//! blocks; damage inside a window is reported as corruption of the block that holds it.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use stampkv_sstable::{BlockCache, ReadAt, Table, TableError, TableOptions};

use crate::common::{build, fixed_entries, Entry, Rng};

/// A table image that counts the reads made of it.
struct CountedReads {
    bytes: Vec<u8>,
    reads: AtomicU64,
}

impl CountedReads {
    fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
}

impl ReadAt for CountedReads {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.bytes.read_exact_at(buf, offset)
    }
    fn size(&self) -> io::Result<u64> {
        Ok(self.bytes.len() as u64)
    }
}

fn table_of(bytes: Vec<u8>, cache: Option<Arc<BlockCache>>) -> (Arc<CountedReads>, Arc<Table>) {
    let file = Arc::new(CountedReads { bytes, reads: AtomicU64::new(0) });
    let table = Table::open(file.clone(), 1, "scanned.sst".into(), cache).unwrap();
    (file, table)
}

fn forward_scan(table: &Arc<Table>) -> Result<Vec<Entry>, (Vec<Entry>, TableError)> {
    let mut it = table.iter();
    let mut got = Vec::new();
    let mut step = it.seek_to_first();
    while step.is_ok() && it.valid() {
        got.push((it.user_key().to_vec(), it.trailer(), it.value().to_vec()));
        step = it.next();
    }
    match step {
        Ok(()) => Ok(got),
        Err(e) => Err((got, e)),
    }
}

#[test]
fn a_forward_scan_reads_windows_not_blocks() {
    let entries = fixed_entries(20_000, 100);
    let options = TableOptions { block_size: 1024, ..TableOptions::default() };
    let (file, table) = table_of(build(&entries, options), None);
    let blocks = table.properties().data_block_count;
    assert!(blocks > 2000, "{blocks} blocks");

    for _ in 0..2 {
        let before = file.reads();
        assert!(forward_scan(&table).unwrap() == entries, "the scan differs from the table's entries");
        let reads = file.reads() - before;
        // Two single blocks, then windows of 16 KiB doubling to 256 KiB: about 2.3 MB in
        // 256 KiB windows is a few dozen reads.
        assert!(reads * 50 < blocks, "{reads} reads for {blocks} blocks");
    }

    // Seeks followed by a few steps read single blocks: never a window.
    let mut rng = Rng::new(5);
    let mut it = table.iter();
    let before = file.reads();
    for _ in 0..200 {
        let i = rng.index(entries.len());
        let (user, trailer, _) = &entries[i];
        it.seek(user, *trailer).unwrap();
        for expected in entries[i..].iter().take(3) {
            assert_eq!(
                (it.user_key(), it.trailer(), it.value()),
                (&expected.0[..], expected.1, &expected.2[..])
            );
            it.next().unwrap();
        }
    }
    let reads = file.reads() - before;
    assert!(reads <= 400, "{reads} reads for 200 short seeks");
}

#[test]
fn a_scan_through_the_cache_and_windows_agrees_with_the_table() {
    // Every other stretch of blocks is already cached (read by seeks), so the scan
    // alternates between the cache, single reads and windows.
    let entries = fixed_entries(5_000, 60);
    let options = TableOptions { block_size: 512, ..TableOptions::default() };
    let cache = Arc::new(BlockCache::new(64 << 20));
    let (file, table) = table_of(build(&entries, options), Some(cache));
    let mut it = table.iter();
    for i in (0..entries.len()).step_by(400) {
        it.seek(&entries[i].0, entries[i].1).unwrap();
        for _ in 0..50 {
            it.next().unwrap();
        }
    }
    let before = file.reads();
    assert!(forward_scan(&table).unwrap() == entries);
    assert!(file.reads() > before, "the scan read nothing");
    // Everything is cached now: a second scan reads nothing.
    let before = file.reads();
    assert!(forward_scan(&table).unwrap() == entries);
    assert_eq!(file.reads(), before);
}

#[test]
fn damage_inside_a_window_is_corruption_of_that_block() {
    let entries = fixed_entries(20_000, 100);
    let options = TableOptions { block_size: 1024, ..TableOptions::default() };
    let intact = build(&entries, options);
    let data_bytes = table_of(intact.clone(), None).1.properties().data_bytes as usize;
    let mut rng = Rng::new(9);
    for _ in 0..20 {
        let mut damaged = intact.clone();
        // A byte in the data section, well past the first blocks (so inside a window).
        let pos = 20_000 + rng.index(data_bytes - 21_000);
        damaged[pos] ^= 0x40;
        let (_, table) = table_of(damaged, None);
        let (got, err) = forward_scan(&table).expect_err("damage went unnoticed");
        assert!(matches!(err, TableError::Corruption { ref file, .. } if file == "scanned.sst"), "{err}");
        assert!(got[..] == entries[..got.len()], "entries before the damage differ");
        // The scan stopped near the damage (entries take about the same room each, give
        // or take their prefix compression; a block holds about eight).
        let at = pos * entries.len() / data_bytes;
        assert!(
            got.len() + 100 >= at && got.len() <= at + 100,
            "{} entries before byte {pos} (~entry {at})",
            got.len()
        );
    }
}
