// The kill -9 test's writer for the @deno/kv client (Node), the same workload and
// acknowledgement file as deno_kill.ts, whose `check` mode reads it back:
//   STAMPKV_URL=... DENO_KV_ACCESS_TOKEN=... node node_kill.mjs ACK_FILE [WRITERS]
// Writer w commits ["kill", w, i] = {w, i, pad} with sum(["kill-count", w], 1) one after
// another and appends "w i versionstamp" to ACK_FILE after each acknowledged commit.
import { appendFileSync } from "node:fs";
import { openKv } from "@deno/kv";

const [ackFile, writersArg] = process.argv.slice(2);
const kv = await openKv(process.env.STAMPKV_URL, { accessToken: process.env.DENO_KV_ACCESS_TOKEN });
const writer = async (w) => {
  for (let i = 0; ; i++) {
    const r = await kv.atomic().check({ key: ["kill", w, i], versionstamp: null })
      .set(["kill", w, i], { w, i, pad: "x".repeat(i % 500) })
      .sum(["kill-count", w], 1n).commit();
    if (!r.ok) throw new Error(`commit ${w}/${i} failed its check`);
    appendFileSync(ackFile, `${w} ${i} ${r.versionstamp}\n`);
  }
};
await Promise.all(Array.from({ length: Number(writersArg ?? "1") }, (_, w) => writer(w)));
