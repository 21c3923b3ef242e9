// The kill -9 test's client.
//   write ACK_FILE [WRITERS]: WRITERS concurrent writers (default 1); writer w commits
//                   ["kill", w, i] = {w, i, pad} and sum(["kill-count", w], 1) one after another
//                   and appends "w i versionstamp" to ACK_FILE after each acknowledged commit,
//                   until killed.
//   check ACK_FILE: every acknowledged commit must be there exactly once, with its value and
//                   versionstamp; each writer's versionstamps strictly increase; every
//                   versionstamp is unique.
const [mode, ackFile, writersArg] = Deno.args;
const kv = await Deno.openKv(Deno.env.get("STAMPKV_URL"));
if (mode === "write") {
  const writers = Number(writersArg ?? "1");
  const writer = async (w: number) => {
    for (let i = 0; ; i++) {
      const r = await kv.atomic().check({ key: ["kill", w, i], versionstamp: null })
        .set(["kill", w, i], { w, i, pad: "x".repeat(i % 500) })
        .sum(["kill-count", w], 1n).commit();
      if (!r.ok) throw new Error(`commit ${w}/${i} failed its check`);
      Deno.writeTextFileSync(ackFile, `${w} ${i} ${r.versionstamp}\n`, { append: true });
    }
  };
  await Promise.all(Array.from({ length: writers }, (_, w) => writer(w)));
} else if (mode === "check") {
  // A line cut short by killing the writer is not an acknowledgement.
  const lines = Deno.readTextFileSync(ackFile).split("\n").filter((l) => /^\d+ \d+ [0-9a-f]{20}$/.test(l));
  if (lines.length < 10) throw new Error(`only ${lines.length} commits were acknowledged before the kill`);
  let missing = 0;
  const acked = new Map<number, number>();
  const last = new Map<number, string>();
  const seen = new Set<string>();
  for (const line of lines) {
    const [ws, is, versionstamp] = line.split(" ");
    const [w, i] = [Number(ws), Number(is)];
    acked.set(w, Math.max(acked.get(w) ?? 0, i + 1));
    const previous = last.get(w);
    if (previous !== undefined && previous >= versionstamp) {
      throw new Error(`writer ${w}: versionstamp ${versionstamp} of commit ${i} is not above ${previous}`);
    }
    last.set(w, versionstamp);
    if (seen.has(versionstamp)) throw new Error(`versionstamp ${versionstamp} was given twice`);
    seen.add(versionstamp);
    const entry = await kv.get<{ w: number; i: number }>(["kill", w, i]);
    if (entry.versionstamp !== versionstamp || entry.value?.i !== i || entry.value?.w !== w) {
      if (missing++ < 10) console.error(`acknowledged commit ${w}/${i} (${versionstamp}) is missing: ${JSON.stringify(entry)}`);
    }
  }
  if (missing > 0) throw new Error(`${missing} of ${lines.length} acknowledged commits were lost`);
  // Exactly once: a writer's counter counts its acknowledged commits, plus at most the one that
  // was in flight at the kill (applied or not, never twice).
  let inFlightApplied = 0;
  for (const [w, count] of acked) {
    const sum = (await kv.get<Deno.KvU64>(["kill-count", w])).value?.value ?? 0n;
    const next = await kv.get(["kill", w, count]);
    const expected = BigInt(count) + (next.versionstamp === null ? 0n : 1n);
    if (sum !== expected) throw new Error(`writer ${w}: counter ${sum}, expected ${expected} (${count} acknowledged)`);
    if (next.versionstamp !== null) inFlightApplied++;
    if ((await kv.get(["kill", w, count + 1])).versionstamp !== null) {
      throw new Error(`writer ${w}: commit ${count + 1} is there, two past the last acknowledged`);
    }
  }
  console.log(
    `ok: ${acked.size} writers, all ${lines.length} acknowledged commits survived kill -9 exactly once ` +
      `(${inFlightApplied} unacknowledged in-flight commits applied), versionstamps increasing`,
  );
} else {
  throw new Error("usage: deno_kill.ts write ACK_FILE [WRITERS] | check ACK_FILE");
}
kv.close();
