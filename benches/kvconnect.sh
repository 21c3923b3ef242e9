#!/usr/bin/env bash
# KV Connect benchmark: `stampkv serve` vs Deno's reference server `denokv serve` (crates.io
# denokv 0.14.0), real Deno 2.9.6 as the client, in one run. Builds what it needs:
#   - denokv 0.14.0 with `cargo install --locked` into target/peers/denokv (once);
#   - Deno 2.9.6 from npm into benches/node_modules (once; not committed);
#   - the release `stampkv` binary and the runner.
# Arguments go to the runner (examples/kvconnect_bench.rs), e.g. --runs 3 --seconds 5.
# Writes the table to stdout and a latency chart to target/kvconnect-latency.svg.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

denokv="$root/target/peers/denokv/bin/denokv"
if [ ! -x "$denokv" ]; then
  cargo install --locked denokv@0.14.0 --root "$root/target/peers/denokv"
fi
deno="$root/benches/node_modules/.bin/deno"
if ! "$deno" --version 2>/dev/null | grep -q '^deno 2\.9\.6 '; then
  (cd benches && npm install --no-save --no-audit --no-fund deno@2.9.6)
fi
cargo build --release -p stampkv-cli --bin stampkv
cargo build --release -p stampkv-benches --example kvconnect_bench
exec "$root/target/release/examples/kvconnect_bench" --stampkv "$root/target/release/stampkv" \
  --denokv "$denokv" --deno "$deno" --chart "$root/target/kvconnect-latency.svg" "$@"
