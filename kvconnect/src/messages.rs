//! KV Connect's protobuf messages (`com.deno.kv.datapath`), written by hand so that the
//! build needs no `protoc`. Enumerations are plain `int32` fields with the constants below:
//! on the wire an enum is an `int32`.

#![allow(missing_docs, reason = "field meanings are those of datapath.proto, named the same")]

/// `SnapshotRead`: the ranges of one snapshot read.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SnapshotRead {
    #[prost(message, repeated, tag = "1")]
    pub ranges: Vec<ReadRange>,
}

/// `ReadRange`: encoded keys from `start` (included) to `end` (excluded).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReadRange {
    #[prost(bytes = "vec", tag = "1")]
    pub start: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub end: Vec<u8>,
    #[prost(int32, tag = "3")]
    pub limit: i32,
    #[prost(bool, tag = "4")]
    pub reverse: bool,
}

/// `SnapshotReadOutput`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SnapshotReadOutput {
    #[prost(message, repeated, tag = "1")]
    pub ranges: Vec<ReadRangeOutput>,
    #[prost(bool, tag = "2")]
    pub read_disabled: bool,
    #[prost(bool, tag = "4")]
    pub read_is_strongly_consistent: bool,
    #[prost(int32, tag = "8")]
    pub status: i32,
}

/// `ReadRangeOutput`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReadRangeOutput {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<KvEntry>,
}

/// `KvEntry`: an entry with its 10-byte versionstamp.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KvEntry {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
    #[prost(int32, tag = "3")]
    pub encoding: i32,
    #[prost(bytes = "vec", tag = "4")]
    pub versionstamp: Vec<u8>,
}

/// `AtomicWrite`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AtomicWrite {
    #[prost(message, repeated, tag = "1")]
    pub checks: Vec<Check>,
    #[prost(message, repeated, tag = "2")]
    pub mutations: Vec<Mutation>,
    #[prost(message, repeated, tag = "3")]
    pub enqueues: Vec<Enqueue>,
}

/// `Check`: empty versionstamp = the key must not exist.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Check {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub versionstamp: Vec<u8>,
}

/// `Mutation`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mutation {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(message, optional, tag = "2")]
    pub value: Option<KvValue>,
    #[prost(int32, tag = "3")]
    pub mutation_type: i32,
    #[prost(int64, tag = "4")]
    pub expire_at_ms: i64,
    #[prost(bytes = "vec", tag = "5")]
    pub sum_min: Vec<u8>,
    #[prost(bytes = "vec", tag = "6")]
    pub sum_max: Vec<u8>,
    #[prost(bool, tag = "7")]
    pub sum_clamp: bool,
}

/// `KvValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KvValue {
    #[prost(bytes = "vec", tag = "1")]
    pub data: Vec<u8>,
    #[prost(int32, tag = "2")]
    pub encoding: i32,
}

/// `Enqueue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Enqueue {
    #[prost(bytes = "vec", tag = "1")]
    pub payload: Vec<u8>,
    #[prost(int64, tag = "2")]
    pub deadline_ms: i64,
    #[prost(bytes = "vec", repeated, tag = "3")]
    pub keys_if_undelivered: Vec<Vec<u8>>,
    #[prost(uint32, repeated, tag = "4")]
    pub backoff_schedule: Vec<u32>,
}

/// `AtomicWriteOutput`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AtomicWriteOutput {
    #[prost(int32, tag = "1")]
    pub status: i32,
    #[prost(bytes = "vec", tag = "2")]
    pub versionstamp: Vec<u8>,
    #[prost(uint32, repeated, tag = "4")]
    pub failed_checks: Vec<u32>,
}

/// `Watch`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Watch {
    #[prost(message, repeated, tag = "1")]
    pub keys: Vec<WatchKey>,
}

/// `WatchKey`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchKey {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
}

/// `WatchOutput`: one frame of a watch stream.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchOutput {
    #[prost(int32, tag = "1")]
    pub status: i32,
    #[prost(message, repeated, tag = "2")]
    pub keys: Vec<WatchKeyOutput>,
}

/// `WatchKeyOutput`: `changed` with no entry = deleted or missing.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchKeyOutput {
    #[prost(bool, tag = "1")]
    pub changed: bool,
    #[prost(message, optional, tag = "2")]
    pub entry_if_changed: Option<KvEntry>,
}

/// `SnapshotReadStatus::SR_SUCCESS`.
pub const SR_SUCCESS: i32 = 1;
/// `AtomicWriteStatus::AW_SUCCESS`.
pub const AW_SUCCESS: i32 = 1;
/// `AtomicWriteStatus::AW_CHECK_FAILURE`.
pub const AW_CHECK_FAILURE: i32 = 2;
/// `MutationType::M_SET`.
pub const M_SET: i32 = 1;
/// `MutationType::M_DELETE`.
pub const M_DELETE: i32 = 2;
/// `MutationType::M_SUM`.
pub const M_SUM: i32 = 3;
/// `MutationType::M_MAX`.
pub const M_MAX: i32 = 4;
/// `MutationType::M_MIN`.
pub const M_MIN: i32 = 5;
/// `MutationType::M_SET_SUFFIX_VERSIONSTAMPED_KEY`.
pub const M_SET_SUFFIX_VERSIONSTAMPED_KEY: i32 = 9;
/// `ValueEncoding::VE_V8`.
pub const VE_V8: i32 = 1;
/// `ValueEncoding::VE_LE64`.
pub const VE_LE64: i32 = 2;
/// `ValueEncoding::VE_BYTES`.
pub const VE_BYTES: i32 = 3;
/// `SnapshotReadStatus::SR_UNSPECIFIED`.
pub const SR_UNSPECIFIED: i32 = 0;
/// `SnapshotReadStatus::SR_READ_DISABLED`.
pub const SR_READ_DISABLED: i32 = 2;
/// `AtomicWriteStatus::AW_UNSPECIFIED`.
pub const AW_UNSPECIFIED: i32 = 0;
/// `AtomicWriteStatus::AW_WRITE_DISABLED`.
pub const AW_WRITE_DISABLED: i32 = 5;

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn get_request_bytes_as_deno_sends_them() {
        let captured =
            [0x0a, 0x0d, 0x0a, 0x03, 0x02, 0x61, 0x00, 0x12, 0x04, 0x02, 0x61, 0x00, 0x00, 0x18, 0x01];
        let read = SnapshotRead::decode(&captured[..]).unwrap();
        let range = ReadRange { start: vec![2, b'a', 0], end: vec![2, b'a', 0, 0], limit: 1, reverse: false };
        assert_eq!(read, SnapshotRead { ranges: vec![range] });
        assert_eq!(read.encode_to_vec(), captured);
    }

    #[test]
    fn set_u64_with_expiry_bytes() {
        let mutation = Mutation {
            key: vec![0x02, b'a', 0x00, 0x15, 0x01],
            value: Some(KvValue { data: vec![7, 0, 0, 0, 0, 0, 0, 0], encoding: VE_LE64 }),
            mutation_type: M_SET,
            expire_at_ms: 1000,
            ..Default::default()
        };
        let bytes = AtomicWrite { mutations: vec![mutation.clone()], ..Default::default() }.encode_to_vec();
        let expected = [
            0x12, 0x1a, // mutations, 26 bytes
            0x0a, 0x05, 0x02, b'a', 0x00, 0x15, 0x01, // key
            0x12, 0x0c, 0x0a, 0x08, 7, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x02, // value, LE64
            0x18, 0x01, // M_SET
            0x20, 0xe8, 0x07, // expire_at_ms = 1000
        ];
        assert_eq!(bytes, expected);
        assert_eq!(AtomicWrite::decode(&bytes[..]).unwrap().mutations, vec![mutation]);
    }

    #[test]
    fn outputs_encode_as_expected() {
        let out =
            AtomicWriteOutput { status: AW_CHECK_FAILURE, versionstamp: vec![], failed_checks: vec![0, 2] };
        assert_eq!(out.encode_to_vec(), [0x08, 0x02, 0x22, 0x02, 0x00, 0x02]);
        let frame = WatchOutput {
            status: SR_SUCCESS,
            keys: vec![WatchKeyOutput { changed: true, entry_if_changed: None }],
        };
        assert_eq!(frame.encode_to_vec(), [0x08, 0x01, 0x12, 0x02, 0x08, 0x01]);
    }
}
