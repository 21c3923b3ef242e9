// Prints every entry the server holds, one canonical JSON line each (see canon.mjs).
import { canonEntry } from "./canon.mjs";
const kv = await Deno.openKv(Deno.env.get("STAMPKV_URL"));
for await (const entry of kv.list({ prefix: [] })) console.log(canonEntry(entry));
kv.close();
