// deno run -A compare_files.ts ORIGINAL EXPORTED: the file stampkv exported has exactly
// the schema of the file Deno wrote, the same kv rows (keys, values, encodings, versions,
// expiry times), the same data version, and the same queued messages — the one Deno was
// running when it died now pending at its deadline.
import { DatabaseSync } from "node:sqlite";

const [originalPath, exportedPath] = Deno.args;
const original = new DatabaseSync(originalPath, { readOnly: true });
const exported = new DatabaseSync(exportedPath, { readOnly: true });
const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
const rows = (db: DatabaseSync, sql: string) =>
  db.prepare(sql).all().map((row) =>
    JSON.stringify(Object.values(row).map((v) => (v instanceof Uint8Array ? hex(v) : v)))
  );
let failures = 0;
function same(what: string, a: string[], b: string[]) {
  const diff = Math.max(a.length, b.length);
  for (let i = 0; i < diff; i++) {
    if (a[i] !== b[i]) {
      console.error(`${what} differs at ${i}:\n  Deno:    ${a[i]}\n  stampkv: ${b[i]}`);
      failures++;
      return;
    }
  }
  console.log(`ok: ${what} (${a.length})`);
}
same(
  "schema",
  rows(original, "select type, name, tbl_name, sql from sqlite_master order by rowid"),
  rows(exported, "select type, name, tbl_name, sql from sqlite_master order by rowid"),
);
same(
  "kv rows",
  rows(original, "select k, v, v_encoding, version, expiration_ms from kv order by k"),
  rows(exported, "select k, v, v_encoding, version, expiration_ms from kv order by k"),
);
same(
  "data version and migration state",
  rows(original, "select (select version from data_version), (select version from migration_state)"),
  rows(exported, "select (select version from data_version), (select version from migration_state)"),
);
const queueOf = (db: DatabaseSync, running: boolean) =>
  rows(
    db,
    `select ts, data, backoff_schedule, keys_if_undelivered from queue` +
      (running ? ` union all select deadline, data, backoff_schedule, keys_if_undelivered from queue_running` : "") +
      ` order by 1, 2`,
  );
same("queued messages", queueOf(original, true), queueOf(exported, false));
same("running messages", [], rows(exported, "select * from queue_running"));
const running = rows(original, "select id from queue_running");
if (running.length !== 1) {
  console.error(`Deno's file should hold one running message, it holds ${running.length}`);
  failures++;
}
if (failures > 0) Deno.exit(1);
