//! `verify`, `repair`, `stats`, `compact`: the health of a database's files.

use crate::error::CliError;

/// Arguments of `stampkv verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {}

/// Runs `stampkv verify`.
pub fn verify(_args: VerifyArgs) -> Result<(), CliError> {
    Err(CliError::failed("`verify` is not built yet"))
}

/// Arguments of `stampkv repair`.
#[derive(Debug, clap::Args)]
pub struct RepairArgs {}

/// Runs `stampkv repair`.
pub fn repair(_args: RepairArgs) -> Result<(), CliError> {
    Err(CliError::failed("`repair` is not built yet"))
}

/// Arguments of `stampkv stats`.
#[derive(Debug, clap::Args)]
pub struct StatsArgs {}

/// Runs `stampkv stats`.
pub fn stats(_args: StatsArgs) -> Result<(), CliError> {
    Err(CliError::failed("`stats` is not built yet"))
}

/// Arguments of `stampkv compact`.
#[derive(Debug, clap::Args)]
pub struct CompactArgs {}

/// Runs `stampkv compact`.
pub fn compact(_args: CompactArgs) -> Result<(), CliError> {
    Err(CliError::failed("`compact` is not built yet"))
}
