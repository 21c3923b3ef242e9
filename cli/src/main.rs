//! `stampkv`: the stampkv command line. One binary, one subcommand per job: `serve` a database
//! over KV Connect, look into and edit it, move data in and out (text dumps, Deno's SQLite
//! file), back it up while it is live, verify and repair it.

#![forbid(unsafe_code)]

mod commands;
mod engine_error;
mod output;
mod progress;

// The modules shared with other crates live in the library (`src/lib.rs`); the commands
// reach them as `crate::<module>`.
use stampkv_cli::{error, key_syntax, transfer, value_display, value_json};

use clap::{Parser, Subcommand};
use commands::{backup, data, deno_sqlite, dump, edge, maintenance, serve};
use std::process::ExitCode;

/// stampkv: a crash-safe key-value database with Deno KV's data model.
#[derive(Debug, Parser)]
#[command(name = "stampkv", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve a database directory over KV Connect (Deno's remote KV protocol).
    Serve(serve::ServeArgs),
    /// Serve a caching edge in front of a KV Connect upstream (a primary or another edge).
    Edge(edge::EdgeArgs),
    /// Print the value stored under a key.
    Get(data::GetArgs),
    /// Store a value under a key.
    Set(data::SetArgs),
    /// Delete a key.
    Delete(data::DeleteArgs),
    /// List entries by prefix or range.
    List(data::ListArgs),
    /// Write every entry (and optionally the queue) as a line-oriented text dump.
    Dump(dump::DumpArgs),
    /// Load a text dump written by `dump`.
    Load(dump::LoadArgs),
    /// Bring a Deno KV SQLite file (what `Deno.openKv(path)` keeps) into a database.
    ImportDeno(deno_sqlite::ImportArgs),
    /// Write a database out as a Deno KV SQLite file.
    ExportDeno(deno_sqlite::ExportArgs),
    /// Take a consistent copy of a database, even while another process writes it.
    Backup(backup::BackupArgs),
    /// Restore a backup into a new database directory.
    Restore(backup::RestoreArgs),
    /// Check every checksum of every file of a database.
    Verify(maintenance::VerifyArgs),
    /// Salvage what is still readable from a damaged database.
    Repair(maintenance::RepairArgs),
    /// Print levels, files, sizes and amplification.
    Stats(maintenance::StatsArgs),
    /// Compact the whole database.
    Compact(maintenance::CompactArgs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Serve(args) => serve::run(args),
        Command::Edge(args) => edge::run(args),
        Command::Get(args) => data::get(args),
        Command::Set(args) => data::set(args),
        Command::Delete(args) => data::delete(args),
        Command::List(args) => data::list(args),
        Command::Dump(args) => dump::dump(args),
        Command::Load(args) => dump::load(args),
        Command::ImportDeno(args) => deno_sqlite::import(args),
        Command::ExportDeno(args) => deno_sqlite::export(args),
        Command::Backup(args) => backup::backup(args),
        Command::Restore(args) => backup::restore(args),
        Command::Verify(args) => maintenance::verify(args),
        Command::Repair(args) => maintenance::repair(args),
        Command::Stats(args) => maintenance::stats(args),
        Command::Compact(args) => maintenance::compact(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("stampkv: error: {}", error.message);
            ExitCode::from(error.exit_code)
        }
    }
}
