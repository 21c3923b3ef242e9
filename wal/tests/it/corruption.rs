//! Test 3 (every single-byte corruption) and test 4 (`synced_to` tells
//! corruption from a torn tail).

use crate::common::*;
use stampkv_wal::*;

/// Outcome of reading a damaged log in the default mode.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Ok, with this many records (a prefix of the originals).
    Prefix(usize),
    Corruption,
}

/// Reads `data` (default mode, last segment) and checks that every record
/// returned equals the original at its index: the result must be a prefix.
fn prefix_or_corruption(data: &[u8], originals: &[Vec<u8>], what: &str) -> Outcome {
    let mut reader = SegmentReader::new(data, info(1, true), RecoveryMode::default());
    let mut n = 0;
    loop {
        match reader.next_record() {
            Ok(Some(record)) => {
                assert!(
                    n < originals.len() && record == &originals[n][..],
                    "{what}: record {n} is not the original"
                );
                n += 1;
            }
            Ok(None) => return Outcome::Prefix(n),
            Err(WalError::Corruption { .. }) => return Outcome::Corruption,
            Err(e) => panic!("{what}: unexpected error {e}"),
        }
    }
}

/// Records returned in `mode` must be a subsequence of the originals.
fn assert_subsequence(data: &[u8], originals: &[Vec<u8>], mode: RecoveryMode, what: &str) {
    let read = read_log(data, 1, true, mode);
    let mut it = originals.iter();
    for (i, r) in read.records.iter().enumerate() {
        assert!(it.any(|o| o == r), "{what}: record {i} is not an original");
    }
    if mode == RecoveryMode::PointInTime {
        assert!(read.result.is_ok(), "{what}: {:?}", read.result);
        assert!(originals.starts_with(&read.records), "{what}");
    }
}

/// For every byte position × {flip bit 0, set 0x00, set 0xFF}.
fn every_single_byte_corruption(w: &Written, synced: bool, other_modes: bool) -> [usize; 2] {
    let mut data = w.data.clone();
    let mut counts = [0usize; 2];
    for pos in 0..data.len() {
        let original = data[pos];
        for (m, value) in [original ^ 1, 0x00, 0xFF].into_iter().enumerate() {
            if value == original && m > 0 {
                continue;
            }
            data[pos] = value;
            let what = format!("byte {pos} := {value:#04x}");
            match prefix_or_corruption(&data, &w.records, &what) {
                Outcome::Prefix(_) => counts[0] += 1,
                Outcome::Corruption => {
                    // A log that was never synced can only have a torn tail.
                    assert!(synced, "{what}: corruption reported in an unsynced log");
                    counts[1] += 1;
                }
            }
            if other_modes {
                assert_subsequence(&data, &w.records, RecoveryMode::SkipAnyCorrupted, &what);
                assert_subsequence(&data, &w.records, RecoveryMode::PointInTime, &what);
            }
            data[pos] = original;
        }
    }
    counts
}

fn two_block_log(seed: u64, sync_each: bool) -> Written {
    let mut rng = Rng::new(seed);
    let mut records = records_totalling(&mut rng, 36 * 1024, 1500);
    records.insert(3, rng.bytes(3000));
    let w = write_log(&records, How { sync_each, ..How::default() });
    assert!(w.data.len() > BLOCK_SIZE);
    w
}

#[test]
fn every_byte_of_a_multi_block_log_never_synced() {
    for seed in 0..iters() as u64 {
        let w = two_block_log(100 + seed, false);
        let [ok, corrupt] = every_single_byte_corruption(&w, false, false);
        assert_eq!(corrupt, 0);
        assert!(ok > 0);
    }
}

#[test]
fn every_byte_of_a_multi_block_log_synced_after_each_record() {
    for seed in 0..iters() as u64 {
        let w = two_block_log(200 + seed, true);
        let [ok, corrupt] = every_single_byte_corruption(&w, true, false);
        // Damage before the last record is provably in synced data.
        assert!(corrupt > ok, "ok {ok}, corrupt {corrupt}");
    }
}

/// Small logs (with a sealed variant), also checking that PointInTime
/// returns a prefix and SkipAnyCorrupted a subsequence, never an altered record.
#[test]
fn every_byte_of_small_logs_in_all_modes() {
    let mut rng = Rng::new(300);
    for round in 0..2 * iters() {
        let records = records_totalling(&mut rng, 3000, 400);
        let how = How { sync_each: round % 2 == 1, seal: round % 2 == 1, ..How::default() };
        let w = write_log(&records, how);
        every_single_byte_corruption(&w, how.sync_each, true);
    }
}

/// Zeroes the chunk of record `i` (header and payload).
fn zero_record(w: &Written, i: usize) -> Vec<u8> {
    let mut data = w.data.clone();
    data[w.start(i) as usize..w.ends[i] as usize].fill(0);
    data
}

fn small_records(n: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(400);
    (0..n)
        .map(|_| {
            let len = 100 + rng.index(200);
            rng.bytes(len)
        })
        .collect()
}

#[test]
fn damage_in_synced_data_is_corruption() {
    // ~3 blocks of small records, synced after each one.
    let records = small_records(400);
    let synced = write_log(&records, How { sync_each: true, ..How::default() });
    let last_block_start = (synced.data.len() / BLOCK_SIZE * BLOCK_SIZE) as u64;
    let in_last_block = (0..records.len()).find(|&i| synced.start(i) > last_block_start + 1000).unwrap();
    assert!(in_last_block + 5 < records.len());
    // Zeroed chunks, in the first block and in the last block (found by
    // the byte-wise search of the damaged block).
    for i in [50, in_last_block] {
        let read = recover(&zero_record(&synced, i), 1);
        assert_eq!(read.corruption_offset(), synced.start(i), "record {i}");
        assert_eq!(read.records, records[..i]);
    }
    // A damaged payload byte.
    let mut data = synced.data.clone();
    data[synced.start(77) as usize + HEADER_SIZE + 3] ^= 0x40;
    assert_eq!(recover(&data, 1).corruption_offset(), synced.start(77));
    // The last record damaged: nothing proves it was synced → torn tail.
    let last = records.len() - 1;
    let mut data = synced.data.clone();
    data[synced.start(last) as usize + HEADER_SIZE] ^= 1;
    let read = recover(&data, 1);
    assert_eq!(read.records, records[..last]);
    assert_eq!(read.summary().end, SegmentEnd::TornTail { offset: synced.start(last) });
    // The last record zeroed entirely: indistinguishable from never written.
    let read = recover(&zero_record(&synced, last), 1);
    assert_eq!(read.records, records[..last]);
    assert_eq!(read.summary().end, SegmentEnd::Unsealed);
}

#[test]
fn same_damage_in_unsynced_data_is_a_torn_tail() {
    let records = small_records(400);
    let unsynced = write_log(&records, How::default());
    for i in [50, 300] {
        let read = recover(&zero_record(&unsynced, i), 1);
        assert_eq!(read.records, records[..i]);
        assert_eq!(
            *read.summary(),
            SegmentSummary {
                valid_end: unsynced.ends[i - 1],
                end: SegmentEnd::TornTail { offset: unsynced.start(i) }
            }
        );
    }
}

/// Records 0..100 synced, the rest written without a sync: damage after the
/// synced prefix is a torn tail, damage inside it is corruption.
#[test]
fn partially_synced_log() {
    let records = small_records(300);
    let file = MemLogFile::new();
    let mut w = LogWriter::create(&file, 1, no_prealloc()).unwrap();
    let mut ends = Vec::new();
    for (i, r) in records.iter().enumerate() {
        ends.push(w.add_record(r).unwrap());
        if i == 99 {
            w.sync().unwrap();
        }
    }
    let written = Written { data: file.contents(), records: records.clone(), ends };
    let read = recover(&zero_record(&written, 150), 1);
    assert_eq!(read.records, records[..150]);
    assert!(matches!(read.summary().end, SegmentEnd::TornTail { .. }));
    let read = recover(&zero_record(&written, 60), 1);
    assert_eq!(read.corruption_offset(), written.start(60));
}

/// A record spanning blocks whose LAST fragment is damaged: r is the FIRST
/// chunk's offset, and the damage is judged against it.
#[test]
fn damage_in_a_fragmented_record() {
    let mut rng = Rng::new(500);
    let mut records: Vec<Vec<u8>> = (0..20).map(|_| rng.bytes(200)).collect();
    records.push(rng.bytes(70_000)); // FIRST, MIDDLE, LAST
    records.extend((0..300).map(|_| rng.bytes(200)));
    for sync_each in [false, true] {
        let w = write_log(&records, How { sync_each, ..How::default() });
        let mut data = w.data.clone();
        // Damage the LAST fragment (just before the record's end).
        data[w.ends[20] as usize - 10] ^= 1;
        let read = recover(&data, 1);
        assert_eq!(read.records, records[..20]);
        if sync_each {
            // The LAST chunk starts its block.
            let last_chunk = (w.ends[20] - 10) / BLOCK_SIZE as u64 * BLOCK_SIZE as u64;
            assert_eq!(last_chunk, 2 * BLOCK_SIZE as u64);
            assert_eq!(read.corruption_offset(), last_chunk);
        } else {
            assert_eq!(read.summary().end, SegmentEnd::TornTail { offset: w.start(20) });
        }
    }
}

/// Arbitrary bytes, and logs with many random mutations, never make the
/// reader panic in any mode.
#[test]
fn random_inputs_never_panic() {
    let mut rng = Rng::new(600);
    let base = write_log(&random_records(&mut rng, 40), How::default());
    let modes = [
        RecoveryMode::TolerateCorruptedTail,
        RecoveryMode::AbsoluteConsistency,
        RecoveryMode::PointInTime,
        RecoveryMode::SkipAnyCorrupted,
    ];
    for round in 0..200 * iters() {
        let data = if round % 2 == 0 {
            let len = rng.index(3 * BLOCK_SIZE);
            rng.bytes(len)
        } else {
            let mut data = base.data.clone();
            for _ in 0..1 + rng.index(20) {
                let at = rng.index(data.len());
                data[at] = rng.next_u64() as u8;
            }
            let keep = rng.index(data.len() + 1);
            data.truncate(keep);
            data
        };
        for mode in modes {
            for is_last in [false, true] {
                let read = read_log(&data, 1, is_last, mode);
                let _ = read.result;
            }
        }
    }
}
