// The floor under scale_bench's `conns` and `procs` figures: the least a Deno
// program can do and still serve those workloads — Deno's own WebSocket
// (`Deno.serve` + `Deno.upgradeWebSocket`, framing in Rust), `JSON.parse` /
// `JSON.stringify`, and for each request only what the bench checks:
// `initialize`, `fs/getMetadata` (one stat), `process/start` (spawned through
// `setsid` as the server does, stdout read to the end, each chunk sent as a
// base64 `process/output`, then `process/exited` and `process/closed`).
// Nothing else: no output log, no ordering, no limits, no validation, no
// orphan guard, no sessions. Numbers only, not a server to use.
//
//   deno run -A ../shared/bench/scale_bench.ts --only conns,procs \
//     --ours "deno run -A --quiet bench/builtin_ws_server.ts"
//
// Compare its rows with the server's (`--ours` left out) and the reference's:
// what the server costs above this line is ours to remove; what this costs
// above the reference is the runtime's.

type Params = Record<string, unknown>;

function answer(ws: WebSocket, id: unknown, result: unknown): void {
  ws.send(JSON.stringify({ jsonrpc: "2.0", id, result }));
}

function notify(ws: WebSocket, method: string, params: Params): void {
  ws.send(JSON.stringify({ jsonrpc: "2.0", method, params }));
}

async function getMetadata(ws: WebSocket, id: unknown, params: Params): Promise<void> {
  const info = await Deno.stat(new URL(String(params.path)));
  answer(ws, id, {
    isDirectory: info.isDirectory,
    isFile: info.isFile,
    isSymlink: info.isSymlink,
    createdAtMs: info.birthtime?.getTime() ?? 0,
    modifiedAtMs: info.mtime?.getTime() ?? 0,
  });
}

async function startProcess(ws: WebSocket, id: unknown, params: Params): Promise<void> {
  const processId = String(params.processId);
  const argv = params.argv as string[];
  const child = new Deno.Command("/usr/bin/setsid", {
    args: argv,
    cwd: new URL(String(params.cwd)),
    env: params.env as Record<string, string>,
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  answer(ws, id, { processId });
  let seq = 0;
  const pump = async (stream: ReadableStream<Uint8Array>, name: string) => {
    for await (const chunk of stream) {
      notify(ws, "process/output", {
        processId,
        seq: ++seq,
        stream: name,
        chunk: chunk.toBase64(),
      });
    }
  };
  const [status] = await Promise.all([
    child.status,
    pump(child.stdout, "stdout"),
    pump(child.stderr, "stderr"),
  ]);
  notify(ws, "process/exited", { processId, seq: ++seq, exitCode: status.code });
  notify(ws, "process/closed", { processId, seq: ++seq });
}

function serveSocket(ws: WebSocket): void {
  ws.onmessage = (event) => {
    const message = JSON.parse(event.data as string);
    const { id, method, params } = message;
    if (id === undefined) return;
    const work = method === "initialize"
      ? Promise.resolve(answer(ws, id, { sessionId: crypto.randomUUID() }))
      : method === "fs/getMetadata"
      ? getMetadata(ws, id, params)
      : method === "process/start"
      ? startProcess(ws, id, params)
      : Promise.reject(new Error(`unknown method ${method}`));
    work.catch((error) => {
      if (ws.readyState !== WebSocket.OPEN) return;
      ws.send(
        JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32603, message: String(error) } }),
      );
    });
  };
}

Deno.serve({
  hostname: "127.0.0.1",
  port: Deno.args.includes("--port") ? Number(Deno.args[Deno.args.indexOf("--port") + 1]) : 0,
  onListen: ({ port }) => console.log(`ws://127.0.0.1:${port}`),
}, (request) => {
  const { socket, response } = Deno.upgradeWebSocket(request);
  serveSocket(socket);
  return response;
});
