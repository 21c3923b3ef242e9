#!/usr/bin/env bash
# End-to-end test of `stampkv serve --etcd` with real Deno 2.9.6 and @deno/kv under Node, on a
# 3-member etcd cluster on free loopback ports (started here, stopped on exit):
#  1. Deno's and Node's test programs (../deno_test.ts, ../node_test.mjs) against one server;
#  2. two servers of one database at once: writes through one, reads, checks, sums and watches
#     through the other (two_servers.ts with Deno, two_servers.mjs with @deno/kv);
#  3. `stampkv edge` in front of the second server: Deno's test program through it;
#  4. kill -9 of a server while 16 Deno writers commit through it, then again with 16
#     @deno/kv (Node) writers: every acknowledged commit is read back through the other
#     server exactly once, versionstamps increasing;
#  5. the differential suite (../diff) with its servers on the cluster;
#  6. the CLI's transfers (../../../cli/e2e) with real Deno's files, and on the cluster too:
#     import-deno, dump, load both ways between a directory and the cluster, stats, export-deno.
# Needs etcd (Debian's etcd-server), node and npm.
set -euo pipefail
cd "$(dirname "$0")"
cluster_dir="$PWD"
e2e="$(cd .. && pwd)"
root="$(cd ../../.. && pwd)"

fail() { echo "cluster e2e: FAIL: $*" >&2; exit 1; }
command -v etcd >/dev/null 2>&1 || fail "etcd is not installed (apt-get install etcd-server)"
command -v node >/dev/null 2>&1 || fail "node is not installed"
deno="$e2e/node_modules/.bin/deno"
if ! "$deno" --version 2>/dev/null | grep -q '^deno 2\.9\.6 ' || [ ! -d "$e2e/node_modules/@deno/kv" ]; then
  (cd "$e2e" && npm install --no-save --no-audit --no-fund deno@2.9.6 @deno/kv)
fi
export DENO_NO_UPDATE_CHECK=1 DENO_NO_PROMPT=1
export NODE_PATH="$e2e/node_modules"

(cd "$root" && cargo build -q -p stampkv-cli --bin stampkv && cargo build -q -p stampkv-testkit --bin etcd_cluster)
stampkv="$root/target/debug/stampkv"

scratch="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do { kill -9 "$pid" && wait "$pid"; } 2>/dev/null || true; done
  rm -rf "$scratch"
}
trap cleanup EXIT

# The cluster: etcd_cluster prints its endpoints and runs until killed (its members with it).
mkfifo "$scratch/cluster.in"
"$root/target/debug/etcd_cluster" 3 <"$scratch/cluster.in" >"$scratch/cluster.out" 2>"$scratch/cluster.err" &
pids+=($!)
exec 9>"$scratch/cluster.in"
for _ in $(seq 1 300); do
  grep -q '^endpoints=' "$scratch/cluster.out" && break
  kill -0 "${pids[0]}" 2>/dev/null || { cat "$scratch/cluster.err" >&2; fail "the etcd cluster did not start"; }
  sleep 0.1
done
etcd_endpoints="$(sed -n 's/^endpoints=//p' "$scratch/cluster.out")"
[ -n "$etcd_endpoints" ] || fail "the etcd cluster did not report its endpoints"
echo "cluster e2e: etcd at $etcd_endpoints"

export DENO_KV_ACCESS_TOKEN="cluster-token-$RANDOM-$RANDOM-$RANDOM"
# shellcheck source=server/e2e/lib.sh
source "$e2e/lib.sh"
# serve PREFIX LOG: starts a server of the database under PREFIX; sets last_pid and last_url.
serve() {
  "$stampkv" serve --etcd "$etcd_endpoints" --etcd-prefix "$1" --addr 127.0.0.1:0 \
    --access-token "$DENO_KV_ACCESS_TOKEN" 2>"$2" &
  last_pid=$!
  pids+=("$last_pid")
  last_url="http://$(wait_for_address "$last_pid" "$2")"
}

echo "cluster e2e: 1. Deno and Node test programs against a server on the cluster"
serve "e2e-$$/" "$scratch/a.log"
url_a="$last_url"
STAMPKV_URL="$url_a" "$deno" test --unstable-kv -A "$e2e/deno_test.ts"
STAMPKV_URL="$url_a" node --test "$e2e/node_test.mjs"

echo "cluster e2e: 2. two servers of one database at once"
serve "e2e-$$/" "$scratch/b.log"
url_b="$last_url"
STAMPKV_URL_A="$url_a" STAMPKV_URL_B="$url_b" "$deno" test --unstable-kv -A "$cluster_dir/two_servers.ts"
STAMPKV_URL_A="$url_a" STAMPKV_URL_B="$url_b" node --test "$cluster_dir/two_servers.mjs"

echo "cluster e2e: 3. an edge in front of the second server"
serve "e2e-edge-$$/" "$scratch/edge-upstream.log"
"$stampkv" edge --upstream "$last_url" --addr 127.0.0.1:0 --access-token "$DENO_KV_ACCESS_TOKEN" 2>"$scratch/edge.log" &
pids+=($!)
edge_url="http://$(wait_for_address "${pids[-1]}" "$scratch/edge.log")"
STAMPKV_URL="$edge_url" "$deno" test --unstable-kv -A "$e2e/deno_test.ts"

# kill_under_writers NAME WRITER...: two servers of a fresh database; WRITER (a command that
# takes the victim's URL in STAMPKV_URL and appends its acknowledgements to $scratch/NAME.acks)
# commits through the first, which is killed with SIGKILL after 4 s; deno_kill.ts then checks
# every acknowledged commit through the second.
killed=()
kill_under_writers() {
  local name="$1"; shift
  serve "e2e-$name-$$/" "$scratch/$name-victim.log"
  local victim="$last_pid" victim_url="$last_url"
  serve "e2e-$name-$$/" "$scratch/$name-survivor.log"
  local survivor_url="$last_url"
  STAMPKV_URL="$victim_url" "$@" "$scratch/$name.acks" 16 2>"$scratch/$name-writer.log" &
  local writer=$!
  pids+=("$writer")
  killed+=("$victim" "$writer")
  sleep 4
  kill -0 "$writer" 2>/dev/null || { cat "$scratch/$name-writer.log" >&2; fail "the $name writer stopped before the kill"; }
  kill -9 "$victim" "$writer"
  wait "$victim" "$writer" 2>/dev/null || true
  echo "cluster e2e: killed the server after $(wc -l <"$scratch/$name.acks") acknowledged commits"
  STAMPKV_URL="$survivor_url" "$deno" run --unstable-kv -A "$e2e/deno_kill.ts" check "$scratch/$name.acks"
}

echo "cluster e2e: 4. kill -9 of a server while 16 Deno writers commit through it"
kill_under_writers kill-deno "$deno" run --unstable-kv -A "$e2e/deno_kill.ts" write
echo "cluster e2e: 4b. kill -9 of a server while 16 @deno/kv (Node) writers commit through it"
kill_under_writers kill-node node "$e2e/node_kill.mjs"

echo "cluster e2e: 5. differential suite with the servers on the cluster"
STAMPKV_BIN="$stampkv" STAMPKV_ETCD="$etcd_endpoints" bash "$e2e/diff/run.sh"

echo "cluster e2e: 6. the CLI's transfers, on a directory and on the cluster"
STAMPKV_ETCD="$etcd_endpoints" bash "$root/cli/e2e/run.sh"

for pid in "${pids[@]}"; do
  case " ${killed[*]} " in *" $pid "*) continue ;; esac
  kill -0 "$pid" 2>/dev/null || { cat "$scratch"/*.log >&2; fail "a process died during the run"; }
done
echo "cluster e2e: all passed"
