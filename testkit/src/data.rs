//! Generated data for tests and benchmarks.

use crate::SplitMix64;

/// One JSON-like record (about 100 bytes, no newline) of the kind Deno KV applications
/// store: an id, a user, a city, a flag, a score and two tags, drawn from `rng`. Blocks of
/// such records compress to about 0.4 of their size with LZ4, so they stand for
/// compressible values wherever compression is measured or tested.
pub fn json_like_record(rng: &mut SplitMix64) -> String {
    const WORDS: [&str; 8] = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"];
    format!(
        "{{\"id\":{},\"user\":\"user{:04}\",\"city\":\"{}\",\"active\":{},\"score\":{},\"tags\":[\"{}\",\"{}\"]}}",
        rng.below(1_000_000),
        rng.below(5000),
        rng.pick(&WORDS),
        rng.chance(50),
        rng.below(100),
        rng.pick(&WORDS),
        rng.pick(&WORDS),
    )
}
