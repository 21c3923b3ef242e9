#!/usr/bin/env bash
# Edge cache benchmark: eventual reads of a Zipf-skewed workload from clients 50 ms (by
# default) from the primary, read directly, through a pull edge and through a push edge,
# and the staleness of writes at the primary as seen at an edge. Builds the release
# `stampkv` binary and the runner (examples/edge_bench.rs), then runs it; arguments go to
# the runner, e.g. --seconds 5 --clients 16. Writes the tables to stdout and the latency
# chart to benches/charts/edge-latency.svg.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

cargo build --release -p stampkv-cli --bin stampkv
cargo build --release -p stampkv-benches --example edge_bench
exec "$root/target/release/examples/edge_bench" --stampkv "$root/target/release/stampkv" \
  --chart "$root/benches/charts/edge-latency.svg" "$@"
