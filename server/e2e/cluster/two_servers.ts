// Two `stampkv serve --etcd` servers in front of one etcd cluster, used at once by real Deno:
// writes through one are read back at once through the other, versionstamps increase in
// commit order across both, checks and sums see each other's commits, and a watch opened on
// one server sees commits made through the other.
//   STAMPKV_URL_A=http://... STAMPKV_URL_B=http://... DENO_KV_ACCESS_TOKEN=... \
//     deno test --unstable-kv -A two_servers.ts

const urlA = Deno.env.get("STAMPKV_URL_A");
const urlB = Deno.env.get("STAMPKV_URL_B");
const token = Deno.env.get("DENO_KV_ACCESS_TOKEN");
if (!urlA || !urlB || !token) throw new Error("set STAMPKV_URL_A, STAMPKV_URL_B and DENO_KV_ACCESS_TOKEN");

function assert(cond: unknown, msg = "assertion failed"): asserts cond {
  if (!cond) throw new Error(msg);
}
function assertEquals(actual: unknown, expected: unknown, msg = "") {
  const a = Deno.inspect(actual, { depth: 10, sorted: true });
  const e = Deno.inspect(expected, { depth: 10, sorted: true });
  if (a !== e) throw new Error(`${msg}\nexpected: ${e}\nactual:   ${a}`);
}
function test(name: string, fn: (a: Deno.Kv, b: Deno.Kv) => Promise<void>) {
  Deno.test({ name, sanitizeOps: false, sanitizeResources: false }, async () => {
    const a = await Deno.openKv(urlA);
    const b = await Deno.openKv(urlB);
    try {
      await fn(a, b);
    } finally {
      a.close();
      b.close();
    }
  });
}
const run = crypto.randomUUID();

test("both servers hand out the same database id", async () => {
  const ids = [];
  for (const url of [urlA, urlB]) {
    const r = await fetch(url, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ supportedVersions: [2, 3] }),
    });
    assertEquals(r.status, 200);
    ids.push((await r.json()).databaseId);
  }
  assertEquals(ids[0], ids[1]);
});

test("a write through one server is read back at once through the other", async (a, b) => {
  for (let i = 0; i < 40; i++) {
    const [writer, reader] = i % 2 === 0 ? [a, b] : [b, a];
    const key = [run, "rw", i];
    const r = await writer.set(key, { i });
    assert(r.ok);
    assertEquals(await reader.get(key), { key, value: { i }, versionstamp: r.versionstamp });
  }
  const listed = [];
  for await (const e of b.list({ prefix: [run, "rw"] })) listed.push(e.key[2]);
  assertEquals(listed, Array.from({ length: 40 }, (_, i) => i));
});

test("versionstamps increase in commit order across both servers", async (a, b) => {
  let last = "";
  for (let i = 0; i < 40; i++) {
    const r = await (i % 3 === 0 ? a : b).set([run, "order", i], i);
    assert(r.ok);
    assert(r.versionstamp > last, `versionstamp ${r.versionstamp} after ${last}`);
    last = r.versionstamp;
  }
});

test("a check made through one server sees a commit made through the other", async (a, b) => {
  const key = [run, "check"];
  const first = await a.set(key, "first");
  const seen = await a.get(key);
  assertEquals(seen.versionstamp, first.versionstamp);
  assert((await b.set(key, "second")).ok);
  const stale = await a.atomic().check(seen).set(key, "third").commit();
  assertEquals(stale.ok, false);
  assertEquals((await a.get(key)).value, "second");
});

test("concurrent sums through both servers all count", async (a, b) => {
  const key = [run, "sum"];
  await Promise.all(
    Array.from({ length: 30 }, (_, i) => (i % 2 ? a : b).atomic().sum(key, 1n).commit()),
  );
  assertEquals((await a.get(key)).value, new Deno.KvU64(30n));
  assertEquals((await b.get(key)).value, new Deno.KvU64(30n));
});

test("a watch opened on one server sees commits made through the other", async (a, b) => {
  const key = [run, "watched"];
  const reader = b.watch([key]).getReader();
  const first = await reader.read();
  assertEquals(first.value?.[0].value, null);
  for (let i = 1; i <= 3; i++) assert((await a.set(key, i)).ok);
  const deadline = Date.now() + 10_000;
  let value: unknown = null;
  while (value !== 3) {
    assert(Date.now() < deadline, `the watch on B saw ${value}, not 3, within 10 s`);
    const next = await reader.read();
    value = next.value?.[0].value;
  }
  await reader.cancel();
});
