//! `get`, `set`, `delete`, `list`: read and edit single entries, keys in Deno's syntax.

use crate::error::CliError;

/// Arguments of `stampkv get`.
#[derive(Debug, clap::Args)]
pub struct GetArgs {}

/// Runs `stampkv get`.
pub fn get(_args: GetArgs) -> Result<(), CliError> {
    Err(CliError::failed("`get` is not built yet"))
}

/// Arguments of `stampkv set`.
#[derive(Debug, clap::Args)]
pub struct SetArgs {}

/// Runs `stampkv set`.
pub fn set(_args: SetArgs) -> Result<(), CliError> {
    Err(CliError::failed("`set` is not built yet"))
}

/// Arguments of `stampkv delete`.
#[derive(Debug, clap::Args)]
pub struct DeleteArgs {}

/// Runs `stampkv delete`.
pub fn delete(_args: DeleteArgs) -> Result<(), CliError> {
    Err(CliError::failed("`delete` is not built yet"))
}

/// Arguments of `stampkv list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {}

/// Runs `stampkv list`.
pub fn list(_args: ListArgs) -> Result<(), CliError> {
    Err(CliError::failed("`list` is not built yet"))
}
