//! `import-deno` and `export-deno`: Deno KV's own SQLite file in and out.

use crate::error::CliError;

/// Arguments of `stampkv import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {}

/// Runs `stampkv import`.
pub fn import(_args: ImportArgs) -> Result<(), CliError> {
    Err(CliError::failed("`import` is not built yet"))
}

/// Arguments of `stampkv export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {}

/// Runs `stampkv export`.
pub fn export(_args: ExportArgs) -> Result<(), CliError> {
    Err(CliError::failed("`export` is not built yet"))
}
