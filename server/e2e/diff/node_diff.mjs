// The differential idea for the @deno/kv npm client under Node: the same cases run against
// @deno/kv's own SQLite backend (`openKv(":memory:")`: the N-API build of denokv's SQLite
// backend behind the same client code as the remote one, so the client's quirks are the same
// on both sides) and against stampkv over KV Connect, and the transcripts are compared.
//
//   STAMPKV_TARGETS="server=http://... edge=http://..." DENO_KV_ACCESS_TOKEN=... node node_diff.mjs
//
// Env: DIFF_SEED, DIFF_SEQUENCES, DIFF_LENGTH, DIFF_ONLY, DIFF_VERBOSE as for deno_diff.ts.
//
// Error texts: the N-API backend reports limit errors by their Rust names ("TooManyReadRanges")
// and the remote client reports a 400 as "Unexpected response status: 400 <server text>"; both
// are reduced to a kind ("too many ranges", ...). Type-mismatch texts are Deno's on both sides
// and are compared in full. Node 20's V8 cannot read values Deno 2.9 wrote, so every value here
// is written by Node.

import { KvU64, openKv } from "@deno/kv";
import { canonError as baseCanonError, canonResult, drain, sleep, Transcript, WatchTap } from "./transcript.mjs";
import { prng } from "./prng.mjs";

// The N-API backend holds a libuv pool thread for every watch waiting for a change (also after
// the watch is cancelled), so the default pool of 4 threads runs dry and stalls everything else.
if (!process.env.UV_THREADPOOL_SIZE) {
  const { spawnSync } = await import("node:child_process");
  const r = spawnSync(process.execPath, process.argv.slice(1), { stdio: "inherit", env: { ...process.env, UV_THREADPOOL_SIZE: "64" } });
  process.exit(r.status ?? 1);
}

// After a cancelled watch is ended, the N-API backend rejects the client's pending read with
// "watch not found" where nobody listens; that is the client's own business, not a result.
process.on("unhandledRejection", (e) => {
  if (String(e?.message ?? e).startsWith("watch not found")) return;
  console.error("diff: unhandled rejection", e);
  process.exitCode = 2;
});

const targets = (process.env.STAMPKV_TARGETS ?? "").split(/\s+/).filter(Boolean).map((s) => {
  const i = s.indexOf("=");
  return { name: s.slice(0, i), url: s.slice(i + 1) };
});
if (targets.length === 0) throw new Error("set STAMPKV_TARGETS to 'name=url ...'");
const accessToken = process.env.DENO_KV_ACCESS_TOKEN;
const seed = Number(process.env.DIFF_SEED ?? 1);
const sequences = Number(process.env.DIFF_SEQUENCES ?? 4);
const length = Number(process.env.DIFF_LENGTH ?? 150);
const only = process.env.DIFF_ONLY ? new RegExp(process.env.DIFF_ONLY) : undefined;
const verbose = process.env.DIFF_VERBOSE === "1";
const CASE_TIMEOUT_MS = Number(process.env.DIFF_CASE_TIMEOUT_MS ?? 30_000);
const MAX_U64 = 2n ** 64n - 1n;

const KINDS = [
  [/^TooManyReadRanges$|too many ranges/i, "too many ranges"],
  [/^TooManyEntries$|too many entries|read range limit/i, "too many entries"],
  [/^KeyTooL(arge|ong)|key.*(too large|size limit)/i, "key too large"],
  [/^ValueTooL(arge|ong)|value.*(too large|size limit)/i, "value too large"],
  [/^TooManyChecks|too many checks/i, "too many checks"],
  [/^TooManyMutations|too many mutations/i, "too many mutations"],
  [/^TotalMutationTooLarge|^TotalKeyTooLarge|total .*size/i, "total size too large"],
];
function canonError(e) {
  if (!(e instanceof Error)) return baseCanonError(e);
  let message = e.message.split("\n\nStack backtrace:")[0].trim();
  const remote = /^Unexpected response status: 400 ([\s\S]*)$/.exec(message);
  if (remote) message = remote[1];
  if (/^Failed to perform '(sum|min|max)' mutation/.test(message)) return { error: "Rejected", message };
  for (const [re, kind] of KINDS) if (re.test(message)) return { error: "Rejected", kind };
  return { error: remote ? "Rejected" : e.constructor.name, message };
}
async function call(t, label, f) {
  try {
    const r = await f();
    t.noteCommit(r);
    t.step(label, canonResult(r));
    return r;
  } catch (e) {
    t.step(label, canonError(e));
    return undefined;
  }
}

const keyOfSize = (p, size, fill = 1) => [p, new Uint8Array(size - (Buffer.byteLength(p) + 2) - 2).fill(fill)];

const cases = {
  async "get, set, delete, getMany"({ kv, p, t }) {
    // @deno/kv reads one key as the range [key, 0xFF) with limit 1, so a missing key's read
    // returns its successor; keep a sentinel after every key so that successor is Node's.
    await kv.set([p, "zz sentinel"], 0);
    await call(t, "get missing", () => kv.get([p, "a"]));
    await call(t, "set", () => kv.set([p, "a"], { hello: "node" }));
    await call(t, "get", () => kv.get([p, "a"]));
    await call(t, "set b", () => kv.set([p, "b"], 2));
    await call(t, "getMany([])", () => kv.getMany([]));
    await call(t, "getMany mixed with duplicate", () => kv.getMany([[p, "b"], [p, "missing"], [p, "a"], [p, "b"]]));
    await call(t, "getMany 10", () => kv.getMany(Array.from({ length: 10 }, (_, i) => [p, i])));
    await call(t, "getMany 11", () => kv.getMany(Array.from({ length: 11 }, (_, i) => [p, i])));
    await call(t, "delete", () => kv.delete([p, "a"]));
    await call(t, "get deleted", () => kv.get([p, "a"]));
    await call(t, "delete missing", () => kv.delete([p, "never"]));
    return t.finish();
  },

  async "values"({ kv, p, t }) {
    await kv.set([p, "zz sentinel"], 0);
    const values = {
      string: "hello", empty: "", unicode: "é😀", int: 42, negzero: -0, double: 1.5, nan: NaN, inf: -Infinity,
      big: 2n ** 100n, bool: true, null: null, undefined: undefined, bytes: new Uint8Array([1, 0, 255]),
      date: new Date(Date.UTC(2024, 1, 29)), regexp: /x+/g, map: new Map([[1, "one"]]), set: new Set([1, "a"]),
      object: { a: [1, { b: null }], c: 2n }, u64: new KvU64(MAX_U64), u64zero: new KvU64(0n),
    };
    for (const [name, v] of Object.entries(values)) {
      await call(t, `set ${name}`, () => kv.set([p, name], v));
      await call(t, `get ${name}`, () => kv.get([p, name]));
    }
    await drain(t, "list all", kv.list({ prefix: [p] }));
    return t.finish();
  },

  async "keys and list"({ kv, p, t }) {
    const parts = ["a", "", "a\u0000b", "é", 0, -0, 1.5, -Infinity, NaN, 0n, -1n, 2n ** 64n, true, false, new Uint8Array([0, 1])];
    for (const part of parts) await call(t, `set ${String(part)}`, () => kv.set([p, "k", part], String(part)));
    await drain(t, "list forward", kv.list({ prefix: [p, "k"] }));
    await drain(t, "list reverse", kv.list({ prefix: [p, "k"] }, { reverse: true }));
    await drain(t, "list limit 3", kv.list({ prefix: [p, "k"] }, { limit: 3 }));
    await drain(t, "list batchSize 2", kv.list({ prefix: [p, "k"] }, { batchSize: 2 }));
    await drain(t, "list batchSize 2 reverse limit 5", kv.list({ prefix: [p, "k"] }, { batchSize: 2, limit: 5, reverse: true }));
    await drain(t, "start + end", kv.list({ start: [p, "k", 0n], end: [p, "k", true] }));
    await drain(t, "prefix + start", kv.list({ prefix: [p, "k"], start: [p, "k", 0] }));
    await drain(t, "prefix + end", kv.list({ prefix: [p, "k"], end: [p, "k", 0] }));
    await drain(t, "eventual", kv.list({ prefix: [p, "k"] }, { consistency: "eventual", limit: 4 }));
    // Pages by cursor (the client's own cursor format), forward and reverse.
    for (const reverse of [false, true]) {
      let cursor;
      for (let page = 0; page < 6; page++) {
        const it = kv.list({ prefix: [p, "k"] }, { limit: 4, cursor, reverse });
        const keys = [];
        for await (const e of it) keys.push(String(e.value));
        t.step(`${reverse ? "reverse" : "forward"} page ${page}`, keys);
        if (keys.length < 4) break;
        cursor = it.cursor;
      }
    }
    return t.finish();
  },

  async "atomic, checks, sum, min, max"({ kv, p, t }) {
    await kv.set([p, "zz sentinel"], 0);
    await call(t, "check null, set", () => kv.atomic().check({ key: [p, "a"], versionstamp: null }).set([p, "a"], 1).commit());
    await call(t, "check null fails", () => kv.atomic().check({ key: [p, "a"], versionstamp: null }).set([p, "a"], 2).commit());
    const a = await kv.get([p, "a"]);
    await call(t, "check with entry", () => kv.atomic().check(a).set([p, "a"], 3).commit());
    await call(t, "stale check", () => kv.atomic().check(a).set([p, "a"], 4).commit());
    await call(t, "get a", () => kv.get([p, "a"]));
    await call(t, "empty commit", () => kv.atomic().commit());
    await call(t, "set after empty commit", () => kv.set([p, "b"], 1));
    await call(t, "sum missing", () => kv.atomic().sum([p, "s"], 5n).commit());
    await call(t, "sum wraps", async () => {
      await kv.set([p, "w"], new KvU64(MAX_U64));
      return kv.atomic().sum([p, "w"], 3n).commit();
    });
    await call(t, "min", () => kv.atomic().min([p, "s"], 2n).commit());
    await call(t, "max", () => kv.atomic().max([p, "s"], 9n).commit());
    await call(t, "get s, w", () => kv.getMany([[p, "s"], [p, "w"]]));
    await call(t, "sum on a number", () => kv.atomic().sum([p, "a"], 1n).commit());
    await call(t, "max on a number", () => kv.atomic().max([p, "a"], 1n).commit());
    await call(t, "a unchanged", () => kv.get([p, "a"]));
    return t.finish();
  },

  async "limits"({ kv, p, t }) {
    await call(t, "set key of 2048 bytes", () => kv.set(keyOfSize(p, 2048), 1));
    await call(t, "set key of 2049 bytes", () => kv.set(keyOfSize(p, 2049), 1));
    await call(t, "value of 65536 bytes", () => kv.set([p, "v"], new Uint8Array(65536)));
    await call(t, "value of 65537 bytes", () => kv.set([p, "v"], new Uint8Array(65537)));
    const muts = (n) => {
      let op = kv.atomic();
      for (let i = 0; i < n; i++) op = op.set([p, "m", i], i);
      return op.commit();
    };
    await call(t, "1000 mutations", () => muts(1000));
    await call(t, "1001 mutations", () => muts(1001));
    const checks = (n) => {
      let op = kv.atomic();
      for (let i = 0; i < n; i++) op = op.check({ key: [p, "c", i], versionstamp: null });
      return op.commit();
    };
    // denokv's backends (this oracle) allow 10 checks, Deno's own 100 (stampkv follows Deno,
    // compared in deno_diff.ts), so only 10 is asked here.
    await call(t, "10 checks", () => checks(10));
    await call(t, "list batchSize 1000 is refused by the client", async () => {
      let n = 0;
      for await (const _ of kv.list({ prefix: [p, "m"] }, { batchSize: 1000 })) n++;
      return n;
    });
    await call(t, "list limit 1000 (batches of 500)", async () => {
      let n = 0;
      for await (const _ of kv.list({ prefix: [p, "m"] }, { limit: 1000 })) n++;
      return n;
    });
    return t.finish();
  },

  async "eventual reads"({ kv, p, t }) {
    // Through an edge, eventual reads are answered from its cache; a write through the same
    // edge drops what it cached, so a client reads its own writes.
    await kv.set([p, "zz sentinel"], 0);
    await call(t, "set", () => kv.set([p, "x"], 1));
    await call(t, "eventual get", () => kv.get([p, "x"], { consistency: "eventual" }));
    await call(t, "set again", () => kv.set([p, "x"], 2));
    await call(t, "eventual get after write", () => kv.get([p, "x"], { consistency: "eventual" }));
    await call(t, "eventual getMany", () => kv.getMany([[p, "x"], [p, "y"]], { consistency: "eventual" }));
    await call(t, "delete", () => kv.delete([p, "x"]));
    await call(t, "eventual get after delete", () => kv.get([p, "x"], { consistency: "eventual" }));
    await call(t, "atomic sum", () => kv.atomic().sum([p, "n"], 1n).commit());
    await call(t, "eventual get of the sum", () => kv.get([p, "n"], { consistency: "eventual" }));
    await drain(t, "eventual list", kv.list({ prefix: [p] }, { consistency: "eventual" }));
    return t.finish();
  },

  async "watch through the client's WatchCache"({ kv, p, t }) {
    await call(t, "set a", () => kv.set([p, "a"], "a"));
    const tap = new WatchTap(kv.watch([[p, "a"], [p, "b"]]));
    t.step("initial", await tap.next(3000));
    await call(t, "set b", () => kv.set([p, "b"], "b"));
    t.step("after set b", await tap.next(3000));
    await call(t, "set a again", () => kv.set([p, "a"], "a2"));
    t.step("after set a", await tap.next(3000));
    await call(t, "unrelated write", () => kv.set([p, "c"], 1));
    t.step("after unrelated write", await tap.next(300));
    await call(t, "delete a", () => kv.delete([p, "a"]));
    t.step("after delete a", await tap.next(3000));
    await tap.cancel();
    const one = new WatchTap(kv.watch([[p, "b"]]));
    t.step("single key initial", await one.next(3000));
    await call(t, "set b (KvU64)", () => kv.set([p, "b"], new KvU64(7n)));
    t.step("single key after set", await one.next(3000));
    await one.cancel();
    const missing = new WatchTap(kv.watch([[p, "none"]]));
    t.step("missing key initial", await missing.next(1000));
    await call(t, "set none", () => kv.set([p, "none"], 1));
    t.step("missing key after set", await missing.next(3000));
    await missing.cancel();
    return t.finish();
  },
};

function randomCase(s, n) {
  return async ({ kv, p, t }) => {
    const r = prng(s);
    await kv.set([p, "zz sentinel"], 0);
    const keys = [[p, "a"], [p, "b"], [p, 1], [p, "b", 2n], [p, true]];
    const counters = [[p, "c", 0], [p, "c", 1]];
    const observed = new Map();
    const id = (k) => JSON.stringify(k, (_, v) => (typeof v === "bigint" ? `${v}n` : v));
    const value = () => r.pick([r.int(100), "s" + r.int(10), new Uint8Array([r.int(9)]), { n: r.int(4) }, null, new KvU64(BigInt(r.int(50)))]);
    const operand = () => r.pick([1n, BigInt(r.int(100)), MAX_U64]);
    for (let step = 0; step < n; step++) {
      const k = r.int(100);
      if (k < 25) {
        const key = r.pick(keys);
        const res = await call(t, `${step} set ${id(key)}`, () => kv.set(key, value()));
        if (res?.ok) observed.set(id(key), res.versionstamp);
      } else if (k < 35) {
        const key = r.pick([...keys, ...counters]);
        await call(t, `${step} delete ${id(key)}`, () => kv.delete(key));
        observed.set(id(key), null);
      } else if (k < 50) {
        const ks = Array.from({ length: 1 + r.int(4) }, () => r.pick([...keys, ...counters]));
        const es = await call(t, `${step} getMany ${ks.length}`, () => kv.getMany(ks));
        es?.forEach((e) => observed.set(id(e.key), e.versionstamp));
      } else if (k < 65) {
        const opts = { limit: r.int(2) ? 1 + r.int(6) : undefined, reverse: !!r.int(2), batchSize: r.int(2) ? 1 + r.int(3) : undefined };
        await drain(t, `${step} list ${JSON.stringify(opts)}`, kv.list({ prefix: [p] }, opts));
      } else {
        let op = kv.atomic();
        const desc = [];
        const written = [];
        for (let i = r.int(3); i > 0; i--) {
          const key = r.pick([...keys, ...counters]);
          const c = r.int(2);
          op = op.check({ key, versionstamp: c ? (observed.get(id(key)) ?? null) : null });
          desc.push(`check ${id(key)} ${c ? "observed" : "null"}`);
        }
        for (let i = 1 + r.int(3); i > 0; i--) {
          if (r.int(2)) {
            const key = r.pick(keys);
            op = op.set(key, value());
            written.push(key);
            desc.push(`set ${id(key)}`);
          } else {
            const key = r.pick(counters);
            const f = r.pick(["sum", "min", "max"]);
            const x = operand();
            op = op[f](key, x);
            written.push(key);
            desc.push(`${f} ${id(key)} ${x}`);
          }
        }
        const res = await call(t, `${step} atomic [${desc.join("; ")}]`, () => op.commit());
        if (res?.ok) for (const key of written) observed.set(id(key), res.versionstamp);
      }
    }
    await drain(t, "final contents", kv.list({ prefix: [p] }));
    return t.finish();
  };
}

// Neither local backend of @deno/kv 0.14 can be the oracle for watches: the N-API backend's
// watch stalls Node's event loop (timers stop firing after a watch saw a write to an unrelated
// key) and the pure-JavaScript one (`openKv()`) never emits a first chunk and then spins. So the
// watch case compares the other targets with the first one (the server); Deno's own watch
// semantics are compared against stampkv in deno_diff.ts.
const FIRST_TARGET_IS_ORACLE = new Set(["watch through the client's WatchCache"]);

const all = Object.entries(cases);
for (let i = 0; i < sequences; i++) all.push([`random sequence seed ${seed + i} length ${length}`, randomCase(seed + i, length)]);
const selected = all.filter(([name]) => !only || only.test(name));
const run = Math.random().toString(16).slice(2, 10);

async function runCase(c, open, p) {
  const t = new Transcript();
  if (process.env.DIFF_TRACE) {
    const step = t.step.bind(t);
    t.step = (label, v) => (console.error(`trace ${p}: ${label} ${show(v).slice(0, 200)}`), step(label, v));
  }
  let kv;
  let timer;
  try {
    kv = await open();
    return await Promise.race([
      c({ kv, p, t }),
      new Promise((resolve) => {
        timer = setTimeout(() => resolve([...t.finish(), ["case timed out after (ms)", CASE_TIMEOUT_MS]]), CASE_TIMEOUT_MS);
      }),
    ]);
  } catch (e) {
    return [...t.finish(), ["case threw", String(e?.stack ?? e)]];
  } finally {
    clearTimeout(timer);
    try {
      kv?.close();
    } catch { /* closed */ }
  }
}

const show = (x) => JSON.stringify(x, (_k, v) => (typeof v === "string" && v.length > 80 ? `${v.slice(0, 40)}...(${v.length} chars)` : v));
const differences = [];
let operations = 0;
for (const [n, [name, c]] of selected.entries()) {
  const p = `node-${run}-${n}`;
  const started = Date.now();
  const remote = targets.map((tg) => runCase(c, () => openKv(tg.url, { accessToken }), p));
  const [oracle, ...actuals] = FIRST_TARGET_IS_ORACLE.has(name)
    ? [await remote[0], ...(await Promise.all(remote))]
    : await Promise.all([runCase(c, () => openKv(":memory:"), p), ...remote]);
  const caseDiffs = [];
  targets.forEach((tg, i) => {
    const actual = actuals[i];
    const steps = Math.max(oracle.length, actual.length);
    operations += steps;
    for (let s = 0; s < steps; s++) {
      const o = oracle[s], a = actual[s];
      if (o && a && o[0] === a[0] && JSON.stringify(o[1]) === JSON.stringify(a[1])) continue;
      caseDiffs.push({ target: tg.name, step: s, label: (o ?? a)[0], oracle: o ? o[1] : "(missing)", actual: a ? a[1] : "(missing)" });
    }
  });
  differences.push(...caseDiffs);
  console.log(`diff: ${caseDiffs.length ? "DIFFERS" : "same   "} node: ${name} (${oracle.length} steps, ${Date.now() - started} ms)`);
  const shown = verbose ? caseDiffs : caseDiffs.slice(0, 6);
  for (const d of shown) {
    console.log(`  [${d.target}] step ${d.step} ${d.label}\n    @deno/kv sqlite: ${show(d.oracle)}\n    stampkv:         ${show(d.actual)}`);
  }
  if (shown.length < caseDiffs.length) console.log(`  ... and ${caseDiffs.length - shown.length} more`);
}
const perTarget = targets.map((tg) => `${tg.name} ${differences.filter((d) => d.target === tg.name).length}`).join(", ");
console.log(
  `diff: node: ${selected.length} cases x ${targets.length} targets, ${operations} operations compared, ` +
    `${differences.length} differences (${perTarget})`,
);
await sleep(10);
process.exit(differences.length ? 1 : 0);
