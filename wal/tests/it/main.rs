//! Integration tests of stampkv-wal (one test binary to keep link time low).

mod common;
mod corruption;
mod modes;
mod roundtrip;
mod truncation;
mod wal;
