//! `backup` and `restore`: consistent point-in-time copies of a live database.

use crate::error::CliError;

/// Arguments of `stampkv backup`.
#[derive(Debug, clap::Args)]
pub struct BackupArgs {}

/// Runs `stampkv backup`.
pub fn backup(_args: BackupArgs) -> Result<(), CliError> {
    Err(CliError::failed("`backup` is not built yet"))
}

/// Arguments of `stampkv restore`.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {}

/// Runs `stampkv restore`.
pub fn restore(_args: RestoreArgs) -> Result<(), CliError> {
    Err(CliError::failed("`restore` is not built yet"))
}
