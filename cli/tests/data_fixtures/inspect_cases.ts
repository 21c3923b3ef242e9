// Generates inspect_cases.jsonl: values of every kind a stampkv value holds, each with what
// Deno prints for it. Run with Deno 2.9.6 (NO_COLOR=1):
//   deno run inspect_cases.ts > inspect_cases.jsonl
// Each line: {"value": <typed JSON, cli/FORMAT.md>, "deno": Deno.inspect(value),
//             "full": Deno.inspect(value, no limits)}.

const full = { depth: Infinity, iterableLimit: Infinity, maxArrayLength: Infinity, maxStringLength: Infinity, strAbbreviateSize: Infinity };

let seed = 20240601;
function random(): number {
  // xorshift32, fixed seed: the file is the same on every run.
  seed ^= seed << 13;
  seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  seed >>>= 0;
  return seed / 4294967296;
}
const pick = <T>(items: T[]): T => items[Math.floor(random() * items.length)];
const int = (n: number) => Math.floor(random() * n);

const words = [
  "", "a", "Ann", "users", "é", "naïve", "日本語", "😀", "a\"b", "a'b", "a`b'c\"", "tab\there",
  "line\nbreak", "\u0000\u0001\u001f\u007f\u0080", "back\\slash", "$x", "valid_id", "1", "42",
  "01", "-1", "__proto__", "class", "x".repeat(30), "a-b", "e\u0301", "\u200b", "ｆｕｌｌ",
];

function string(): string {
  switch (int(6)) {
    case 0: return pick(words);
    case 1: return pick(words) + pick(words) + pick(words);
    case 2: return Array.from({ length: int(6) }, () => pick(words)).join("\n");
    case 3: return "w".repeat(int(120));
    case 4: return Array.from({ length: 1 + int(4) }, () => "z".repeat(int(50))).join("\n");
    default: return String.fromCharCode(...Array.from({ length: int(12) }, () => 32 + int(400)));
  }
}

function number(): number {
  return pick([
    0, -0, 1, -1, 42, 1.5, -2.5e-7, 1e21, 1e-7, 123456789012345680000, NaN, Infinity,
    -Infinity, 2 ** 31, 2 ** 53, 0.1 + 0.2, 5e-324, Number.MAX_VALUE, int(1000), int(100000) / 7,
    -int(1e9),
  ]);
}

function primitive(): unknown {
  switch (int(9)) {
    case 0: return undefined;
    case 1: return null;
    case 2: return random() < 0.5;
    case 3: case 4: return number();
    case 5: return pick([0n, 42n, -42n, 2n ** 70n, -(2n ** 64n), BigInt(int(1e6))]);
    case 6: return pick([new Date(0), new Date(1.5e12), new Date(NaN), new Date(-1e14), new Date(8.64e15)]);
    case 7: return pick([/abc/gi, /a\/b/, new RegExp(""), /[/]/, /x/dgimsy, /\n/u]);
    default: return string();
  }
}

function value(depth: number): unknown {
  if (depth > 6 || random() < 0.4) return primitive();
  const size = pick([0, 1, 2, 3, 5, 6, 7, 8, 12, 20, 30]) + (random() < 0.03 ? 95 : 0);
  switch (int(6)) {
    case 0: {
      const kind = int(3);
      return Array.from({ length: size }, () =>
        kind === 0 ? number() : kind === 1 ? pick(words) : value(depth + 1));
    }
    case 1: {
      const object: Record<string, unknown> = {};
      for (let i = 0; i < Math.min(size, 12); i++) {
        object[random() < 0.2 ? String(int(20)) : pick(words) + (random() < 0.3 ? "" : String(i))] = value(depth + 1);
      }
      return object;
    }
    case 2: {
      const map = new Map();
      for (let i = 0; i < Math.min(size, 10); i++) map.set(value(depth + 2), value(depth + 1));
      return map;
    }
    case 3: {
      const set = new Set();
      for (let i = 0; i < Math.min(size, 10); i++) set.add(value(depth + 1));
      return set;
    }
    case 4: return Uint8Array.from({ length: size * (random() < 0.2 ? 9 : 1) }, () => int(256));
    default: return primitive();
  }
}

function base64url(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "");
}

function typed(v: unknown): unknown {
  switch (typeof v) {
    case "undefined": return { type: "undefined" };
    case "boolean": return { type: "boolean", value: v };
    case "bigint": return { type: "bigint", value: String(v) };
    case "string": return { type: "string", value: v };
    case "number":
      return { type: "number", value: Number.isFinite(v) ? v : String(v) };
  }
  if (v === null) return { type: "null", value: null };
  if (Array.isArray(v)) return { type: "json_array", value: v.map(typed) };
  if (v instanceof Uint8Array) return { type: "Uint8Array", byteLength: v.length, value: base64url(v) };
  if (v instanceof Map) return { type: "json_map", value: [...v].map(([k, x]) => [typed(k), typed(x)]) };
  if (v instanceof Set) return { type: "json_set", value: [...v].map(typed) };
  if (v instanceof Date) return { type: "Date", value: isNaN(v.getTime()) ? null : v.toISOString() };
  if (v instanceof RegExp) return { type: "RegExp", value: String(v) };
  const members: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as object)) members[k] = typed(x);
  return { type: "json_object", value: members };
}

const fixed: unknown[] = [
  [[[[[[1]]]]]], { a: { b: { c: { d: { e: { f: 1 } } } } } }, [[[[[new Map([[1, 2]])]]]]],
  [[[[[new Set([1])]]]]], [[[[[new Uint8Array([1])]]]]], [[[[[new Date(0), /x/, [], {}]]]]],
  { a: { b: { c: { d: 1 } } } }, { a: [{ b: { c: {} } }] }, new Map([[{ k: [[[[1]]]] }, 1]]),
  Array.from({ length: 101 }, (_, i) => i), Array.from({ length: 150 }, (_, i) => "s" + i),
  Uint8Array.from({ length: 300 }, (_, i) => i % 256), new Set(Array.from({ length: 120 }, (_, i) => i)),
  new Map(Array.from({ length: 105 }, (_, i) => [i, -i])), "x".repeat(10003),
  { long: "y".repeat(10001) }, ["日本語日本語", "ｆｕｌｌ", "😀😀", "a", "b", "c", "d", "e"],
  Array.from({ length: 7 }, (_, i) => 10n ** BigInt(i)), [1, "a", 2, "b", 3, "c", 4],
  { "": 1, "1": 2, "$": 3, "a b": 4, "__proto__x": 5, "\n": 6 }, [-0, 0, NaN, -Infinity],
  [new Date(NaN), new Date(-8.64e15), new Date(253402300800000), new Date(-62198755200000)],
  Array.from({ length: 26 }, (_, i) => String.fromCharCode(97 + i).repeat(i % 7 + 1)),
  Array.from({ length: 40 }, (_, i) => i * 1.5), Array.from({ length: 16 }, () => "x".repeat(20)),
];
let written = 0;
for (const v of fixed) emit(v);
function emit(v: unknown) {
  const line = JSON.stringify({ value: typed(v), deno: Deno.inspect(v), full: Deno.inspect(v, full) }, (_k, x) =>
    Object.is(x, -0) ? "__NEGATIVE_ZERO__" : x);
  console.log(line.replaceAll('"__NEGATIVE_ZERO__"', "-0"));
}
while (written < 700) {
  const v = value(0);
  // JSON.stringify writes -0 as 0: the typed number is patched to keep its sign.
  const line = JSON.stringify({ value: typed(v), deno: Deno.inspect(v), full: Deno.inspect(v, full) }, (_k, x) =>
    Object.is(x, -0) ? "__NEGATIVE_ZERO__" : x);
  // Small cases only, so that the file stays small: the limits (100 items, depth 4) are
  // reached by arrays of numbers and by nesting, which take little room.
  if (line.length > 6000) continue;
  written++;
  console.log(line.replaceAll('"__NEGATIVE_ZERO__"', "-0"));
}
