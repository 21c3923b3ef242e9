//! The command line's one error type: a single line for the user and the process exit status.

use std::fmt;

/// What went wrong, as one line for standard error, and the exit status to leave with.
#[derive(Debug)]
pub struct CliError {
    /// The message printed after `stampkv: error: `.
    pub message: String,
    /// The process exit status (never 0).
    pub exit_code: u8,
}

impl CliError {
    /// Exit status of a command that could not do its work (bad input, I/O failure, ...).
    pub const FAILED: u8 = 1;

    /// Exit status of `verify` when it read everything and found problems.
    pub const PROBLEMS_FOUND: u8 = 3;

    /// A failure with exit status [`CliError::FAILED`].
    pub fn failed(message: impl Into<String>) -> CliError {
        CliError { message: message.into(), exit_code: CliError::FAILED }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for CliError {
    fn from(message: String) -> CliError {
        CliError::failed(message)
    }
}

impl From<&str> for CliError {
    fn from(message: &str) -> CliError {
        CliError::failed(message)
    }
}
