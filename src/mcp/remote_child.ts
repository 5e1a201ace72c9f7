/**
 * Starts an MCP stdio server through an exec-server: `process/start` with
 * `pipeStdin`, no terminal, the remote environment rules, and the client
 * library's ordered output (replayed after a reconnect, gaps filled with
 * `process/read`) as the byte streams.
 *
 * @module
 */

import type { ExecServerClient } from "../client/client.ts";
import type { McpChild } from "./child.ts";
import { remoteMcpEnv } from "./env.ts";
import type { McpServerSpec } from "./server_spec.ts";

/** Remote stderr lines longer than this are logged in pieces. */
export const REMOTE_STDERR_LINE_BYTES = 1024 * 1024;

let counter = 0;

/** Options of {@linkcode spawnRemoteMcpChild}. */
export interface RemoteMcpOptions {
  /** Working directory when the spec has none (absolute, on the exec-server). */
  readonly fallbackCwd?: string;
  /** The environment local variables are read from (default: this process's). */
  readonly hostEnv?: Readonly<Record<string, string>>;
}

/** Starts `spec` on the exec-server behind `client`. */
export async function spawnRemoteMcpChild(
  client: ExecServerClient,
  spec: McpServerSpec,
  options: RemoteMcpOptions = {},
): Promise<McpChild> {
  const cwd = spec.cwd ?? options.fallbackCwd;
  if (cwd === undefined) throw new Error("executor stdio server requires an explicit cwd");
  if (!cwd.startsWith("/") && !cwd.startsWith("file:")) {
    throw new Error(
      `remote stdio MCP server \`${spec.name}\` requires an absolute cwd, got \`${cwd}\``,
    );
  }
  const { env, envPolicy } = remoteMcpEnv(spec, options.hostEnv);
  const process = await client.spawn([spec.command, ...(spec.args ?? [])], {
    cwd,
    env,
    envPolicy,
    stdin: "piped",
    processId: `mcp-stdio-${++counter}`,
  });
  const exited = process.status.then(() => {}, () => {});
  let stopping: Promise<void> | null = null;
  return {
    label: spec.command,
    stdout: process.stdout,
    stdin: process.stdin,
    stderr: process.stderr,
    stderrLineBytes: REMOTE_STDERR_LINE_BYTES,
    exited,
    terminate() {
      stopping ??= (async () => {
        await process.terminate(2000).catch(() => {});
        await exited;
      })();
      return stopping;
    },
  };
}
