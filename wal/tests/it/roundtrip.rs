//! Test 1: records written through `LogWriter` read back identical.

use crate::common::*;
use stampkv_wal::*;

fn assert_round_trip(records: &[Vec<u8>], how: How) {
    let w = write_log(records, how);
    let read = read_log(&w.data, how.segment, !how.seal, RecoveryMode::default());
    let summary = read.summary();
    assert_eq!(read.records.len(), records.len());
    for (i, (got, want)) in read.records.iter().zip(records).enumerate() {
        assert_eq!(got, want, "record {i} differs");
    }
    let expected_end = if how.seal { SegmentEnd::Sealed } else { SegmentEnd::Unsealed };
    assert_eq!(summary.end, expected_end);
    if how.seal {
        assert_eq!(summary.valid_end, w.data.len() as u64);
    } else {
        assert_eq!(summary.valid_end, *w.ends.last().unwrap_or(&28));
    }
}

#[test]
fn random_records_round_trip() {
    let mut rng = Rng::new(1);
    for round in 0..4 * iters() {
        let records = random_records(&mut rng, 60);
        let how = How {
            segment: round as u64,
            prealloc: [0, 4096, 100_000, 1 << 20][round % 4],
            seal: round % 2 == 0,
            sync_each: round % 3 == 0,
        };
        assert_round_trip(&records, how);
    }
}

#[test]
fn empty_segment_and_empty_records() {
    assert_round_trip(&[], How::default());
    assert_round_trip(&[], How { seal: true, ..How::default() });
    assert_round_trip(&vec![Vec::new(); 5000], How::default());
}

/// Payload sizes that leave exactly 0..=12 bytes in a block, followed by
/// records of assorted sizes, in the first block and after a record that
/// spans several blocks.
#[test]
fn block_fill_edge_cases() {
    let mut rng = Rng::new(2);
    let capacity = BLOCK_SIZE - HEADER_SIZE;
    let block = BLOCK_SIZE as u64;
    for leave in 0..=HEADER_SIZE as u64 + 1 {
        for lead_len in [0usize, 2 * BLOCK_SIZE + 100] {
            let mut records = Vec::new();
            let mut offset = 28u64;
            if lead_len > 0 {
                records.push(rng.bytes(lead_len));
                offset = write_log(&records, How::default()).ends[0];
            }
            // Fill the rest of the block so that exactly `leave` bytes remain.
            let block_end = (offset / block + 1) * block;
            let fill = block_end - leave - offset - HEADER_SIZE as u64;
            records.push(rng.bytes(fill as usize));
            for len in [0, 1, 5, capacity - 1, capacity, capacity + 1, 2 * capacity, 3] {
                records.push(rng.bytes(len));
            }
            let w = write_log(&records, How::default());
            assert_eq!(w.ends[usize::from(lead_len > 0)], block_end - leave);
            assert_round_trip(&records, How::default());
            assert_round_trip(&records, How { seal: true, prealloc: 8192, ..How::default() });
        }
    }
}

/// Records that fill 1, 2 and 3 whole block payloads, give or take 2 bytes.
#[test]
fn multi_block_exact_fills() {
    let mut rng = Rng::new(3);
    let capacity = BLOCK_SIZE - HEADER_SIZE;
    let mut records = Vec::new();
    for blocks in 1..=3 {
        for delta in -2i64..=2 {
            let len = (blocks * capacity) as i64 + delta;
            records.push(rng.bytes(len as usize));
        }
    }
    assert_round_trip(&records, How::default());
    assert_round_trip(&records, How { seal: true, ..How::default() });
}

/// The writer's bytes equal an independent encoding written from FORMAT.md.
#[test]
fn golden_bytes_match_the_spec() {
    let record_a = b"hello".to_vec();
    let record_b = vec![0xAB; BLOCK_SIZE]; // fragments: FIRST, LAST
    let w =
        write_log(&[record_a.clone(), record_b.clone()], How { segment: 42, seal: true, ..How::default() });
    let mut want = spec_chunk(42, 6, 0, &spec_header_payload(1, 1, 42));
    assert_eq!(want.len(), 28);
    want.extend(spec_chunk(42, 1, 0, &record_a));
    let first_len = BLOCK_SIZE - want.len() - HEADER_SIZE;
    want.extend(spec_chunk(42, 2, 0, &record_b[..first_len]));
    assert_eq!(want.len(), BLOCK_SIZE);
    want.extend(spec_chunk(42, 4, 0, &record_b[first_len..]));
    // The writer's `seal` writes SEAL with synced_to = 0 (nothing synced yet).
    want.extend(spec_chunk(42, 5, 0, &[]));
    assert_eq!(w.data, want);
    // The example in FORMAT.md.
    assert_eq!(w.ends, [44, 32834]);
    assert_eq!(w.data.len(), 32845);
}

/// `synced_to` in each chunk header is the durable prefix when it was written.
#[test]
fn synced_to_records_the_durable_prefix() {
    let file = MemLogFile::new();
    let mut w = LogWriter::create(&file, 9, no_prealloc()).unwrap();
    let e1 = w.add_record(b"one").unwrap();
    w.sync().unwrap();
    let e2 = w.add_record(b"two").unwrap();
    let e3 = w.add_record(b"three").unwrap();
    w.sync().unwrap();
    w.add_record(b"four").unwrap();
    let data = file.contents();
    let synced_at = |off: u64| {
        let o = off as usize + 7;
        u32::from_le_bytes(data[o..o + 4].try_into().unwrap())
    };
    assert_eq!(synced_at(28), 0);
    assert_eq!(synced_at(e1), e1 as u32);
    assert_eq!(synced_at(e2), e1 as u32);
    assert_eq!(synced_at(e3), e3 as u32);
    assert_eq!(w.synced_offset(), e3);
}
