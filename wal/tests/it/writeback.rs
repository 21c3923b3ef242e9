//! Write-back hints (`WalOptions::writeback_bytes`): unsynced writes are handed to the OS
//! for write-back in contiguous steps of at least the configured size, never for bytes
//! already synced, and not at all when disabled; the log reads back the same either way.

use std::io;
use std::sync::Mutex;

use stampkv_wal::*;

use crate::common::{read_log, Rng};

/// A log file that records the write-back ranges asked of it.
#[derive(Default)]
struct Recording {
    file: MemLogFile,
    requests: Mutex<Vec<(u64, u64)>>,
}

impl LogFile for Recording {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        self.requests.lock().unwrap().push((offset, len));
        Ok(())
    }
}

impl Recording {
    fn requests(&self) -> Vec<(u64, u64)> {
        self.requests.lock().unwrap().clone()
    }
}

fn options(writeback_bytes: u64) -> WalOptions {
    WalOptions { preallocate_bytes: 0, writeback_bytes }
}

/// Appends `n` records of up to 300 bytes; returns them.
fn append(writer: &mut LogWriter<&Recording>, rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let record = vec![i as u8; rng.index(300)];
            writer.add_record(&record).unwrap();
            record
        })
        .collect()
}

#[test]
fn unsynced_writes_are_handed_to_write_back_in_contiguous_steps() {
    const STEP: u64 = 4096;
    let file = Recording::default();
    let mut rng = Rng::new(3);
    let mut writer = LogWriter::create(&file, 1, options(STEP)).unwrap();
    let mut records = append(&mut writer, &mut rng, 500);
    let written = writer.offset();
    let requests = file.requests();
    assert!(
        requests.len() as u64 >= written / (STEP + 400),
        "{} requests for {written} bytes",
        requests.len()
    );
    let mut next = 0;
    for &(offset, len) in &requests {
        assert_eq!(offset, next, "ranges are contiguous: {requests:?}");
        assert!(len >= STEP, "a range shorter than the step: {requests:?}");
        next = offset + len;
    }
    assert!(written - next < STEP, "{} bytes written but never handed over", written - next);

    // A sync makes what it covers durable: later requests start after it.
    writer.sync().unwrap();
    let synced = writer.offset();
    let before = requests.len();
    records.extend(append(&mut writer, &mut rng, 200));
    let after = file.requests();
    assert!(after.len() > before);
    assert!(
        after[before..].iter().all(|&(offset, _)| offset >= synced),
        "{:?} after a sync at {synced}",
        &after[before..]
    );
    writer.seal().unwrap();
    let read = read_log(&file.file.contents(), 1, true, RecoveryMode::AbsoluteConsistency);
    assert_eq!(read.summary().end, SegmentEnd::Sealed);
    assert_eq!(read.records, records);
}

#[test]
fn no_write_back_when_disabled_and_the_same_log_either_way() {
    let (with, without) = (Recording::default(), Recording::default());
    let (mut rng_a, mut rng_b) = (Rng::new(9), Rng::new(9));
    let mut a = LogWriter::create(&with, 1, options(1024)).unwrap();
    let mut b = LogWriter::create(&without, 1, options(0)).unwrap();
    append(&mut a, &mut rng_a, 300);
    append(&mut b, &mut rng_b, 300);
    a.seal().unwrap();
    b.seal().unwrap();
    assert!(!with.requests().is_empty());
    assert!(without.requests().is_empty());
    assert_eq!(with.file.contents(), without.file.contents());
}
