//! The parts of the `stampkv` command line that other crates use too: the key syntax
//! (`["users", 42n]`, [`key_syntax::parse_key`]), the value notations it prints and reads
//! ([`value_display`], [`value_json`]), and the transfer formats (the text dump of
//! [`transfer::dumpfile`], Deno's SQLite file). The `stampkv` binary (`src/main.rs`) is
//! built on them; the fuzz targets in `fuzz/` drive the key parser and the dump reader
//! through this library.

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

pub mod error;
pub mod key_syntax;
pub mod transfer;
pub use stampkv::inspect as value_display;
pub mod value_json;

#[cfg(test)]
mod inspect_cases;
