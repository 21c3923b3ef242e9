#!/usr/bin/env bash
# Differential test of stampkv against real Deno: the cases of cases.ts and random sequences
# (random.ts) run in Deno 2.9.6 against Deno's own local backend (the oracle) and against
# stampkv, directly and through an edge; node_diff.mjs does the same with the @deno/kv client
# under Node. Prints the counts (cases, operations compared, differences) and exits non-zero
# on any difference.
#
#   bash server/e2e/diff/run.sh
# Env: STAMPKV_BIN (default: target/debug/stampkv, built if missing), DIFF_SEED (default 1),
# STAMPKV_ETCD (an etcd cluster's client URLs: the servers serve databases on it, each under a
# prefix of its own, instead of directories), DIFF_SEQUENCES (random sequences per suite, default 4), DIFF_LENGTH (operations per sequence,
# default 150), DIFF_ONLY (regular expression on case names), DIFF_REPORT (JSON report of the
# Deno suite), DIFF_VERBOSE=1 (every differing step). More iterations locally, e.g.
#   DIFF_SEED=$RANDOM DIFF_SEQUENCES=40 DIFF_LENGTH=400 bash server/e2e/diff/run.sh
set -euo pipefail
cd "$(dirname "$0")"
diff_dir="$PWD"
e2e="$(cd .. && pwd)"
root="$(cd ../../.. && pwd)"

fail() { echo "diff: FAIL: $*" >&2; exit 1; }
command -v node >/dev/null 2>&1 || fail "node is not installed"
deno="$e2e/node_modules/.bin/deno"
if ! "$deno" --version 2>/dev/null | grep -q '^deno 2\.9\.6 ' || [ ! -d "$e2e/node_modules/@deno/kv" ]; then
  (cd "$e2e" && npm install --no-save --no-audit --no-fund deno@2.9.6 @deno/kv)
fi
export DENO_NO_UPDATE_CHECK=1 DENO_NO_PROMPT=1

stampkv="${STAMPKV_BIN:-$root/target/debug/stampkv}"
if [ ! -x "$stampkv" ]; then
  (cd "$root" && cargo build -q -p stampkv-cli --bin stampkv)
fi

scratch="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do { kill -9 "$pid" && wait "$pid"; } 2>/dev/null || true; done
  rm -rf "$scratch"
}
trap cleanup EXIT

export DENO_KV_ACCESS_TOKEN="diff-token-$RANDOM-$RANDOM-$RANDOM"
# shellcheck source=server/e2e/lib.sh
source "$e2e/lib.sh"

# One server read directly, and a second one behind an edge (each target gets a database of
# its own, so the cases of both targets, run at the same time, use the same keys).
# database NAME: the arguments of `stampkv serve` for a database of its own named NAME.
database() {
  if [ -n "${STAMPKV_ETCD:-}" ]; then
    echo --etcd "$STAMPKV_ETCD" --etcd-prefix "diff-$1-$$-$RANDOM/"
  else
    echo --path "$scratch/$1"
  fi
}
"$stampkv" serve $(database direct) --addr 127.0.0.1:0 --access-token "$DENO_KV_ACCESS_TOKEN" 2>"$scratch/direct.log" &
pids+=($!)
direct="http://$(wait_for_address "${pids[-1]}" "$scratch/direct.log")"
"$stampkv" serve $(database primary) --addr 127.0.0.1:0 --access-token "$DENO_KV_ACCESS_TOKEN" 2>"$scratch/primary.log" &
pids+=($!)
primary="http://$(wait_for_address "${pids[-1]}" "$scratch/primary.log")"
"$stampkv" edge --upstream "$primary" --addr 127.0.0.1:0 --access-token "$DENO_KV_ACCESS_TOKEN" 2>"$scratch/edge.log" &
pids+=($!)
edge="http://$(wait_for_address "${pids[-1]}" "$scratch/edge.log")"
echo "diff: server at $direct; edge at $edge in front of $primary${STAMPKV_ETCD:+ (databases on etcd $STAMPKV_ETCD)}"
export STAMPKV_TARGETS="server=$direct edge=$edge"

status=0
"$deno" run --unstable-kv -A "$diff_dir/deno_diff.ts" | tee "$scratch/deno.out" || status=1
UV_THREADPOOL_SIZE=64 node "$diff_dir/node_diff.mjs" | tee "$scratch/node.out" || status=1

for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null || { cat "$scratch"/*.log >&2; fail "a server or the edge died during the run"; }; done
echo "diff: summary:"
grep -h '^diff: \(deno\|node\): ' "$scratch/deno.out" "$scratch/node.out" | sed 's/^/  /'
[ "$status" -eq 0 ] || fail "stampkv differs from the oracle (see the DIFFERS lines above)"
echo "diff: no differences"
