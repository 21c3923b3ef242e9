// A canonical JSON form of Deno KV keys and values, written the same way by Deno, by
// Node (@deno/kv) and by the Rust example `dump_json`, so that their views can be compared.
// Numbers are compared by their IEEE-754 bits (NaN as "NaN"), bytes in hex.

const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

function f64(n) {
  if (Number.isNaN(n)) return "NaN";
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, n);
  return hex(new Uint8Array(view.buffer));
}

export function canonKeyPart(part) {
  if (part instanceof Uint8Array) return ["bytes", hex(part)];
  switch (typeof part) {
    case "string": return ["string", part];
    case "number": return ["number", f64(part)];
    case "bigint": return ["bigint", part.toString()];
    case "boolean": return ["bool", part];
  }
  throw new Error(`not a key part: ${String(part)}`);
}

export function canonValue(v) {
  if (v === undefined) return ["undefined"];
  if (v === null) return ["null"];
  switch (typeof v) {
    case "boolean": return ["bool", v];
    case "number": return ["number", f64(v)];
    case "bigint": return ["bigint", v.toString()];
    case "string": return ["string", v];
  }
  if (/KvU64$/.test(v?.constructor?.name ?? "") && typeof v.value === "bigint") return ["u64", v.value.toString()];
  if (v instanceof Uint8Array) return ["bytes", hex(v)];
  if (Array.isArray(v)) return ["array", v.map(canonValue)];
  if (v instanceof Map) return ["map", [...v].map(([k, x]) => [canonValue(k), canonValue(x)])];
  if (v instanceof Set) return ["set", [...v].map(canonValue)];
  if (v instanceof Date) return ["date", f64(v.getTime())];
  if (v instanceof RegExp) return ["regexp", v.source, v.flags];
  if (typeof v === "object") return ["object", Object.entries(v).map(([k, x]) => [k, canonValue(x)])];
  throw new Error(`value of unknown kind: ${String(v)}`);
}

export function canonEntry(entry) {
  return JSON.stringify({
    key: entry.key.map(canonKeyPart),
    value: canonValue(entry.value),
    versionstamp: entry.versionstamp,
  });
}

// The values of every structured-clone kind the tests write (and read back identically).
export function sampleValues() {
  const date = new Date(Date.UTC(2024, 1, 29, 12, 34, 56, 789));
  const nested = { a: [1, "two", 3n, null, undefined, true], m: new Map([["k", new Set([1, 2])]]) };
  return {
    undefined: undefined,
    null: null,
    true: true,
    false: false,
    int: 42,
    float: -1.5e-300,
    negzero: -0,
    nan: NaN,
    inf: -Infinity,
    bigint: 123456789012345678901234567890n,
    negbigint: -42n,
    string: "héllo \u0000 wörld 🦕",
    empty: "",
    bytes: new Uint8Array([0, 1, 254, 255]),
    array: [1, [2, [3]], "x"],
    object: { z: 1, a: "b", nested },
    map: new Map([[1, "one"], ["two", 2], [3n, [3]]]),
    set: new Set(["a", 1, 2n]),
    date,
    invalidDate: new Date(NaN),
    regexp: /ab+c\/d/gi,
  };
}
