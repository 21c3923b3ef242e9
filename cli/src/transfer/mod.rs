//! Moving whole databases in and out: the text dump (`dump`, `load`) and Deno KV's SQLite
//! file (`import-deno`, `export-deno`), over [`stampkv::Kv::bulk_snapshot`] (one
//! consistent read) and [`stampkv::Kv::restore`] (one all-or-nothing write that keeps
//! versionstamps).

pub mod base64;
pub mod deno_sqlite;
pub mod dumpfile;
pub mod number;
pub mod show;
pub mod target;
