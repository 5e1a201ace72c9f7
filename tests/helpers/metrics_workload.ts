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

/** `name{labels} value` lines of a Prometheus scrape, without comments, as a map. */
export function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const space = line.lastIndexOf(" ");
    out.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return out;
}

/** Scrapes `url` (a `/metrics` endpoint): its samples and its text. */
export async function scrape(url: string): Promise<{ got: Map<string, number>; text: string }> {
  const response = await fetch(url);
  assertEquals(response.status, 200);
  const text = await response.text();
  return { got: samples(text), text };
}

/** Asserts each `[sample, value]` of `want` is in `got` (the scrape's text in the message). */
export function assertSamples(
  scraped: { got: Map<string, number>; text: string },
  want: ReadonlyArray<readonly [string, number]>,
): void {
  for (const [key, value] of want) {
    assertEquals([key, scraped.got.get(key)], [key, value], scraped.text);
  }
}
