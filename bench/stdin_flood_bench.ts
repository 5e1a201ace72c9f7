// A child that never reads its stdin, flooded: 30 × 4 MiB `process/write`
// on one WebSocket, then an unrelated `fs/getMetadata`. Reports how long the
// server took to take the 30 writes off the socket and how long the unrelated
// request waited after them, ours and the reference alternated. The client
// is raw (pre-built masked frames, one socket write each): Deno's own
// WebSocket client keeps sending long after `send()` returns and would
// measure itself.
//
//   deno run -A bench/stdin_flood_bench.ts [--rounds 5] [--reference PATH]

import { median } from "./helpers.ts";

const args = Deno.args;
const rounds = Number(args[args.indexOf("--rounds") + 1] || 5) || 5;
const refAt = args.indexOf("--reference");
const reference = refAt >= 0 ? args[refAt + 1] : Deno.env.get("CODEX_REFERENCE_BIN");
const cli = new URL("../cli.ts", import.meta.url).pathname;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Starts a server on ws://127.0.0.1:0 and finds its URL in what it prints. */
async function start(kind: "ours" | "reference") {
  const child = kind === "ours"
    ? new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", cli, "serve", "--listen", "ws://127.0.0.1:0", "--log-level", "error"],
      stdout: "piped",
      stderr: "piped",
    }).spawn()
    : new Deno.Command(reference!, {
      args: ["exec-server", "--listen", "ws://127.0.0.1:0"],
      env: { CODEX_HOME: Deno.makeTempDirSync() },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  let seen = "";
  const found = Promise.withResolvers<string>();
  for (const stream of [child.stdout, child.stderr]) {
    (async () => {
      for await (const t of stream.pipeThrough(new TextDecoderStream())) {
        seen += t;
        const m = seen.match(/ws:\/\/127\.0\.0\.1:\d+/);
        if (m) found.resolve(m[0]);
      }
    })();
  }
  return { child, url: new URL(await found.promise) };
}

function frame(text: string): Uint8Array {
  const payload = encoder.encode(text);
  const n = payload.length;
  const head = n < 126 ? 2 : n < 65536 ? 4 : 10;
  const f = new Uint8Array(head + 4 + n);
  f[0] = 0x81;
  if (n < 126) f[1] = 0x80 | n;
  else if (n < 65536) f.set([0x80 | 126, n >> 8, n & 255], 1);
  else {
    f[1] = 0x80 | 127;
    new DataView(f.buffer).setBigUint64(2, BigInt(n));
  }
  const mask = [1, 2, 3, 4];
  f.set(mask, head);
  for (let i = 0; i < n; i++) f[head + 4 + i] = payload[i]! ^ mask[i & 3]!;
  return f;
}

async function round(kind: "ours" | "reference"): Promise<[number, number]> {
  const { child, url } = await start(kind);
  const conn = await Deno.connect({ hostname: url.hostname, port: Number(url.port) });
  await conn.write(encoder.encode(
    `GET / HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: ${btoa("0123456789abcdef")}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
  ));
  const buf = new Uint8Array(1 << 20);
  let rest = new Uint8Array(0);
  let head = "";
  while (!head.includes("\r\n\r\n")) {
    const n = await conn.read(buf);
    head += decoder.decode(buf.subarray(0, n!));
  }
  const answer = async (id: number) => {
    for (;;) {
      while (rest.length >= 2) {
        let len = rest[1]! & 127;
        let off = 2;
        if (len === 126) [len, off] = [(rest[2]! << 8) | rest[3]!, 4];
        else if (len === 127) {
          [len, off] = [Number(new DataView(rest.buffer, rest.byteOffset).getBigUint64(2)), 10];
        }
        if (rest.length < off + len) break;
        const m = JSON.parse(decoder.decode(rest.subarray(off, off + len)));
        rest = rest.slice(off + len);
        if (m.id === id) return m;
      }
      const n = await conn.read(buf);
      const joined = new Uint8Array(rest.length + n!);
      joined.set(rest);
      joined.set(buf.subarray(0, n!), rest.length);
      rest = joined;
    }
  };
  const send = (m: unknown) => conn.write(frame(JSON.stringify(m)));
  await send({ id: 1, method: "initialize", params: { clientName: "bench" } });
  await answer(1);
  await send({ method: "initialized", params: {} });
  await send({
    id: 2,
    method: "process/start",
    params: {
      processId: "p",
      argv: ["sleep", "60"],
      cwd: "file:///tmp",
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
      pipeStdin: true,
    },
  });
  await answer(2);
  const chunk = new Uint8Array(4 * 1024 * 1024).fill(97).toBase64();
  const frames = Array.from({ length: 30 }, (_, i) =>
    frame(JSON.stringify({
      id: 100 + i,
      method: "process/write",
      params: { processId: "p", chunk, writeId: `w${i}` },
    })));
  const meta = frame(
    JSON.stringify({ id: 3, method: "fs/getMetadata", params: { path: "file:///tmp" } }),
  );
  const t0 = performance.now();
  for (const f of frames) for (let o = 0; o < f.length;) o += await conn.write(f.subarray(o));
  const taken = performance.now();
  await conn.write(meta);
  await answer(3);
  const waited = performance.now() - taken;
  conn.close();
  child.kill("SIGKILL");
  await child.status;
  return [taken - t0, waited];
}

const kinds: Array<"ours" | "reference"> = reference ? ["ours", "reference"] : ["ours"];
const results: Record<string, { taken: number[]; waited: number[] }> = {};
for (let r = 0; r < rounds; r++) {
  for (const kind of kinds) {
    const [taken, waited] = await round(kind);
    (results[kind] ??= { taken: [], waited: [] }).taken.push(taken);
    results[kind].waited.push(waited);
  }
}
for (const [kind, { taken, waited }] of Object.entries(results)) {
  console.log(
    `${kind.padEnd(9)} 30 x 4 MiB taken in ${median(taken).toFixed(0)} ms (median of ${rounds}); ` +
      `unrelated request answered ${median(waited).toFixed(0)} ms after them`,
  );
}
