#!/usr/bin/env bash
# KV Connect load generator: `stampkv serve` vs Deno's reference server `denokv serve` (crates.io
# denokv 0.14.0), driven by a Rust generator of a few µs per request, servers pinned to one core
# and the generator to the other. Builds what it needs:
#   - denokv 0.14.0 with `cargo install --locked` into target/peers/denokv (once);
#   - the release `stampkv` binary and the generator (examples/kvc_load.rs).
# Arguments go to the generator, e.g. --runs 3 --seconds 5 --connections 1,32.
# Writes the table to stdout and a latency chart to target/kvc-load-latency.svg.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

denokv="$root/target/peers/denokv/bin/denokv"
if [ ! -x "$denokv" ]; then
  cargo install --locked denokv@0.14.0 --root "$root/target/peers/denokv"
fi
cargo build --release -p stampkv-cli --bin stampkv
cargo build --release -p stampkv-benches --example kvc_load
exec "$root/target/release/examples/kvc_load" --stampkv "$root/target/release/stampkv" \
  --denokv "$denokv" --chart "$root/target/kvc-load-latency.svg" "$@"
