// Side-by-side helpers of the edge-case tests: one scenario against our
// server and (when installed) the reference, each with a fresh directory.

import { assertEquals } from "./assert.ts";
import type { WireClient } from "./wire_client.ts";
import { oursServer, referenceServer } from "./sandbox.ts";
import { scratchRoot } from "./reference.ts";

/** A `file://` URI of a local path. */
export const u = (path: string): string => `file://${path}`;
/** Base64 of a Latin-1 string. */
export const b64 = (s: string): string => btoa(s);
/** Whether the tests run as root (device nodes, tmpfs mounts). */
export const isRoot: boolean = Deno.uid() === 0;

// deno-lint-ignore no-explicit-any
export type Json = any;

/**
 * Runs `scenario` against our server and (when installed) the reference,
 * each with a fresh directory, and returns what each observed.
 */
export async function sideBySide<T>(
  scenario: (c: WireClient, dir: string) => Promise<T>,
): Promise<{ ours: T; reference: T | null }> {
  const results: Record<string, T> = {};
  for (const named of [oursServer(), referenceServer()]) {
    if (!named) continue;
    await using s = named.server;
    await s.client.initialize();
    const dir = await Deno.makeTempDir({ dir: scratchRoot(), prefix: "robust-" });
    try {
      results[named.name] = await scenario(s.client, dir);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
  return { ours: results.ours!, reference: results.reference ?? null };
}

/** Asserts the reference (when present) observed the same as ours. */
export function same<T>(r: { ours: T; reference: T | null }): T {
  if (r.reference !== null) assertEquals(r.ours, r.reference, "ours vs the reference");
  return r.ours;
}

/** A JSON-RPC answer's error, or else its result. */
export const outcome = (m: Json): Json => m.error ?? m.result;
