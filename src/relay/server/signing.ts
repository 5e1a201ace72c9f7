/**
 * Signed, short-lived rendezvous URLs: the path names the role and
 * environment, the query carries `role`, `reg` (registration id), `exp`
 * (unix seconds), `v` (1), optionally `tok` (harness token digest prefix)
 * and `sig` = base64url(HMAC-SHA256(secret, canonical string)). Any
 * extra, missing or altered parameter fails with one of the reference's
 * rejection reasons.
 *
 * The signed string is unambiguous (a JSON array of the raw path and each
 * value), and the query is read strictly: every parameter once, values in
 * plain URL-safe characters only (no percent-encoding), so no rewriting of
 * the URL can verify as another grant.
 *
 * @module
 */

import { hmacSha256Base64Url } from "../../util/hmac.ts";

/** What a signed URL grants. */
export interface RendezvousGrant {
  /** `environment` (executor socket) or `harness`. */
  readonly role: "environment" | "harness";
  /** The environment. */
  readonly environmentId: string;
  /** The registration. */
  readonly registrationId: string;
  /** Harness token digest prefix (connection accounting). */
  readonly tokenTag?: string;
}

/** A rejected rendezvous URL: HTTP status and `x-codex-rendezvous-rejection-reason`. */
export class RendezvousRejection extends Error {
  /** Creates the rejection. */
  constructor(readonly status: number, readonly reason: string) {
    super(reason);
    this.name = "RendezvousRejection";
  }
}

const ALLOWED = new Set(["role", "reg", "exp", "v", "tok", "sig"]);

function timingSafeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

const hmac = hmacSha256Base64Url;

function canonical(path: string, params: { get(key: string): string | null }): string {
  return JSON.stringify([
    path,
    params.get("role"),
    params.get("reg"),
    params.get("exp"),
    params.get("v"),
    params.get("tok"),
  ]);
}

/** Values as we issue them: nothing that needs (or hides behind) percent-encoding. */
const PLAIN = /^[A-Za-z0-9_.~-]*$/;

/** The query as sent, strictly: known keys, each once, plain values. */
function strictQuery(query: string): Map<string, string> {
  const params = new Map<string, string>();
  if (query === "") return params;
  for (const pair of query.split("&")) {
    const eq = pair.indexOf("=");
    const key = eq === -1 ? pair : pair.slice(0, eq);
    const value = eq === -1 ? "" : pair.slice(eq + 1);
    if (!ALLOWED.has(key)) throw new RendezvousRejection(400, "extra_query_param");
    if (params.has(key) || !PLAIN.test(value)) {
      throw new RendezvousRejection(400, "malformed_query");
    }
    params.set(key, value);
  }
  return params;
}

/** Signs a URL on `base` for `grant`, valid for `ttlMs`. */
export async function signRendezvousUrl(
  secret: Uint8Array,
  base: string,
  grant: RendezvousGrant,
  ttlMs: number,
): Promise<string> {
  const path = `/ws/${grant.role}/${encodeURIComponent(grant.environmentId)}`;
  const params = new URLSearchParams({
    role: grant.role,
    reg: grant.registrationId,
    exp: String(Math.floor((Date.now() + ttlMs) / 1000)),
    v: "1",
  });
  if (grant.tokenTag) params.set("tok", grant.tokenTag);
  params.set("sig", await hmac(secret, canonical(path, params)));
  const ws = base.replace(/^http/, "ws").replace(/\/+$/, "");
  return `${ws}${path}?${params}`;
}

/** Verifies a request target; throws {@linkcode RendezvousRejection}. */
export async function verifyRendezvousUrl(
  secret: Uint8Array,
  target: string,
): Promise<RendezvousGrant> {
  const q = target.indexOf("?");
  const path = q === -1 ? target : target.slice(0, q);
  if (target.includes("#")) throw new RendezvousRejection(400, "malformed_query");
  const m = /^\/ws\/(environment|harness)\/([^/?]+)$/.exec(path);
  if (!m) throw new RendezvousRejection(404, "unknown_route");
  const query = strictQuery(q === -1 ? "" : target.slice(q + 1));
  const p = { has: (k: string) => query.has(k), get: (k: string) => query.get(k) ?? null };
  if (!p.has("role")) throw new RendezvousRejection(400, "missing_role");
  if (p.get("role") !== m[1]) throw new RendezvousRejection(400, "invalid_role");
  if (!p.has("exp")) throw new RendezvousRejection(400, "missing_expiry");
  if (!p.has("sig")) throw new RendezvousRejection(401, "missing_signature");
  if (!p.has("v")) throw new RendezvousRejection(400, "missing_version");
  if (p.get("v") !== "1") throw new RendezvousRejection(400, "invalid_version");
  if (!p.get("reg")) throw new RendezvousRejection(400, "missing_executor_registration_id");
  const exp = Number(p.get("exp"));
  if (!Number.isInteger(exp)) throw new RendezvousRejection(400, "invalid_expiry");
  if (exp * 1000 < Date.now()) throw new RendezvousRejection(401, "expired");
  if (!timingSafeEqual(await hmac(secret, canonical(path, p)), p.get("sig")!)) {
    throw new RendezvousRejection(401, "invalid_signature");
  }
  return {
    role: m[1] as "environment" | "harness",
    environmentId: decodeURIComponent(m[2]!),
    registrationId: p.get("reg")!,
    ...(p.get("tok") ? { tokenTag: p.get("tok")! } : {}),
  };
}
