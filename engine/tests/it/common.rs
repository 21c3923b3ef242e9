//! Helpers shared by the engine's integration tests.

/// The shared seeded generator of stampkv's tests.
pub use stampkv_testkit::SplitMix64 as Rng;

/// An integer from the environment, or a default (CI uses the defaults).
pub fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
