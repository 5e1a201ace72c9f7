/**
 * A protocol method's name as a metric label or span name: the protocol's
 * own methods as they are, anything else `unknown` (a client cannot grow a
 * label set). Shared by the server's and the client's metrics.
 *
 * @module
 */

import { REQUESTS } from "../protocol/spec.ts";

const KNOWN_METHODS: ReadonlySet<string> = new Set(Object.keys(REQUESTS));

/** A method name as a label: the protocol's own, anything else `unknown`. */
export function methodLabel(method: string): string {
  return KNOWN_METHODS.has(method) ? method : "unknown";
}
