#!/usr/bin/env bash
# End-to-end test of `stampkv import-deno` and `stampkv export-deno` with real Deno 2.9.6:
#  1. Deno writes a database file (every key part and value kind, expiring keys, queued
#     messages pending and one left running by a killed listener);
#  2. `stampkv import-deno` brings it in: the entries read from Rust equal Deno's, with the
#     same versionstamps, and every message is there;
#  3. `stampkv export-deno` writes it back: the file has Deno's schema and rows, Deno reads
#     the same entries, delivers the due messages (dead-lettering one) and commits on top;
#  4. with STAMPKV_ETCD=URL[,URL...] (an etcd cluster, as server/e2e/cluster/run.sh starts
#     one): the same file imported into the cluster, dumped, loaded between the cluster and a
#     directory both ways, counted by `stats`, and exported again for Deno to compare.
# Needs node and npm; installs deno@2.9.6 into cli/e2e/node_modules (not committed).
set -euo pipefail
cd "$(dirname "$0")"
e2e="$PWD"
root="$(cd ../.. && pwd)"

fail() { echo "cli e2e: FAIL: $*" >&2; exit 1; }
command -v node >/dev/null 2>&1 || fail "node is not installed: the end-to-end test needs Node.js (>= 18) and npm"
command -v npm >/dev/null 2>&1 || fail "npm is not installed: the end-to-end test needs Node.js (>= 18) and npm"

deno="$e2e/node_modules/.bin/deno"
if ! "$deno" --version 2>/dev/null | grep -q '^deno 2\.9\.6 '; then
  npm install --no-save --no-audit --no-fund deno@2.9.6
fi
"$deno" --version | sed -n 1p
export DENO_NO_UPDATE_CHECK=1 DENO_NO_PROMPT=1
run_deno() { "$deno" run --unstable-kv -A "$@"; }

(cd "$root" && cargo build -q -p stampkv-cli --bin stampkv && cargo build -q -p stampkv-server --example dump_json)
stampkv="$root/target/debug/stampkv"
dump_json="$root/target/debug/examples/dump_json"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

echo "cli e2e: 1. Deno writes a database file"
run_deno "$e2e/make_db.ts" "$scratch/deno.sqlite" "$scratch/expected.json"
run_deno "$e2e/deno_canon.ts" "$scratch/deno.sqlite" >"$scratch/deno.canon"
[ -s "$scratch/deno.canon" ] || fail "Deno's file holds no entries"

echo "cli e2e: 2. stampkv import-deno"
"$stampkv" import-deno "$scratch/deno.sqlite" --path "$scratch/db"
"$dump_json" "$scratch/db" >"$scratch/rust.canon"
node "$root/server/e2e/compare.mjs" "$scratch/deno.canon" "$scratch/rust.canon"
"$stampkv" dump --path "$scratch/db" >"$scratch/db.dump"
# Five messages due soon, one due in an hour, the one Deno was running.
tail -n 1 "$scratch/db.dump" | grep -q '"messages":7,' || fail "the imported queue is not complete: $(tail -n 1 "$scratch/db.dump")"
grep -q '"expireAt":' "$scratch/db.dump" || fail "the expiry times were not imported"

echo "cli e2e: 3. stampkv export-deno, read and listened to by Deno"
"$stampkv" export-deno "$scratch/exported.sqlite" --path "$scratch/db"
run_deno "$e2e/compare_files.ts" "$scratch/deno.sqlite" "$scratch/exported.sqlite"
run_deno "$e2e/deno_canon.ts" "$scratch/exported.sqlite" >"$scratch/exported.canon"
node "$root/server/e2e/compare.mjs" "$scratch/deno.canon" "$scratch/exported.canon"
# Deno logs the handler that fails on purpose to standard error: shown only on failure.
run_deno "$e2e/listen.ts" "$scratch/exported.sqlite" "$scratch/expected.json" 2>"$scratch/listen.err" ||
  { cat "$scratch/listen.err" >&2; fail "Deno did not deliver the exported queue"; }

if [ -n "${STAMPKV_ETCD:-}" ]; then
  echo "cli e2e: 4. the same transfers against the etcd cluster at $STAMPKV_ETCD"
  on_etcd() { local prefix="$1"; shift; "$stampkv" "$@" --etcd "$STAMPKV_ETCD" --etcd-prefix "cli-e2e-$$-$prefix/"; }
  on_etcd a import-deno "$scratch/deno.sqlite"
  on_etcd a dump -o "$scratch/etcd-a.dump"
  cmp "$scratch/db.dump" "$scratch/etcd-a.dump" || fail "the cluster's dump differs from the directory's"
  on_etcd a stats >"$scratch/stats.txt"
  grep -q "7 queued messages" "$scratch/stats.txt" || fail "stats --etcd: $(cat "$scratch/stats.txt")"
  grep -q "leader" "$scratch/stats.txt" || fail "stats --etcd shows no members: $(cat "$scratch/stats.txt")"
  on_etcd a export-deno "$scratch/etcd-exported.sqlite"
  run_deno "$e2e/compare_files.ts" "$scratch/deno.sqlite" "$scratch/etcd-exported.sqlite"
  # A directory's dump into the cluster and the cluster's back into a directory.
  on_etcd b load "$scratch/db.dump"
  on_etcd b dump -o "$scratch/etcd-b.dump"
  cmp "$scratch/db.dump" "$scratch/etcd-b.dump" || fail "a dump loaded into the cluster dumps differently"
  "$stampkv" load "$scratch/etcd-b.dump" --path "$scratch/from-etcd"
  "$stampkv" dump --path "$scratch/from-etcd" -o "$scratch/from-etcd.dump"
  cmp "$scratch/db.dump" "$scratch/from-etcd.dump" || fail "the cluster's dump loaded into a directory dumps differently"
  if on_etcd b load "$scratch/db.dump" 2>"$scratch/refused.txt"; then fail "a load into a cluster database that holds data was not refused"; fi
  grep -q "already holds data" "$scratch/refused.txt" || fail "unexpected refusal: $(cat "$scratch/refused.txt")"
fi

echo "cli e2e: all passed"
