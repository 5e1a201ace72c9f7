// Micro-benchmarks of the hot paths: a process output chunk becoming framed
// bytes, and a small request being parsed. Not timed tests: `deno task bench`.
import { eventNotification } from "../src/server/session.ts";
import { frameBatch, ndjsonFraming } from "../src/jsonrpc/output_sink.ts";
import { decodeMessage, encodeMessage, encodeMessageParts } from "../src/jsonrpc/message.ts";
import { OutputLog } from "../src/process/output_log.ts";

const chunk64k = crypto.getRandomValues(new Uint8Array(65536));
const chunk4k = chunk64k.slice(0, 4096);

function framed(chunk: Uint8Array): Uint8Array {
  const { method, params } = eventNotification("p1", {
    kind: "output",
    seq: 42,
    stream: "stdout",
    chunk,
  });
  const parts = encodeMessageParts({ jsonrpc: "2.0", method, params });
  return frameBatch([{ parts, length: parts.reduce((n, p) => n + p.length, 0) }], ndjsonFraming);
}

Deno.bench({
  name: "output 64 KiB chunk → framed NDJSON bytes",
  group: "output",
  baseline: true,
  fn: () => void framed(chunk64k),
});
Deno.bench({
  name: "output 4 KiB chunk → framed NDJSON bytes",
  group: "output",
  fn: () => void framed(chunk4k),
});
Deno.bench({
  name: "output 64 KiB chunk via JSON.stringify (what we avoid)",
  group: "output",
  fn: () => {
    new TextEncoder().encode(
      JSON.stringify({
        jsonrpc: "2.0",
        method: "process/output",
        params: { processId: "p1", seq: 42, stream: "stdout", chunk: chunk64k.toBase64() },
      }) + "\n",
    );
  },
});

const batch = Array.from({ length: 32 }, (_, i) => {
  const parts = encodeMessageParts({ jsonrpc: "2.0", id: i, result: { status: "ready" } });
  return { parts, length: parts.reduce((n, p) => n + p.length, 0) };
});
Deno.bench({
  name: "32 small responses → one framed buffer",
  group: "batch",
  fn: () => void frameBatch(batch, ndjsonFraming),
});

const request = JSON.stringify({
  jsonrpc: "2.0",
  id: 7,
  method: "fs/getMetadata",
  params: { path: "file:///tmp/x/y.txt" },
});
Deno.bench({
  name: "parse a small request (strict)",
  group: "parse",
  baseline: true,
  fn: () => void decodeMessage(request, "p"),
});
Deno.bench({
  name: "parse a small request (JSON.parse only)",
  group: "parse",
  fn: () => void JSON.parse(request),
});
Deno.bench({
  name: "encode a small response",
  group: "parse",
  fn: () => void encodeMessage({ jsonrpc: "2.0", id: 7, result: { isFile: true, size: 3 } }),
});

Deno.bench({
  name: "output log: append + deliver 1 000 chunks of 64 KiB",
  group: "log",
  fn: () => {
    const log = new OutputLog();
    for (let i = 0; i < 1000; i++) {
      const e = log.append({ kind: "output", stream: "stdout", chunk: chunk64k });
      log.markDelivered(e.seq);
    }
  },
});
