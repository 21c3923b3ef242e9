// Transcripts of Deno KV calls in a canonical, JSON-serialisable form, so that the same case
// run against two backends can be compared step by step.
//
// - Keys, values and entries are written in a canonical form that tells every value kind apart
//   (-0 from 0, NaN, KvU64 from bigint, typed arrays by kind and bytes).
// - Versionstamps differ between backends: every versionstamp is written as a marker and, once
//   the case is over, replaced by its rank among all versionstamps the case saw ("vs#1" is the
//   smallest). The versionstamps of successful commits must increase in call order; a step
//   "versionstamp order" records whether they did.
// - Errors are `{error: class, message}`. Errors that a remote backend raises on the server side
//   legitimately differ in form: Deno's remote client reports a 400 answer as
//   `Error: KV Connect failed to call '<url>' (status=400 Bad Request): <server text>` where the
//   local backend throws `TypeError: <text>`. Both are written `{error: "Rejected", message:
//   <text>}` (the URL, the class and the wrapper are dropped; the server's text is kept, since
//   the reference server uses Deno's own texts for the runtime errors it can raise, the sum/min/
//   max type mismatches). Any other status keeps its full message and so shows as a difference.

const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

function f64(n) {
  if (Number.isNaN(n)) return "NaN";
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, n);
  return hex(new Uint8Array(view.buffer));
}

const VS = /^[0-9a-f]{20}$/;
const vsMark = (v) => `\u0000vs:${v}`;

export function canonKeyPart(part) {
  if (part instanceof Uint8Array) return ["bytes", hex(part)];
  switch (typeof part) {
    case "string":
      // A versionstamped key ends with the commit's versionstamp as a string part.
      return ["string", VS.test(part) ? vsMark(part) : part];
    case "number":
      return ["number", f64(part)];
    case "bigint":
      return ["bigint", part.toString()];
    case "boolean":
      return ["bool", part];
  }
  return ["?", String(part)];
}

export function canonKey(key) {
  return key.map(canonKeyPart);
}

export function canonValue(v, depth = 0) {
  if (depth > 20) return ["too deep"];
  if (v === undefined) return ["undefined"];
  if (v === null) return ["null"];
  switch (typeof v) {
    case "boolean":
      return ["bool", v];
    case "number":
      return ["number", f64(v)];
    case "bigint":
      return ["bigint", v.toString()];
    case "string":
      return ["string", v];
    case "function":
      return ["function"];
    case "symbol":
      return ["symbol"];
  }
  const o = v;
  const ctor = o?.constructor?.name ?? "";
  if (/KvU64$/.test(ctor) && typeof o.value === "bigint") return ["u64", o.value.toString()];
  // (@deno/kv's N-API backend returns bytes as Node Buffers, its remote client as Uint8Arrays.)
  if (v instanceof Uint8Array && (Object.getPrototypeOf(v) === Uint8Array.prototype || ctor === "Buffer")) {
    return ["bytes", hex(v)];
  }
  if (ArrayBuffer.isView(v)) {
    return [ctor, hex(new Uint8Array(v.buffer, v.byteOffset, v.byteLength))];
  }
  if (v instanceof ArrayBuffer) return ["arraybuffer", hex(new Uint8Array(v))];
  if (Array.isArray(v)) {
    const out = [];
    for (let i = 0; i < v.length; i++) out.push(i in v ? canonValue(v[i], depth + 1) : ["hole"]);
    return ["array", out];
  }
  if (v instanceof Map) return ["map", [...v].map(([k, x]) => [canonValue(k, depth + 1), canonValue(x, depth + 1)])];
  if (v instanceof Set) return ["set", [...v].map((x) => canonValue(x, depth + 1))];
  if (v instanceof Date) return ["date", f64(v.getTime())];
  if (v instanceof RegExp) return ["regexp", v.source, v.flags];
  if (v instanceof Error) return ["error", v.name, v.message];
  if (v instanceof Boolean || v instanceof Number || v instanceof String) {
    return ["boxed", canonValue(v.valueOf(), depth + 1)];
  }
  return ["object", ctor, Object.entries(o).map(([k, x]) => [k, canonValue(x, depth + 1)])];
}

function isEntry(x) {
  return typeof x === "object" && x !== null && Array.isArray(x.key) &&
    "value" in x && "versionstamp" in x && Object.keys(x).length === 3;
}

export function canonEntry(e) {
  return {
    key: canonKey(e.key),
    value: canonValue(e.value),
    vs: e.versionstamp === null ? null : vsMark(e.versionstamp),
  };
}

/** Canonical form of a call's result: entries, entry lists, commit results, plain values. */
export function canonResult(x) {
  if (x === undefined) return ["undefined"];
  if (isEntry(x)) return canonEntry(x);
  if (Array.isArray(x) && x.every(isEntry)) return ["entries", x.map(canonEntry)];
  if (typeof x === "object" && x !== null && "ok" in x && Object.keys(x).every((k) => k === "ok" || k === "versionstamp")) {
    const r = x;
    return r.versionstamp === undefined ? { ok: r.ok } : { ok: r.ok, vs: vsMark(r.versionstamp) };
  }
  return canonValue(x);
}

// Runtime errors a remote backend raises on the server side (Deno's local backend throws them
// as TypeErrors with the same text).
const SERVER_SIDE = [
  /^Failed to perform '(sum|min|max)' mutation on a non-U64 (value in the database|operand)$/,
  /^Cannot sum /,
  /^unsupported value type$/,
  /^Some of the parameters are not valid V8 values$/,
];
const REMOTE_400 = /^KV Connect failed to call '[^']*' \(status=400 Bad Request\): ([\s\S]*)$/;

export function canonError(e) {
  if (!(e instanceof Error)) return { error: "non-Error", message: String(e) };
  const message = e.message;
  const m = REMOTE_400.exec(message);
  if (m) return { error: "Rejected", message: m[1] };
  if (SERVER_SIDE.some((re) => re.test(message))) return { error: "Rejected", message };
  // Remote failures with other statuses keep their text apart from the URL (server or edge).
  return { error: e.constructor.name, message: message.replace(/'https?:\/\/[^']*'/g, "'<url>'") };
}

/** A transcript under construction. */
export class Transcript {
  steps = [];
  commits = [];

  step(label, value) {
    this.steps.push([label, value]);
  }

  /** Runs `f`, records its canonical result or error, returns the raw result (undefined on error). */
  async call(label, f) {
    try {
      const r = await f();
      this.noteCommit(r);
      this.step(label, canonResult(r));
      return r;
    } catch (e) {
      this.step(label, canonError(e));
      return undefined;
    }
  }

  /** Like `call`, for synchronous calls that may throw (e.g. `kv.list` selector checks). */
  sync(label, f) {
    try {
      const r = f();
      return r;
    } catch (e) {
      this.step(label, canonError(e));
      return undefined;
    }
  }

  noteCommit(r) {
    if (typeof r === "object" && r !== null && r.ok === true) {
      const vs = r.versionstamp;
      if (typeof vs === "string") this.commits.push(vs);
    }
  }

  /** The finished transcript: versionstamps replaced by ranks, plus the commit-order check. */
  finish() {
    const order = this.commits.every((v, i) => i === 0 || v > this.commits[i - 1]);
    const steps = [...this.steps, ["versionstamps increase in commit order", order]];
    const seen = new Set();
    const walk = (x) => {
      if (typeof x === "string" && x.startsWith("\u0000vs:")) seen.add(x.slice(4));
      else if (Array.isArray(x)) x.forEach(walk);
      else if (x && typeof x === "object") Object.values(x).forEach(walk);
    };
    steps.forEach(([, v]) => walk(v));
    const ranks = new Map([...seen].sort().map((v, i) => [v, `vs#${i + 1}`]));
    const replace = (x) => {
      if (typeof x === "string" && x.startsWith("\u0000vs:")) return ranks.get(x.slice(4));
      if (Array.isArray(x)) return x.map(replace);
      if (x && typeof x === "object") return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, replace(v)]));
      return x;
    };
    return steps.map(([l, v]) => [l, replace(v)]);
  }
}

/** Collects every entry of a list iterator, with the cursor after each; stops on error. */
export async function drain(t, label, it, cursors = false) {
  if (!it) return;
  const out = [];
  try {
    for await (const e of it) out.push(cursors ? [canonEntry(e), it.cursor] : canonEntry(e));
    t.step(label, { entries: out, cursor: it.cursor });
  } catch (e) {
    t.step(label, { entries: out, thrown: canonError(e) });
  }
}

/** A watch stream read in the background; `next` waits for the next emission or a timeout. */
export class WatchTap {
  queue = [];
  waiters = [];
  reader;
  constructor(stream) {
    this.reader = stream.getReader();
    (async () => {
      try {
        while (true) {
          const { value, done } = await this.reader.read();
          if (done) {
            this.push("done");
            return;
          }
          this.push(["entries", value.map(canonEntry)]);
        }
      } catch (e) {
        this.push(canonError(e));
      }
    })();
  }
  push(x) {
    const w = this.waiters.shift();
    if (w) w(x);
    else this.queue.push(x);
  }
  next(timeoutMs) {
    if (this.queue.length) return Promise.resolve(this.queue.shift());
    return new Promise((resolve) => {
      let settled = false;
      const waiter = (x) => {
        if (settled) return this.queue.unshift(x);
        settled = true;
        clearTimeout(timer);
        resolve(x);
      };
      const timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        this.waiters = this.waiters.filter((w) => w !== waiter);
        resolve("no emission");
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }
  async cancel() {
    try {
      await this.reader.cancel();
    } catch { /* already failed */ }
  }
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
