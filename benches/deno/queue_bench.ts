// The queue workloads of `examples/queue_bench.rs` on the real Deno runtime: `Deno.openKv`
// (its SQLite backend, as `deno run` opens a local path), `kv.enqueue`, `kv.atomic()
// .enqueue()` batches and `kv.listenQueue`. The Rust runner starts it when it finds Deno:
//
//   deno run -A --unstable-kv benches/deno/queue_bench.ts --messages 100000 --enqueues 10000
//       [--dir DIR]
//
// and reads its `RESULT name rate p50_us p99_us` / `INFO name value` lines. With `--dir`
// the databases are left in DIR/enqueue8/kv.sqlite3 and DIR/batch/kv.sqlite3 for the
// runner to check that no message is left; otherwise a temporary directory is used.

const BATCH = 1000;
const CLIENTS = 8;

function arg(name: string, fallback: string): string {
  const at = Deno.args.indexOf(name);
  return at >= 0 && at + 1 < Deno.args.length ? Deno.args[at + 1] : fallback;
}

const messages = Number(arg("--messages", "100000"));
const enqueues = Number(arg("--enqueues", "10000"));
const root = arg("--dir", "") ||
  await Deno.makeTempDir({ prefix: "deno-queue-bench-" });

function emit(
  name: string,
  units: number,
  elapsedMs: number,
  latenciesMs: number[] = [],
) {
  latenciesMs.sort((a, b) => a - b);
  const at = (q: number) =>
    latenciesMs.length
      ? latenciesMs[Math.floor(latenciesMs.length * q / 100)] * 1000
      : 0;
  console.log(
    `RESULT ${name} ${units / (elapsedMs / 1000)} ${at(50)} ${at(99)}`,
  );
}

async function open(name: string): Promise<Deno.Kv> {
  await Deno.mkdir(`${root}/${name}`, { recursive: true });
  return await Deno.openKv(`${root}/${name}/kv.sqlite3`);
}

// A listener whose handler only counts; the time until each of the `expected` messages
// (payloads 0..expected) was handled and acknowledged, and the database closed. Deno's local
// queue requeues messages it finds running past `enqueue time + 5 s` every 60 s, so a long
// backlog sees a few duplicates (reported as `INFO duplicates`).
async function deliverAndClose(kv: Deno.Kv, expected: number): Promise<number> {
  const seen = new Uint8Array(expected);
  let distinct = 0;
  let deliveries = 0;
  let allSeen!: () => void;
  const everySeen = new Promise<void>((resolve) => (allSeen = resolve));
  const start = performance.now();
  const listening = kv.listenQueue((message: unknown) => {
    if (typeof message !== "number" || !(message >= 0 && message < expected)) {
      throw new Error(`unexpected payload ${message}`);
    }
    deliveries++;
    if (!seen[message]) {
      seen[message] = 1;
      if (++distinct === expected) allSeen();
    }
  });
  await everySeen;
  // The last acknowledgements (finish requests) were sent before this read, to the same
  // single backend worker, which serves requests in order: once it returns they are done.
  await kv.get(["barrier"]);
  kv.close();
  await listening;
  const elapsed = performance.now() - start;
  console.log(`INFO duplicates ${deliveries - expected} of ${expected}`);
  return elapsed;
}

console.log(`INFO messages ${messages} (enqueues ${enqueues})`);

// enqueue_1: one client.
{
  const kv = await open("enqueue1");
  const latencies: number[] = [];
  const start = performance.now();
  for (let i = 0; i < enqueues; i++) {
    const t = performance.now();
    await kv.enqueue(i);
    latencies.push(performance.now() - t);
  }
  emit("enqueue_1", enqueues, performance.now() - start, latencies);
  kv.close();
}

// enqueue_8: eight concurrent clients, then deliver what they left.
{
  const kv = await open("enqueue8");
  const latencies: number[] = [];
  const start = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, t) => {
      for (let i = t; i < enqueues; i += CLIENTS) {
        const s = performance.now();
        await kv.enqueue(i);
        latencies.push(performance.now() - s);
      }
    }),
  );
  const enqueueMs = performance.now() - start;
  emit("enqueue_8", enqueues, enqueueMs, latencies);
  const deliverMs = await deliverAndClose(kv, enqueues);
  emit("deliver_single", enqueues, deliverMs);
  emit("enq8+deliver", enqueues, enqueueMs + deliverMs);
}

// enqueue_batch: 1000 messages per atomic commit, then deliver them.
{
  const kv = await open("batch");
  const latencies: number[] = [];
  const start = performance.now();
  for (let first = 0; first < messages; first += BATCH) {
    const t = performance.now();
    let op = kv.atomic();
    for (let i = first; i < Math.min(first + BATCH, messages); i++) {
      op = op.enqueue(i);
    }
    const result = await op.commit();
    if (!result.ok) throw new Error("an enqueue batch failed");
    latencies.push(performance.now() - t);
  }
  const enqueueMs = performance.now() - start;
  emit("enqueue_batch", messages, enqueueMs, latencies);
  const deliverMs = await deliverAndClose(kv, messages);
  emit("deliver", messages, deliverMs);
  emit("enqueue+deliver", messages, enqueueMs + deliverMs);
  console.log(
    `INFO times enqueue ${(enqueueMs / 1000).toFixed(2)} s + deliver ${
      (deliverMs / 1000).toFixed(2)
    } s for ${messages}`,
  );
}

const status = Deno.readTextFileSync("/proc/self/status");
const hwm = status.split("\n").find((l) => l.startsWith("VmHWM:"));
if (hwm) {
  console.log(
    `INFO peak_rss_mib ${(Number(hwm.split(/\s+/)[1]) / 1024).toFixed(1)}`,
  );
}
if (!arg("--dir", "")) await Deno.remove(root, { recursive: true });
