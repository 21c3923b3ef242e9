// deno run --unstable-kv -A make_big.ts FILE [N]: a Deno KV file with N entries (default 1
// million) for measuring `import-deno`, `dump` and `load`: keys ["user", i] with a small
// object each (about 60 bytes of V8), written 1000 per commit, every tenth expiring in a
// day, and 1000 queued messages due in a day. Not committed: generate it when measuring.
const [file, count = "1000000"] = Deno.args;
const n = Number(count);
const kv = await Deno.openKv(file);
const day = 86_400_000;
for (let start = 0; start < n; start += 1000) {
  const op = kv.atomic();
  for (let i = start; i < Math.min(n, start + 1000); i++) {
    const value = { id: i, name: `user-${i}`, active: i % 2 === 0, score: i * 1.5 };
    op.set(["user", i], value, i % 10 === 0 ? { expireIn: day } : undefined);
  }
  const result = await op.commit();
  if (!result.ok) throw new Error("commit failed");
}
for (let i = 0; i < 1000; i++) await kv.enqueue({ job: i }, { delay: day });
kv.close();
