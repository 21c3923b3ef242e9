// deno run --unstable-kv -A listen.ts FILE EXPECTED: real Deno opens the file stampkv
// exported, delivers every queued message that is due (EXPECTED, from make_db.ts) exactly
// as enqueued, dead-letters the one whose handler fails, keeps the one due in an hour, and
// commits on top with a newer versionstamp.
import { canonValue } from "../../server/e2e/canon.mjs";

const [file, expectedPath] = Deno.args;
const expected: string[] = JSON.parse(Deno.readTextFileSync(expectedPath)).sort();
const kv = await Deno.openKv(file);
const received: string[] = [];
const listening = kv.listenQueue((value) => {
  const canon = JSON.stringify(canonValue(value));
  received.push(canon);
  if (value === "dead letter") throw new Error("failing on purpose: no retry left, so it is dead-lettered");
});
const deadline = Date.now() + 40_000;
const deadLetters = async () => (await kv.getMany([["dead", 1], ["dead", "two"]])).filter((e) => e.value === "dead letter").length;
while (received.length < expected.length || (await deadLetters()) < 2) {
  if (Date.now() > deadline) {
    console.error(`timed out: received ${received.length} of ${expected.length} messages, dead letters: ${await deadLetters()}`);
    Deno.exit(1);
  }
  await new Promise((resolve) => setTimeout(resolve, 100));
}
const got = [...received].sort();
if (JSON.stringify(got) !== JSON.stringify(expected)) {
  console.error(`delivered messages differ:\n  expected ${JSON.stringify(expected)}\n  received ${JSON.stringify(got)}`);
  Deno.exit(1);
}
let newest = "";
for await (const entry of kv.list({ prefix: [] })) if (entry.versionstamp > newest) newest = entry.versionstamp;
const commit = await kv.set(["written by Deno after the export"], true);
if (!(commit.versionstamp > newest)) {
  console.error(`Deno's new versionstamp ${commit.versionstamp} is not newer than ${newest}`);
  Deno.exit(1);
}
console.log(`ok: Deno delivered the ${received.length} due messages, dead-lettered one, committed at ${commit.versionstamp}`);
kv.close();
await listening;
