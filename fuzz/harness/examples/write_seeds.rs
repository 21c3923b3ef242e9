//! Writes the seed corpus: `fuzz/corpus/<target>/seed-*` (see `stampkv_fuzz_harness::seeds`).
//! Old `seed-*` files are removed first; other files (regression inputs) are left alone.
//!
//! `cargo run -p stampkv-fuzz-harness --example write_seeds`

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "writing the seed corpus stops at the first failure"
)]

use std::path::Path;

fn main() -> std::io::Result<()> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus");
    for (target, _) in stampkv_fuzz_harness::TARGETS {
        let dir = corpus.join(target);
        std::fs::create_dir_all(&dir)?;
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("seed-")) {
                std::fs::remove_file(path)?;
            }
        }
    }
    let mut sizes = std::collections::BTreeMap::new();
    for (target, name, bytes) in stampkv_fuzz_harness::seeds::all() {
        std::fs::write(corpus.join(target).join(&name), &bytes)?;
        let (count, total) = sizes.entry(target).or_insert((0usize, 0usize));
        *count += 1;
        *total += bytes.len();
    }
    for (target, (count, total)) in sizes {
        println!("{target}: {count} seeds, {total} bytes");
    }
    Ok(())
}
