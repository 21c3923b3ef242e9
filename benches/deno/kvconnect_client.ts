// A KV Connect load client on the real Deno runtime, for `examples/kvconnect_bench.rs`: it
// opens `--clients` remote databases (`Deno.openKv(url)`, each its own connection) and runs
// one workload on all of them at once, each client issuing its next request when the last
// one returned.
//
//   DENO_KV_ACCESS_TOKEN=... deno run -A --unstable-kv benches/deno/kvconnect_client.ts \
//     --url http://127.0.0.1:4512 --workload read|commit|preload --clients 32 \
//     --seconds 5 --warmup 1 --keys 10000 --client-base 0 --latencies FILE
//
// Workloads (values are 100-byte strings, keys `["k", i]`):
//   preload: writes keys 0..keys in batches of 500 mutations, then exits;
//   read:    `kv.get(["k", random i])`, the value must be there;
//   commit:  `kv.atomic().check({ key, versionstamp: null }).set(key, value).commit()` on a
//            fresh key `["c", client, n]` each time; the commit must succeed.
// Prints `RESULT ops seconds all_ops cpu_us` (all_ops counts the warm-up too; cpu_us is this
// process's CPU time over all of them) and writes every measured latency (ms, float64 little-endian)
// to `--latencies`.

import process from "node:process";

function arg(name: string, fallback: string): string {
  const at = Deno.args.indexOf(name);
  return at >= 0 && at + 1 < Deno.args.length ? Deno.args[at + 1] : fallback;
}

const url = arg("--url", "http://127.0.0.1:4512");
const workload = arg("--workload", "read");
const clients = Number(arg("--clients", "1"));
const seconds = Number(arg("--seconds", "5"));
const warmup = Number(arg("--warmup", "1"));
const keys = Number(arg("--keys", "10000"));
const clientBase = Number(arg("--client-base", "0"));
const latencyFile = arg("--latencies", "");
const value = "v".repeat(100);

const handles: Deno.Kv[] = [];
for (let c = 0; c < clients; c++) handles.push(await Deno.openKv(url));

if (workload === "preload") {
  const kv = handles[0];
  for (let start = 0; start < keys; start += 500) {
    let op = kv.atomic();
    for (let i = start; i < Math.min(keys, start + 500); i++) op = op.set(["k", i], value);
    const result = await op.commit();
    if (!result.ok) throw new Error("preload commit failed");
  }
  console.log(`RESULT ${keys} 0 ${keys} 0`);
  for (const kv of handles) kv.close();
  Deno.exit(0);
}

let measuring = false;
let stopped = false;
const latencies: number[] = [];
let ops = 0;
let allOps = 0;

async function runClient(kv: Deno.Kv, client: number) {
  let n = 0;
  while (!stopped) {
    const started = performance.now();
    if (workload === "read") {
      const entry = await kv.get(["k", Math.floor(Math.random() * keys)]);
      if (entry.value !== value) throw new Error(`missing or wrong value: ${entry.key}`);
    } else if (workload === "commit") {
      const key = ["c", clientBase + client, n++];
      const result = await kv.atomic().check({ key, versionstamp: null }).set(key, value)
        .commit();
      if (!result.ok) throw new Error(`check failed on a fresh key ${key}`);
    } else {
      throw new Error(`unknown workload ${workload}`);
    }
    allOps++;
    if (measuring && !stopped) {
      latencies.push(performance.now() - started);
      ops++;
    }
  }
}

const cpuBefore = process.cpuUsage();
const running = handles.map((kv, c) => runClient(kv, c));
await new Promise((resolve) => setTimeout(resolve, warmup * 1000));
measuring = true;
const began = performance.now();
await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
stopped = true;
const elapsed = (performance.now() - began) / 1000;
await Promise.all(running);
const cpu = process.cpuUsage(cpuBefore);
for (const kv of handles) kv.close();

if (latencyFile) {
  await Deno.writeFile(latencyFile, new Uint8Array(new Float64Array(latencies).buffer));
}
console.log(`RESULT ${ops} ${elapsed} ${allOps} ${cpu.user + cpu.system}`);
