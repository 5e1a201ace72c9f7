/**
 * WebSocket upgrade authentication, as the reference does it (README,
 * "`exec-server serve`"): a Bearer token in the `Authorization` header, checked either
 * against a SHA-256 digest in constant time (`capability-token`) or as an
 * HS256 JWT with `exp`, optional `nbf`, issuer and audience
 * (`signed-bearer-token`). Tokens are never logged.
 *
 * @module
 */

import { hmacSha256Base64Url } from "../util/hmac.ts";

/** No authentication. */
export interface NoAuth {
  /** Mode. */
  readonly mode: "none";
}

/** A shared capability token, stored only as its SHA-256 digest. */
export interface CapabilityTokenAuth {
  /** Mode. */
  readonly mode: "capability-token";
  /** SHA-256 of the token (32 bytes). */
  readonly tokenSha256: Uint8Array;
}

/** HS256-signed JWT bearer tokens. */
export interface SignedBearerTokenAuth {
  /** Mode. */
  readonly mode: "signed-bearer-token";
  /** The shared secret (at least 32 bytes). */
  readonly secret: Uint8Array;
  /** Required `iss`, when set. */
  readonly issuer?: string;
  /** Required member of `aud`, when set. */
  readonly audience?: string;
  /** Tolerance for `exp` and `nbf`, in seconds. Default 30. */
  readonly maxClockSkewSeconds?: number;
}

/** How WebSocket upgrades are authenticated. */
export type WebSocketAuth = NoAuth | CapabilityTokenAuth | SignedBearerTokenAuth;

const encoder = new TextEncoder();

/** SHA-256 of a string. */
export async function sha256(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

/** Compares two byte arrays in time independent of where they differ. */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

/** Extracts the token of `Authorization: Bearer <token>`, or the 401 message. */
export function bearerToken(headers: Headers): { token: string } | { error: string } {
  const value = headers.get("authorization");
  if (value === null) return { error: "missing websocket bearer token" };
  const match = /^\s*(\S+)\s+(.*)$/.exec(value);
  if (!match || match[1]!.toLowerCase() !== "bearer" || match[2]!.trim() === "") {
    return { error: "invalid authorization header" };
  }
  return { token: match[2]!.trim() };
}

/**
 * Verifies an HS256 JWT with `jose` (`jwtVerify`: the algorithm pinned to
 * HS256, `exp` required, `nbf` when present, issuer, audience, clock
 * tolerance); returns null when valid, else the reference's 401 message.
 * `nowSeconds` is injectable for tests.
 */
export async function verifyJwt(
  token: string,
  auth: SignedBearerTokenAuth,
  nowSeconds: number = Date.now() / 1000,
): Promise<string | null> {
  const { errors, jwtVerify } = await import("jose");
  try {
    await jwtVerify(token, auth.secret, {
      algorithms: ["HS256"],
      requiredClaims: ["exp"],
      clockTolerance: auth.maxClockSkewSeconds ?? 30,
      currentDate: new Date(nowSeconds * 1000),
      ...(auth.issuer !== undefined ? { issuer: auth.issuer } : {}),
      ...(auth.audience !== undefined ? { audience: auth.audience } : {}),
    });
    return null;
  } catch (error) {
    if (error instanceof errors.JWTExpired) return "expired websocket jwt";
    if (error instanceof errors.JWTClaimValidationFailed) {
      switch (error.claim) {
        case "nbf":
          return error.reason === "check_failed" ? "websocket jwt is not valid yet" : INVALID_JWT;
        case "iss":
          return "websocket jwt issuer mismatch";
        case "aud":
          return "websocket jwt audience mismatch";
      }
    }
    return INVALID_JWT;
  }
}

const INVALID_JWT = "invalid websocket jwt";

/** Checks an upgrade request; returns null when allowed, else the 401 message. */
export async function checkWebSocketAuth(
  auth: WebSocketAuth,
  headers: Headers,
): Promise<string | null> {
  if (auth.mode === "none") return null;
  const bearer = bearerToken(headers);
  if ("error" in bearer) return bearer.error;
  if (auth.mode === "capability-token") {
    return constantTimeEqual(await sha256(bearer.token), auth.tokenSha256)
      ? null
      : "invalid websocket bearer token";
  }
  return await verifyJwt(bearer.token, auth);
}

/** Signs an HS256 JWT (for clients and tests). */
export async function signJwt(
  payload: Record<string, unknown>,
  secret: Uint8Array,
  header: Record<string, unknown> = { alg: "HS256", typ: "JWT" },
): Promise<string> {
  const b64 = (bytes: Uint8Array) => bytes.toBase64({ alphabet: "base64url", omitPadding: true });
  const h = b64(encoder.encode(JSON.stringify(header)));
  const p = b64(encoder.encode(JSON.stringify(payload)));
  return `${h}.${p}.${await hmacSha256Base64Url(secret, `${h}.${p}`)}`;
}
