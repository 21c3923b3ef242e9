//! Test 5 (each RecoveryMode on the same damaged inputs), test 6 (SEAL rules
//! for non-last segments) and segment header checks.

use crate::common::*;
use stampkv_wal::RecoveryMode::*;
use stampkv_wal::*;

const ALL_MODES: [RecoveryMode; 4] =
    [TolerateCorruptedTail, AbsoluteConsistency, PointInTime, SkipAnyCorrupted];

fn small_records(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            let len = 100 + rng.index(200);
            rng.bytes(len)
        })
        .collect()
}

/// ~3 blocks of small records.
fn log(sync_each: bool) -> Written {
    write_log(&small_records(400, 7), How { sync_each, ..How::default() })
}

fn assert_ok(read: &Read, records: &[Vec<u8>], summary: SegmentSummary, stop_after: bool) {
    assert_eq!(read.records, records);
    assert_eq!(*read.summary(), summary);
    assert_eq!(read.stop_after, stop_after);
}

/// What SkipAnyCorrupted salvages after damage at `p` in record `k`: the
/// records before `k`, then every record that starts in a later block
/// (continuation fragments at the start of that block are skipped).
fn skip_expectation(w: &Written, k: usize, p: u64) -> Vec<Vec<u8>> {
    let resume = (p / BLOCK_SIZE as u64 + 1) * BLOCK_SIZE as u64;
    let mut out = w.records[..k].to_vec();
    out.extend((0..w.records.len()).filter(|&j| w.start(j) >= resume).map(|j| w.records[j].clone()));
    out
}

#[test]
fn torn_tail_in_each_mode() {
    let w = log(false);
    let n = w.records.len();
    let data = &w.data[..w.ends[n - 1] as usize - 20];
    let torn =
        SegmentSummary { valid_end: w.ends[n - 2], end: SegmentEnd::TornTail { offset: w.start(n - 1) } };
    for mode in [TolerateCorruptedTail, PointInTime, SkipAnyCorrupted] {
        assert_ok(&read_log(data, 1, true, mode), &w.records[..n - 1], torn.clone(), false);
    }
    let read = read_log(data, 1, true, AbsoluteConsistency);
    assert_eq!(read.corruption_offset(), w.start(n - 1));
    assert_eq!(read.records, w.records[..n - 1]);
}

#[test]
fn corruption_in_synced_data_in_each_mode() {
    let w = log(true);
    let k = 40;
    let p = w.start(k);
    let mut data = w.data.clone();
    data[p as usize + HEADER_SIZE + 5] ^= 0x10;
    for mode in [TolerateCorruptedTail, AbsoluteConsistency] {
        let read = read_log(&data, 1, true, mode);
        assert_eq!(read.corruption_offset(), p);
        assert_eq!(read.records, w.records[..k]);
    }
    let salvaged = |valid_end| SegmentSummary { valid_end, end: SegmentEnd::Salvaged { offset: p } };
    let read = read_log(&data, 1, true, PointInTime);
    assert_ok(&read, &w.records[..k], salvaged(w.ends[k - 1]), true);
    let read = read_log(&data, 1, true, SkipAnyCorrupted);
    let expected = skip_expectation(&w, k, p);
    assert!(expected.len() > k + 100);
    assert_ok(&read, &expected, salvaged(*w.ends.last().unwrap()), false);
}

#[test]
fn hole_in_unsynced_data_in_each_mode() {
    let w = log(false);
    let k = 40;
    let p = w.start(k);
    let mut data = w.data.clone();
    data[p as usize..w.ends[k] as usize].fill(0);
    let torn = SegmentSummary { valid_end: w.ends[k - 1], end: SegmentEnd::TornTail { offset: p } };
    for mode in [TolerateCorruptedTail, PointInTime] {
        assert_ok(&read_log(&data, 1, true, mode), &w.records[..k], torn.clone(), false);
    }
    assert_eq!(read_log(&data, 1, true, AbsoluteConsistency).corruption_offset(), p);
    let read = read_log(&data, 1, true, SkipAnyCorrupted);
    let summary =
        SegmentSummary { valid_end: *w.ends.last().unwrap(), end: SegmentEnd::Salvaged { offset: p } };
    assert_ok(&read, &skip_expectation(&w, k, p), summary, false);
}

#[test]
fn clean_end_in_each_mode() {
    let w = log(false);
    let end = *w.ends.last().unwrap();
    let unsealed = SegmentSummary { valid_end: end, end: SegmentEnd::Unsealed };
    for mode in ALL_MODES {
        assert_ok(&read_log(&w.data, 1, true, mode), &w.records, unsealed.clone(), false);
    }
    // Test 6: the same segment is damaged if it is not the last one.
    for mode in [TolerateCorruptedTail, AbsoluteConsistency] {
        let read = read_log(&w.data, 1, false, mode);
        assert_eq!(read.corruption_offset(), end);
        assert_eq!(read.records, w.records);
    }
    let salvaged = SegmentSummary { valid_end: end, end: SegmentEnd::Salvaged { offset: end } };
    assert_ok(&read_log(&w.data, 1, false, PointInTime), &w.records, salvaged.clone(), true);
    assert_ok(&read_log(&w.data, 1, false, SkipAnyCorrupted), &w.records, salvaged, false);
}

#[test]
fn torn_tail_in_a_non_last_segment_is_corruption() {
    let w = log(false);
    let n = w.records.len();
    let data = &w.data[..w.ends[n - 1] as usize - 20];
    let read = read_log(data, 1, false, TolerateCorruptedTail);
    assert_eq!(read.corruption_offset(), w.start(n - 1));
    let read = read_log(data, 1, false, PointInTime);
    assert!(read.stop_after);
    assert_eq!(read.records, w.records[..n - 1]);
}

#[test]
fn sealed_segment_ignores_anything_after_the_seal() {
    let records = small_records(50, 8);
    let w = write_log(&records, How { seal: true, ..How::default() });
    let sealed = SegmentSummary { valid_end: w.data.len() as u64, end: SegmentEnd::Sealed };
    let mut data = w.data.clone();
    // Garbage, then a chunk that verifies and claims a synced prefix.
    data.extend(Rng::new(9).bytes(5000));
    data.extend(spec_chunk(1, 1, 100, b"after the seal"));
    for mode in ALL_MODES {
        for is_last in [false, true] {
            assert_ok(&read_log(&data, 1, is_last, mode), &records, sealed.clone(), false);
        }
    }
}

#[test]
fn damage_before_the_seal_of_a_non_last_segment() {
    let records = small_records(50, 10);
    let w = write_log(&records, How { seal: true, ..How::default() });
    let mut data = w.data.clone();
    data[w.start(20) as usize + 15] ^= 1;
    // The SEAL verifies but says nothing was synced before it: in the last
    // segment this is a torn tail, in an earlier one a missing SEAL.
    let read = recover(&data, 1);
    assert_eq!(read.records, records[..20]);
    assert!(matches!(read.summary().end, SegmentEnd::TornTail { .. }));
    let read = read_log(&data, 1, false, TolerateCorruptedTail);
    assert_eq!(read.corruption_offset(), w.start(20));
}

#[test]
fn empty_and_all_zero_segments() {
    let empty = SegmentSummary { valid_end: 0, end: SegmentEnd::Unsealed };
    for data in [vec![], vec![0u8; 5], vec![0u8; 100_000]] {
        for mode in ALL_MODES {
            assert_ok(&read_log(&data, 1, true, mode), &[], empty.clone(), false);
        }
        let read = read_log(&data, 1, false, TolerateCorruptedTail);
        assert_eq!(read.corruption_offset(), 0);
    }
    // Only the header: no records, a writer resumes after it.
    let w = write_log(&[], How::default());
    let read = recover(&w.data, 1);
    assert_eq!(read.summary().valid_end, 28);
}

#[test]
fn segment_number_mismatch_is_an_error_in_every_mode() {
    let w = write_log(&small_records(10, 11), How::default());
    for mode in ALL_MODES {
        let read = read_log(&w.data, 2, true, mode);
        match &read.result {
            Err(WalError::Corruption { offset: 0, reason, .. }) => {
                assert!(reason.contains("segment 1"), "{reason}")
            }
            other => panic!("{mode:?}: {other:?}"),
        }
        assert!(read.records.is_empty());
    }
}

#[test]
fn unknown_version_or_checksum_kind_is_unsupported() {
    for (version, kind) in [(2u16, 1u8), (1, 2), (0xffff, 0)] {
        let mut data = spec_chunk(3, 6, 0, &spec_header_payload(version, kind, 3));
        data.extend(spec_chunk(3, 1, 0, b"record"));
        for mode in ALL_MODES {
            match read_log(&data, 3, true, mode).result {
                Err(WalError::Unsupported { version: v, .. }) => assert_eq!(v, u32::from(version)),
                other => panic!("{mode:?}: {other:?}"),
            }
        }
    }
    // The spec encoder's version-1 header is accepted.
    let mut data = spec_chunk(3, 6, 0, &spec_header_payload(1, 1, 3));
    data.extend(spec_chunk(3, 1, 0, b"record"));
    assert_eq!(recover(&data, 3).records, [b"record".to_vec()]);
}

#[test]
fn first_chunk_must_be_a_segment_header() {
    // A valid FULL chunk at offset 0.
    let data = spec_chunk(3, 1, 0, b"record");
    let read = recover(&data, 3);
    assert!(read.records.is_empty());
    assert!(matches!(read.summary().end, SegmentEnd::TornTail { offset: 0 }));
    let read = read_log(&data, 3, true, AbsoluteConsistency);
    assert_eq!(read.corruption_offset(), 0);
    // A damaged header in a synced log is corruption.
    let w = write_log(&small_records(10, 12), How { sync_each: true, ..How::default() });
    let mut data = w.data.clone();
    data[HEADER_SIZE] = b'X';
    assert_eq!(recover(&data, 1).corruption_offset(), 0);
}

#[test]
fn fragment_sequence_violations() {
    let header = spec_chunk(4, 6, 0, &spec_header_payload(1, 1, 4));
    let cases: Vec<(Vec<Vec<u8>>, usize)> = vec![
        // MIDDLE / LAST without FIRST.
        (vec![spec_chunk(4, 3, 0, b"m")], 0),
        (vec![spec_chunk(4, 4, 0, b"l")], 0),
        // FULL / FIRST / SEAL inside a fragmented record.
        (vec![spec_chunk(4, 2, 0, b"f"), spec_chunk(4, 1, 0, b"x")], 0),
        (vec![spec_chunk(4, 2, 0, b"f"), spec_chunk(4, 2, 0, b"x")], 0),
        (vec![spec_chunk(4, 2, 0, b"f"), spec_chunk(4, 5, 0, b"")], 0),
        // A second segment header, a SEAL with a payload.
        (vec![spec_chunk(4, 1, 0, b"ok"), spec_chunk(4, 6, 0, &spec_header_payload(1, 1, 4))], 1),
        (vec![spec_chunk(4, 5, 0, b"x")], 0),
    ];
    for (chunks, good) in cases {
        let mut data = header.clone();
        chunks.iter().for_each(|c| data.extend(c));
        // Then a chunk proving everything was synced.
        let mut proven = data.clone();
        proven.extend(spec_chunk(4, 1, data.len() as u32, b"late"));
        let read = recover(&data, 4);
        assert_eq!(read.records.len(), good);
        assert!(matches!(read.summary().end, SegmentEnd::TornTail { .. }));
        let read = recover(&proven, 4);
        assert_eq!(read.records.len(), good);
        let offset = read.corruption_offset();
        assert!((28..data.len() as u64).contains(&offset));
    }
    // A valid FIRST, MIDDLE, LAST sequence assembles.
    let mut data = header.clone();
    for (kind, part) in [(2, &b"ab"[..]), (3, b"cd"), (4, b"e")] {
        data.extend(spec_chunk(4, kind, 0, part));
    }
    assert_eq!(recover(&data, 4).records, [b"abcde".to_vec()]);
}

#[test]
fn chunk_with_synced_to_beyond_its_offset_is_damage() {
    let mut data = spec_chunk(4, 6, 0, &spec_header_payload(1, 1, 4));
    data.extend(spec_chunk(4, 1, 0, b"ok"));
    data.extend(spec_chunk(4, 1, 10_000, b"claims too much"));
    let read = recover(&data, 4);
    assert_eq!(read.records, [b"ok".to_vec()]);
    assert!(matches!(read.summary().end, SegmentEnd::TornTail { offset: 41 }));
}

/// SkipAnyCorrupted drops a broken fragment sequence but keeps the verified
/// chunks that follow it.
#[test]
fn skip_mode_resynchronizes_on_sequence_violations() {
    let header = spec_chunk(4, 6, 0, &spec_header_payload(1, 1, 4));
    let first = spec_chunk(4, 2, 0, b"f");
    let mut data = header.clone();
    data.extend(&first);
    data.extend(spec_chunk(4, 1, 0, b"x"));
    data.extend(spec_chunk(4, 4, 0, b"dangling"));
    data.extend(spec_chunk(4, 1, 0, b"y"));
    let read = read_log(&data, 4, true, SkipAnyCorrupted);
    assert_eq!(read.records, [b"x".to_vec(), b"y".to_vec()]);
    let offset = (header.len() + first.len()) as u64;
    assert_eq!(read.summary().end, SegmentEnd::Salvaged { offset });
    assert_eq!(read.summary().valid_end, data.len() as u64);
    // The default mode stops at the first violation (a torn tail here).
    assert!(recover(&data, 4).records.is_empty());
}
