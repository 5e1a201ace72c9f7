// Fixtures for sandbox tests: a workspace with Git metadata, symlinks out
// and a secret, an outside directory (not under /tmp, which workspace-write
// policies make writable), and the `sandbox` objects Codex 0.169.0 sends.

import type { Msg, WireClient } from "./wire_client.ts";
import { spawnCommandServer, type SpawnedServer, spawnStdioServer } from "./wire_client.ts";
import { referenceBin, referenceHome, scratchRoot } from "./reference.ts";

export interface SandboxFixture {
  /** The fixture's own directory (not under /tmp: see `scratchRoot`). */
  readonly base: string;
  /** The workspace root. */
  readonly ws: string;
  /** A directory outside every writable root. */
  readonly outside: string;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * ws/: .git/{config,hooks/}, sub/file ("inside"), private/p, link -> outside,
 * dangle -> outside/new.txt; outside/: s.txt ("secret").
 */
export async function sandboxFixture(): Promise<SandboxFixture> {
  const base = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "sandbox-" });
  const ws = `${base}/ws`;
  const outside = `${base}/outside`;
  await Deno.mkdir(`${ws}/.git/hooks`, { recursive: true });
  await Deno.mkdir(`${ws}/sub`);
  await Deno.mkdir(`${ws}/private`);
  await Deno.mkdir(outside);
  await Deno.writeTextFile(`${ws}/.git/config`, "[core]\n");
  await Deno.writeTextFile(`${ws}/sub/file`, "inside\n");
  await Deno.writeTextFile(`${ws}/private/p`, "private\n");
  await Deno.writeTextFile(`${outside}/s.txt`, "secret\n");
  await Deno.symlink(outside, `${ws}/link`);
  await Deno.symlink(`${outside}/new.txt`, `${ws}/dangle`);
  return {
    base,
    ws,
    outside,
    async [Symbol.asyncDispose]() {
      await Deno.remove(base, { recursive: true });
    },
  };
}

export type Entry = Msg;

/** `{type:"special", value:{kind, subpath?}}` with an access. */
export function special(kind: string, access: string, subpath?: string, skip = false): Entry {
  return {
    path: { type: "special", value: subpath ? { kind, subpath } : { kind } },
    access,
    ...(skip ? { missing_path_behavior: "skip" } : {}),
  };
}

/** An absolute-path entry. */
export function pathEntry(path: string, access: string): Entry {
  return { path: { type: "path", path: `file://${path}` }, access };
}

/** Codex's default (read-only) policy. */
export const READ_ONLY: Entry[] = [special("root", "read")];

/** Codex's `--sandbox workspace-write` policy. */
export const WORKSPACE_WRITE: Entry[] = [
  special("root", "read"),
  special("project_roots", "write"),
  special("slash_tmp", "write"),
  special("tmpdir", "write"),
  ...[".git", ".agents", ".codex", ".aws"].map((s) => special("project_roots", "read", s, true)),
];

/** The `sandbox` member as Codex sends it on process/start. */
export function sandboxContext(
  ws: string,
  entries: Entry[],
  network: "restricted" | "enabled" = "restricted",
): Msg {
  return {
    permissions: {
      type: "managed",
      file_system: { type: "restricted", entries },
      network,
    },
    cwd: `file://${ws}`,
    workspaceRoots: [`file://${ws}`],
    windowsSandboxLevel: "disabled",
    windowsSandboxProxySettingsMode: "reconcile",
    useLegacyLandlock: false,
  };
}

/** What a sandboxed run looked like to the client. */
export interface SandboxRun {
  readonly sandboxType: string;
  readonly exitCode: number | null;
  readonly sandboxDenied: boolean;
  readonly stdout: string;
  readonly stderr: string;
}

let runs = 0;

/** Starts `/bin/sh -c script` as `processId` in `ws` under `sandbox`; its `process/start` result. */
export async function startSandboxed(
  c: WireClient,
  processId: string,
  ws: string,
  script: string,
  sandbox: Msg | null,
  extra: Msg = {},
): Promise<Msg> {
  const started = await c.call("process/start", {
    processId,
    argv: ["/bin/sh", "-c", script],
    cwd: `file://${ws}`,
    env: { PATH: "/usr/local/bin:/usr/bin:/bin", LC_ALL: "C" },
    tty: false,
    sandbox,
    ...extra,
  });
  if (started.error) throw new Error(`process/start: ${JSON.stringify(started.error)}`);
  return started.result;
}

/**
 * Runs `/bin/sh -c script` in `ws` under `sandbox` and collects it. Output
 * comes from process/read (the reference's order of events around start is
 * not guaranteed).
 */
export async function runSandboxed(
  c: WireClient,
  ws: string,
  script: string,
  sandbox: Msg | null,
  extra: Msg = {},
): Promise<SandboxRun> {
  const processId = `sb${++runs}`;
  const started = await startSandboxed(c, processId, ws, script, sandbox, extra);
  const decoder = new TextDecoder();
  let stdout = "";
  let stderr = "";
  let after = 0;
  for (;;) {
    const read = await c.request(
      "process/read",
      { processId, afterSeq: after, waitMs: 5000 },
      30_000,
    );
    for (const chunk of read.chunks) {
      const text = decoder.decode(Uint8Array.fromBase64(chunk.chunk));
      if (chunk.stream === "stderr") stderr += text;
      else stdout += text;
    }
    after = read.nextSeq - 1;
    if (read.closed) {
      return {
        sandboxType: started.sandboxType,
        exitCode: read.exitCode,
        sandboxDenied: read.sandboxDenied,
        stdout,
        stderr,
      };
    }
  }
}

/** A spawned server: ours, or the reference (when installed). */
export interface NamedServer {
  readonly name: "ours" | "reference";
  readonly server: SpawnedServer;
}

/** Our server over stdio. */
export function oursServer(args: string[] = [], env: Record<string, string> = {}): NamedServer {
  return {
    name: "ours",
    server: spawnStdioServer(["serve", "--listen", "stdio", "--log-level", "error", ...args], env),
  };
}

/**
 * The reference over stdio (with `args` and `env` as {@linkcode oursServer}
 * takes them), or null (with a visible note) when it is not installed.
 */
export function referenceServer(
  args: string[] = [],
  env: Record<string, string> = {},
): NamedServer | null {
  const bin = referenceBin();
  if (!bin) {
    console.warn("note: reference exec-server not found (CODEX_REFERENCE_BIN); ours only");
    return null;
  }
  return {
    name: "reference",
    server: spawnCommandServer(bin, ["exec-server", "--listen", "stdio", ...args], {
      CODEX_HOME: referenceHome(),
      ...env,
    }),
  };
}
