/**
 * Every method and notification name of the exec-server protocol (from
 * the table in `spec.ts`), and what the connection needs of them: the
 * lifecycle family of a method, its lane and its ordering key.
 *
 * @module
 */

import { Method, REQUESTS } from "./spec.ts";

export {
  ClientNotification,
  Method,
  type MethodName,
  ServerNotification,
  ServerRequest,
} from "./spec.ts";

/**
 * The family a method belongs to, as used in the lifecycle gating messages
 * (`client must call initialize before using <family> methods`).
 */
export function methodFamily(method: string): string {
  if (method.startsWith("process/")) return "exec";
  if (method.startsWith("fs/")) return "filesystem";
  if (method.startsWith("http/")) return "http";
  if (method === Method.EnvironmentInfo) return "environment info";
  if (method === Method.EnvironmentStatus) return "environment status";
  if (method === Method.EnvironmentConfigRead) return "environment config";
  if (method.startsWith("capabilit")) return "capability discovery";
  return method;
}

/**
 * Methods that must never wait behind ordinary work (the reference's
 * "control lane"): status, signals, termination, closing handles — the
 * rows of the table marked `lane: "control"`.
 */
export const CONTROL_METHODS: ReadonlySet<string> = new Set(
  Object.entries(REQUESTS).filter(([, row]) => row.lane === "control").map(([name]) => name),
);

/**
 * What a request is about, for ordering: `process/*` requests name a
 * process (`processId`), file-handle requests a handle (`handleId`) — the
 * rows' `orderedBy`. Requests about the same one take effect in arrival
 * order, across lanes (a `process/terminate` pipelined behind its
 * `process/start` waits for it).
 */
const ORDERED_BY: ReadonlyMap<string, "processId" | "handleId"> = new Map(
  Object.entries(REQUESTS).flatMap(([name, row]) =>
    row.orderedBy ? [[name, row.orderedBy] as const] : []
  ),
);

/** The ordering key of a request (see `ORDERED_BY`), or null when it has none. */
export function orderKeyOf(method: string, params: unknown): string | null {
  const field = ORDERED_BY.get(method);
  if (field === undefined || typeof params !== "object" || params === null) return null;
  const id = (params as Record<string, unknown>)[field];
  return typeof id === "string" ? `${field}\0${id}` : null;
}
