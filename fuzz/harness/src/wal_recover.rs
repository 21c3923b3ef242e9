//! `wal_recover`: reading write-ahead-log segments, intact, damaged or arbitrary.
//!
//! The first input byte chooses the variant (even: raw, odd: structured).
//!
//! - Raw: the rest is a segment. `SegmentReader` in every `RecoveryMode`, as the last
//!   segment and as an earlier one, never panics and always terminates; after an error it
//!   is finished; `valid_end` lies within the data. All modes but `SkipAnyCorrupted` parse
//!   the same way up to the first damage, so they return the same records, and those are a
//!   prefix of what `SkipAnyCorrupted` returns.
//! - Structured: records chosen by the input (small, multi-block, empty, and records whose
//!   payload holds a valid chunk of the same segment) are written with `LogWriter` into a
//!   `MemLogFile` (with syncs, preallocation, a seal), then damaged in place (truncation,
//!   byte changes, zeroed or filled ranges). Then:
//!   - intact: every mode returns every record; an unsealed segment that is not the last
//!     is an error in the strict modes;
//!   - default mode: `Ok`(a prefix of the records) or a `Corruption` error (after a prefix);
//!     `AbsoluteConsistency` and `PointInTime` a prefix too, `SkipAnyCorrupted` a
//!     subsequence: never a record that was not written;
//!   - a log never synced (and holding no chunk-like payloads) never reports corruption;
//!   - a truncation alone yields exactly the records that end before the cut;
//!   - `seal_recovered_segment` at the recovered `valid_end` gives a segment that reads,
//!     as a non-last segment, as exactly the recovered records, sealed.

use crate::util::{filler, hex, SplitMix64};
use arbitrary::{Arbitrary, Unstructured};
use stampkv_wal::{
    seal_recovered_segment, LogWriter, MemLogFile, RecoveryMode, SegmentEnd, SegmentInfo, SegmentReader,
    SegmentSummary, WalError, WalOptions, HEADER_SIZE,
};

const MODES: [RecoveryMode; 4] = [
    RecoveryMode::TolerateCorruptedTail,
    RecoveryMode::AbsoluteConsistency,
    RecoveryMode::PointInTime,
    RecoveryMode::SkipAnyCorrupted,
];

/// The segment number used throughout (a segment written as another number is "misnamed").
const SEGMENT: u64 = 1;
/// Offset of the first record: just past the 28-byte segment header chunk.
const FIRST_RECORD: u64 = 28;

/// Runs the `wal_recover` target on one input.
pub fn wal_recover(data: &[u8]) {
    let Some((&variant, rest)) = data.split_first() else { return };
    if variant & 1 == 0 {
        raw(rest);
    } else if let Ok(spec) = Spec::arbitrary(&mut Unstructured::new(rest)) {
        structured(spec);
    }
}

/// Everything one read of a segment produced.
#[derive(Debug)]
struct Read {
    records: Vec<Vec<u8>>,
    result: Result<SegmentSummary, WalError>,
}

fn read(data: &[u8], mode: RecoveryMode, is_last: bool) -> Read {
    let info = SegmentInfo { number: SEGMENT, name: "000001.log".into(), is_last };
    let mut reader = SegmentReader::new(data, info, mode);
    let mut records = Vec::new();
    // Every record but the first costs at least one chunk header: a bound on the loop.
    let bound = data.len() / HEADER_SIZE + 2;
    let result = loop {
        match reader.next_record() {
            Ok(Some(record)) => records.push(record.to_vec()),
            Ok(None) => break Ok(reader.summary()),
            Err(e) => {
                assert!(
                    matches!(reader.next_record(), Ok(None)),
                    "{mode:?}: the reader goes on after an error ({e})"
                );
                break Err(e);
            }
        }
        assert!(records.len() <= bound, "{mode:?}: more records than chunks ({} bytes)", data.len());
    };
    if let Ok(summary) = &result {
        assert!(summary.valid_end <= data.len() as u64, "{mode:?}: valid_end {summary:?} beyond the data");
    }
    Read { records, result }
}

fn raw(data: &[u8]) {
    let mut strict_records: Option<Vec<Vec<u8>>> = None;
    let mut skip_records: Option<Vec<Vec<u8>>> = None;
    for is_last in [true, false] {
        for mode in MODES {
            let r = read(data, mode, is_last);
            let slot =
                if mode == RecoveryMode::SkipAnyCorrupted { &mut skip_records } else { &mut strict_records };
            match slot {
                None => *slot = Some(r.records),
                Some(first) => assert_eq!(
                    *first,
                    r.records,
                    "{mode:?} (is_last {is_last}) returned other records than the same parse elsewhere; data {}",
                    hex(data)
                ),
            }
        }
    }
    let (strict, skip) = (strict_records.unwrap_or_default(), skip_records.unwrap_or_default());
    assert!(
        skip.starts_with(&strict),
        "SkipAnyCorrupted does not start with the records the other modes return; data {}",
        hex(data)
    );
}

// ---------------------------------------------------------------------------------------
// Structured: write, damage, recover
// ---------------------------------------------------------------------------------------

#[derive(Arbitrary, Debug)]
enum RecordSpec {
    /// Up to 255 filler bytes.
    Small { len: u8, seed: u8 },
    /// Up to ~128 KiB of filler: FIRST, MIDDLE*, LAST chunks.
    Large { len: u16, seed: u8 },
    /// Bytes from the input.
    Bytes(Vec<u8>),
    /// A payload that holds a valid chunk of this very segment (with a large `synced_to`)
    /// between filler bytes: adversarial data for the byte-wise evidence search.
    ChunkLike { kind: u8, synced_to: u32, before: u8, inner: u8, after: u8 },
}

#[derive(Arbitrary, Debug)]
struct RecordStep {
    record: RecordSpec,
    /// Sync after this record.
    sync: bool,
}

#[derive(Arbitrary, Debug)]
enum Damage {
    Truncate { at: u32 },
    Set { at: u32, byte: u8 },
    Xor { at: u32, mask: u8 },
    Zero { at: u32, len: u16 },
    Fill { at: u32, len: u16, byte: u8 },
}

#[derive(Arbitrary, Debug)]
struct Spec {
    /// Preallocation in 4 KiB steps (0: none).
    prealloc_pages: u8,
    steps: Vec<RecordStep>,
    seal: bool,
    damage: Vec<Damage>,
}

/// One chunk of segment `segment`, encoded straight from `wal/FORMAT.md`.
fn spec_chunk(segment: u64, kind: u8, synced_to: u32, payload: &[u8]) -> Vec<u8> {
    let mut tail = Vec::with_capacity(7);
    tail.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    tail.push(kind);
    tail.extend_from_slice(&synced_to.to_le_bytes());
    let mut h = crc32fast::Hasher::new();
    h.update(&segment.to_le_bytes());
    h.update(&tail);
    h.update(payload);
    let crc = h.finalize();
    let masked = crc.rotate_right(15).wrapping_add(0xa282_ead8);
    let mut out = masked.to_le_bytes().to_vec();
    out.extend_from_slice(&tail);
    out.extend_from_slice(payload);
    out
}

impl RecordSpec {
    fn payload(&self, index: usize) -> (Vec<u8>, bool) {
        let fill =
            |len: usize, seed: u8| filler(&mut SplitMix64::new(((index as u64) << 8) | u64::from(seed)), len);
        match self {
            RecordSpec::Small { len, seed } => (fill(usize::from(*len), *seed), false),
            RecordSpec::Large { len, seed } => (fill(usize::from(*len) * 2, *seed), false),
            RecordSpec::Bytes(bytes) => (bytes.iter().copied().take(4096).collect(), false),
            RecordSpec::ChunkLike { kind, synced_to, before, inner, after } => {
                let mut payload = fill(usize::from(*before % 64), *inner);
                let inner_payload = fill(usize::from(*inner % 32), *after);
                payload.extend(spec_chunk(SEGMENT, 1 + kind % 6, *synced_to, &inner_payload));
                payload.extend(fill(usize::from(*after % 64), *before));
                (payload, true)
            }
        }
    }
}

/// The log as written: file bytes, records, and each record's end offset.
struct Written {
    data: Vec<u8>,
    records: Vec<Vec<u8>>,
    ends: Vec<u64>,
    synced: bool,
    chunk_like: bool,
    sealed: bool,
}

fn write(spec: &Spec) -> Written {
    let file = MemLogFile::new();
    let preallocate_bytes = u64::from(spec.prealloc_pages % 64) * 4096;
    let mut writer =
        LogWriter::create(&file, SEGMENT, WalOptions { preallocate_bytes, ..WalOptions::default() })
            .expect("create");
    let (mut records, mut ends) = (Vec::new(), Vec::new());
    let (mut synced, mut chunk_like, mut total) = (false, false, 0usize);
    for (index, step) in spec.steps.iter().take(64).enumerate() {
        let (payload, is_chunk_like) = step.record.payload(index);
        total += payload.len();
        if total > 400 * 1024 {
            break;
        }
        ends.push(writer.add_record(&payload).expect("add_record"));
        records.push(payload);
        chunk_like |= is_chunk_like;
        if step.sync {
            writer.sync().expect("sync");
            synced = true;
        }
    }
    if spec.seal {
        writer.seal().expect("seal");
    }
    Written { data: file.contents(), records, ends, synced, chunk_like, sealed: spec.seal }
}

/// Applies the damage; returns the damaged bytes and, if the damage was truncations
/// only, the length cut to.
fn damage(data: &[u8], damage: &[Damage]) -> (Vec<u8>, Option<usize>) {
    let mut out = data.to_vec();
    let mut only_truncation = true;
    for d in damage.iter().take(8) {
        let at = |at: u32, len: usize| if len == 0 { 0 } else { at as usize % len };
        match *d {
            Damage::Truncate { at: cut } => {
                let len = out.len();
                out.truncate(at(cut, len + 1));
            }
            Damage::Set { at: pos, byte } if !out.is_empty() => {
                let i = at(pos, out.len());
                out[i] = byte;
                only_truncation = false;
            }
            Damage::Xor { at: pos, mask } if !out.is_empty() => {
                let i = at(pos, out.len());
                out[i] ^= mask.max(1);
                only_truncation = false;
            }
            Damage::Zero { at: pos, len } | Damage::Fill { at: pos, len, byte: 0 } if !out.is_empty() => {
                let i = at(pos, out.len());
                let end = (i + usize::from(len)).min(out.len());
                out[i..end].fill(0);
                only_truncation = false;
            }
            Damage::Fill { at: pos, len, byte } if !out.is_empty() => {
                let i = at(pos, out.len());
                let end = (i + usize::from(len)).min(out.len());
                out[i..end].fill(byte);
                only_truncation = false;
            }
            _ => {}
        }
    }
    let cut = (only_truncation && out.len() < data.len()).then_some(out.len());
    (out, cut)
}

fn is_prefix(records: &[Vec<u8>], originals: &[Vec<u8>]) -> bool {
    originals.starts_with(records)
}

fn is_subsequence(records: &[Vec<u8>], originals: &[Vec<u8>]) -> bool {
    let mut it = originals.iter();
    records.iter().all(|r| it.any(|o| o == r))
}

fn structured(spec: Spec) {
    let w = write(&spec);
    let (data, cut) = damage(&w.data, &spec.damage);
    let ctx = |what: &str| {
        format!(
            "{what}; {} records, synced {}, sealed {}, chunk-like {}; damaged segment {}",
            w.records.len(),
            w.synced,
            w.sealed,
            w.chunk_like,
            hex(&data)
        )
    };
    if data == w.data {
        intact(&w);
        return;
    }
    for is_last in [true, false] {
        for mode in MODES {
            let r = read(&data, mode, is_last);
            let what = format!("{mode:?}, is_last {is_last}");
            if mode == RecoveryMode::SkipAnyCorrupted {
                assert!(
                    is_subsequence(&r.records, &w.records),
                    "{}",
                    ctx(&format!("{what}: not a subsequence"))
                );
            } else {
                assert!(is_prefix(&r.records, &w.records), "{}", ctx(&format!("{what}: not a prefix")));
            }
            if let Err(e) = &r.result {
                assert!(
                    matches!(e, WalError::Corruption { .. }),
                    "{}",
                    ctx(&format!("{what}: unexpected error {e}"))
                );
            }
            if mode == RecoveryMode::PointInTime && is_last {
                assert!(r.result.is_ok(), "{}", ctx(&format!("{what}: PointInTime failed: {:?}", r.result)));
            }
        }
    }
    let r = read(&data, RecoveryMode::TolerateCorruptedTail, true);
    if crate::util::verbose() {
        let end = r.result.as_ref().map(|s| format!("{:?}", s.end)).unwrap_or_else(|e| format!("error {e}"));
        let end: String = end.chars().take(40).collect();
        eprintln!(
            "wal_recover: {} of {} records ({} bytes), synced {}, sealed {}, chunk-like {}, cut {cut:?}: {end}",
            r.records.len(),
            w.records.len(),
            w.data.len(),
            w.synced,
            w.sealed,
            w.chunk_like
        );
    }
    if !w.synced && !w.chunk_like {
        // Nothing was ever synced: any damage can only be a torn tail.
        assert!(r.result.is_ok(), "{}", ctx(&format!("corruption in a log never synced: {:?}", r.result)));
    }
    if let (Some(len), false) = (cut, w.chunk_like) {
        let complete = w.ends.iter().filter(|&&end| end <= len as u64).count();
        assert_eq!(r.records.len(), complete, "{}", ctx(&format!("truncated to {len}")));
        let summary =
            r.result.as_ref().unwrap_or_else(|e| panic!("{}", ctx(&format!("truncated to {len}: {e}"))));
        let expected_end = match complete {
            0 if (len as u64) < FIRST_RECORD => 0,
            0 => FIRST_RECORD,
            k => w.ends[k - 1],
        };
        assert_eq!(summary.valid_end, expected_end, "{}", ctx(&format!("truncated to {len}: valid_end")));
    }
    if let Ok(summary) = &r.result {
        reseal(&data, &r.records, summary.valid_end);
    }
}

/// After a recovery, sealing at `valid_end` leaves a clean segment with the same records.
fn reseal(data: &[u8], records: &[Vec<u8>], valid_end: u64) {
    let file = MemLogFile::from_bytes(data.to_vec());
    seal_recovered_segment(&file, SEGMENT, valid_end).expect("seal_recovered_segment");
    let sealed = file.contents();
    let r = read(&sealed, RecoveryMode::TolerateCorruptedTail, false);
    assert_eq!(r.records, records, "resealed at {valid_end}: other records; {}", hex(&sealed));
    let summary = r.result.unwrap_or_else(|e| panic!("resealed at {valid_end}: {e}; {}", hex(&sealed)));
    assert_eq!(summary.end, SegmentEnd::Sealed, "resealed at {valid_end}");
}

fn intact(w: &Written) {
    for is_last in [true, false] {
        for mode in MODES {
            let r = read(&w.data, mode, is_last);
            let what = format!("intact log, {mode:?}, is_last {is_last}");
            let strict =
                matches!(mode, RecoveryMode::TolerateCorruptedTail | RecoveryMode::AbsoluteConsistency);
            if !is_last && !w.sealed && strict {
                assert!(
                    matches!(r.result, Err(WalError::Corruption { .. })),
                    "{what}: an unsealed earlier segment must be an error, got {:?}",
                    r.result
                );
                continue;
            }
            assert_eq!(r.records, w.records, "{what}: records differ");
            let summary = r.result.unwrap_or_else(|e| panic!("{what}: {e}"));
            let expected = if w.sealed { SegmentEnd::Sealed } else { SegmentEnd::Unsealed };
            if is_last || w.sealed {
                assert_eq!(summary.end, expected, "{what}");
            }
        }
    }
}
