// Runs every case of cases.ts and the random sequences of random.ts against Deno's own local
// backend (the oracle: a fresh SQLite database per case) and against stampkv over KV Connect
// (one or more URLs), and compares the transcripts step by step.
//
//   STAMPKV_TARGETS="server=http://127.0.0.1:P1 edge=http://127.0.0.1:P2" \
//   DENO_KV_ACCESS_TOKEN=... deno run --unstable-kv -A deno_diff.ts
//
// Env: DIFF_SEED (first seed, default 1), DIFF_SEQUENCES (number of random sequences, default 4),
// DIFF_LENGTH (operations per sequence, default 150), DIFF_ONLY (a regular expression: run only
// the cases whose name matches), DIFF_REPORT (write every transcript and difference there as
// JSON), DIFF_VERBOSE=1 (print every step of every difference instead of the first 6 per case).

import { type Case, cases, type Env, type Json, keyBytes, type RawRange } from "./cases.ts";
import { randomCase } from "./random.ts";
import { Transcript } from "./transcript.mjs";

const targets = (Deno.env.get("STAMPKV_TARGETS") ?? "").split(/\s+/).filter(Boolean).map((s) => {
  const i = s.indexOf("=");
  return { name: s.slice(0, i), url: s.slice(i + 1) };
});
if (targets.length === 0) throw new Error("set STAMPKV_TARGETS to 'name=url ...'");
const token = Deno.env.get("DENO_KV_ACCESS_TOKEN");
if (!token) throw new Error("set DENO_KV_ACCESS_TOKEN");
const seed = Number(Deno.env.get("DIFF_SEED") ?? 1);
const sequences = Number(Deno.env.get("DIFF_SEQUENCES") ?? 4);
const length = Number(Deno.env.get("DIFF_LENGTH") ?? 150);
const only = Deno.env.get("DIFF_ONLY") ? new RegExp(Deno.env.get("DIFF_ONLY")!) : undefined;
const verbose = Deno.env.get("DIFF_VERBOSE") === "1";
const CASE_TIMEOUT_MS = Number(Deno.env.get("DIFF_CASE_TIMEOUT_MS") ?? 30_000);
/** JSON for the console: long strings (big keys) shortened. */
const show = (x: unknown) =>
  JSON.stringify(x, (_k, v) => (typeof v === "string" && v.length > 80 ? `${v.slice(0, 40)}...(${v.length} chars)` : v));

const all: [string, Case][] = Object.entries(cases);
for (let i = 0; i < sequences; i++) all.push([`random sequence seed ${seed + i} length ${length}`, randomCase(seed + i, length)]);
const selected = all.filter(([name]) => !only || only.test(name));

// Every run gets its own key space on the servers, so that runs against one server do not mix.
const run = crypto.randomUUID().slice(0, 8);
const tmp = await Deno.makeTempDir({ prefix: "stampkv-diff-" });

// ---- the oracle: Deno's SQLite backend on a fresh file per case -------------------------------
async function oracleEnv(p: string, n: number): Promise<Env & { close(): void }> {
  const path = `${tmp}/case-${n}.sqlite`;
  const env = {
    p,
    t: new Transcript(),
    kv: await Deno.openKv(path),
    async reopen() {
      env.kv.close();
      env.kv = await Deno.openKv(path);
      return env.kv;
    },
    // Deno's snapshot read checks (ext/kv: number of ranges, then the sum of their limits), then
    // reads each range; a read of no ranges is answered with nothing.
    async rawRead(ranges: RawRange[]): Promise<Json> {
      if (ranges.length > 10) return { error: "Rejected", why: "Too many ranges (max 10)" };
      if (ranges.reduce((n, r) => n + r.limit, 0) > 1000) return { error: "Rejected", why: "Too many entries (max 1000)" };
      const counts = [];
      for (const r of ranges) {
        let n = 0;
        for await (const _ of env.kv.list({ start: r.start, end: r.end }, { limit: r.limit, batchSize: r.limit })) n++;
        counts.push(n);
      }
      return { answered: counts };
    },
    close() {
      env.kv.close();
    },
  };
  return env;
}

// ---- stampkv over KV Connect --------------------------------------------------------------------
function varint(n: number, out: number[]) {
  while (n > 127) {
    out.push((n & 127) | 128);
    n >>>= 7;
  }
  out.push(n);
}
function lenField(field: number, bytes: Uint8Array | number[], out: number[]) {
  varint((field << 3) | 2, out);
  varint(bytes.length, out);
  out.push(...bytes);
}
function encodeSnapshotRead(ranges: RawRange[]): Uint8Array<ArrayBuffer> {
  const out: number[] = [];
  for (const r of ranges) {
    const range: number[] = [];
    lenField(1, keyBytes(r.start), range);
    lenField(2, keyBytes(r.end), range);
    varint(3 << 3, range);
    varint(r.limit, range);
    lenField(1, range, out);
  }
  return new Uint8Array(out);
}
/** Fields of one protobuf message: [field number, wire type, value or bytes]. */
function fields(buf: Uint8Array): [number, number, number | Uint8Array][] {
  const out: [number, number, number | Uint8Array][] = [];
  let i = 0;
  const rd = () => {
    let n = 0, shift = 0, b;
    do {
      b = buf[i++];
      n += (b & 127) * 2 ** shift;
      shift += 7;
    } while (b & 128);
    return n;
  };
  while (i < buf.length) {
    const tag = rd();
    const wt = tag & 7;
    if (wt === 0) out.push([tag >>> 3, 0, rd()]);
    else if (wt === 2) {
      const len = rd();
      out.push([tag >>> 3, 2, buf.subarray(i, i + len)]);
      i += len;
    } else throw new Error(`wire type ${wt}`);
  }
  return out;
}
async function remoteRawRead(url: string, ranges: RawRange[]): Promise<Json> {
  const meta = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ supportedVersions: [2, 3] }),
  }).then((r) => r.json());
  const ep = meta.endpoints.find((e: { consistency: string }) => e.consistency === "strong");
  const res = await fetch(`${new URL(ep.url, url).href.replace(/\/$/, "")}/snapshot_read`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${meta.token}`,
      "content-type": "application/x-protobuf",
      "x-denokv-database-id": meta.databaseId,
      "x-denokv-version": String(meta.version),
    },
    body: encodeSnapshotRead(ranges) as Uint8Array<ArrayBuffer>,
  });
  const body = new Uint8Array(await res.arrayBuffer());
  if (res.status >= 400 && res.status < 500) return { error: "Rejected", why: new TextDecoder().decode(body) };
  if (res.status !== 200) return { status: res.status, body: new TextDecoder().decode(body) };
  const counts = fields(body).filter(([f]) => f === 1).map(([, , v]) => fields(v as Uint8Array).filter(([f]) => f === 1).length);
  return { answered: counts };
}
async function remoteEnv(url: string, p: string): Promise<Env & { close(): void }> {
  const env = {
    p,
    t: new Transcript(),
    kv: await Deno.openKv(url),
    async reopen() {
      env.kv.close();
      env.kv = await Deno.openKv(url);
      return env.kv;
    },
    rawRead: (ranges: RawRange[]) => remoteRawRead(url, ranges),
    close() {
      env.kv.close();
    },
  };
  return env;
}

// ---- running and comparing ----------------------------------------------------------------------
type Steps = Json[];
async function runCase(c: Case, env: Env & { close(): void }): Promise<Steps> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      c(env),
      new Promise<Steps>((resolve) => {
        timer = setTimeout(() => resolve([...env.t.finish(), ["case timed out after (ms)", CASE_TIMEOUT_MS]]), CASE_TIMEOUT_MS);
      }),
    ]);
  } catch (e) {
    return [...env.t.finish(), ["case threw", String((e as Error)?.stack ?? e)]];
  } finally {
    clearTimeout(timer);
    try {
      env.close();
    } catch { /* already closed */ }
  }
}

/** Drops the `why` texts of raw reads: the servers' refusal texts legitimately differ. */
function comparable(x: Json): string {
  return JSON.stringify(x, (k, v) => (k === "why" ? undefined : v));
}

interface Difference {
  target: string;
  case: string;
  step: number;
  label: string;
  oracle: Json | "(missing)";
  actual: Json | "(missing)";
}
const differences: Difference[] = [];
const report: Record<string, unknown>[] = [];
let operations = 0;

for (const [n, [name, c]] of selected.entries()) {
  const p = `${run}-${n}`;
  const started = Date.now();
  const [oracle, ...actuals] = await Promise.all([
    oracleEnv(p, n).then((env) => runCase(c, env)),
    ...targets.map((t) => remoteEnv(t.url, p).then((env) => runCase(c, env))),
  ]);
  const caseDiffs: Difference[] = [];
  targets.forEach((t, i) => {
    const actual = actuals[i];
    const steps = Math.max(oracle.length, actual.length);
    operations += steps;
    for (let s = 0; s < steps; s++) {
      const o = oracle[s], a = actual[s];
      if (o && a && o[0] === a[0] && comparable(o[1]) === comparable(a[1])) continue;
      caseDiffs.push({
        target: t.name,
        case: name,
        step: s,
        label: (o ?? a)![0] + (o && a && o[0] !== a[0] ? ` / ${a[0]}` : ""),
        oracle: o ? o[1] : "(missing)",
        actual: a ? a[1] : "(missing)",
      });
    }
  });
  differences.push(...caseDiffs);
  report.push({ case: name, prefix: p, oracle, actual: Object.fromEntries(targets.map((t, i) => [t.name, actuals[i]])) });
  const ms = Date.now() - started;
  console.log(`diff: ${caseDiffs.length ? "DIFFERS" : "same   "} ${name} (${oracle.length} steps, ${ms} ms)`);
  const shown = verbose ? caseDiffs : caseDiffs.slice(0, 6);
  for (const d of shown) {
    console.log(`  [${d.target}] step ${d.step} ${d.label}\n    deno:    ${show(d.oracle)}\n    stampkv: ${show(d.actual)}`);
  }
  if (shown.length < caseDiffs.length) console.log(`  ... and ${caseDiffs.length - shown.length} more`);
}

const path = Deno.env.get("DIFF_REPORT");
if (path) await Deno.writeTextFile(path, JSON.stringify({ targets, differences, report }, null, 1));
await Deno.remove(tmp, { recursive: true });
const perTarget = targets.map((t) => `${t.name} ${differences.filter((d) => d.target === t.name).length}`).join(", ");
console.log(
  `diff: deno: ${selected.length} cases x ${targets.length} targets, ${operations} operations compared, ` +
    `${differences.length} differences (${perTarget})`,
);
Deno.exit(differences.length ? 1 : 0);
