/**
 * The W3C trace context a JSON-RPC request may carry (its top-level `trace`
 * member), defined here — below the JSON-RPC layer — so that tracing needs
 * nothing from the layers it traces.
 *
 * @module
 */

/** W3C trace context carried by a request. */
export interface TraceContext {
  /** The `traceparent` value. */
  traceparent: string;
  /** The `tracestate` value. */
  tracestate?: string;
}
