//! Deno KV's limits, as options with Deno's defaults.

/// Size and count limits, checked before anything of a commit or read is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Encoded size of a key written, deleted or checked (2048).
    pub max_write_key_bytes: usize,
    /// Encoded size of a key or range end read (2049).
    pub max_read_key_bytes: usize,
    /// Encoded size of a value (65536).
    pub max_value_bytes: usize,
    /// Checks per atomic operation (100).
    pub max_checks: usize,
    /// Mutations plus enqueues per atomic operation (1000).
    pub max_mutations: usize,
    /// Keys and values of one atomic operation, counted as Deno counts them (819200).
    pub max_total_mutation_bytes: usize,
    /// Keys of one atomic operation (81920).
    pub max_total_key_bytes: usize,
    /// Keys per `get_many` (10).
    pub max_read_ranges: usize,
    /// Entries per list batch (1000).
    pub max_read_entries: usize,
    /// Keys per `watch` (10).
    pub max_watched_keys: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_write_key_bytes: 2048,
            max_read_key_bytes: 2049,
            max_value_bytes: 65536,
            max_checks: 100,
            max_mutations: 1000,
            max_total_mutation_bytes: 819_200,
            max_total_key_bytes: 81_920,
            max_read_ranges: 10,
            max_read_entries: 1000,
            max_watched_keys: 10,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deno's limits, as DESIGN.md and `../shared/reference/deno-kv-semantics.md` give them.
    #[test]
    fn defaults_are_denos() {
        let l = Limits::default();
        assert_eq!((l.max_write_key_bytes, l.max_read_key_bytes, l.max_value_bytes), (2048, 2049, 65536));
        assert_eq!((l.max_checks, l.max_mutations), (100, 1000));
        assert_eq!((l.max_total_mutation_bytes, l.max_total_key_bytes), (819_200, 81_920));
        assert_eq!((l.max_read_ranges, l.max_read_entries, l.max_watched_keys), (10, 1000, 10));
    }
}
