//! The error type of the table layer.

use std::fmt;
use std::io;

/// Errors of the table layer.
#[derive(Debug)]
pub enum TableError {
    /// A checksum, magic, length or structure check failed.
    Corruption {
        /// The file, as named by the caller of [`Table::open`](crate::Table::open).
        file: String,
        /// Byte offset in the file of the damaged block or structure.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// A format version this code does not read.
    Unsupported {
        /// The file, as named by the caller of [`Table::open`](crate::Table::open).
        file: String,
        /// The version found in the footer.
        version: u32,
    },
    /// Keys added to a builder out of order (or a duplicate versioned key).
    OutOfOrder,
    /// An I/O error. Read errors carry the file name and offset in their message; an
    /// invalid argument to the builder (oversized key or value, duplicate user property
    /// name) is reported as [`io::ErrorKind::InvalidInput`].
    Io(io::Error),
}

impl TableError {
    /// A [`TableError::Corruption`].
    pub(crate) fn corruption(file: &str, offset: u64, reason: impl Into<String>) -> Self {
        TableError::Corruption { file: file.to_owned(), offset, reason: reason.into() }
    }

    /// An [`io::ErrorKind::InvalidInput`] error for a bad builder argument.
    pub(crate) fn invalid_input(msg: impl Into<String>) -> Self {
        TableError::Io(io::Error::new(io::ErrorKind::InvalidInput, msg.into()))
    }

    /// Wraps a read error so that its message names the file and offset.
    pub(crate) fn read_error(file: &str, offset: u64, err: io::Error) -> Self {
        let kind = err.kind();
        TableError::Io(io::Error::new(kind, format!("{file}: read at offset {offset} failed: {err}")))
    }
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableError::Corruption { file, offset, reason } => {
                write!(f, "corrupt table {file} at offset {offset}: {reason}")
            }
            TableError::Unsupported { file, version } => {
                write!(f, "table {file} has unsupported format version {version}")
            }
            TableError::OutOfOrder => {
                f.write_str("table keys added out of order (or duplicate versioned key)")
            }
            TableError::Io(e) => write!(f, "table I/O error: {e}"),
        }
    }
}

impl std::error::Error for TableError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TableError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for TableError {
    fn from(e: io::Error) -> Self {
        TableError::Io(e)
    }
}
