// The workload the telemetry tests count (its metrics are exact): a
// handshake, a process exiting 0 ("ok") and one exiting 3 ("bad"), both
// waited for until closed, an unknown method and a refused fs/readFile.

import { assert, assertEquals } from "./assert.ts";
import { startProcess, type WireClient } from "./wire_client.ts";

/** Runs the workload on an exec-server connection that has not initialized yet. */
export async function metricsWorkload(client: WireClient): Promise<void> {
  await client.initialize();
  await startProcess(client, "ok", ["/bin/sh", "-c", "exit 0"]);
  await startProcess(client, "bad", ["/bin/sh", "-c", "exit 3"]);
  for (const id of ["ok", "bad"]) {
    await client.take(
      (m) =>
        m.method === "process/closed" && (m.params as { processId?: string })?.processId === id,
      30_000,
    );
  }
  assertEquals((await client.call("no/such/method", {})).error.code, -32601);
  const refused = await client.call("fs/readFile", { path: "relative" });
  assert(refused.error, JSON.stringify(refused));
}
