/**
 * The server with its JIT already warm: it serves one round of the
 * `scale_bench.ts conns` workload (N WebSockets × 20 `fs/getMetadata`) to a
 * client inside this process, waits for the compiler threads to settle, and
 * only then prints its URL. Only for measuring how much of a fresh server's
 * CPU per request is warm-up (`scale_bench.ts --only conns --ours "deno run
 * -A bench/warmed_ws_server.ts"`) — a real server pays it once, in its first
 * seconds.
 *
 * @module
 */

import { ExecServer, listenWebSocket } from "../mod.ts";
import { createLogger } from "../src/log/logger.ts";

const CONNECTIONS = Number(Deno.env.get("WARM_CONNECTIONS") ?? 100);
const REQUESTS = 20;

const server = new ExecServer({ logger: createLogger({ level: "error" }) });
const listener = listenWebSocket(server, { hostname: "127.0.0.1", port: 0 });
const path = `file://${Deno.makeTempFileSync()}`;

async function client(): Promise<void> {
  const ws = new WebSocket(listener.url);
  const waiting = new Map<number, () => void>();
  ws.onmessage = (event) => waiting.get(JSON.parse(event.data).id)?.();
  let id = 0;
  const request = (method: string, params: unknown) =>
    new Promise<void>((resolve) => {
      waiting.set(++id, resolve);
      ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    });
  await new Promise((resolve) => (ws.onopen = resolve));
  await request("initialize", { clientName: "warm-up" });
  ws.send(JSON.stringify({ jsonrpc: "2.0", method: "initialized", params: {} }));
  for (let i = 0; i < REQUESTS; i++) await request("fs/getMetadata", { path });
  const closed = new Promise((resolve) => (ws.onclose = resolve));
  ws.close();
  await closed;
}

await Promise.all(Array.from({ length: CONNECTIONS }, client));
// Background compilation and collection of the warm-up settle first.
await new Promise((resolve) => setTimeout(resolve, 1000));
console.log(listener.url);
Deno.addSignalListener("SIGTERM", async () => {
  await listener.close();
  await server.close();
  Deno.exit(0);
});
