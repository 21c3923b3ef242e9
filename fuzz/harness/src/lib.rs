//! The logic of stampkv's fuzz targets.
//!
//! Each `pub fn <target>(data: &[u8])` runs one target on one input and **panics on any
//! property violation** (never on an expected error). cargo-fuzz runs them under libFuzzer
//! (`fuzz/fuzz_targets/<target>.rs`, nightly); `tests/corpus.rs` runs every committed
//! input of `fuzz/corpus/<target>/` through them on the stable toolchain, so the seeds and
//! regression inputs are checked by `cargo test --workspace`.
//!
//! | target | input | properties |
//! |---|---|---|
//! | [`key_codec`] | raw key bytes, and two structured keys | decode never panics and accepts only canonical encodings; decode(encode(k)) == k; key order == byte order of encodings |
//! | [`value_codec`] | raw V8 / stored-value bytes, and a structured `Value` | deserialize never panics; whatever it accepts serializes again and reads back as the same value (a fixpoint); `decode_stored`/`encode_stored` round trip; structured values round trip |
//! | [`wal_recover`] | raw segment bytes, or records + damage | the reader never panics in any mode; on damaged logs it returns a prefix (or, salvaging, a subsequence) of the records written, never a record that was not written |
//! | [`sstable_read`] | raw table bytes, or entries + damage | no panic; a damaged table reads as an error or exactly the original data; with checksums recomputed over damage, block decoders still never panic |
//! | [`engine_model`] | an operation sequence | `Db` equals a `BTreeMap` model after every read, snapshots included; after a crash it equals the model after a prefix of the commits that contains every synced one |
//! | [`kv_model`] | an operation sequence | `Kv` equals a model of the Deno KV contract: values, versionstamps, checks, sum/min/max, expiry, list order and cursor paging, enqueues, reopen and crash |
//! | [`kvconnect_request`] | an endpoint selector and a request body | the KV Connect server (its axum router, in-process) never panics or answers 5xx; its 200 answers decode and agree with the request (ranges, limits, key order, versionstamps, checks, watch frames, metadata) |
//! | [`metadata_json`] | a metadata exchange body (`POST /`) | as `kvconnect_request`: the version answered is the highest one offered, and an offer is never refused |
//! | [`dump_reader`] | a `stampkv dump` file | the CLI's dump reader never panics, reads or names a line; lines that read get the right end line and then read to the end; what it reads is written again and reads back the same |
//! | [`key_syntax`] | key text, and a structured key | the CLI's key parser never panics, errors name a column; printed (Deno's notation) and typed JSON keys parse back to the same key |
//!
//! The seed inputs committed in `fuzz/corpus/` are written by [`seeds::all`] (run
//! `cargo run -p stampkv-fuzz-harness --example write_seeds`); the `deno-*` inputs of the
//! network targets are real Deno traffic, recorded by `fuzz/seeds/capture.mjs` (see
//! `fuzz/seeds/README.md`).

#![forbid(unsafe_code)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "fuzz targets report a property violation by panicking; libFuzzer and the corpus tests catch it"
)]

mod dump_reader;
mod engine_model;
mod key_codec;
mod key_syntax;
mod kv_model;
pub mod kvconnect_request;
pub mod seeds;
mod sstable_read;
mod util;
mod value_codec;
mod wal_recover;

pub use dump_reader::dump_reader;
pub use engine_model::engine_model;
pub use key_codec::key_codec;
pub use key_syntax::key_syntax;
pub use kv_model::kv_model;
pub use kvconnect_request::{kvconnect_request, metadata_json};
pub use sstable_read::sstable_read;
pub use value_codec::value_codec;
pub use wal_recover::wal_recover;

/// A target: its name (of `fuzz/fuzz_targets/<name>.rs` and `fuzz/corpus/<name>/`) and
/// its function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target.
pub const TARGETS: [Target; 10] = [
    ("key_codec", key_codec),
    ("value_codec", value_codec),
    ("wal_recover", wal_recover),
    ("sstable_read", sstable_read),
    ("engine_model", engine_model),
    ("kv_model", kv_model),
    ("kvconnect_request", kvconnect_request),
    ("metadata_json", metadata_json),
    ("dump_reader", dump_reader),
    ("key_syntax", key_syntax),
];
