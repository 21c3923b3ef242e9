// The @deno/kv client (Node) against two `stampkv serve --etcd` servers of one cluster:
// strong reads through one server see writes through the other at once; eventual reads are
// answered from the eventual endpoint (read_is_strongly_consistent false is accepted there);
// a watch (sent to the eventual endpoint by @deno/kv) sees commits through the other server.
//   STAMPKV_URL_A=... STAMPKV_URL_B=... DENO_KV_ACCESS_TOKEN=... node --test two_servers.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { openKv } from "@deno/kv";

const urlA = process.env.STAMPKV_URL_A;
const urlB = process.env.STAMPKV_URL_B;
const accessToken = process.env.DENO_KV_ACCESS_TOKEN;
const run = crypto.randomUUID();

async function both(fn) {
  const a = await openKv(urlA, { accessToken });
  const b = await openKv(urlB, { accessToken });
  try {
    await fn(a, b);
  } finally {
    a.close();
    b.close();
  }
}

test("the metadata lists a strong and an eventual endpoint", async () => {
  const r = await fetch(urlB, {
    method: "POST",
    headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json" },
    body: JSON.stringify({ supportedVersions: [2, 3] }),
  });
  const body = await r.json();
  assert.deepEqual(body.endpoints.map((e) => e.consistency), ["strong", "eventual"]);
});

test("strong reads through B see writes through A at once", async () => {
  await both(async (a, b) => {
    for (let i = 0; i < 20; i++) {
      const key = [run, "strong", i];
      const r = await a.set(key, `v${i}`);
      assert.equal(r.ok, true);
      const got = await b.get(key);
      assert.equal(got.value, `v${i}`);
      assert.equal(got.versionstamp, r.versionstamp);
    }
  });
});

test("eventual reads through B catch up with writes through A", async () => {
  await both(async (a, b) => {
    const key = [run, "eventual"];
    const r = await a.set(key, "now");
    const deadline = Date.now() + 5000;
    for (;;) {
      const got = await b.get(key, { consistency: "eventual" });
      if (got.versionstamp === r.versionstamp) break;
      assert.ok(Date.now() < deadline, "an eventual read did not catch up within 5 s");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const listed = [];
    for await (const e of b.list({ prefix: [run, "strong"] }, { consistency: "eventual" })) listed.push(e.key[2]);
    assert.equal(listed.length, 20);
  });
});

test("a watch on B sees commits through A", async () => {
  await both(async (a, b) => {
    const key = [run, "watched"];
    // @deno/kv's watch stream yields nothing while every watched key is missing.
    await a.set(key, 0);
    const reader = b.watch([key]).getReader();
    await reader.read();
    for (let i = 1; i <= 3; i++) assert.equal((await a.set(key, i)).ok, true);
    const deadline = Date.now() + 10000;
    let value = null;
    while (value !== 3) {
      assert.ok(Date.now() < deadline, `the watch saw ${value}, not 3`);
      const next = await reader.read();
      value = next.value?.[0].value ?? null;
    }
    await reader.cancel();
  });
});
