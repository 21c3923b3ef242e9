#!/usr/bin/env bash
# End-to-end test of `stampkv serve` with real Deno 2.9.6 and the @deno/kv npm client:
#  1. Deno's and Node's test programs against a fresh server (every remote-capable operation);
#  2. Deno's view of the data equals an in-process `Kv` read of the directory after a clean stop;
#  3. kill -9 of the server while 16 Deno writers commit: after a restart every acknowledged commit is there exactly once;
#  4. `stampkv edge` in front of a server: @deno/kv's eventual reads are answered by the edge and
#     its strong reads and writes reach the server (counted on both), and programs 1 pass through it.
# Needs node and npm; installs deno@2.9.6 and @deno/kv into server/e2e/node_modules (not committed).
set -euo pipefail
cd "$(dirname "$0")"
e2e="$PWD"
root="$(cd ../.. && pwd)"

fail() { echo "e2e: FAIL: $*" >&2; exit 1; }
command -v node >/dev/null 2>&1 || fail "node is not installed: the end-to-end test needs Node.js (>= 18) and npm"
command -v npm >/dev/null 2>&1 || fail "npm is not installed: the end-to-end test needs Node.js (>= 18) and npm"
echo "e2e: node $(node --version), npm $(npm --version)"

deno="$e2e/node_modules/.bin/deno"
if ! "$deno" --version 2>/dev/null | grep -q '^deno 2\.9\.6 ' || [ ! -d "$e2e/node_modules/@deno/kv" ]; then
  npm install --no-save --no-audit --no-fund deno@2.9.6 @deno/kv
fi
"$deno" --version | sed -n 1p
export DENO_NO_UPDATE_CHECK=1 DENO_NO_PROMPT=1

(cd "$root" && cargo build -q -p stampkv-cli --bin stampkv && cargo build -q -p stampkv-server --example dump_json)
stampkv="$root/target/debug/stampkv"
dump_json="$root/target/debug/examples/dump_json"

scratch="$(mktemp -d)"
server_pid=""
writer_pid=""
edge_pid=""
cleanup() {
  [ -n "$edge_pid" ] && kill -9 "$edge_pid" 2>/dev/null || true
  [ -n "$writer_pid" ] && kill -9 "$writer_pid" 2>/dev/null || true
  [ -n "$server_pid" ] && kill -9 "$server_pid" 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT

export DENO_KV_ACCESS_TOKEN="e2e-token-$RANDOM-$RANDOM-$RANDOM"
# shellcheck source=server/e2e/lib.sh
source "$e2e/lib.sh"
# start_server DIR LOG: starts `stampkv serve` on a free loopback port; sets server_pid and STAMPKV_URL.
start_server() {
  "$stampkv" serve --path "$1" --addr 127.0.0.1:0 --access-token "$DENO_KV_ACCESS_TOKEN" 2>"$2" &
  server_pid=$!
  local addr
  addr="$(wait_for_address "$server_pid" "$2")"
  export STAMPKV_URL="http://$addr"
  echo "e2e: server $server_pid at $STAMPKV_URL"
}
# stop_server LOG: SIGTERM, then the server must exit 0 after closing the database.
stop_server() {
  kill -TERM "$server_pid"
  local status=0
  wait "$server_pid" || status=$?
  server_pid=""
  [ "$status" -eq 0 ] || { cat "$1" >&2; fail "the server exited with status $status after SIGTERM"; }
  grep -q 'msg="stopped"' "$1" || { cat "$1" >&2; fail "the server did not report a clean stop"; }
}

echo "e2e: 1. Deno and Node test programs"
start_server "$scratch/db" "$scratch/server.log"
"$deno" test --unstable-kv -A "$e2e/deno_test.ts"
node --test "$e2e/node_test.mjs"
"$deno" run --unstable-kv -A "$e2e/deno_dump.ts" >"$scratch/deno.dump"
node -e "fetch(process.argv[1], { headers: { authorization: 'Bearer ' + process.env.DENO_KV_ACCESS_TOKEN } }).then(r=>r.text()).then(t=>process.stdout.write(t))" "$STAMPKV_URL/metrics" >"$scratch/metrics"
grep -q 'stampkv_requests_total{kind="atomic_write",status="200"}' "$scratch/metrics" || fail "metrics do not count the commits"
stop_server "$scratch/server.log"

echo "e2e: 2. Deno's view equals an in-process read of the directory"
"$dump_json" "$scratch/db" >"$scratch/rust.dump"
node "$e2e/compare.mjs" "$scratch/deno.dump" "$scratch/rust.dump"

echo "e2e: 3. kill -9 while 16 Deno writers commit"
start_server "$scratch/killdb" "$scratch/kill.log"
"$deno" run --unstable-kv -A "$e2e/deno_kill.ts" write "$scratch/acks" 16 2>"$scratch/writer.log" &
writer_pid=$!
sleep 4
kill -0 "$writer_pid" 2>/dev/null || { cat "$scratch/writer.log" >&2; fail "the writer stopped before the kill"; }
kill -9 "$server_pid"
wait "$server_pid" 2>/dev/null || true
server_pid=""
kill -9 "$writer_pid"
wait "$writer_pid" 2>/dev/null || true
writer_pid=""
echo "e2e: killed the server after $(wc -l <"$scratch/acks") acknowledged commits"
start_server "$scratch/killdb" "$scratch/kill2.log"
"$deno" run --unstable-kv -A "$e2e/deno_kill.ts" check "$scratch/acks"
stop_server "$scratch/kill2.log"

echo "e2e: 4. an edge in front of the server: @deno/kv's eventual reads stay there, and both test programs pass through it"
start_server "$scratch/edgedb" "$scratch/primary.log"
export STAMPKV_PRIMARY_URL="$STAMPKV_URL"
"$stampkv" edge --upstream "$STAMPKV_PRIMARY_URL" --addr 127.0.0.1:0 --access-token "$DENO_KV_ACCESS_TOKEN" 2>"$scratch/edge.log" &
edge_pid=$!
edge_addr="$(wait_for_address "$edge_pid" "$scratch/edge.log")"
export STAMPKV_EDGE_URL="http://$edge_addr"
echo "e2e: edge $edge_pid at $STAMPKV_EDGE_URL"
node --test "$e2e/edge_node_test.mjs"
STAMPKV_URL="$STAMPKV_EDGE_URL" "$deno" test --unstable-kv -A "$e2e/deno_test.ts"
STAMPKV_URL="$STAMPKV_EDGE_URL" node --test "$e2e/node_test.mjs"
kill -TERM "$edge_pid"
status=0
wait "$edge_pid" || status=$?
edge_pid=""
[ "$status" -eq 0 ] || { cat "$scratch/edge.log" >&2; fail "the edge exited with status $status after SIGTERM"; }
stop_server "$scratch/primary.log"

echo "e2e: 5. differential suite: Deno's and @deno/kv's own backends as oracles against the server and an edge"
STAMPKV_BIN="$stampkv" bash "$e2e/diff/run.sh"

echo "e2e: all passed"
