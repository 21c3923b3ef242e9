//! Runtime checks of the engine's invariants, in the spirit of Pebble's `invariants` build
//! tag: where a comment states an invariant, [`invariant!`] enforces it.
//!
//! The checks run when the `invariants` cargo feature is on (tests, fuzzing and CI turn it
//! on) or when debug assertions are on; a release build without the feature compiles them
//! away. A failed check panics: the engine's state would otherwise be corrupt.

/// Whether invariant checks run in this build.
pub(crate) const ENABLED: bool = cfg!(any(feature = "invariants", debug_assertions));

/// Panics with the formatted message if the condition is false (when [`ENABLED`]).
macro_rules! invariant {
    ($condition:expr, $($message:tt)+) => {
        if $crate::invariants::ENABLED && !$condition {
            panic!("invariant violated: {}", format_args!($($message)+));
        }
    };
}
pub(crate) use invariant;
