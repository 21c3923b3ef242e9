//! Options of single writes, and how a commit ends.

use crate::Versionstamp;
use std::time::Duration;

/// Options of a single `set`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetOptions {
    /// Make the entry expire this long after the commit (`Some(Duration::ZERO)`: expired
    /// at once). As Deno's `expireIn`, it must be a whole number of milliseconds: a
    /// fraction of a millisecond is not rounded but fails the commit with `expireIn must be
    /// a non-negative integer: received 1.5` ([`KvError::InvalidExpireIn`]). The expiry
    /// time, now plus `expire_in` on the engine's clock, must not be later than
    /// +262142-12-31T23:59:59.999Z (8210266876799999 ms after the Unix epoch), else the
    /// commit fails with `Invalid mutation: expireIn is too large: <ms>`.
    pub expire_in: Option<Duration>,
}

/// How a commit ended when it did not fail with an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitResult {
    /// Everything was applied; this is the commit's versionstamp.
    Committed(Versionstamp),
    /// A check did not hold; nothing was applied.
    CheckFailed,
}

impl CommitResult {
    /// Whether the commit was applied (Deno's `ok`).
    pub fn ok(&self) -> bool {
        matches!(self, CommitResult::Committed(_))
    }

    /// The commit's versionstamp, if it was applied.
    pub fn versionstamp(&self) -> Option<Versionstamp> {
        match self {
            CommitResult::Committed(v) => Some(*v),
            CommitResult::CheckFailed => None,
        }
    }
}
