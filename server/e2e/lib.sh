# Shell helpers shared by the end-to-end scripts (sourced; the caller defines `fail`).

# wait_for_address PID LOG: waits (up to 15 s) for PID's "listening" log line in LOG; prints
# the loopback address it reports.
wait_for_address() {
  for _ in $(seq 1 150); do
    if grep -q 'msg="listening"' "$2"; then break; fi
    kill -0 "$1" 2>/dev/null || { cat "$2" >&2; fail "the process exited at start"; }
    sleep 0.1
  done
  local addr
  addr="$(grep -m1 -o 'addr=127\.0\.0\.1:[0-9]*' "$2" | cut -d= -f2)"
  [ -n "$addr" ] || { cat "$2" >&2; fail "the process did not report its address"; }
  echo "$addr"
}
