// Shared plumbing of the side-by-side benchmarks: a stdio exec-server spoken
// to with raw JSON-RPC lines (an independent client: no project code), its
// CPU from /proc, and the servers to compare.

/** A JSON object. */
export type Json = Record<string, unknown>;

const cli = new URL("../cli.ts", import.meta.url).pathname;
/** Scratch space outside /tmp (sandbox policies make /tmp writable). */
export const cache = new URL("../.cache/", import.meta.url).pathname;

/** CPU seconds of `pid`: [self, self + reaped children]. */
export function cpu(pid: number): [number, number] {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ").map(Number);
  const self = (f[11]! + f[12]!) / 100;
  return [self, self + (f[13]! + f[14]!) / 100];
}

/** How a bench talks to a server: its stdio, or a WebSocket it listens on. */
export type Transport = "stdio" | "ws";

/** Writes all of `bytes` to `conn`. */
async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  for (let o = 0; o < bytes.length;) o += await conn.write(bytes.subarray(o));
}

/**
 * Largest frame the WebSocket client sends: a message is one frame up to
 * 16 MiB, the most both servers take (as tungstenite, Codex's client,
 * sends them), and only a larger one is fragmented.
 */
const WS_FRAME = 16 * 1024 * 1024;

/**
 * A client frame header: masked with the all-zero key (legal, and the
 * payload then goes out as it is — the client's cost is the header).
 */
function wsHeader(opcode: number, fin: boolean, n: number): Uint8Array {
  const size = n < 126 ? 2 : n < 65536 ? 4 : 10;
  const h = new Uint8Array(size + 4);
  h[0] = (fin ? 0x80 : 0) | opcode;
  if (n < 126) h[1] = 0x80 | n;
  else if (n < 65536) h.set([0x80 | 126, n >> 8, n & 255], 1);
  else {
    h[1] = 0x80 | 127;
    new DataView(h.buffer).setBigUint64(2, BigInt(n));
  }
  return h;
}

export class Server {
  readonly child: Deno.ChildProcess;
  readonly #waiting = new Map<string, (m: Json) => void>();
  #id = 0;
  /** Writes one message given in pieces (in call order, never interleaved). */
  #write!: (pieces: Uint8Array[]) => Promise<void>;
  readonly ready: Promise<void>;
  #conn: Deno.Conn | null = null;
  #stdin: WritableStreamDefaultWriter<Uint8Array> | null = null;

  constructor(
    readonly name: string,
    program: string,
    args: string[],
    env: Record<string, string>,
    readonly transport: Transport = "stdio",
  ) {
    this.child = new Deno.Command(program, {
      args,
      env,
      stdin: transport === "stdio" ? "piped" : "null",
      stdout: "piped",
      stderr: transport === "stdio" ? "null" : "piped",
    }).spawn();
    this.ready = transport === "stdio" ? this.#startStdio() : this.#startWs();
  }

  #startStdio(): Promise<void> {
    const writer = this.#stdin = this.child.stdin.getWriter();
    const newline = new Uint8Array([10]);
    this.#write = (pieces) =>
      Promise.all([...pieces, newline].map((p) => writer.write(p))).then(() => {});
    this.#pump();
    return Promise.resolve();
  }

  async #startWs(): Promise<void> {
    // The listening URL, from whatever the server prints.
    let seen = "";
    const found = Promise.withResolvers<URL>();
    for (const stream of [this.child.stdout, this.child.stderr]) {
      (async () => {
        for await (const t of stream.pipeThrough(new TextDecoderStream())) {
          seen += t;
          const m = seen.match(/ws:\/\/127\.0\.0\.1:\d+/);
          if (m) found.resolve(new URL(m[0]));
        }
      })();
    }
    const url = await found.promise;
    const conn = this.#conn = await Deno.connect({
      hostname: url.hostname,
      port: Number(url.port),
    });
    // A small request right after a flood goes out at once, not after the
    // server's delayed acknowledgement of the flood's tail (Nagle).
    conn.setNoDelay(true);
    await writeAll(
      conn,
      new TextEncoder().encode(
        `GET / HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${btoa("0123456789abcdef")}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      ),
    );
    let chain = Promise.resolve();
    this.#write = (pieces) => {
      // Frames of at most WS_FRAME bytes, cut across the pieces.
      const total = pieces.reduce((n, p) => n + p.length, 0);
      const writes: Uint8Array[] = [];
      let piece = 0;
      let at = 0;
      for (let sent = 0, first = true; first || sent < total; first = false) {
        const n = Math.min(WS_FRAME, total - sent);
        writes.push(wsHeader(first ? 1 : 0, sent + n === total, n));
        for (let left = n; left > 0;) {
          const p = pieces[piece]!;
          const take = Math.min(left, p.length - at);
          writes.push(p.subarray(at, at + take));
          left -= take;
          at += take;
          if (at === p.length) [piece, at] = [piece + 1, 0];
        }
        sent += n;
      }
      const done = chain.then(async () => {
        for (const w of writes) await writeAll(conn, w);
      });
      chain = done.catch(() => {});
      return done;
    };
    const buf = new Uint8Array(1 << 20);
    let rest = new Uint8Array(0);
    // The 101 answer.
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) throw new Error(`${this.name}: closed during the handshake`);
      const joined = new Uint8Array(rest.length + n);
      joined.set(rest);
      joined.set(buf.subarray(0, n), rest.length);
      rest = joined;
      const end = new TextDecoder().decode(rest).indexOf("\r\n\r\n");
      if (end >= 0) {
        rest = rest.slice(end + 4);
        break;
      }
    }
    (async () => {
      const decoder = new TextDecoder();
      let message: Uint8Array[] = [];
      for (;;) {
        while (rest.length >= 2) {
          let len = rest[1]! & 127;
          let off = 2;
          if (len === 126) [len, off] = [(rest[2]! << 8) | rest[3]!, 4];
          else if (len === 127) {
            [len, off] = [Number(new DataView(rest.buffer, rest.byteOffset).getBigUint64(2)), 10];
          }
          if (rest.length < off + len) break;
          const opcode = rest[0]! & 15;
          if (opcode <= 2) {
            message.push(rest.slice(off, off + len));
            if (rest[0]! & 0x80) {
              this.#dispatch(decoder.decode(concat(message)));
              message = [];
            }
          }
          rest = rest.slice(off + len);
        }
        let n: number | null;
        try {
          n = await conn.read(buf);
        } catch {
          return;
        }
        if (n === null) return;
        const joined = new Uint8Array(rest.length + n);
        joined.set(rest);
        joined.set(buf.subarray(0, n), rest.length);
        rest = joined;
      }
    })();
  }

  #dispatch(line: string): void {
    const msg = JSON.parse(line) as Json;
    const key = "id" in msg && !("method" in msg)
      ? `id:${msg.id}`
      : msg.method === "process/closed"
      ? `closed:${(msg.params as Json).processId}`
      : null;
    if (key) {
      this.#waiting.get(key)?.(msg);
      this.#waiting.delete(key);
    }
  }

  async #pump() {
    // Pieces of an unfinished line, joined once its newline arrives: a long
    // line (a 64 MiB file's base64) costs linear time.
    let pieces: string[] = [];
    for await (const chunk of this.child.stdout.pipeThrough(new TextDecoderStream())) {
      let text = chunk;
      let nl;
      while ((nl = text.indexOf("\n")) >= 0) {
        pieces.push(text.slice(0, nl));
        text = text.slice(nl + 1);
        const line = pieces.join("");
        pieces = [];
        this.#dispatch(line);
      }
      if (text) pieces.push(text);
    }
  }

  #wait(key: string): Promise<Json> {
    return new Promise((resolve) => this.#waiting.set(key, resolve));
  }

  send(msg: Json): Promise<void> {
    return this.#write([new TextEncoder().encode(JSON.stringify(msg))]);
  }

  /**
   * A request whose `params[member]` is `payload` (ASCII bytes of a JSON
   * string's contents, e.g. base64, encoded once by the caller): the
   * message is written in three pieces, so the client's cost per request
   * is the envelope, not the payload — what a fast harness pays.
   */
  async requestWithPayload(
    method: string,
    params: Json,
    member: string,
    payload: Uint8Array,
  ): Promise<Json> {
    return await (await this.sendWithPayload(method, params, member, payload)).answer;
  }

  /**
   * Sends what {@linkcode requestWithPayload} sends; resolves once it is
   * written (taken by the pipe or socket), with the answer to come (wrapped:
   * a promise resolved with a promise would wait for it).
   */
  async sendWithPayload(
    method: string,
    params: Json,
    member: string,
    payload: Uint8Array,
  ): Promise<{ answer: Promise<Json> }> {
    const id = ++this.#id;
    const answer = this.#wait(`id:${id}`);
    const mark = JSON.stringify("\u0000payload\u0000");
    const text = JSON.stringify({
      jsonrpc: "2.0",
      id,
      method,
      params: { ...params, [member]: JSON.parse(mark) },
    });
    const at = text.indexOf(mark);
    const encoder = new TextEncoder();
    await this.#write([
      encoder.encode(text.slice(0, at + 1)),
      payload,
      encoder.encode(text.slice(at + mark.length - 1)),
    ]);
    return { answer };
  }

  async request(method: string, params: Json): Promise<Json> {
    const id = ++this.#id;
    const answer = this.#wait(`id:${id}`);
    await this.send({ jsonrpc: "2.0", id, method, params });
    return await answer;
  }

  /** Runs `argv` in `cwd` (optionally sandboxed) until `process/closed`. */
  async exec(processId: string, cwd: string, sandbox?: Json, argv = ["/bin/true"]): Promise<void> {
    const closed = this.#wait(`closed:${processId}`);
    const started = await this.request("process/start", {
      processId,
      argv,
      cwd: `file://${cwd}`,
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
      ...(sandbox ? { sandbox } : {}),
    });
    if ("error" in started) throw new Error(`${this.name}: ${JSON.stringify(started.error)}`);
    await closed;
  }

  async close() {
    await this.#stdin?.close().catch(() => {});
    this.#conn?.close();
    try {
      // A profiled server is stopped by a signal it exits on, so the profile is written.
      this.child.kill(profileFlags().length > 0 ? "SIGTERM" : "SIGKILL");
    } catch { /* gone */ }
    await this.child.status;
  }
}

/**
 * Extra `deno run` flags for our server from `BENCH_OURS_DENO_FLAGS`, e.g.
 * `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile it under a bench.
 */
function profileFlags(): string[] {
  return Deno.env.get("BENCH_OURS_DENO_FLAGS")?.split(" ").filter(Boolean) ?? [];
}

/** Ours, and the reference when `reference` names its binary, over `transport`; initialized. */
export async function startServers(
  reference: string | null,
  clientName: string,
  transport: Transport = "stdio",
): Promise<Server[]> {
  Deno.mkdirSync(cache, { recursive: true });
  const listen = transport === "stdio" ? "stdio" : "ws://127.0.0.1:0";
  const servers = [
    new Server(
      "ours",
      Deno.execPath(),
      ["run", "-A", ...profileFlags(), cli, "serve", "--listen", listen, "--log-level", "error"],
      {},
      transport,
    ),
  ];
  if (reference) {
    const home = Deno.makeTempDirSync({ dir: cache, prefix: "codex-home-" });
    servers.push(
      new Server("reference", reference, ["exec-server", "--listen", listen], {
        CODEX_HOME: home,
      }, transport),
    );
  }
  for (const s of servers) {
    await s.ready;
    await s.request("initialize", { clientName });
    await s.send({ jsonrpc: "2.0", method: "initialized" });
  }
  return servers;
}

/** The bytes of `parts`, joined. */
function concat(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** The value after `--name` on the command line, if any. */
export function benchFlag(name: string): string | undefined {
  const at = Deno.args.indexOf(`--${name}`);
  return at >= 0 ? Deno.args[at + 1] : undefined;
}

/** `--rounds` (default 5), `--reference` (or CODEX_REFERENCE_BIN), `--transport` (default both). */
export function benchOptions(): {
  rounds: number;
  reference: string | null;
  transports: Transport[];
} {
  return {
    rounds: Number(benchFlag("rounds") ?? 5) || 5,
    reference: benchFlag("reference") ?? Deno.env.get("CODEX_REFERENCE_BIN") ?? null,
    transports: (benchFlag("transport")?.split(",") ?? ["stdio", "ws"]) as Transport[],
  };
}

/** The median. */
export const median = (xs: number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
