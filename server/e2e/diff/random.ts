// Randomised sequences of operations (set, delete, get, getMany, list, atomic with checks and
// sum/min/max) from a seeded generator: the same seed gives the same sequence on every backend.
// Checks use the versionstamps this backend itself observed (from reads and commits), so the
// sequences stay comparable although versionstamps differ between backends.

import type { Case } from "./cases.ts";
import { canonError, canonResult } from "./transcript.mjs";
import { prng } from "./prng.mjs";
import type { Env, Json } from "./cases.ts";
type Transcript = Env["t"];

const MAX_U64 = 2n ** 64n - 1n;

export function randomCase(seed: number, length: number): Case {
  return async ({ kv, p, t }) => {
    const r = prng(seed);
    // Plain keys (values of any kind) and counters (mostly KvU64, sometimes not).
    const plain: Deno.KvKey[] = [
      [p, "r", "a"], [p, "r", "b"], [p, "r", "b", 1], [p, "r", 1], [p, "r", -0], [p, "r", 2n],
      [p, "r", new Uint8Array([0])], [p, "r", true], [p, "r", "z"],
    ];
    const counters: Deno.KvKey[] = [[p, "c", 0], [p, "c", 1], [p, "c", 2]];
    const all = [...plain, ...counters];
    const observed = new Map<string, string | null>();
    const id = (k: Deno.KvKey) => JSON.stringify(canonResult(k));
    const note = (e: { key: Deno.KvKey; versionstamp: string | null }) => observed.set(id(e.key), e.versionstamp);
    const value = (): unknown => {
      switch (r.int(8)) {
        case 0: return r.int(1000) - 500;
        case 1: return "s" + r.int(100);
        case 2: return new Uint8Array([r.int(256), r.int(256)]);
        case 3: return { n: r.int(10), l: [r.int(3), "x"] };
        case 4: return new Deno.KvU64(BigInt(r.int(1000)));
        case 5: return r.pick([null, undefined, true, NaN, -0, 1.25]);
        case 6: return BigInt(r.int(1000)) - 500n;
        default: return new Map([[r.int(5), r.int(5)]]);
      }
    };
    const operand = () => r.pick([0n, 1n, BigInt(r.int(1000)), MAX_U64, MAX_U64 - 1n, 2n ** 63n]);
    // Counters only ever hold KvU64s. A single sum sometimes targets a plain key (a type mismatch
    // unless it holds a KvU64); an atomic with several mutations never does, because Deno's local
    // backend keeps the mutations before a failing one (reference §5), which is not compared.
    const counterKey = () => (r.int(5) === 0 ? r.pick(plain) : r.pick(counters));

    for (let step = 0; step < length; step++) {
      const kind = r.int(100);
      if (kind < 20) {
        const key = r.pick(plain);
        const v = value();
        const res = await t.call(`${step} set ${id(key)}`, () => kv.set(key, v));
        if (res?.ok) observed.set(id(key), res.versionstamp);
      } else if (kind < 28) {
        const key = r.pick(all);
        await t.call(`${step} delete ${id(key)}`, () => kv.delete(key));
        observed.set(id(key), null);
      } else if (kind < 36) {
        const key = r.pick(all);
        const e = await t.call(`${step} get ${id(key)}`, () => kv.get(key));
        if (e) note(e);
      } else if (kind < 44) {
        const keys = Array.from({ length: 1 + r.int(5) }, () => r.pick(all));
        const es = await t.call(`${step} getMany ${keys.length}`, () => kv.getMany(keys));
        es?.forEach(note);
      } else if (kind < 58) {
        const opts: Deno.KvListOptions = {};
        if (r.int(2)) opts.limit = 1 + r.int(8);
        if (r.int(2)) opts.reverse = true;
        if (r.int(2)) opts.batchSize = 1 + r.int(4);
        let sel: Deno.KvListSelector;
        const s = r.int(4);
        if (s === 0) sel = { prefix: [p] };
        else if (s === 1) sel = { prefix: [p, "r"] };
        else if (s === 2) sel = { prefix: [p, "r"], start: r.pick(plain) };
        else {
          const [a, b] = [r.pick(all), r.pick(all)];
          sel = { start: a, end: b };
        }
        const label = `${step} list ${JSON.stringify(canonResult(Object.values(sel)))} ${JSON.stringify(opts)}`;
        const out: Json[] = [];
        try {
          const it = kv.list(sel, opts);
          for await (const e of it) {
            note(e);
            out.push(canonResult(e));
          }
          t.step(label, ["entries", out]);
        } catch (e) {
          t.step(label, { entries: out, thrown: canonError(e) });
        }
      } else if (kind < 90) {
        let op = kv.atomic();
        const desc: string[] = [];
        const written: [Deno.KvKey, boolean][] = [];
        for (let i = r.int(4); i > 0; i--) {
          const key = r.pick(all);
          const c = r.int(3);
          const vs = c === 0 ? (observed.get(id(key)) ?? null) : c === 1 ? null : "00000000000000000001";
          op = op.check({ key, versionstamp: vs });
          desc.push(`check ${id(key)} ${c === 0 ? "observed" : c === 1 ? "null" : "stale"}`);
        }
        for (let i = 1 + r.int(4); i > 0; i--) {
          const m = r.int(10);
          if (m < 3) {
            const key = r.pick(plain);
            op = op.set(key, value());
            written.push([key, true]);
            desc.push(`set ${id(key)}`);
          } else if (m < 5) {
            const key = r.pick(all);
            op = op.delete(key);
            written.push([key, false]);
            desc.push(`delete ${id(key)}`);
          } else {
            const key = r.pick(counters);
            const n = operand();
            const f = m < 7 ? "sum" : m < 9 ? "min" : "max";
            op = op[f](key, n);
            written.push([key, true]);
            desc.push(`${f} ${id(key)} ${n}`);
          }
        }
        const res = await t.call(`${step} atomic [${desc.join("; ")}]`, () => op.commit());
        if (res?.ok) for (const [key, set] of written) observed.set(id(key), set ? res.versionstamp : null);
        // A rejected commit (type mismatch) may have applied a prefix of its mutations on Deno's
        // local backend (see the reference, §5); forget what this commit might have written.
        if (!res) for (const [key] of written) observed.delete(id(key));
      } else {
        const key = counterKey();
        const n = operand();
        const res = await t.call(`${step} sum ${id(key)} ${n}`, () => kv.atomic().sum(key, n).commit());
        if (res?.ok) observed.set(id(key), res.versionstamp);
      }
    }
    await drain(t, kv, p);
    return t.finish();
  };
}

async function drain(t: Transcript, kv: Deno.Kv, p: string) {
  const out: Json[] = [];
  for await (const e of kv.list({ prefix: [p] })) out.push(canonResult(e));
  t.step("final contents", ["entries", out]);
}
