// node compare.mjs A B: the two dumps (canonical JSON lines) must hold the same entries.
import { readFileSync } from "node:fs";
const load = (f) => readFileSync(f, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.stringify(JSON.parse(l)));
const [a, b] = [load(process.argv[2]), load(process.argv[3])];
let diff = 0;
for (let i = 0; i < Math.max(a.length, b.length); i++) {
  if (a[i] !== b[i]) {
    if (diff++ < 10) console.error(`entry ${i} differs:\n  ${process.argv[2]}: ${a[i]}\n  ${process.argv[3]}: ${b[i]}`);
  }
}
if (diff > 0 || a.length === 0) {
  console.error(`FAIL: ${diff} of ${Math.max(a.length, b.length)} entries differ`);
  process.exit(1);
}
console.log(`ok: the ${a.length} entries are identical`);
