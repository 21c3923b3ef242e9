// deno run --unstable-kv -A deno_canon.ts FILE: every entry of a Deno KV file as Deno reads
// it, one canonical JSON line each (server/e2e/canon.mjs).
import { canonEntry } from "../../server/e2e/canon.mjs";

const kv = await Deno.openKv(Deno.args[0]);
for await (const entry of kv.list({ prefix: [] })) console.log(canonEntry(entry));
kv.close();
