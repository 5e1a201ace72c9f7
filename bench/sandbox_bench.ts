// Sandboxed exec round trip, side by side: `process/start` of `/bin/true`
// under Codex's read-only and workspace-write policies until `process/closed`,
// on our server and on the reference, alternating rounds (A, B, B, A, …).
//
//   deno run -A bench/sandbox_bench.ts [--reference PATH] [--execs 200] [--rounds 3]
//
// Reports per exec: p50 wall time, the server's own CPU, and the server's
// CPU plus its reaped children's (bubblewrap and the sandbox helper run as
// children: that is where a sandbox costs). Not a test: numbers only.

import { parseArgs } from "node:util";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    reference: { type: "string" },
    execs: { type: "string", default: "200" },
    rounds: { type: "string", default: "3" },
  },
});
const execs = Number(values.execs);
const rounds = Number(values.rounds);
const reference = values.reference ?? Deno.env.get("CODEX_REFERENCE_BIN") ?? null;
const cli = new URL("../cli.ts", import.meta.url).pathname;
const cache = new URL("../.cache/", import.meta.url).pathname;
Deno.mkdirSync(cache, { recursive: true });
const ws = Deno.makeTempDirSync({ dir: cache, prefix: "sandbox-bench-" });

type Json = Record<string, unknown>;

/** CPU seconds of `pid`: [self, self + reaped children]. */
function cpu(pid: number): [number, number] {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ").map(Number);
  const self = (f[11]! + f[12]!) / 100;
  return [self, self + (f[13]! + f[14]!) / 100];
}

class Server {
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
    let buffered = "";
    for await (const text of this.child.stdout.pipeThrough(new TextDecoderStream())) {
      buffered += text;
      let nl;
      while ((nl = buffered.indexOf("\n")) >= 0) {
        const msg = JSON.parse(buffered.slice(0, nl)) as Json;
        buffered = buffered.slice(nl + 1);
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
    }
  }

  #wait(key: string): Promise<Json> {
    return new Promise((resolve) => this.#waiting.set(key, resolve));
  }

  send(msg: Json): Promise<void> {
    return this.#writer.write(new TextEncoder().encode(JSON.stringify(msg) + "\n"));
  }

  async request(method: string, params: Json): Promise<Json> {
    const id = ++this.#id;
    const answer = this.#wait(`id:${id}`);
    await this.send({ jsonrpc: "2.0", id, method, params });
    return await answer;
  }

  async exec(processId: string, sandbox: Json): Promise<void> {
    const closed = this.#wait(`closed:${processId}`);
    const started = await this.request("process/start", {
      processId,
      argv: ["/bin/true"],
      cwd: `file://${ws}`,
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
      sandbox,
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

const special = (kind: string, access: string, subpath?: string) => ({
  path: { type: "special", value: subpath ? { kind, subpath } : { kind } },
  access,
});
const policy = (entries: Json[]) => ({
  permissions: {
    type: "managed",
    file_system: { type: "restricted", entries },
    network: "restricted",
  },
  cwd: `file://${ws}`,
  workspaceRoots: [`file://${ws}`],
  windowsSandboxLevel: "disabled",
});
const policies: Record<string, Json> = {
  "read-only": policy([special("root", "read")]),
  "workspace-write": policy([
    special("root", "read"),
    special("project_roots", "write"),
    special("slash_tmp", "write"),
    ...[".git", ".agents", ".codex", ".aws"].map((s) => special("project_roots", "read", s)),
  ]),
};

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
    new Server("reference", reference, ["exec-server", "--listen", "stdio"], { CODEX_HOME: home }),
  );
}
for (const s of servers) {
  await s.request("initialize", { clientName: "sandbox_bench" });
  await s.send({ jsonrpc: "2.0", method: "initialized" });
  for (let i = 0; i < 10; i++) await s.exec(`warm${i}`, policies["read-only"]!); // warm-up
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
let n = 0;
for (const [label, sandbox] of Object.entries(policies)) {
  const results = new Map<string, { p50: number[]; self: number[]; total: number[] }>();
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? servers : [...servers].reverse();
    for (const s of order) {
      const times: number[] = [];
      const [self0, total0] = cpu(s.child.pid);
      for (let i = 0; i < execs; i++) {
        const t = performance.now();
        await s.exec(`e${++n}`, sandbox);
        times.push(performance.now() - t);
      }
      const [self1, total1] = cpu(s.child.pid);
      const r = results.get(s.name) ?? { p50: [], self: [], total: [] };
      r.p50.push(median(times));
      r.self.push(((self1 - self0) * 1000) / execs);
      r.total.push(((total1 - total0) * 1000) / execs);
      results.set(s.name, r);
    }
  }
  for (const [name, r] of results) {
    console.log(
      `${label} ${name}: exec_rtt_p50 ${median(r.p50).toFixed(2)} ms, ` +
        `server_cpu ${median(r.self).toFixed(2)} ms/exec, ` +
        `server+children_cpu ${median(r.total).toFixed(2)} ms/exec`,
    );
  }
  const a = results.get("ours");
  const b = results.get("reference");
  if (a && b) {
    console.log(
      `${label} ours/reference: wall ${(median(a.p50) / median(b.p50)).toFixed(2)}×, ` +
        `server_cpu ${(median(a.self) / median(b.self)).toFixed(2)}×, ` +
        `server+children_cpu ${(median(a.total) / median(b.total)).toFixed(2)}×`,
    );
  }
}
for (const s of servers) await s.close();
Deno.removeSync(ws, { recursive: true });
