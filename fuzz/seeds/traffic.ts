// The Deno program whose KV Connect requests `capture.mjs` records as seeds: every remote
// operation of `Deno.Kv` with every kind of key part and value, successful and failing
// atomic writes, list paging, a watch, and requests the server refuses (an enqueue, too many
// keys). Run by capture.mjs:
//   STAMPKV_URL=http://127.0.0.1:PORT DENO_KV_ACCESS_TOKEN=... deno run --unstable-kv -A traffic.ts

const url = Deno.env.get("STAMPKV_URL");
if (!url) throw new Error("set STAMPKV_URL to the server's (or the capture proxy's) URL");

const kv = await Deno.openKv(url);

async function attempt(what: string, f: () => Promise<unknown>) {
  try {
    await f();
  } catch (e) {
    console.log(`traffic: ${what} refused as expected: ${(e as Error).message}`);
  }
}

// Keys of every part kind.
const keys: Deno.KvKey[] = [
  ["users", "alice"],
  ["users", "bob", 42],
  ["users", 1.5, -0, 1e300],
  ["big", 123456789012345678901234567890n, -7n],
  ["flags", true, false],
  ["bytes", new Uint8Array([0, 1, 0, 255])],
  ["unicode", "é😀", "a\0b"],
  [""],
];

// Values of every encoding: V8 (every kind), KvU64, plain bytes.
const values: unknown[] = [
  "hello",
  42,
  -1.25,
  NaN,
  12345678901234567890n,
  true,
  null,
  undefined,
  { name: "alice", tags: ["a", "b"], nested: { deep: [1, [2, [3]]] } },
  [1, "two", { three: 3 }],
  new Map<unknown, unknown>([["k", 1], [2, "v"]]),
  new Set([1, "x", null]),
  new Date(1_700_000_000_000),
  /a+b/gi,
  new Uint8Array([1, 2, 3, 4]),
  new Deno.KvU64(258n),
  "x".repeat(3000),
];

for (const [i, key] of keys.entries()) {
  await kv.set(key, values[i % values.length]);
}
for (const [i, value] of values.entries()) {
  await kv.set(["values", i], value);
}
await kv.set(["expiring", 1], "soon gone", { expireIn: 60_000 });
await kv.set(["expiring", 2], "gone", { expireIn: 1 });

// Reads: get, getMany (up to 10 keys), lists of every selector form, reverse, limits, cursors.
await kv.get(["users", "alice"]);
await kv.get(["missing"]);
await kv.get(["users", "alice"], { consistency: "eventual" });
await kv.getMany(keys);
await kv.getMany([["values", 0], ["values", 1], ["values", 2]]);
for await (const _ of kv.list({ prefix: ["users"] })) { /* read all */ }
for await (const _ of kv.list({ prefix: ["values"] }, { reverse: true, limit: 5 })) { /* read */ }
for await (const _ of kv.list({ start: ["values", 3], end: ["values", 9] }, { batchSize: 2 })) { /* paged */ }
for await (const _ of kv.list({ prefix: ["values"], start: ["values", 5] })) { /* read */ }
for await (const _ of kv.list({ prefix: ["values"], end: ["values", 5] }, { reverse: true })) { /* read */ }
const firstPage = kv.list({ prefix: ["values"] }, { limit: 3 });
for await (const _ of firstPage) { /* first page */ }
for await (const _ of kv.list({ prefix: ["values"] }, { limit: 3, cursor: firstPage.cursor })) { /* next */ }
for await (const _ of kv.list({ prefix: [] }, { limit: 1000, batchSize: 500 })) { /* everything */ }

// Atomic writes: checks that hold and that fail, every mutation kind.
const alice = await kv.get(["users", "alice"]);
await kv.atomic()
  .check(alice)
  .check({ key: ["never", "written"], versionstamp: null })
  .set(["users", "alice"], { name: "alice", visits: 1 })
  .sum(["counters", "visits"], 1n)
  .min(["counters", "low"], 10n)
  .max(["counters", "high"], 10n)
  .delete(["users", "bob", 42])
  .commit();
await kv.atomic().sum(["counters", "visits"], 0xffff_ffff_ffff_ffffn).commit();
await kv.atomic().check(alice).set(["users", "alice"], "stale").commit(); // a failed check
await kv.atomic()
  .check({ key: ["users", "alice"], versionstamp: "00000000000000000000" })
  .check({ key: ["never", "written"], versionstamp: null })
  .commit(); // a failed check, no mutation
await kv.atomic().set(["expiring", 3], new Uint8Array(64), { expireIn: 3_600_000 }).commit();
await kv.delete(["users", "bob", 42]);
await kv.delete(["never", "written"]);

// Refused by the server or by Deno: an enqueue, a sum over a non-KvU64.
await attempt("enqueue", () => kv.enqueue({ job: 1 }, { delay: 1000, keysIfUndelivered: [["failed", 1]] }));
await attempt("sum over a string", () => kv.atomic().sum(["users", "alice"], 1n).commit());

// A watch: the first event, a change, then cancel.
const stream = kv.watch([["users", "alice"], ["counters", "visits"], ["missing"]]);
const reader = stream.getReader();
await reader.read();
await kv.set(["counters", "visits"], new Deno.KvU64(7n));
await reader.read();
await reader.cancel();

kv.close();
console.log("traffic: done");
