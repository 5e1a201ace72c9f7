// An exec-server registered with a rendezvous relay as an environment, the
// way the relay tests set one up: its own ExecServer, a fast registry
// backoff (a refused or dropped registration is retried within 200 ms) —
// or ours or the reference as a process of its own.

import { ExecServer } from "../../src/server/exec_server.ts";
import { RemoteExecutor } from "../../src/relay/executor/executor.ts";
import { nullLogger } from "../../src/log/logger.ts";
import { CLI } from "./cli.ts";
import { referenceBin } from "./reference.ts";

/**
 * Starts an executor serving a fresh `ExecServer` as `environmentId` at the
 * relay `registryUrl` (with an executor token as `bearer`). The caller
 * awaits `executor.connected`; disposing closes the executor, then the
 * server.
 */
export async function relayedServer(registryUrl: string, bearer: string, environmentId: string) {
  const server = new ExecServer({ logger: nullLogger });
  const executor = await RemoteExecutor.start({
    registry: { url: registryUrl, bearer },
    environmentId,
    server,
    logger: nullLogger,
    backoff: { initialMs: 50, maxMs: 200 },
  });
  return {
    server,
    executor,
    async [Symbol.asyncDispose]() {
      await executor.close();
      await server.close();
    },
  };
}

/** A remote executor running as its own process (see {@linkcode spawnRemoteExecutor}). */
export interface RemoteExecutorProcess extends AsyncDisposable {
  readonly child: Deno.ChildProcess;
  /** Ends it with SIGTERM (it pushes its telemetry then) and waits; once. */
  stop(): Promise<void>;
}

/**
 * Runs ours (`serve --remote`) or the pinned reference (`exec-server
 * --remote`) as `environmentId` at `registryUrl`, its registration bearer
 * written on stdin (`--registration-bearer-stdin`), with `env` (its
 * `CODEX_HOME` among them). The caller waits for it to register.
 */
export async function spawnRemoteExecutor(
  which: "ours" | "reference",
  registryUrl: string,
  environmentId: string,
  bearer: string,
  env: Record<string, string>,
): Promise<RemoteExecutorProcess> {
  const remote = [
    "--remote",
    registryUrl,
    "--environment-id",
    environmentId,
    "--registration-bearer-stdin",
  ];
  const [program, ...args] = which === "ours"
    ? [Deno.execPath(), "run", "-A", CLI, "serve", ...remote, "--log-level", "error"]
    : [referenceBin()!, "exec-server", ...remote];
  const child = new Deno.Command(program!, {
    args,
    env,
    stdin: "piped",
    stdout: "null",
    stderr: "null",
  }).spawn();
  let stopping: Promise<void> | null = null;
  const stop = () =>
    stopping ??= (async () => {
      try {
        child.kill("SIGTERM");
      } catch { /* ended */ }
      await child.status;
    })();
  try {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(bearer + "\n"));
    await w.close();
  } catch (error) {
    await stop();
    throw error;
  }
  return { child, stop, [Symbol.asyncDispose]: stop };
}
