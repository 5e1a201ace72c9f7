/**
 * The floor of a newline-delimited JSON-RPC server on stdio for
 * `exec_bench.ts`'s `readfile`: it answers `initialize` and `fs/readFile`
 * only — the file read whole (`Deno.readFileSync`), one `toBase64`, the
 * reply's bytes written to stdout, nothing else (no strict JSON, limits,
 * sandbox or path checks). With `--replay` it answers each path with the
 * reply it built the first time: no work per request at all, so what the
 * benchmark then measures is its own client.
 *
 *   deno run -A ../shared/bench/exec_bench.ts --only readfile \
 *     --server "deno run -A bench/minimal_stdio_server.ts [--replay]" --vs-server "<reference> exec-server --listen stdio"
 *
 * @module
 */

const replay = Deno.args.includes("--replay");
const encoder = new TextEncoder();
const decoder = new TextDecoder();
const cache = new Map<string, Uint8Array>();

function write(bytes: Uint8Array): void {
  for (let at = 0; at < bytes.length;) at += Deno.stdout.writeSync(bytes.subarray(at));
}

/** The reply to `fs/readFile`: its head (with the id) and its body (`--replay`: built once per path). */
function readFile(id: unknown, path: string): void {
  write(encoder.encode(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"dataBase64":"`));
  let body = replay ? cache.get(path) : undefined;
  if (body === undefined) {
    body = encoder.encode(`${Deno.readFileSync(new URL(path)).toBase64()}"}}\n`);
    if (replay) cache.set(path, body);
  }
  write(body);
}

function handle(line: string): void {
  const msg = JSON.parse(line);
  if (msg.id === undefined) return;
  if (msg.method === "fs/readFile") return readFile(msg.id, msg.params.path);
  const result = msg.method === "initialize" ? { sessionId: "s" } : null;
  write(encoder.encode(JSON.stringify({ jsonrpc: "2.0", id: msg.id, result }) + "\n"));
}

let pending = "";
const buffer = new Uint8Array(64 * 1024);
for (;;) {
  const n = await Deno.stdin.read(buffer);
  if (n === null) break;
  pending += decoder.decode(buffer.subarray(0, n), { stream: true });
  for (let nl = pending.indexOf("\n"); nl !== -1; nl = pending.indexOf("\n")) {
    const line = pending.slice(0, nl);
    pending = pending.slice(nl + 1);
    if (line.trim() !== "") handle(line);
  }
}
