// End-to-end test of `stampkv edge` with the @deno/kv npm client under Node: eventual reads
// are answered by the edge (its counters show it), strong reads and atomic writes reach the
// primary (its counters show it), and every answer is right.
//   STAMPKV_EDGE_URL=... STAMPKV_PRIMARY_URL=... DENO_KV_ACCESS_TOKEN=... node --test edge_node_test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { openKv } from "@deno/kv";

const edgeUrl = process.env.STAMPKV_EDGE_URL;
const primaryUrl = process.env.STAMPKV_PRIMARY_URL;
const accessToken = process.env.DENO_KV_ACCESS_TOKEN;
if (!edgeUrl || !primaryUrl || !accessToken) throw new Error("set STAMPKV_EDGE_URL, STAMPKV_PRIMARY_URL and DENO_KV_ACCESS_TOKEN");

/** The value of the Prometheus sample `line` (name with labels) at `url`, 0 if absent. */
async function sample(url, line) {
  const text = await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${accessToken}` } })).text();
  const found = text.split("\n").find((l) => l.startsWith(`${line} `));
  return found ? Number(found.slice(line.length + 1)) : 0;
}
const primaryReads = () => sample(primaryUrl, 'stampkv_requests_total{kind="snapshot_read",status="200"}');
const primaryWrites = () => sample(primaryUrl, 'stampkv_requests_total{kind="atomic_write",status="200"}');
const edgeCounter = (name) => sample(edgeUrl, `stampkv_edge_${name}_total`);

test("eventual reads stay at the edge; strong reads and writes reach the primary", async () => {
  const kv = await openKv(edgeUrl, { accessToken });
  try {
    // @deno/kv reads a key as the range from it to 0xFF with limit 1: keep a later key that
    // Node wrote, so a missing key's neighbour decodes (see node_test.mjs).
    await kv.set(["edge", "zz sentinel"], 0);
    const writes = await primaryWrites();
    const r = await kv.set(["edge", "a"], { hello: "edge" });
    assert.equal(r.ok, true);
    assert.equal(await primaryWrites(), writes + 1, "the write must reach the primary");

    let reads = await primaryReads();
    const strong = await kv.get(["edge", "a"]);
    assert.deepEqual(strong, { key: ["edge", "a"], value: { hello: "edge" }, versionstamp: r.versionstamp });
    assert.equal(await primaryReads(), reads + 1, "a strong read must reach the primary");

    reads = await primaryReads();
    const [hits, misses] = [await edgeCounter("hits"), await edgeCounter("misses")];
    for (let i = 0; i < 10; i++) {
      const got = await kv.get(["edge", "a"], { consistency: "eventual" });
      assert.deepEqual(got, { key: ["edge", "a"], value: { hello: "edge" }, versionstamp: r.versionstamp });
    }
    assert.equal(await edgeCounter("misses"), misses + 1, "the first eventual read is the edge's miss");
    assert.equal(await edgeCounter("hits"), hits + 9, "the other nine are the edge's hits");
    assert.equal(await primaryReads(), reads + 1, "only the miss may reach the primary");

    // getMany and list, eventual: right answers, and the second time nothing reaches the primary.
    let op = kv.atomic();
    for (let i = 0; i < 6; i++) op = op.set(["edge", "list", i], `item ${i}`);
    assert.equal((await op.commit()).ok, true);
    const readAll = async () => {
      const many = await kv.getMany([["edge", "list", 1], ["edge", "list", 4], ["edge", "list", 9]], { consistency: "eventual" });
      const listed = [];
      for await (const e of kv.list({ prefix: ["edge", "list"] }, { consistency: "eventual", batchSize: 4 })) listed.push(e.value);
      return { many: many.map((e) => e.value), listed };
    };
    const first = await readAll();
    assert.deepEqual(first, { many: ["item 1", "item 4", null], listed: [0, 1, 2, 3, 4, 5].map((i) => `item ${i}`) });
    reads = await primaryReads();
    assert.deepEqual(await readAll(), first);
    assert.equal(await primaryReads(), reads, "cached getMany and list must not reach the primary");

    // A write through the edge drops what it cached for the key: the next eventual read sees it.
    const c = await kv.atomic().check({ key: ["edge", "a"], versionstamp: r.versionstamp }).set(["edge", "a"], "changed").commit();
    assert.equal(c.ok, true);
    assert.equal((await kv.get(["edge", "a"], { consistency: "eventual" })).value, "changed");
    assert.equal((await kv.get(["edge", "a"])).value, "changed");
  } finally {
    kv.close();
  }
});
