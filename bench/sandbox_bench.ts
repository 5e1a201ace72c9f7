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
import { cache, cpu, type Json, median, startServers } from "./helpers.ts";

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
const servers = await startServers(reference, "sandbox_bench");
const ws = Deno.makeTempDirSync({ dir: cache, prefix: "sandbox-bench-" });

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

for (const s of servers) {
  for (let i = 0; i < 10; i++) await s.exec(`warm${i}`, ws, policies["read-only"]!); // warm-up
}

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
        await s.exec(`e${++n}`, ws, sandbox);
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
