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

export class Server {
  readonly child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #waiting = new Map<string, (m: Json) => void>();
  #id = 0;

  constructor(readonly name: string, program: string, args: string[], env: Record<string, string>) {
    this.child = new Deno.Command(program, {
      args,
      env,
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    this.#writer = this.child.stdin.getWriter();
    this.#pump();
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
      if (text) pieces.push(text);
    }
  }

  #wait(key: string): Promise<Json> {
    return new Promise((resolve) => this.#waiting.set(key, resolve));
  }

  send(msg: Json): Promise<void> {
    return this.#writer.write(new TextEncoder().encode(JSON.stringify(msg) + "\n"));
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
    const id = ++this.#id;
    const answer = this.#wait(`id:${id}`);
    const mark = "\u0000payload\u0000";
    const text = JSON.stringify({
      jsonrpc: "2.0",
      id,
      method,
      params: { ...params, [member]: mark },
    });
    const at = text.indexOf(JSON.stringify(mark));
    const encoder = new TextEncoder();
    // Queued at once, so pipelined requests' pieces never interleave.
    await Promise.all([
      this.#writer.write(encoder.encode(text.slice(0, at + 1))),
      this.#writer.write(payload),
      this.#writer.write(encoder.encode(text.slice(at + JSON.stringify(mark).length - 1) + "\n")),
    ]);
    return await answer;
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
    await this.#writer.close().catch(() => {});
    try {
      this.child.kill("SIGKILL");
    } catch { /* gone */ }
    await this.child.status;
  }
}

/** Ours over stdio, and the reference when `reference` names its binary; initialized. */
export async function startServers(
  reference: string | null,
  clientName: string,
): Promise<Server[]> {
  Deno.mkdirSync(cache, { recursive: true });
  const servers = [
    new Server("ours", Deno.execPath(), [
      "run",
      "-A",
      cli,
      "serve",
      "--listen",
      "stdio",
      "--log-level",
      "error",
    ], {}),
  ];
  if (reference) {
    const home = Deno.makeTempDirSync({ dir: cache, prefix: "codex-home-" });
    servers.push(
      new Server("reference", reference, ["exec-server", "--listen", "stdio"], {
        CODEX_HOME: home,
      }),
    );
  }
  for (const s of servers) {
    await s.request("initialize", { clientName });
    await s.send({ jsonrpc: "2.0", method: "initialized" });
  }
  return servers;
}

/** The median. */
export const median = (xs: number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
