// An exec-server registered with a rendezvous relay as an environment, the
// way the relay tests set one up: its own ExecServer, a fast registry
// backoff (a refused or dropped registration is retried within 200 ms).

import { ExecServer } from "../../src/server/exec_server.ts";
import { RemoteExecutor } from "../../src/relay/executor/executor.ts";
import { nullLogger } from "../../src/log/logger.ts";

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
