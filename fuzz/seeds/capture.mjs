// Records real Deno KV Connect traffic as fuzz seeds (see fuzz/seeds/README.md).
//
//   node fuzz/seeds/capture.mjs <stampkv binary> <deno binary>
//
// 1. Starts `stampkv serve` on a fresh database in a temporary directory (any free port).
// 2. Starts an HTTP/2 proxy without TLS (Deno speaks HTTP/2 with prior knowledge to http://
//    URLs) that forwards every request to the server and records each request body.
// 3. Runs traffic.ts with Deno against the proxy.
// 4. Stops the server (the process it started, by its id) and dumps the database with
//    `stampkv dump`, with and without versionstamps and expiry times.
//
// It writes, replacing earlier captures (files named deno-*):
//   fuzz/corpus/kvconnect_request/deno-<endpoint>-<hash>: a selector byte (0 metadata,
//     1 snapshot_read, 2 atomic_write, 3 watch) and the request body, as the target reads them;
//   fuzz/corpus/metadata_json/deno-metadata-<hash>: the metadata exchange bodies;
//   fuzz/corpus/dump_reader/deno-dump-<variant>: the dumps.
// Identical bodies are kept once.

import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as http2 from "node:http2";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const [stampkv, deno] = process.argv.slice(2);
if (!stampkv || !deno) {
  console.error("usage: node capture.mjs <stampkv binary> <deno binary>");
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const corpus = path.join(here, "..", "corpus");
const token = `capture-token-${process.pid}-${Date.now()}`;
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "stampkv-capture-"));
const dbPath = path.join(scratch, "db");

const ENDPOINTS = { "/": 0, "/v2/snapshot_read": 1, "/v2/atomic_write": 2, "/v2/watch": 3 };
const NAMES = ["metadata", "snapshot_read", "atomic_write", "watch"];

function clearCaptures(target) {
  const dir = path.join(corpus, target);
  fs.mkdirSync(dir, { recursive: true });
  for (const name of fs.readdirSync(dir)) {
    if (name.startsWith("deno-")) fs.rmSync(path.join(dir, name));
  }
  return dir;
}
const requestDir = clearCaptures("kvconnect_request");
const metadataDir = clearCaptures("metadata_json");
const dumpDir = clearCaptures("dump_reader");

const seen = new Set();
const counts = {};
function record(urlPath, body) {
  const selector = ENDPOINTS[urlPath];
  if (selector === undefined) return;
  const hash = createHash("sha256").update(body).digest("hex").slice(0, 12);
  const name = NAMES[selector];
  if (seen.has(`${name}-${hash}`)) return;
  seen.add(`${name}-${hash}`);
  counts[name] = (counts[name] ?? 0) + 1;
  fs.writeFileSync(path.join(requestDir, `deno-${name}-${hash}`), Buffer.concat([Buffer.from([selector]), body]));
  if (selector === 0) fs.writeFileSync(path.join(metadataDir, `deno-metadata-${hash}`), body);
}

// 1. The server.
const server = spawn(stampkv, ["serve", "--path", dbPath, "--addr", "127.0.0.1:0", "--access-token", token], {
  stdio: ["ignore", "ignore", "pipe"],
});
let serverLog = "";
const upstreamAddr = await new Promise((resolve, reject) => {
  server.stderr.on("data", (chunk) => {
    serverLog += chunk;
    const found = /addr=(127\.0\.0\.1:\d+)/.exec(serverLog);
    if (found) resolve(found[1]);
  });
  server.on("exit", (code) => reject(new Error(`stampkv serve exited (${code}):\n${serverLog}`)));
});

// 2. The recording proxy.
const upstream = http2.connect(`http://${upstreamAddr}`);
const proxy = http2.createServer();
proxy.on("stream", (stream, headers) => {
  const chunks = [];
  stream.on("data", (chunk) => chunks.push(chunk));
  stream.on("end", () => {
    const body = Buffer.concat(chunks);
    record(headers[":path"], body);
    const forwarded = { ":method": headers[":method"], ":path": headers[":path"] };
    for (const [name, value] of Object.entries(headers)) {
      if (!name.startsWith(":")) forwarded[name] = value;
    }
    const request = upstream.request(forwarded);
    request.on("response", (responseHeaders) => {
      const answer = {};
      for (const [name, value] of Object.entries(responseHeaders)) {
        if (!name.startsWith(":") || name === ":status") answer[name] = value;
      }
      if (!stream.destroyed) stream.respond(answer);
      request.pipe(stream);
    });
    request.on("error", () => stream.destroy());
    stream.on("close", () => request.close());
    request.end(body);
  });
});
await new Promise((resolve) => proxy.listen(0, "127.0.0.1", resolve));
const proxyUrl = `http://127.0.0.1:${proxy.address().port}`;

// 3. Deno's traffic.
// Asynchronously: the proxy runs on this process's event loop.
const client = spawn(deno, ["run", "--unstable-kv", "-A", path.join(here, "traffic.ts")], {
  env: { ...process.env, STAMPKV_URL: proxyUrl, DENO_KV_ACCESS_TOKEN: token, DENO_NO_UPDATE_CHECK: "1" },
  stdio: "inherit",
  timeout: 120_000,
});
const run = await new Promise((resolve) => client.on("exit", (status, signal) => resolve({ status, signal })));

// 4. Stop the server, dump the database.
proxy.close();
upstream.close();
server.kill("SIGTERM");
await new Promise((resolve) => (server.exitCode !== null ? resolve() : server.on("exit", resolve)));
if (run.status !== 0) {
  console.error(`deno failed (${run.status ?? run.signal}); server log:\n${serverLog}`);
  fs.rmSync(scratch, { recursive: true, force: true });
  process.exit(1);
}
const dumps = { full: [], "no-versionstamps": ["--no-versionstamps"], "no-expiry": ["--no-expiry", "--no-versionstamps"] };
for (const [variant, flags] of Object.entries(dumps)) {
  const out = path.join(dumpDir, `deno-dump-${variant}`);
  const dump = spawnSync(stampkv, ["dump", "--path", dbPath, "-o", out, ...flags], { stdio: "inherit" });
  if (dump.status !== 0) throw new Error(`stampkv dump ${flags.join(" ")} failed`);
}
fs.rmSync(scratch, { recursive: true, force: true });
console.log("capture:", JSON.stringify(counts), `and ${Object.keys(dumps).length} dumps`);
