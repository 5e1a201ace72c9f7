/**
 * Where a sandboxed filesystem request runs: in-process, or inside its
 * sandbox through the server's sandbox filesystem gateway.
 *
 * @module
 */

import { internalError } from "../../protocol/errors.ts";
import type { FileSystemSandboxContext } from "../../protocol/types.ts";
import { requireSandboxSupport } from "../../sandbox/mod.ts";
import { readsEverything, resolveSandbox, type SandboxPlan } from "../../sandbox/policy.ts";

/** The plan of a request's sandbox; null when it asks for none. */
export function sandboxPlan(
  sandbox: FileSystemSandboxContext | null | undefined,
): SandboxPlan | null {
  if (!sandbox) return null;
  return resolveSandbox(sandbox, {
    cwd: sandbox.cwd ?? sandbox.policyContext?.cwd ?? "/",
    env: Deno.env.toObject(),
  });
}

/**
 * The plan a request must run in; null when it may run here: no sandbox,
 * or a read under a policy that lets everything be read (as the reference,
 * which reads in-process then and spawns its helper only for writes and
 * for policies that hide paths).
 */
export function planFor(
  sandbox: FileSystemSandboxContext | null | undefined,
  access: "read" | "write",
): SandboxPlan | null {
  const plan = sandboxPlan(sandbox);
  if (!plan || (access === "read" && readsEverything(plan))) return null;
  try {
    requireSandboxSupport();
  } catch (error) {
    throw internalError((error as Error).message, error);
  }
  return plan;
}

/**
 * {@linkcode planFor} as a planner for the sandbox filesystem gateway: the
 * plan made now first, then the request's sandbox planned again each time
 * it is asked (bubblewrap could not build the previous plan: what exists
 * changed in between). Null when the request may run here.
 */
export function plannerFor(
  sandbox: FileSystemSandboxContext | null | undefined,
  access: "read" | "write",
): (() => SandboxPlan) | null {
  const plan = planFor(sandbox, access);
  if (!plan) return null;
  let first: SandboxPlan | null = plan;
  return () => {
    const next = first ?? planFor(sandbox, access) ?? plan;
    first = null;
    return next;
  };
}
