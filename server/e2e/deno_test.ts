// End-to-end tests of `stampkv serve` with real Deno as the client:
//   STAMPKV_URL=http://127.0.0.1:PORT DENO_KV_ACCESS_TOKEN=... deno test --unstable-kv -A deno_test.ts
// Every test works under its own key prefix.

import { canonValue, sampleValues } from "./canon.mjs";

const url = Deno.env.get("STAMPKV_URL");
if (!url) throw new Error("set STAMPKV_URL to the server's URL");

function assert(cond: unknown, msg = "assertion failed"): asserts cond {
  if (!cond) throw new Error(msg);
}
function assertEquals(actual: unknown, expected: unknown, msg = "") {
  const a = Deno.inspect(actual, { depth: 10, sorted: true });
  const e = Deno.inspect(expected, { depth: 10, sorted: true });
  if (a !== e) throw new Error(`${msg}\nexpected: ${e}\nactual:   ${a}`);
}
async function assertRejects(f: () => Promise<unknown>, text: string) {
  try {
    await f();
  } catch (e) {
    assertEquals((e as Error).message, text);
    return;
  }
  throw new Error(`expected an error: ${text}`);
}
function test(name: string, fn: (kv: Deno.Kv) => Promise<void>) {
  Deno.test({ name, sanitizeOps: false, sanitizeResources: false }, async () => {
    const kv = await Deno.openKv(url);
    try {
      await fn(kv);
    } finally {
      kv.close();
    }
  });
}
async function keys(iter: Deno.KvListIterator<unknown>) {
  const out = [];
  for await (const e of iter) out.push(e.key);
  return out;
}

test("get, set, delete, getMany", async (kv) => {
  const missing = await kv.get(["crud", "missing"]);
  assertEquals(missing, { key: ["crud", "missing"], value: null, versionstamp: null });
  const r = await kv.set(["crud", "a"], "alpha");
  assert(r.ok && r.versionstamp.length === 20);
  const got = await kv.get(["crud", "a"]);
  assertEquals(got, { key: ["crud", "a"], value: "alpha", versionstamp: r.versionstamp });
  await kv.set(["crud", "b"], 2);
  const many = await kv.getMany([["crud", "b"], ["crud", "missing"], ["crud", "a"]]);
  assertEquals(many.map((e) => e.value), [2, null, "alpha"]);
  await kv.delete(["crud", "a"]);
  assertEquals((await kv.get(["crud", "a"])).value, null);
});

test("list: prefix, start, end, reverse, limit, cursor, batchSize", async (kv) => {
  let op = kv.atomic();
  for (let i = 0; i < 25; i++) op = op.set(["list", i], `v${i}`);
  await op.commit();
  const all = await keys(kv.list({ prefix: ["list"] }));
  assertEquals(all, Array.from({ length: 25 }, (_, i) => ["list", i]));
  assertEquals(await keys(kv.list({ prefix: ["list"], start: ["list", 20] })), [20, 21, 22, 23, 24].map((i) => ["list", i]));
  assertEquals(await keys(kv.list({ prefix: ["list"], end: ["list", 3] })), [0, 1, 2].map((i) => ["list", i]));
  assertEquals(await keys(kv.list({ start: ["list", 5], end: ["list", 8] })), [5, 6, 7].map((i) => ["list", i]));
  assertEquals(await keys(kv.list({ prefix: ["list"] }, { reverse: true, limit: 3 })), [24, 23, 22].map((i) => ["list", i]));
  assertEquals((await keys(kv.list({ prefix: ["list"] }, { batchSize: 2 }))).length, 25);
  const page = kv.list({ prefix: ["list"] }, { limit: 10 });
  const first = await keys(page);
  assertEquals(first.length, 10);
  const rest = await keys(kv.list({ prefix: ["list"] }, { cursor: page.cursor, batchSize: 4 }));
  assertEquals(rest, Array.from({ length: 15 }, (_, i) => ["list", i + 10]));
  const back = kv.list({ prefix: ["list"] }, { limit: 5, reverse: true });
  await keys(back);
  assertEquals((await keys(kv.list({ prefix: ["list"] }, { cursor: back.cursor, reverse: true, limit: 2 }))), [["list", 19], ["list", 18]]);
});

test("set with expireIn", async (kv) => {
  await kv.set(["expire", "soon"], "x", { expireIn: 300 });
  await kv.set(["expire", "later"], "y", { expireIn: 3_600_000 });
  assertEquals((await kv.get(["expire", "soon"])).value, "x");
  await new Promise((r) => setTimeout(r, 1000));
  assertEquals((await kv.get(["expire", "soon"])).value, null);
  assertEquals((await kv.get(["expire", "later"])).value, "y");
});

test("atomic with passing and failing checks", async (kv) => {
  const a = await kv.set(["atomic", "a"], 1);
  const ok = await kv.atomic().check({ key: ["atomic", "a"], versionstamp: a.versionstamp })
    .check({ key: ["atomic", "none"], versionstamp: null }).set(["atomic", "b"], 2).delete(["atomic", "a"]).commit();
  assert(ok.ok);
  const fail = await kv.atomic().check({ key: ["atomic", "b"], versionstamp: null }).set(["atomic", "c"], 3).commit();
  assertEquals(fail, { ok: false });
  const stale = await kv.atomic().check({ key: ["atomic", "a"], versionstamp: a.versionstamp }).set(["atomic", "c"], 3).commit();
  assertEquals(stale, { ok: false });
  assertEquals((await kv.getMany([["atomic", "a"], ["atomic", "b"], ["atomic", "c"]])).map((e) => e.value), [null, 2, null]);
});

test("sum, min, max on KvU64; sum on numbers and bigints through mutate", async (kv) => {
  await kv.atomic().sum(["math", "s"], 10n).min(["math", "min"], 7n).max(["math", "max"], 7n).commit();
  await kv.atomic().sum(["math", "s"], 0xffff_ffff_ffff_ffffn).min(["math", "min"], 3n).max(["math", "max"], 9n).commit();
  const [s, mn, mx] = await kv.getMany([["math", "s"], ["math", "min"], ["math", "max"]]);
  assertEquals([s.value, mn.value, mx.value], [new Deno.KvU64(9n), new Deno.KvU64(3n), new Deno.KvU64(9n)]);
  await kv.atomic().mutate({ type: "sum", key: ["math", "n"], value: 1.5 as unknown as Deno.KvU64 }).commit();
  await kv.atomic().mutate({ type: "sum", key: ["math", "n"], value: 2 as unknown as Deno.KvU64 }).commit();
  assertEquals((await kv.get(["math", "n"])).value, 3.5);
  await kv.atomic().mutate({ type: "sum", key: ["math", "big"], value: (10n ** 30n) as unknown as Deno.KvU64 }).commit();
  await kv.atomic().mutate({ type: "sum", key: ["math", "big"], value: -1n as unknown as Deno.KvU64 }).commit();
  assertEquals((await kv.get(["math", "big"])).value, 10n ** 30n - 1n);
  await kv.set(["math", "str"], "text");
  await assertRejects(
    () => kv.atomic().set(["math", "partial"], 1).sum(["math", "str"], 1n).commit(),
    `KV Connect failed to call '${url}/v2/atomic_write' (status=400 Bad Request): Failed to perform 'sum' mutation on a non-U64 value in the database`,
  );
  assertEquals((await kv.get(["math", "partial"])).value, null, "all or nothing");
});

test("versionstamped keys", async (kv) => {
  const r = await kv.atomic().set(["vs", kv.commitVersionstamp()], "stamped").commit();
  assert(r.ok);
  const found = [];
  for await (const e of kv.list({ prefix: ["vs"] })) found.push(e);
  assertEquals(found, [{ key: ["vs", r.versionstamp], value: "stamped", versionstamp: r.versionstamp }]);
});

test("limit errors as Deno shows them", async (kv) => {
  const checks = () => {
    let op = kv.atomic();
    for (let i = 0; i < 101; i++) op = op.check({ key: ["limits", i], versionstamp: null });
    return op.commit();
  };
  await assertRejects(checks, "Too many checks (max 100)");
  const mutations = () => {
    let op = kv.atomic();
    for (let i = 0; i < 1001; i++) op = op.set(["limits", i], i);
    return op.commit();
  };
  await assertRejects(mutations, "Too many mutations (max 1000)");
  await assertRejects(() => kv.set(["limits", "k".repeat(2100)], 1), "Key too large for write (max 2048 bytes)");
  await assertRejects(() => kv.get(["limits", "k".repeat(2100)]), "Key too large for read (max 2049 bytes)");
  await assertRejects(() => kv.set(["limits", "v"], new Uint8Array(65537)), "Value too large (max 65536 bytes)");
  await assertRejects(() => kv.getMany(Array.from({ length: 11 }, (_, i) => ["limits", i])), "Too many ranges (max 10)");
  const total = () => {
    let op = kv.atomic();
    for (let i = 0; i < 20; i++) op = op.set(["limits", i], new Uint8Array(60000));
    return op.commit();
  };
  await assertRejects(total, "Total mutation size too large (max 819200 bytes)");
  await assertRejects(() => keys(kv.list({ prefix: ["limits"] }, { batchSize: 1001 })), "Too many entries (max 1000)");
  await assertRejects(() => kv.enqueue("x"), "Enqueue operations are not supported in KV Connect");
  // 100 checks and 1000 mutations are within the limits.
  let op = kv.atomic();
  for (let i = 0; i < 100; i++) op = op.check({ key: ["limits", "c", i], versionstamp: null });
  for (let i = 0; i < 1000; i++) op = op.set(["limits", "m", i], i);
  assert((await op.commit()).ok);
});

test("watch: a change made by a second client arrives", async (kv) => {
  const other = await Deno.openKv(url);
  try {
    const reader = kv.watch([["watch", "a"], ["watch", "b"]]).getReader();
    const first = await reader.read();
    assertEquals(first.value!.map((e) => e.value), [null, null]);
    const r = await other.set(["watch", "b"], "from the other client");
    const timeout = setTimeout(() => reader.cancel(), 10_000);
    const next = await reader.read();
    clearTimeout(timeout);
    assert(!next.done, "the watch ended before the change arrived");
    assertEquals(next.value![1], { key: ["watch", "b"], value: "from the other client", versionstamp: r.versionstamp });
    await reader.cancel();
  } finally {
    other.close();
  }
});

test("values of every structured-clone kind round-trip", async (kv) => {
  const samples = sampleValues() as Record<string, unknown>;
  let op = kv.atomic();
  for (const [name, value] of Object.entries(samples)) op = op.set(["values", name], value);
  op = op.set(["values", "u64"], new Deno.KvU64(18446744073709551615n));
  assert((await op.commit()).ok);
  for (const [name, value] of Object.entries(samples)) {
    const got = (await kv.get(["values", name])).value;
    assertEquals(JSON.stringify(canonValue(got)), JSON.stringify(canonValue(value)), name);
  }
  assertEquals((await kv.get(["values", "u64"])).value, new Deno.KvU64(18446744073709551615n));
  // Keys of every part kind.
  const key = [new Uint8Array([0, 1]), "s", 5n, -0, 1.5, false, true];
  await kv.set(["keys", ...key], "k");
  assertEquals((await kv.get(["keys", ...key])).value, "k");
});
