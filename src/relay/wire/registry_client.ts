/**
 * The environment registry's HTTP API as both Codex clients use it:
 * `register` and `validate` (executor), `connect` (harness). POST with a
 * JSON body, `authorization: Bearer`, redirects never followed, the error
 * body `{"error":{"code","message"}}`, and the retry rules of each call.
 *
 * @module
 */

import { describeFetchFailure } from "../../util/fetch_error.ts";
import { decodePublicKey, type NoisePublicKey, SECURITY_PROFILE } from "../../noise/hybrid_ik.ts";
import type { RemoteKey } from "../../noise/handshake.ts";
import { concatBytes } from "../../util/bytes.ts";

/** How to reach a registry. */
export interface RegistryEndpoint {
  /** Base URL (trailing slashes ignored). */
  readonly url: string;
  /** Bearer token. */
  readonly bearer: string;
  /** `chatgpt-account-id` header, when set. */
  readonly accountId?: string;
}

/** A registry answered with an error (or not at all). */
export class RegistryError extends Error {
  /** Creates the error. */
  constructor(
    message: string,
    readonly status: number | null,
    readonly code: string | null,
    /** The registry did not answer in time. */
    readonly timedOut = false,
  ) {
    super(message);
    this.name = "RegistryError";
  }

  /** Worth retrying for a harness `connect`. */
  get retryable(): boolean {
    if (this.status === null) return true;
    return this.status >= 500 || this.status === 408 || this.status === 429 ||
      (this.status === 409 && this.code === "environment_offline");
  }
}

async function post(
  endpoint: RegistryEndpoint,
  path: string,
  body: unknown,
  timeoutMs: number,
  extraHeaders: Record<string, string> = {},
): Promise<{ status: number; json: unknown; text: string }> {
  const url = `${endpoint.url.trim().replace(/\/+$/, "")}/${path}`;
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "*/*",
    authorization: `Bearer ${endpoint.bearer}`,
    ...extraHeaders,
  };
  if (endpoint.accountId) headers["chatgpt-account-id"] = endpoint.accountId;
  let response: Response;
  try {
    response = await fetch(url, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      redirect: "manual",
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (error) {
    throw new RegistryError(
      `environment registry request failed: ${describeFetchFailure(url, error, timeoutMs)}`,
      null,
      null,
      (error as { name?: string } | null)?.name === "TimeoutError",
    );
  }
  // Bounded: an error page can be anything.
  const text = await readPreview(response, MAX_BODY_BYTES);
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch { /* empty or not JSON */ }
  return { status: response.status, json, text };
}

/** Largest registry answer read. */
const MAX_BODY_BYTES = 256 * 1024;
/** Longest preview of a non-JSON error body in a message. */
const PREVIEW_CHARS = 200;

async function readPreview(response: Response, limit: number): Promise<string> {
  if (!response.body) return "";
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < limit) {
      const { value, done } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return new TextDecoder().decode(concatBytes(chunks, size).subarray(0, limit));
}

/**
 * The registry's error code, when it is a plain identifier (anything else
 * could carry what it echoes back, so it is not shown).
 */
function registryCode(json: unknown): string | null {
  const code = (json as { error?: { code?: unknown } } | null)?.error?.code;
  return typeof code === "string" && /^[A-Za-z0-9_.:-]{1,64}$/.test(code) ? code : null;
}

/**
 * What the registry said: its JSON error message, or a bounded preview of
 * the body — with the bearer, and any `Bearer`/`Basic` credential (token68
 * characters), replaced by `[redacted]` (an error page may echo the request).
 */
function registryReason(json: unknown, text: string, bearer: string): string {
  const error = (json as { error?: { message?: unknown } } | null)?.error;
  let reason: string;
  if (typeof error?.message === "string") reason = error.message;
  else if (json !== null) return "";
  else {
    const preview = text.replace(/\s+/g, " ").trim();
    if (preview === "") return "";
    reason = preview.length > PREVIEW_CHARS
      ? `${preview.slice(0, PREVIEW_CHARS)}… (${text.length} bytes)`
      : preview;
  }
  // A bearer too short to be a credential would redact ordinary words.
  if (bearer.length >= 8) reason = reason.split(bearer).join("[redacted]");
  return `: ${reason.replace(/\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+/gi, "$1 [redacted]")}`;
}

function failure(
  endpoint: RegistryEndpoint,
  status: number,
  json: unknown,
  what: string,
  text = "",
): RegistryError {
  const code = registryCode(json);
  if (status === 401 || status === 403) {
    // No body: a refusal of credentials may echo them (as Codex, which
    // leaves it out too); the status and the code say what happened.
    return new RegistryError(
      `environment registry rejected the ${what} credentials (HTTP ${status})${
        code ? ` (${code})` : ""
      }`,
      status,
      code,
    );
  }
  if (status >= 300 && status < 400) {
    return new RegistryError(
      `environment registry redirected the ${what} request (HTTP ${status})`,
      status,
      code,
    );
  }
  return new RegistryError(
    `environment registry ${what} failed with HTTP ${status}${code ? ` (${code})` : ""}${
      registryReason(json, text, endpoint.bearer)
    }`,
    status,
    code,
  );
}

/** The answer is for the environment asked about, with our security profile. */
function checkEnvironment(r: unknown, environmentId: string, status: number): void {
  const o = r as { environment_id?: unknown; security_profile?: unknown } | null;
  if (o?.environment_id !== environmentId) {
    throw new RegistryError(
      "environment registry returned a different environment id",
      status,
      null,
    );
  }
  if (o.security_profile !== SECURITY_PROFILE) {
    throw new RegistryError(
      "environment registry returned an unsupported security profile",
      status,
      null,
    );
  }
}

/** A registration. */
export interface Registration {
  /** The environment. */
  readonly environmentId: string;
  /** The rendezvous URL for the executor socket. */
  readonly url: string;
  /** Binds handshakes to this registration. */
  readonly executorRegistrationId: string;
}

/** `POST …/register`, retrying only 503 `registration_conflict` (500 ms·2^n ≤ 5 s + jitter). */
export async function registerExecutor(
  endpoint: RegistryEndpoint,
  environmentId: string,
  publicKey: NoisePublicKey,
  options: { maxAttempts?: number } = {},
): Promise<Registration> {
  for (let attempt = 0;; attempt++) {
    const { status, json, text } = await post(
      endpoint,
      `cloud/environment/${encodeURIComponent(environmentId)}/register`,
      { security_profile: SECURITY_PROFILE, executor_public_key: publicKey },
      10_000,
    );
    if (status === 200) {
      const r = json as {
        environment_id?: unknown;
        url?: unknown;
        security_profile?: unknown;
        executor_registration_id?: unknown;
      };
      checkEnvironment(r, environmentId, status);
      if (typeof r.url !== "string" || typeof r.executor_registration_id !== "string") {
        throw new RegistryError(
          "environment registry returned an incomplete registration",
          status,
          null,
        );
      }
      return { environmentId, url: r.url, executorRegistrationId: r.executor_registration_id };
    }
    const error = failure(endpoint, status, json, "register", text);
    if (
      status !== 503 || error.code !== "registration_conflict" ||
      attempt + 1 >= (options.maxAttempts ?? 8)
    ) throw error;
    const base = Math.min(500 * 2 ** Math.min(attempt, 4), 5000);
    await new Promise((r) => setTimeout(r, base + Math.random() * base / 2));
  }
}

/** The registry's verdict on a harness key. */
export type ValidationResult = "valid" | "invalid" | "unauthorized";

/** Why a validation was not `valid`: the status and the registry's code, never its message. */
export interface ValidationRefusal {
  /**
   * Why, as the reference's handshake diagnostics name it: `registry_http`
   * (an answer other than 200), `validation_protocol` (200 but not
   * `{"valid": true}`), `validation_timeout`, `registry_request` (no answer).
   */
  readonly reason:
    | "registry_http"
    | "validation_protocol"
    | "validation_timeout"
    | "registry_request";
  /** The HTTP status, or null when the registry did not answer. */
  readonly status: number | null;
  /** The registry's error code, when it is a plain identifier. */
  readonly code: string | null;
}

/**
 * `POST …/validate` (10 s): 200 `{valid:true}` → valid; 401 → unauthorized;
 * anything else → invalid, told to `onRefusal` with the status and code
 * only (the body may echo what the harness or executor sent).
 */
export async function validateHarness(
  endpoint: RegistryEndpoint,
  environmentId: string,
  streamId: string,
  body: {
    executor_registration_id: string;
    harness_public_key: NoisePublicKey;
    harness_key_authorization: string;
  },
  onRefusal: (why: ValidationRefusal) => void = () => {},
): Promise<ValidationResult> {
  let answer: { status: number; json: unknown };
  try {
    answer = await post(
      endpoint,
      `cloud/environment/${encodeURIComponent(environmentId)}/validate`,
      body,
      10_000,
      { "x-codex-noise-stream-id": streamId },
    );
  } catch (error) {
    const timedOut = error instanceof RegistryError && error.timedOut;
    onRefusal({
      reason: timedOut ? "validation_timeout" : "registry_request",
      status: null,
      code: null,
    });
    return "invalid";
  }
  const { status, json } = answer;
  if (status === 200 && (json as { valid?: unknown } | null)?.valid === true) return "valid";
  onRefusal({
    reason: status === 200 ? "validation_protocol" : "registry_http",
    status,
    code: registryCode(json),
  });
  return status === 401 ? "unauthorized" : "invalid";
}

/** What a harness needs for one connection. */
export interface ConnectBundle {
  /** The environment. */
  readonly environmentId: string;
  /** The rendezvous URL for this connection. */
  readonly url: string;
  /** The executor's current registration. */
  readonly executorRegistrationId: string;
  /** The executor's pinned key. */
  readonly executorPublicKey: RemoteKey;
  /** Single-use authorization for msg 1. */
  readonly harnessKeyAuthorization: string;
}

async function connectOnce(
  endpoint: RegistryEndpoint,
  environmentId: string,
  harnessKey: NoisePublicKey,
): Promise<ConnectBundle> {
  const { status, json, text } = await post(
    endpoint,
    `cloud/environment/${encodeURIComponent(environmentId)}/connect`,
    { harness_public_key: harnessKey },
    6_000,
  );
  if (status !== 200) throw failure(endpoint, status, json, "connect", text);
  const r = json as Record<string, unknown>;
  const nonBlank = (v: unknown) => typeof v === "string" && v.trim() !== "";
  checkEnvironment(r, environmentId, status);
  if (
    !nonBlank(r.url) || !nonBlank(r.executor_registration_id) ||
    !nonBlank(r.harness_key_authorization)
  ) {
    throw new RegistryError(
      "environment registry returned an incomplete connect bundle",
      status,
      null,
    );
  }
  return {
    environmentId,
    url: r.url as string,
    executorRegistrationId: r.executor_registration_id as string,
    executorPublicKey: decodePublicKey(r.executor_public_key),
    harnessKeyAuthorization: r.harness_key_authorization as string,
  };
}

/** `POST …/connect`: up to 4 retries on retryable errors, 6 s per call, 14 s in all. */
export async function connectHarness(
  endpoint: RegistryEndpoint,
  environmentId: string,
  harnessKey: NoisePublicKey,
): Promise<ConnectBundle> {
  const deadline = Date.now() + 14_000;
  for (let attempt = 0;; attempt++) {
    try {
      return await connectOnce(endpoint, environmentId, harnessKey);
    } catch (error) {
      if (
        !(error instanceof RegistryError) || !error.retryable || attempt >= 4 ||
        Date.now() + 250 > deadline
      ) throw error;
      await new Promise((r) =>
        setTimeout(r, Math.min(250 * 2 ** attempt, Math.max(0, deadline - Date.now())))
      );
    }
  }
}
