//! Answers on the wire: a cached range is kept as its encoded `ReadRangeOutput`, and an
//! eventual `snapshot_read` answer is assembled by copying those bytes, without decoding.

use crate::cache::Answer;
use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;
use stampkv_kvconnect as proto;
use std::time::Instant;

/// `SnapshotReadOutput.ranges` is field 1, length-delimited: tag byte `1 << 3 | 2`.
const RANGES_TAG: u8 = 0x0a;
/// `SnapshotReadOutput.status` is field 8, varint: tag byte `8 << 3 | 0`.
const STATUS_TAG: u8 = 0x40;

/// One range's answer as cached.
pub(crate) fn answer(output: &proto::ReadRangeOutput, fetched_at: Instant) -> Answer {
    Answer { body: Bytes::from(output.encode_to_vec()), entries: output.values.len(), fetched_at }
}

/// The answer of a point read that found `entry` (or nothing).
pub(crate) fn point_answer(entry: Option<proto::KvEntry>, fetched_at: Instant) -> Answer {
    answer(&proto::ReadRangeOutput { values: entry.into_iter().collect() }, fetched_at)
}

/// The versionstamp a cached point answer holds: `Some(None)` for "not found", `None` if
/// the answer is not a point answer.
pub(crate) fn point_stamp(answer: &Answer) -> Option<Option<Vec<u8>>> {
    let output = proto::ReadRangeOutput::decode(answer.body.clone()).ok()?;
    match output.values.as_slice() {
        [] => Some(None),
        [entry] => Some(Some(entry.versionstamp.clone())),
        _ => None,
    }
}

/// An encoded `SnapshotReadOutput` holding `answers` in order, `status = SR_SUCCESS` and
/// `read_is_strongly_consistent = false` (the default, so not written).
pub(crate) fn eventual_output(answers: &[Answer]) -> Bytes {
    let size: usize =
        answers.iter().map(|a| 1 + prost::length_delimiter_len(a.body.len()) + a.body.len()).sum();
    let mut out = BytesMut::with_capacity(size + 2);
    for answer in answers {
        out.put_u8(RANGES_TAG);
        // Writing a varint into a growable buffer cannot fail.
        let _ = prost::encode_length_delimiter(answer.body.len(), &mut out);
        out.put_slice(&answer.body);
    }
    out.put_u8(STATUS_TAG);
    out.put_u8(u8::try_from(proto::SR_SUCCESS).unwrap_or(1));
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembled_output_decodes_as_the_message() {
        let entry = |k: &[u8]| proto::KvEntry {
            key: k.to_vec(),
            value: vec![1; 300],
            encoding: proto::VE_BYTES,
            versionstamp: vec![0; 10],
        };
        let first = proto::ReadRangeOutput { values: vec![entry(b"a"), entry(b"b")] };
        let empty = proto::ReadRangeOutput { values: vec![] };
        let now = Instant::now();
        let bytes = eventual_output(&[answer(&first, now), answer(&empty, now), point_answer(None, now)]);
        let decoded = proto::SnapshotReadOutput::decode(bytes).unwrap();
        assert_eq!(decoded.ranges, vec![first.clone(), empty.clone(), empty]);
        assert_eq!(decoded.status, proto::SR_SUCCESS);
        assert!(!decoded.read_is_strongly_consistent && !decoded.read_disabled);
        assert_eq!(answer(&proto::ReadRangeOutput::default(), now).entries, 0);
        assert_eq!(point_stamp(&point_answer(None, now)), Some(None));
        assert_eq!(point_stamp(&point_answer(Some(entry(b"k")), now)), Some(Some(vec![0; 10])));
        assert_eq!(point_stamp(&answer(&first, now)), None);
    }
}
