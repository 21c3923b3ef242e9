// deno run --unstable-kv -A make_db.ts FILE EXPECTED: writes a Deno KV database file with
// every key part and value kind, a shared and a versionstamped commit, expiring keys and
// queued messages — due in a few seconds, due in an hour, and one a listener was handling
// when the process died (it stays in `queue_running`) — then writes to EXPECTED the
// canonical values a listener must receive once they are due.
import { canonValue, sampleValues } from "../../server/e2e/canon.mjs";

const [file, expectedPath] = Deno.args;
const DELAY_MS = Number(Deno.env.get("E2E_QUEUE_DELAY_MS") ?? "8000");
const kv = await Deno.openKv(file);

const values = sampleValues();
for (const [name, value] of Object.entries(values)) await kv.set(["value", name], value);
await kv.set(["value", "u64"], new Deno.KvU64(18446744073709551615n));
await kv.set(["value", "u64-zero"], new Deno.KvU64(0n));

const keys = [
  [new Uint8Array([])],
  [new Uint8Array([0, 1, 255])],
  [""],
  ["nul \u0000 and 🦕"],
  [-(2n ** 70n)],
  [-1n],
  [0n],
  [2n ** 64n],
  [-Infinity],
  [-1.5e-300],
  [-0],
  [0],
  [0.1],
  [Infinity],
  [NaN],
  [false],
  [true],
  ["mixed", 1, 2n, true, new Uint8Array([7])],
];
for (const [i, key] of keys.entries()) await kv.set(["key", ...key], i);

const shared = await kv.atomic()
  .set(["shared", 1], "one")
  .set(["shared", 2], "two")
  .set(["versionstamped", kv.commitVersionstamp()], "vs")
  .commit();
if (!shared.ok) throw new Error("the shared commit failed");

await kv.set(["expiring", "hour"], "h", { expireIn: 3_600_000 });
await kv.set(["expiring", "day"], new Uint8Array([1, 2]), { expireIn: 86_400_000 });
await kv.set(["deleted"], 1);
await kv.delete(["deleted"]);

const due = [
  [{ kind: "object", n: 1, nested: [1n, "x"] }, {}],
  [new Uint8Array([1, 2, 3]), { backoffSchedule: [100] }],
  [12345678901234567890n, {}],
  [values.map, { keysIfUndelivered: [["unused"]] }],
  // Its handler fails on purpose: with no retry left it is written to these keys.
  ["dead letter", { backoffSchedule: [], keysIfUndelivered: [["dead", 1], ["dead", "two"]] }],
];
for (const [value, options] of due) await kv.enqueue(value, { delay: DELAY_MS, ...options });
await kv.enqueue("in an hour", { delay: 3_600_000 });
await kv.enqueue("was running", { delay: 0 });

const expected = [...due.map(([value]) => value), "was running"].map((v) => JSON.stringify(canonValue(v)));
Deno.writeTextFileSync(expectedPath, JSON.stringify(expected));

// Take "was running" (the only message due) and die while handling it.
let taken: () => void;
const running = new Promise<void>((resolve) => taken = resolve);
kv.listenQueue(() => {
  taken();
  return new Promise(() => {});
});
await running;
await new Promise((resolve) => setTimeout(resolve, 200));
Deno.exit(0);
