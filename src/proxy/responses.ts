/**
 * The exact blocked responses: `x-proxy-error` values, human messages, and
 * the JSON body of a blocked plain-HTTP request.
 *
 * @module
 */

/** The `x-proxy-error` value for a reason. */
export function proxyErrorHeader(reason: string): string {
  switch (reason) {
    case "not_allowed":
    case "not_allowed_local":
      return "blocked-by-allowlist";
    case "denied":
      return "blocked-by-denylist";
    case "method_not_allowed":
      return "blocked-by-method-policy";
    case "mitm_hook_denied":
      return "blocked-by-mitm-hook";
    case "mitm_required":
      return "blocked-by-mitm-required";
    default:
      return "blocked-by-policy";
  }
}

/** The human message for a reason. */
export function blockedMessage(reason: string): string {
  switch (reason) {
    case "not_allowed":
      return "Domain not in allowlist.";
    case "not_allowed_local":
      return "Sandbox policy blocks local/private network addresses.";
    case "denied":
      return "Domain denied by the sandbox policy.";
    case "method_not_allowed":
      return "Method not allowed in limited mode.";
    case "mitm_hook_denied":
      return "HTTPS request denied by MITM hook policy.";
    case "mitm_required":
      return "MITM required for limited HTTPS.";
    case "proxy_disabled":
      return "network proxy is disabled";
    default:
      return "Request blocked by network policy.";
  }
}

/** Fields of a blocked plain-HTTP response body. */
export interface BlockedBody {
  /** Host. */
  readonly host: string;
  /** Reason. */
  readonly reason: string;
  /** `deny` or `ask`. */
  readonly decision?: "deny" | "ask" | undefined;
  /** Who decided. */
  readonly source?: string | undefined;
  /** Protocol. */
  readonly protocol?: string | undefined;
  /** Port. */
  readonly port?: number | undefined;
}

/** The JSON body of a blocked plain-HTTP request (optional keys omitted). */
export function blockedJson(body: BlockedBody): string {
  const out: Record<string, unknown> = { status: "blocked", host: body.host, reason: body.reason };
  if (body.decision !== undefined) out.decision = body.decision;
  if (body.source !== undefined) out.source = body.source;
  if (body.protocol !== undefined) out.protocol = body.protocol;
  if (body.port !== undefined) out.port = body.port;
  out.message = blockedMessage(body.reason);
  return JSON.stringify(out);
}
