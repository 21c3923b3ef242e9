// End-to-end tests of `stampkv serve` with the @deno/kv npm client under Node:
//   STAMPKV_URL=http://127.0.0.1:PORT DENO_KV_ACCESS_TOKEN=... node --test node_test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { KvU64, openKv } from "@deno/kv";
import { canonValue, sampleValues } from "./canon.mjs";

const url = process.env.STAMPKV_URL;
const accessToken = process.env.DENO_KV_ACCESS_TOKEN;
if (!url || !accessToken) throw new Error("set STAMPKV_URL and DENO_KV_ACCESS_TOKEN");

const open = () => openKv(url, { accessToken });
async function keys(iter) {
  const out = [];
  for await (const e of iter) out.push(e.key);
  return out;
}
async function withKv(fn) {
  const kv = await open();
  try {
    await fn(kv);
  } finally {
    kv.close();
  }
}

// @deno/kv 0.14 reads a single key as the range [key, 0xFF) with limit 1, so a missing key
// returns the next key's value, which it then decodes. Node 20's V8 cannot decode values
// Deno 2.9 wrote (V8 serialization version 16), so the key after a missing one must be one
// that Node wrote: hence the sentinel below, and no reading of Deno's values from Node.
test("get, set, delete, getMany", () => withKv(async (kv) => {
  await kv.set(["node", "crud", "zz sentinel"], 0);
  const r = await kv.set(["node", "crud", "a"], { hello: "node" });
  assert.equal(r.ok, true);
  assert.equal(r.versionstamp.length, 20);
  const got = await kv.get(["node", "crud", "a"]);
  assert.deepEqual(got, { key: ["node", "crud", "a"], value: { hello: "node" }, versionstamp: r.versionstamp });
  const many = await kv.getMany([["node", "crud", "a"], ["node", "crud", "none"]]);
  assert.deepEqual(many.map((e) => e.versionstamp), [r.versionstamp, null]);
  await kv.delete(["node", "crud", "a"]);
  assert.equal((await kv.get(["node", "crud", "a"])).value, null);
}));

test("list with prefix, start, end, reverse, limit, cursor, batchSize", () => withKv(async (kv) => {
  let op = kv.atomic();
  for (let i = 0; i < 12; i++) op = op.set(["node", "list", i], i);
  await op.commit();
  assert.equal((await keys(kv.list({ prefix: ["node", "list"] }, { batchSize: 5 }))).length, 12);
  assert.deepEqual(await keys(kv.list({ start: ["node", "list", 3], end: ["node", "list", 5] })), [["node", "list", 3], ["node", "list", 4]]);
  assert.deepEqual(await keys(kv.list({ prefix: ["node", "list"], start: ["node", "list", 10] })), [["node", "list", 10], ["node", "list", 11]]);
  assert.deepEqual(await keys(kv.list({ prefix: ["node", "list"], end: ["node", "list", 1] })), [["node", "list", 0]]);
  const page = kv.list({ prefix: ["node", "list"] }, { limit: 4, reverse: true });
  assert.deepEqual(await keys(page), [11, 10, 9, 8].map((i) => ["node", "list", i]));
  const next = await keys(kv.list({ prefix: ["node", "list"] }, { cursor: page.cursor, reverse: true, limit: 2 }));
  assert.deepEqual(next, [7, 6].map((i) => ["node", "list", i]));
}));

// (@deno/kv 0.14 has no versionstamped keys: its client cannot send that mutation.)
test("expireIn, checks, sum/min/max", () => withKv(async (kv) => {
  const run = String(Date.now());
  await kv.set(["node", "exp"], 1, { expireIn: 200 });
  await new Promise((r) => setTimeout(r, 800));
  assert.equal((await kv.get(["node", "exp"])).value, null);
  const a = await kv.set(["node", "chk"], 1);
  assert.equal((await kv.atomic().check({ key: ["node", "chk"], versionstamp: a.versionstamp }).set(["node", "chk"], 2).commit()).ok, true);
  assert.equal((await kv.atomic().check({ key: ["node", "chk"], versionstamp: a.versionstamp }).set(["node", "chk"], 3).commit()).ok, false);
  assert.equal((await kv.get(["node", "chk"])).value, 2);
  const [sum, max, min] = [["node", run, "sum"], ["node", run, "max"], ["node", run, "min"]];
  await kv.atomic().sum(sum, 5n).max(max, 5n).min(min, 5n).commit();
  await kv.atomic().sum(sum, 6n).max(max, 1n).min(min, 1n).commit();
  const values = (await kv.getMany([sum, max, min])).map((e) => e.value.value);
  assert.deepEqual(values, [11n, 5n, 1n]);
}));

test("watch: a change made by another client arrives", () => withKv(async (kv) => {
  const other = await open();
  try {
    // @deno/kv's watch stream yields nothing while every watched key is missing: start with a value.
    const before = await kv.set(["node", "watch"], "before");
    const reader = kv.watch([["node", "watch"]]).getReader();
    const first = await reader.read();
    assert.deepEqual(first.value[0], { key: ["node", "watch"], value: "before", versionstamp: before.versionstamp });
    const r = await other.set(["node", "watch"], "changed");
    let next;
    do {
      next = await reader.read();
    } while (!next.done && next.value[0].versionstamp !== r.versionstamp);
    assert.equal(next.done, false);
    assert.equal(next.value[0].value, "changed");
    await reader.cancel();
  } finally {
    other.close();
  }
}));

test("values written by Node read back identically", () => withKv(async (kv) => {
  const samples = sampleValues();
  let op = kv.atomic();
  for (const [name, value] of Object.entries(samples)) op = op.set(["node", "values", name], value);
  op = op.set(["node", "values", "u64"], new KvU64(7n));
  assert.equal((await op.commit()).ok, true);
  for (const [name, value] of Object.entries(samples)) {
    const got = (await kv.get(["node", "values", name])).value;
    assert.deepEqual(canonValue(got), canonValue(value), name);
  }
  assert.equal((await kv.get(["node", "values", "u64"])).value.value, 7n);
}));
