/**
 * The registry endpoints a relay node serves: `register` and `validate`
 * (executor token), `connect` (harness token), with the shapes the Codex
 * clients expect and `{"error":{"code","message"}}` on failure. `connect`
 * answers with a URL on the node that holds the executor's socket, so no
 * node forwards to another.
 *
 * @module
 */

import { decodePublicKey, encodePublicKey, SECURITY_PROFILE } from "../../noise/hybrid_ik.ts";
import { signRendezvousUrl } from "./signing.ts";
import type { RelayStore, TokenRole } from "./store.ts";

/** What the handlers need. */
export interface RegistryContext {
  /** State. */
  readonly store: RelayStore;
  /** URL-signing secret. */
  readonly secret: Uint8Array;
  /** This node's public base URL. */
  readonly nodeUrl: string;
}

/** A JSON response. */
export interface JsonResponse {
  /** HTTP status. */
  readonly status: number;
  /** Body. */
  readonly body: unknown;
}

const error = (status: number, code: string, message: string): JsonResponse => ({
  status,
  body: { error: { code, message } },
});

/** Executor URLs live this long (the executor re-registers on expiry). */
export const EXECUTOR_URL_TTL_MS = 24 * 60 * 60 * 1000;
/** Harness URLs live this long (one connection attempt). */
export const HARNESS_URL_TTL_MS = 60_000;

async function authenticate(
  ctx: RegistryContext,
  headers: Headers,
  role: TokenRole,
  environmentId: string,
) {
  const auth = headers.get("authorization") ?? "";
  const m = /^Bearer\s+(\S+)$/i.exec(auth);
  if (!m) return { problem: error(401, "unauthorized", "missing bearer token") };
  const token = await ctx.store.token(m[1]!);
  if (!token || token.role !== role) {
    return { problem: error(401, "unauthorized", "invalid token") };
  }
  if (token.environmentId !== environmentId) {
    return { problem: error(403, "forbidden", "token is not valid for this environment") };
  }
  return { token };
}

/** Handles `POST /cloud/environment/{id}/{register|validate|connect}`; `null` for other paths. */
export async function handleRegistryRequest(
  ctx: RegistryContext,
  method: string,
  path: string,
  headers: Headers,
  body: unknown,
): Promise<JsonResponse | null> {
  const m = /^\/cloud\/environment\/([^/]+)\/(register|validate|connect)$/.exec(path);
  if (!m) return null;
  if (method !== "POST") return error(405, "method_not_allowed", "use POST");
  const environmentId = decodeURIComponent(m[1]!);
  const action = m[2]!;
  const b = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  if (action === "register") {
    const { problem } = await authenticate(ctx, headers, "executor", environmentId);
    if (problem) return problem;
    if (b.security_profile !== SECURITY_PROFILE) {
      return error(400, "unsupported_security_profile", "unsupported security profile");
    }
    let key;
    try {
      key = decodePublicKey(b.executor_public_key);
    } catch (e) {
      return error(400, "invalid_public_key", (e as Error).message);
    }
    const record = await ctx.store.register(environmentId, encodePublicKey(key));
    const url = await signRendezvousUrl(
      ctx.secret,
      ctx.nodeUrl,
      { role: "environment", environmentId, registrationId: record.registrationId },
      EXECUTOR_URL_TTL_MS,
    );
    return {
      status: 200,
      body: {
        environment_id: environmentId,
        url,
        security_profile: SECURITY_PROFILE,
        executor_registration_id: record.registrationId,
      },
    };
  }
  if (action === "connect") {
    const { token, problem } = await authenticate(ctx, headers, "harness", environmentId);
    if (problem) return problem;
    let key;
    try {
      key = decodePublicKey(b.harness_public_key);
    } catch (e) {
      return error(400, "invalid_public_key", (e as Error).message);
    }
    const registration = await ctx.store.registration(environmentId);
    if (!registration) {
      return error(404, "environment_not_found", "no executor registered for this environment");
    }
    const socket = await ctx.store.socket(environmentId);
    if (!socket || socket.registrationId !== registration.registrationId) {
      return error(409, "environment_offline", "the environment's executor is not connected");
    }
    const json = encodePublicKey(key);
    const authorization = await ctx.store.authorize({
      environmentId,
      registrationId: registration.registrationId,
      x25519: json.x25519_public_key,
      mlkem: json.mlkem768_public_key,
    });
    const url = await signRendezvousUrl(
      ctx.secret,
      socket.nodeUrl,
      {
        role: "harness",
        environmentId,
        registrationId: registration.registrationId,
        tokenTag: token!.digest.slice(0, 16),
      },
      HARNESS_URL_TTL_MS,
    );
    return {
      status: 200,
      body: {
        environment_id: environmentId,
        url,
        security_profile: SECURITY_PROFILE,
        executor_registration_id: registration.registrationId,
        executor_public_key: registration.executorPublicKey,
        harness_key_authorization: authorization,
      },
    };
  }
  // validate
  const { problem } = await authenticate(ctx, headers, "executor", environmentId);
  if (problem) return problem;
  const authorization = typeof b.harness_key_authorization === "string"
    ? b.harness_key_authorization
    : "";
  // Only this environment's current registration may use up (consume) an
  // authorization: another executor asking about it must not burn it.
  const record = authorization
    ? await ctx.store.consume(
      authorization,
      (r) => r.environmentId === environmentId && r.registrationId === b.executor_registration_id,
    )
    : null;
  let key;
  try {
    key = encodePublicKey(decodePublicKey(b.harness_public_key));
  } catch {
    return { status: 200, body: { valid: false } };
  }
  const valid = record !== null && record.x25519 === key.x25519_public_key &&
    record.mlkem === key.mlkem768_public_key;
  return { status: 200, body: { valid } };
}
