// A raw JSON-RPC test client that speaks newline-delimited JSON or WebSocket
// text frames and shows exactly what is on the wire. It shares no framing
// code with the package under test.

import "./libc_preload.ts";
import { CLI } from "./cli.ts";
import { concatBytes } from "../../src/util/bytes.ts";
import { ExecServer, type ExecServerOptions } from "../../src/server/exec_server.ts";
import { serveStdio } from "../../src/server/listen_stdio.ts";
import { createLogger, type Logger, nullLogger } from "../../src/log/logger.ts";

// deno-lint-ignore no-explicit-any
export type Msg = Record<string, any>;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export { CLI };
export const ROOT = new URL("../../", import.meta.url).pathname;

/** Collects log lines in memory (to assert on them, e.g. that no secret appears). */
export function memoryLogger(level: "debug" | "info" | "warn" = "debug"): {
  logger: Logger;
  lines: string[];
} {
  const lines: string[] = [];
  return { logger: createLogger({ level, write: (l) => lines.push(l) }), lines };
}

export interface WireTransport {
  sendRaw(data: string | Uint8Array): Promise<void>;
  close(): Promise<void>;
}

export class WireClient {
  #messages: Msg[] = [];
  #waiters: Array<() => void> = [];
  #nextId = 1;
  #ended = false;
  #gate: PromiseWithResolvers<void> | null = null;
  readonly ended: Promise<void>;
  #resolveEnded!: () => void;

  constructor(readonly transport: WireTransport) {
    this.ended = new Promise((r) => (this.#resolveEnded = r));
  }

  /** Every message in arrival order (never consumed). */
  readonly arrivals: Msg[] = [];

  /** Feed one decoded message (called by the transport). */
  push(msg: Msg): void {
    this.arrivals.push(msg);
    this.#messages.push(msg);
    for (const w of this.#waiters.splice(0)) w();
  }

  end(): void {
    this.#ended = true;
    this.#resolveEnded();
    for (const w of this.#waiters.splice(0)) w();
  }

  get isEnded(): boolean {
    return this.#ended;
  }

  /** Stops reading from the transport (the server sees backpressure). */
  pause(): void {
    this.#gate ??= Promise.withResolvers<void>();
  }

  /** Resumes reading. */
  resume(): void {
    this.#gate?.resolve();
    this.#gate = null;
  }

  /** Resolves when reading may continue (transports await it before each read). */
  readGate(): Promise<void> | undefined {
    return this.#gate?.promise;
  }

  /** Every message received so far (not consumed). */
  get received(): readonly Msg[] {
    return this.#messages;
  }

  send(msg: Msg | string): Promise<void> {
    return this.transport.sendRaw(typeof msg === "string" ? msg : JSON.stringify(msg));
  }

  /**
   * Waits for (and removes) the first message matching `pred`. The deadline
   * only turns a hang into a failure: it is generous, for a busy machine.
   */
  async take(pred: (m: Msg) => boolean, timeoutMs = 60_000): Promise<Msg> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.#messages.findIndex(pred);
      if (i !== -1) return this.#messages.splice(i, 1)[0]!;
      if (this.#ended) throw new Error("connection ended while waiting for a message");
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(`timed out; have: ${JSON.stringify(this.#messages).slice(0, 500)}`);
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
        timer = setTimeout(resolve, left);
      });
      clearTimeout(timer);
    }
  }

  /** Sends a request and returns the whole response message. */
  async call(method: string, params?: unknown, timeoutMs = 60_000): Promise<Msg> {
    const id = this.#nextId++;
    const msg: Msg = { id, method };
    if (params !== undefined) msg.params = params;
    await this.send(msg);
    return await this.take((m) => m.id === id && !("method" in m), timeoutMs);
  }

  /** Sends a request; returns the result or throws with the error. */
  async request(method: string, params?: unknown, timeoutMs = 60_000): Promise<Msg> {
    const res = await this.call(method, params, timeoutMs);
    if (res.error) throw new Error(`${method}: ${res.error.code} ${res.error.message}`);
    return res.result;
  }

  async initialize(params: Msg = { clientName: "test" }): Promise<Msg> {
    const result = await this.request("initialize", params);
    await this.send({ method: "initialized", params: {} });
    return result;
  }

  /** Waits for a notification `method` matching `pred`. */
  notification(method: string, pred: (p: Msg) => boolean = () => true, timeoutMs = 60_000) {
    return this.take((m) => m.method === method && pred(m.params), timeoutMs);
  }

  async close(): Promise<void> {
    await this.transport.close();
  }
}

/** Splits a byte stream into JSON lines and feeds `client`. */
async function pumpLines(readable: ReadableStream<Uint8Array>, client: WireClient) {
  let buffered = "";
  try {
    const reader = readable.getReader();
    for (;;) {
      const gate = client.readGate();
      if (gate) await gate;
      const { value: chunk, done } = await reader.read();
      if (done) break;
      buffered += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buffered.indexOf("\n")) !== -1) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (line.trim()) client.push(JSON.parse(line));
      }
    }
  } catch {
    // stream errored: treat as end
  }
  client.end();
}

export interface InProcessStdio {
  client: WireClient;
  server: ExecServer;
  served: Promise<unknown>;
  /** Closes the client's side of stdin (EOF for the server). */
  closeInput(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** An ExecServer in this process, served over in-memory stdio pipes. */
export function inProcessStdio(options: ExecServerOptions = {}): InProcessStdio {
  const server = new ExecServer({ logger: nullLogger, ...options });
  const toServer = new TransformStream<Uint8Array, Uint8Array>();
  const fromServer = new TransformStream<Uint8Array, Uint8Array>();
  const writer = toServer.writable.getWriter();
  let inputClosed = false;
  const client = new WireClient({
    sendRaw: (data) => writer.write(typeof data === "string" ? encoder.encode(data + "\n") : data),
    close: async () => {
      if (!inputClosed) {
        inputClosed = true;
        await writer.close().catch(() => {});
      }
    },
  });
  const served = serveStdio(server, { input: toServer.readable, output: fromServer.writable });
  pumpLines(fromServer.readable, client);
  return {
    client,
    server,
    served,
    closeInput: () => client.close(),
    async [Symbol.asyncDispose]() {
      await client.close();
      await served;
      await server.close();
      await client.ended;
    },
  };
}

export interface SpawnedServer {
  client: WireClient;
  child: Deno.ChildProcess;
  stderr: Promise<string>;
  status: Promise<Deno.CommandStatus>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** The command line of our server on stdio (errors logged only), for launchers that wrap it. */
export function ourStdioCommand(): string[] {
  return [Deno.execPath(), "run", "-A", CLI, "serve", "--listen", "stdio", "--log-level", "error"];
}

/** Runs `deno run -A cli.ts <args>` and speaks NDJSON on its stdio. */
export function spawnStdioServer(
  args: string[] = ["serve", "--listen", "stdio"],
  env: Record<string, string> = {},
): SpawnedServer {
  return spawnCommandServer(Deno.execPath(), ["run", "-A", CLI, ...args], env);
}

/** Runs `program args…` (a stdio exec-server) and speaks NDJSON on its stdio. */
export function spawnCommandServer(
  program: string,
  args: string[],
  env: Record<string, string> = {},
): SpawnedServer {
  const child = new Deno.Command(program, {
    args,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
    env,
  }).spawn();
  const writer = child.stdin.getWriter();
  let closed = false;
  const client = new WireClient({
    sendRaw: (data) => writer.write(typeof data === "string" ? encoder.encode(data + "\n") : data),
    close: async () => {
      if (!closed) {
        closed = true;
        await writer.close().catch(() => {});
      }
    },
  });
  pumpLines(child.stdout, client);
  const stderr = new Response(child.stderr).text();
  const status = child.status;
  return {
    client,
    child,
    stderr,
    status,
    async [Symbol.asyncDispose]() {
      await client.close();
      const timer = setTimeout(() => {
        try {
          child.kill("SIGKILL");
        } catch { /* exited */ }
      }, 10_000);
      await status;
      clearTimeout(timer);
      await stderr;
      await client.ended;
    },
  };
}

/** A WireClient over Deno's own WebSocket client (an independent implementation). */
export async function webSocketClient(
  url: string,
  protocols?: string[],
): Promise<WireClient & { ws: WebSocket }> {
  const ws = new WebSocket(url, protocols);
  ws.binaryType = "arraybuffer";
  const client = new WireClient({
    sendRaw: (data) => {
      ws.send(data);
      return Promise.resolve();
    },
    close: async () => {
      if (ws.readyState === WebSocket.CLOSED) return;
      const done = new Promise((r) => ws.addEventListener("close", r, { once: true }));
      ws.close();
      await done;
    },
  }) as WireClient & { ws: WebSocket };
  client.ws = ws;
  ws.onmessage = (e) => {
    const text = typeof e.data === "string" ? e.data : decoder.decode(new Uint8Array(e.data));
    client.push(JSON.parse(text));
  };
  ws.onclose = () => client.end();
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve();
    ws.onerror = (e) => reject(new Error(`websocket error: ${(e as ErrorEvent).message}`));
  });
  return client;
}

/** Reads the first stdout line of a child (e.g. the ws:// URL). */
export async function firstLine(
  stream: ReadableStream<Uint8Array>,
): Promise<{ line: string; rest: ReadableStreamDefaultReader<Uint8Array> }> {
  const reader = stream.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value);
  }
  return { line: text.split("\n")[0]!, rest: reader };
}

export interface ProcessRun {
  stdout: Uint8Array;
  stderr: Uint8Array;
  exitCode: number | null;
  signal: string | undefined;
  /** Every event as [seq, kind] in arrival order. */
  events: Array<[number, string]>;
}

/** The chunks joined into one array. */
export function concat(chunks: Uint8Array[]): Uint8Array {
  return concatBytes(chunks);
}

/** Collects a process's notifications until process/closed. */
export async function collectProcess(
  c: WireClient,
  processId: string,
  timeoutMs = 30_000,
): Promise<ProcessRun> {
  const out: Uint8Array[] = [];
  const err: Uint8Array[] = [];
  const events: Array<[number, string]> = [];
  let exitCode: number | null = null;
  let signal: string | undefined;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = await c.take(
      (m) =>
        m.params?.processId === processId && typeof m.method === "string" &&
        m.method.startsWith("process/"),
      deadline - Date.now(),
    );
    events.push([m.params.seq, m.method.slice(8)]);
    if (m.method === "process/output") {
      const bytes = Uint8Array.fromBase64(m.params.chunk);
      (m.params.stream === "stderr" ? err : out).push(bytes);
    } else if (m.method === "process/exited") {
      exitCode = m.params.exitCode;
      signal = m.params.signal;
    } else if (m.method === "process/closed") {
      break;
    }
  }
  return { stdout: concat(out), stderr: concat(err), exitCode, signal, events };
}

/** Starts a process (cwd defaults to /tmp, env to the test's PATH). */
export function startProcess(
  c: WireClient,
  processId: string,
  argv: string[],
  extra: Msg = {},
): Promise<Msg> {
  return c.call("process/start", {
    processId,
    argv,
    cwd: "file:///tmp",
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" },
    tty: false,
    ...extra,
  });
}

export const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);

/** True when the pid is gone or a zombie (orphans are reaped late here). */
export function isDead(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    const state = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
    return state === "Z" || state === "X";
  } catch {
    return true;
  }
}

/**
 * Polls `check` until true or `timeoutMs` passes (a deadline for a busy
 * machine: a passing check returns at once).
 */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 30_000,
  stepMs = 20,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, stepMs));
  }
  return await check();
}

/** Polls `probe` until it returns a value other than `null`; throws after `timeoutMs`. */
export async function waitFor<T>(
  probe: () => T | null | Promise<T | null>,
  timeoutMs = 30_000,
  stepMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`nothing after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

/** A port nothing listens on now (for a server that must come back on the same one). */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** Reads JSON lines from a byte stream: `next()` parses the next line; `cancel()` stops. */
export function jsonLines(stream: ReadableStream<Uint8Array>) {
  const lines = stream.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  return {
    // deno-lint-ignore no-explicit-any
    async next(): Promise<any> {
      while (!buffered.includes("\n")) {
        const { value, done } = await lines.read();
        if (done) throw new Error("stream ended");
        buffered += value;
      }
      const at = buffered.indexOf("\n");
      const line = buffered.slice(0, at);
      buffered = buffered.slice(at + 1);
      return JSON.parse(line);
    },
    cancel: () => lines.cancel(),
  };
}

/**
 * Pids of live (not zombie) processes whose environment holds `marker`
 * (give the processes a test starts a variable with a fresh value, and
 * their descendants inherit it): what outlived a test, seen from outside.
 */
export function livingWithMarker(marker: string): number[] {
  const found: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    const pid = Number(entry.name);
    try {
      if (Deno.readTextFileSync(`/proc/${pid}/environ`).includes(marker) && !isDead(pid)) {
        found.push(pid);
      }
    } catch { /* gone, or a kernel thread */ }
  }
  return found;
}

/** A fresh marker value for {@linkcode livingWithMarker}. */
export function freshMarker(): string {
  return `exec-server-test-${crypto.randomUUID()}`;
}

/** Everything a process printed (both streams, in order), read with `process/read` until it closed. */
export async function readProcessOutput(c: WireClient, processId: string): Promise<string> {
  let out = "";
  let after = 0;
  for (;;) {
    const r = await c.request("process/read", { processId, afterSeq: after, waitMs: 5000 }, 20_000);
    for (const chunk of r.chunks) {
      out += new TextDecoder().decode(Uint8Array.fromBase64(chunk.chunk));
    }
    after = r.nextSeq - 1;
    if (r.closed) return out;
  }
}

/** An `envPolicy` that hands the child the server's whole environment. */
export const INHERIT_ALL = {
  inherit: "all",
  ignoreDefaultExcludes: true,
  exclude: [],
  set: {},
  includeOnly: [],
} as const;
