//! Small helpers shared by the targets.

/// Lowercase hex of some bytes, for failure messages (long inputs are cut).
pub(crate) fn hex(bytes: &[u8]) -> String {
    const MAX: usize = 96;
    let mut out: String = bytes.iter().take(MAX).map(|b| format!("{b:02x}")).collect();
    if bytes.len() > MAX {
        out.push_str(&format!("...({} bytes)", bytes.len()));
    }
    out
}

pub(crate) use stampkv_testkit::SplitMix64;

/// `len` deterministic filler bytes from `rng`, eight per draw (a few input bytes can then
/// stand for a large record or value).
pub(crate) fn filler(rng: &mut SplitMix64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    out.truncate(len);
    out
}

/// `STAMPKV_FUZZ_VERBOSE=1`: the model targets print what a run did.
pub(crate) fn verbose() -> bool {
    static VERBOSE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *VERBOSE.get_or_init(|| std::env::var_os("STAMPKV_FUZZ_VERBOSE").is_some())
}

/// How many operations of each kind a log of `{op:?}` lines holds.
pub(crate) fn op_counts(log: &[String]) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for line in log {
        let name: String = line.chars().take_while(|c| c.is_alphanumeric()).collect();
        *counts.entry(name).or_insert(0) += 1;
    }
    counts
}
