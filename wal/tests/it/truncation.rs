//! Test 2: for every prefix of a log, recovery returns exactly the longest
//! complete prefix of records, without error.

use crate::common::*;
use stampkv_wal::*;

fn check_every_prefix(w: &Written, segment: u64) {
    for len in 0..=w.data.len() {
        let complete = w.ends.iter().filter(|&&e| e <= len as u64).count();
        // Streamed comparison (no copies): this loop runs ~200k recoveries.
        let mut reader = SegmentReader::new(&w.data[..len], info(segment, true), RecoveryMode::default());
        let mut n = 0;
        loop {
            match reader.next_record() {
                Ok(Some(record)) => {
                    assert!(n < complete, "prefix {len}: extra record");
                    assert!(record == &w.records[n][..], "prefix {len}: record {n} differs");
                    n += 1;
                }
                Ok(None) => break,
                Err(e) => panic!("prefix {len}: {e}"),
            }
        }
        assert_eq!(n, complete, "prefix {len}");
        let summary = reader.summary();
        let valid_end = match complete {
            0 if len >= 28 => 28,
            0 => 0,
            n => w.ends[n - 1],
        };
        assert_eq!(summary.valid_end, valid_end, "prefix {len}");
        match summary.end {
            SegmentEnd::Unsealed => {}
            SegmentEnd::TornTail { offset } => assert!(offset >= valid_end, "prefix {len}"),
            ref other => panic!("prefix {len}: {other:?}"),
        }
    }
}

fn log_of_about_100k(seed: u64, how: How) -> Written {
    let mut rng = Rng::new(seed);
    // Mostly small records plus a few that span blocks.
    let mut records = records_totalling(&mut rng, 60 * 1024, 700);
    records.insert(10, rng.bytes(40 * 1024));
    write_log(&records, how)
}

#[test]
fn every_truncation_point_without_preallocation() {
    for seed in 0..iters() as u64 {
        let w = log_of_about_100k(10 + seed, How::default());
        assert!(w.data.len() > 3 * BLOCK_SIZE);
        check_every_prefix(&w, 1);
    }
}

#[test]
fn every_truncation_point_with_preallocation_and_syncs() {
    for seed in 0..iters() as u64 {
        let how = How { prealloc: 48 * 1024, sync_each: true, ..How::default() };
        let w = log_of_about_100k(20 + seed, how);
        assert!(w.data.len() > *w.ends.last().unwrap() as usize, "zeros follow");
        check_every_prefix(&w, 1);
    }
}
