// The kill -9 test's client.
//   write ACK_FILE: commits ["kill", i] = {i, pad} one after another and appends "i versionstamp"
//                   to ACK_FILE after each acknowledged commit, until killed.
//   check ACK_FILE: every acknowledged commit must be there, with its value and versionstamp.
const [mode, ackFile] = Deno.args;
const kv = await Deno.openKv(Deno.env.get("STAMPKV_URL"));
if (mode === "write") {
  for (let i = 0; ; i++) {
    const r = await kv.atomic().check({ key: ["kill", i], versionstamp: null })
      .set(["kill", i], { i, pad: "x".repeat(i % 500) }).commit();
    if (!r.ok) throw new Error(`commit ${i} failed its check`);
    Deno.writeTextFileSync(ackFile, `${i} ${r.versionstamp}\n`, { append: true });
  }
} else if (mode === "check") {
  // A line cut short by killing the writer is not an acknowledgement.
  const lines = Deno.readTextFileSync(ackFile).split("\n").filter((l) => /^\d+ [0-9a-f]{20}$/.test(l));
  if (lines.length < 10) throw new Error(`only ${lines.length} commits were acknowledged before the kill`);
  let missing = 0;
  for (const line of lines) {
    const [i, versionstamp] = line.split(" ");
    const entry = await kv.get<{ i: number }>(["kill", Number(i)]);
    if (entry.versionstamp !== versionstamp || entry.value?.i !== Number(i)) {
      if (missing++ < 10) console.error(`acknowledged commit ${i} (${versionstamp}) is missing: ${JSON.stringify(entry)}`);
    }
  }
  if (missing > 0) throw new Error(`${missing} of ${lines.length} acknowledged commits were lost`);
  console.log(`ok: all ${lines.length} acknowledged commits survived kill -9`);
} else {
  throw new Error("usage: deno_kill.ts write|check ACK_FILE");
}
kv.close();
