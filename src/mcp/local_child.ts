/**
 * Starts an MCP stdio server on this machine: the environment is exactly
 * the one built for it (nothing else leaks in), it leads its own process
 * group, and stopping it sends SIGTERM to the group, then SIGKILL after a
 * grace period.
 *
 * @module
 */

import { signalGroup } from "../process/signals.ts";
import { settleWithin } from "../util/async.ts";
import type { McpChild } from "./child.ts";
import { localMcpEnv } from "./env.ts";
import type { McpServerSpec } from "./server_spec.ts";

/** Stderr lines longer than this are logged in pieces. */
export const LOCAL_STDERR_LINE_BYTES = 16 * 1024;

/** Options of {@linkcode spawnLocalMcpChild}. */
export interface LocalMcpOptions {
  /** Working directory when the spec has none. */
  readonly fallbackCwd?: string;
  /** SIGTERM → SIGKILL grace. Default 2 000 ms. */
  readonly termGraceMs?: number;
  /** The environment variables are taken from (default: this process's). */
  readonly hostEnv?: Readonly<Record<string, string>>;
}

/** Starts `spec` locally. */
export function spawnLocalMcpChild(spec: McpServerSpec, options: LocalMcpOptions = {}): McpChild {
  const env = localMcpEnv(spec, options.hostEnv);
  const cwd = spec.cwd ?? options.fallbackCwd;
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(spec.command, {
      args: [...(spec.args ?? [])],
      env,
      clearEnv: true,
      ...(cwd !== undefined ? { cwd } : {}),
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
      detached: true,
    }).spawn();
  } catch (error) {
    throw new Error(
      `failed to start MCP server \`${spec.name}\` (${spec.command}): ${(error as Error).message}`,
      { cause: error },
    );
  }
  const exited = child.status.then(() => {});
  const grace = options.termGraceMs ?? 2000;
  let stopping: Promise<void> | null = null;
  return {
    label: spec.command,
    stdout: child.stdout,
    stdin: child.stdin,
    stderr: child.stderr,
    stderrLineBytes: LOCAL_STDERR_LINE_BYTES,
    exited,
    terminate() {
      stopping ??= (async () => {
        if (signalGroup(child.pid, "SIGTERM") && !(await settleWithin(exited, grace))) {
          signalGroup(child.pid, "SIGKILL");
        }
        // The leader may have exited while others in its group linger.
        signalGroup(child.pid, "SIGKILL");
        await exited;
      })();
      return stopping;
    },
  };
}
