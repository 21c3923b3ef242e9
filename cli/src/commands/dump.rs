//! `dump` and `load`: a lossless, line-oriented text form of a whole database.

use crate::error::CliError;

/// Arguments of `stampkv dump`.
#[derive(Debug, clap::Args)]
pub struct DumpArgs {}

/// Runs `stampkv dump`.
pub fn dump(_args: DumpArgs) -> Result<(), CliError> {
    Err(CliError::failed("`dump` is not built yet"))
}

/// Arguments of `stampkv load`.
#[derive(Debug, clap::Args)]
pub struct LoadArgs {}

/// Runs `stampkv load`.
pub fn load(_args: LoadArgs) -> Result<(), CliError> {
    Err(CliError::failed("`load` is not built yet"))
}
