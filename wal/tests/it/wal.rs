//! Tests 7-10: group commit, poisoning, preallocation, rotation.

use std::sync::{Arc, Barrier};
use std::thread;

use crate::common::*;
use stampkv_wal::*;

/// Reads every record of a segment (default mode) or panics.
fn records_of(data: &[u8], segment: u64, is_last: bool) -> (Vec<Vec<u8>>, SegmentSummary) {
    let read = read_log(data, segment, is_last, RecoveryMode::default());
    let summary = read.summary().clone();
    (read.records, summary)
}

#[test]
fn group_commit_shares_syncs_on_a_real_file() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 200;
    let tmp = tempfile::tempdir().unwrap();
    let dir = StdSegmentDir { dir: tmp.path().to_path_buf() };
    let wal = Arc::new(Wal::create(dir.clone(), 1, WalOptions::default()).unwrap());
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (wal, start) = (Arc::clone(&wal), Arc::clone(&start));
            thread::spawn(move || {
                let mut rng = Rng::new(t as u64);
                start.wait();
                for i in 0..PER_THREAD {
                    let mut payload = format!("{t}:{i}:").into_bytes();
                    let pad = rng.index(300);
                    payload.extend(rng.bytes(pad));
                    let pos = wal.append(&payload).unwrap();
                    wal.sync_to(pos).unwrap();
                    assert!(wal.synced_position() >= pos);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let commits = (THREADS * PER_THREAD) as u64;
    let stats = wal.stats();
    assert_eq!(stats.records_written, commits);
    assert!(stats.syncs * 10 < commits * 7, "{} syncs for {commits} commits", stats.syncs);
    eprintln!("group commit: {} syncs for {commits} commits", stats.syncs);
    // Crash: drop without close; the segment stays unsealed.
    drop(wal);
    let data = std::fs::read(dir.segment_path(1)).unwrap();
    let (records, summary) = records_of(&data, 1, true);
    assert_eq!(summary.end, SegmentEnd::Unsealed);
    assert_eq!(records.len(), THREADS * PER_THREAD);
    let mut next = [0usize; THREADS];
    for r in &records {
        let text = String::from_utf8_lossy(r);
        let mut parts = text.split(':');
        let t: usize = parts.next().unwrap().parse().unwrap();
        let i: usize = parts.next().unwrap().parse().unwrap();
        assert_eq!(i, next[t], "thread {t} records out of order");
        next[t] += 1;
    }
    assert_eq!(next, [PER_THREAD; THREADS]);
}

#[test]
fn failed_sync_poisons_the_log() {
    let dir = Arc::new(MemSegmentDir::new());
    let wal = Wal::create(Arc::clone(&dir), 1, WalOptions::default()).unwrap();
    let p1 = wal.append(b"one").unwrap();
    wal.sync_to(p1).unwrap();
    dir.segment(1).unwrap().fail_next_syncs(1);
    let p2 = wal.append(b"two").unwrap();
    assert!(matches!(wal.sync_to(p2), Err(WalError::Io(_))));
    assert!(wal.is_poisoned());
    // No retry: the next sync would succeed, but the log refuses all work.
    assert!(matches!(wal.sync_to(p2), Err(WalError::Poisoned)));
    assert!(matches!(wal.sync_to(p1), Err(WalError::Poisoned)));
    assert!(matches!(wal.append(b"three"), Err(WalError::Poisoned)));
    assert!(matches!(wal.rotate(2), Err(WalError::Poisoned)));
    assert!(matches!(wal.close(), Err(WalError::Poisoned)));
    assert_eq!(dir.segment_numbers(), [1]);
}

#[test]
fn failed_write_poisons_the_log() {
    let dir = Arc::new(MemSegmentDir::new());
    let wal = Wal::create(Arc::clone(&dir), 1, no_prealloc()).unwrap();
    wal.append(b"one").unwrap();
    dir.segment(1).unwrap().fail_next_writes(1);
    assert!(matches!(wal.append(b"two"), Err(WalError::Io(_))));
    assert!(matches!(wal.append(b"three"), Err(WalError::Poisoned)));
    assert!(matches!(wal.sync_to(LogPosition(0)), Err(WalError::Poisoned)));
}

#[test]
fn concurrent_committers_all_fail_after_a_failed_sync() {
    let dir = Arc::new(MemSegmentDir::new());
    let wal = Arc::new(Wal::create(Arc::clone(&dir), 1, WalOptions::default()).unwrap());
    dir.segment(1).unwrap().fail_next_syncs(1);
    let start = Arc::new(Barrier::new(4));
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let (wal, start) = (Arc::clone(&wal), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                let pos = wal.append(format!("{t}").as_bytes())?;
                wal.sync_to(pos)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    // Whoever synced first failed; nobody may report success afterwards.
    assert!(results.iter().all(|r| r.is_err()), "{results:?}");
    assert!(results.iter().any(|r| matches!(r, Err(WalError::Io(_)))));
}

#[test]
fn record_errors_do_not_poison() {
    let wal = Wal::create(MemSegmentDir::new(), 1, WalOptions::default()).unwrap();
    let big = vec![0u8; MAX_RECORD_SIZE + 1];
    assert!(matches!(wal.append(&big), Err(WalError::RecordTooLarge { .. })));
    let pos = wal.append(b"fine").unwrap();
    wal.sync_to(pos).unwrap();
    // A position never written is refused, not waited for forever.
    assert!(wal.sync_to(LogPosition(pos.0 + 1)).is_err());
    assert!(!wal.is_poisoned());
}

#[test]
fn preallocation_grows_in_steps_and_seal_trims() {
    const STEP: u64 = 64 * 1024;
    let file = MemLogFile::new();
    let mut w = LogWriter::create(&file, 1, prealloc(STEP)).unwrap();
    // Nothing is zero-filled before the segment is first synced (buffered writes only).
    w.add_record(b"buffered").unwrap();
    assert_eq!(file.len(), w.offset());
    assert_eq!(w.stats().preallocated_bytes, 0);
    w.sync().unwrap();
    let mut rng = Rng::new(20);
    let mut records = vec![b"buffered".to_vec()];
    let mut sizes = Vec::new();
    while w.offset() < 5 * STEP + 1000 {
        let len = record_len(&mut rng);
        records.push(rng.bytes(len));
        w.add_record(records.last().unwrap()).unwrap();
        let len = file.len();
        assert_eq!(len % STEP, 0);
        assert!(len >= w.offset() && len < w.offset() + STEP);
        if sizes.last() != Some(&len) {
            sizes.push(len);
        }
    }
    // Grown step by step (a record larger than a step skips some).
    assert!(sizes.len() >= 4 && sizes.windows(2).all(|w| w[0] < w[1]));
    // The zeros beyond the write position all came from preallocation.
    assert!(w.stats().preallocated_bytes >= file.len() - w.offset());
    // Unsealed and preallocated: all records, the zeros are a clean end.
    let (read, summary) = records_of(&file.contents(), 1, true);
    assert_eq!(read, records);
    assert_eq!(summary, SegmentSummary { valid_end: w.offset(), end: SegmentEnd::Unsealed });
    w.seal().unwrap();
    assert_eq!(file.len(), w.offset());
    let (read, summary) = records_of(&file.contents(), 1, false);
    assert_eq!(read, records);
    assert_eq!(summary.end, SegmentEnd::Sealed);
}

#[test]
fn preallocation_on_a_real_file() {
    const STEP: u64 = 128 * 1024;
    let tmp = tempfile::tempdir().unwrap();
    let dir = StdSegmentDir { dir: tmp.path().to_path_buf() };
    let wal = Wal::create(dir.clone(), 3, prealloc(STEP)).unwrap();
    let path = dir.segment_path(3);
    let file_len = || std::fs::metadata(&path).unwrap().len();
    // Zero-filling starts with the first sync.
    assert_eq!(file_len(), wal.written_position().0);
    wal.sync_to(wal.written_position()).unwrap();
    let records: Vec<Vec<u8>> = (0..300).map(|i| vec![i as u8; 1000]).collect();
    for r in &records {
        let pos = wal.append(r).unwrap();
        assert!(file_len() >= pos.0 && file_len() % STEP == 0);
    }
    wal.sync_to(wal.written_position()).unwrap();
    assert_eq!(file_len(), 3 * STEP);
    let (read, _) = records_of(&std::fs::read(&path).unwrap(), 3, true);
    assert_eq!(read, records);
    wal.close().unwrap();
    assert_eq!(file_len(), wal.written_position().0);
    let (read, summary) = records_of(&std::fs::read(&path).unwrap(), 3, false);
    assert_eq!(read, records);
    assert_eq!(summary.end, SegmentEnd::Sealed);
}

#[test]
fn seal_recovered_segment_after_a_torn_tail() {
    let mut rng = Rng::new(21);
    let records = random_records(&mut rng, 30);
    for prealloc_bytes in [0, 256 * 1024] {
        let w = write_log(&records, How { prealloc: prealloc_bytes, ..How::default() });
        // Tear the last record (keep any preallocated zeros beyond it).
        let mut data = w.data.clone();
        let last = records.len() - 1;
        let torn_at = (w.start(last) + w.ends[last]) as usize / 2;
        data[torn_at..w.ends[last] as usize].fill(0);
        let (read, summary) = records_of(&data, 1, true);
        assert_eq!(read, records[..last]);
        assert!(matches!(summary.end, SegmentEnd::TornTail { .. }));
        let file = MemLogFile::from_bytes(data);
        seal_recovered_segment(&file, 1, summary.valid_end).unwrap();
        assert_eq!(file.sync_count(), 2);
        let (read, sealed) = records_of(&file.contents(), 1, false);
        assert_eq!(read, records[..last]);
        assert_eq!(sealed.end, SegmentEnd::Sealed);
        assert_eq!(sealed.valid_end, file.len());
    }
}

#[test]
fn seal_recovered_segment_edge_cases() {
    // Nothing was ever written: header + SEAL.
    let file = MemLogFile::from_bytes(vec![0; 4096]);
    seal_recovered_segment(&file, 5, 0).unwrap();
    let (read, summary) = records_of(&file.contents(), 5, false);
    assert!(read.is_empty());
    assert_eq!(summary.end, SegmentEnd::Sealed);
    assert_eq!(file.len(), 28 + 11);
    // valid_end leaves fewer than 11 bytes in its block: SEAL in the next block.
    let fill = BLOCK_SIZE - 28 - HEADER_SIZE - 5;
    let w = write_log(&[vec![1; fill]], How::default());
    assert_eq!(w.ends[0], BLOCK_SIZE as u64 - 5);
    let file = MemLogFile::from_bytes(w.data.clone());
    seal_recovered_segment(&file, 1, w.ends[0]).unwrap();
    assert_eq!(file.len(), (BLOCK_SIZE + HEADER_SIZE) as u64);
    let (read, summary) = records_of(&file.contents(), 1, false);
    assert_eq!(read, w.records);
    assert_eq!(summary.end, SegmentEnd::Sealed);
    // Inside the segment header: refused.
    assert!(seal_recovered_segment(&file, 1, 10).is_err());
}

#[test]
fn rotation_across_segments() {
    let dir = Arc::new(MemSegmentDir::new());
    let wal = Wal::create(Arc::clone(&dir), 5, prealloc(16 * 1024)).unwrap();
    let mut rng = Rng::new(22);
    let mut expected: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut last_pos = LogPosition(0);
    for (i, segment) in [5u64, 6, 7, 8].into_iter().enumerate() {
        if i > 0 {
            wal.rotate(segment).unwrap();
            // The old segment was sealed and synced by the rotation.
            assert!(wal.synced_position() >= last_pos);
            wal.sync_to(last_pos).unwrap();
        }
        assert_eq!(wal.current_segment(), segment);
        let records = random_records(&mut rng, 10 + i * 5);
        for r in &records {
            let pos = wal.append(r).unwrap();
            assert!(pos > last_pos);
            last_pos = pos;
        }
        expected.push(records);
    }
    wal.sync_to(last_pos).unwrap();
    assert_eq!(dir.segment_numbers(), [5, 6, 7, 8]);
    // The last segment is unsealed (no close): a crash image.
    for (i, segment) in [5u64, 6, 7, 8].into_iter().enumerate() {
        let is_last = segment == 8;
        let data = dir.segment(segment).unwrap().contents();
        let (read, summary) = records_of(&data, segment, is_last);
        assert_eq!(read, expected[i], "segment {segment}");
        let end = if is_last { SegmentEnd::Unsealed } else { SegmentEnd::Sealed };
        assert_eq!(summary.end, end);
        // Sealed segments must not be read as the wrong segment.
        assert!(read_log(&data, segment + 100, is_last, RecoveryMode::default()).result.is_err());
    }
    wal.close().unwrap();
    wal.close().unwrap();
    assert!(matches!(wal.append(b"late"), Err(WalError::Closed)));
    // Positions count every byte of every segment.
    let total: u64 = dir.segment_numbers().iter().map(|&n| dir.segment(n).unwrap().len()).sum();
    assert_eq!(wal.written_position().0, total);
    assert_eq!(wal.synced_position().0, total);
    let stats = wal.stats();
    assert_eq!(stats.records_written, expected.iter().map(|r| r.len() as u64).sum::<u64>());
    assert_eq!(stats.bytes_written, total);
    assert_eq!(dir.dir_syncs(), 4);
}

#[test]
fn rotation_with_concurrent_committers() {
    let dir = Arc::new(MemSegmentDir::new());
    let wal = Arc::new(Wal::create(Arc::clone(&dir), 1, no_prealloc()).unwrap());
    let handles: Vec<_> = (0..4u8)
        .map(|t| {
            let wal = Arc::clone(&wal);
            thread::spawn(move || {
                for i in 0..300u16 {
                    let mut payload = vec![t];
                    payload.extend(i.to_le_bytes());
                    let pos = wal.append(&payload).unwrap();
                    wal.sync_to(pos).unwrap();
                }
            })
        })
        .collect();
    for segment in 2..=6 {
        thread::yield_now();
        wal.rotate(segment).unwrap();
    }
    for h in handles {
        h.join().unwrap();
    }
    let numbers = dir.segment_numbers();
    let mut all = Vec::new();
    for &n in &numbers {
        let data = dir.segment(n).unwrap().contents();
        let (read, _) = records_of(&data, n, n == *numbers.last().unwrap());
        all.extend(read);
    }
    assert_eq!(all.len(), 4 * 300);
    for t in 0..4u8 {
        let seq: Vec<u16> =
            all.iter().filter(|r| r[0] == t).map(|r| u16::from_le_bytes([r[1], r[2]])).collect();
        assert_eq!(seq, (0..300).collect::<Vec<_>>());
    }
}

#[test]
fn deferred_records_reach_the_file_with_the_next_sync_or_immediate_append() {
    let dir = Arc::new(MemSegmentDir::new());
    let wal = Wal::create(Arc::clone(&dir), 1, no_prealloc()).unwrap();
    let file = dir.segment(1).unwrap();
    let header_len = file.len();
    let p1 = wal.append_deferred(b"one").unwrap();
    let p2 = wal.append_deferred(b"two").unwrap();
    assert!(p2 > p1);
    assert_eq!(file.len(), header_len, "deferred records are not written yet");
    assert_eq!(wal.written_position(), p2, "but they count as appended");
    let writes_before = wal.stats().bytes_written;
    wal.sync_to(p1).unwrap();
    assert!(wal.synced_position() >= p2, "one sync wrote and synced both");
    assert_eq!(wal.stats().bytes_written - writes_before, p2.0 - header_len);
    // An immediate append writes deferred records before its own, in order.
    let p3 = wal.append_deferred(b"three").unwrap();
    let p4 = wal.append(b"four").unwrap();
    assert!(p4 > p3);
    let (records, _) = records_of(&file.contents(), 1, true);
    assert_eq!(records, [b"one".to_vec(), b"two".to_vec(), b"three".to_vec(), b"four".to_vec()]);
}

#[test]
fn rotation_and_close_write_deferred_records_first() {
    let dir = Arc::new(MemSegmentDir::new());
    let wal = Wal::create(Arc::clone(&dir), 1, WalOptions::default()).unwrap();
    wal.append_deferred(b"a").unwrap();
    wal.rotate(2).unwrap();
    wal.append_deferred(b"b").unwrap();
    wal.close().unwrap();
    let (first, summary) = records_of(&dir.segment(1).unwrap().contents(), 1, false);
    assert_eq!((first, summary.end), (vec![b"a".to_vec()], SegmentEnd::Sealed));
    let (second, summary) = records_of(&dir.segment(2).unwrap().contents(), 2, true);
    assert_eq!((second, summary.end), (vec![b"b".to_vec()], SegmentEnd::Sealed));
}

#[test]
fn a_failed_write_of_deferred_records_fails_the_sync_and_poisons() {
    let dir = Arc::new(MemSegmentDir::new());
    let wal = Wal::create(Arc::clone(&dir), 1, no_prealloc()).unwrap();
    let pos = wal.append_deferred(b"lost").unwrap();
    dir.segment(1).unwrap().fail_next_writes(1);
    assert!(matches!(wal.sync_to(pos), Err(WalError::Io(_))));
    assert!(wal.is_poisoned());
    assert!(matches!(wal.append_deferred(b"more"), Err(WalError::Poisoned)));
}

#[test]
fn gathering_runs_before_the_sync_and_its_appends_join_it() {
    let dir = Arc::new(MemSegmentDir::new());
    let wal = Wal::create(Arc::clone(&dir), 1, no_prealloc()).unwrap();
    let mine = wal.append_deferred(b"mine").unwrap();
    let mut late = None;
    wal.sync_to_gathering(mine, || {
        if late.is_none() {
            late = Some(wal.append_deferred(b"joined during gathering").unwrap());
        }
    })
    .unwrap();
    let late = late.expect("gather was called");
    assert!(wal.synced_position() >= late, "the sync covered the record appended while gathering");
    assert_eq!(wal.stats().syncs, 1);
}
