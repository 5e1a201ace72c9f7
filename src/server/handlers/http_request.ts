/**
 * `http/request` semantics on top of the HTTP client: validation with the
 * reference's messages, `valueEnvVar` headers from the server's environment,
 * timeouts, the buffered-body cap, and streamed bodies as deltas.
 *
 * @module
 */

import type { ExecTelemetry } from "../../telemetry/tracing.ts";
import { concatBytes } from "../../util/bytes.ts";
import { RpcError } from "../../jsonrpc/errors.ts";
import { ErrorCode } from "../../protocol/errors.ts";
import type { HttpHeaderParam } from "../../protocol/types.ts";
import {
  HttpBodyError,
  type HttpClientResponse,
  httpRequest,
  HttpTransportError,
  TOKEN,
} from "../../http/client.ts";

/** What the handler asks for (already decoded). */
export interface HttpRequestSpec {
  /** Method (token). */
  readonly method: string;
  /** Absolute URL text. */
  readonly url: string;
  /** Headers in order. */
  readonly headers: readonly HttpHeaderParam[];
  /** Body bytes. */
  readonly body?: Uint8Array;
  /** Deadline for the whole exchange. */
  readonly timeoutMs?: number;
  /** Redirect handling. */
  readonly redirectPolicy: "follow" | "stop";
}

/** Where `valueEnvVar` values come from. */
export type EnvLookup = (name: string) => string | undefined;

function invalidParams(message: string): RpcError {
  return new RpcError(ErrorCode.InvalidParams, message);
}

/** Validates the request and resolves env-var headers; throws `-32602`. */
export function prepareRequest(
  spec: HttpRequestSpec,
  env: EnvLookup,
): { method: string; url: URL; headers: Array<[string, string]> } {
  if (!TOKEN.test(spec.method)) {
    throw invalidParams("http/request method is invalid: invalid HTTP method");
  }
  let url: URL;
  try {
    url = new URL(spec.url);
  } catch {
    throw invalidParams("http/request url is invalid: relative URL without a base");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw invalidParams(
      `http/request only supports http and https URLs, got ${url.protocol.slice(0, -1)}`,
    );
  }
  const headers: Array<[string, string]> = [];
  for (const h of spec.headers) {
    if (!TOKEN.test(h.name)) {
      throw invalidParams("http/request header name is invalid: invalid HTTP header name");
    }
    let value = h.value;
    if (h.valueEnvVar !== undefined && h.valueEnvVar !== null) {
      const fromEnv = env(h.valueEnvVar);
      if (fromEnv === undefined) {
        throw invalidParams(
          `http/request header ${h.name} requires executor environment variable ${h.valueEnvVar}`,
        );
      }
      value += fromEnv;
    }
    if (/[\r\n\0]/.test(value)) {
      throw invalidParams("http/request header value is invalid: failed to parse header value");
    }
    headers.push([h.name, value]);
  }
  return { method: spec.method, url, headers };
}

/** A started exchange: response head plus a deadline that covers the body. */
export interface HttpExchange {
  /** The response (body still streaming). */
  readonly response: HttpClientResponse;
  /** Clears the deadline timer (call when the body is done). */
  done(): void;
}

/**
 * Sends the request; maps failures to `-32603` with the reference's wording
 * (`http/request failed: error sending request for url (…)`).
 */
export async function startExchange(
  spec: HttpRequestSpec,
  env: EnvLookup,
  abort: AbortSignal,
  telemetry: ExecTelemetry | null = null,
): Promise<HttpExchange> {
  const prepared = prepareRequest(spec, env);
  const reported = telemetry?.httpRequest(prepared.method, prepared.url);
  const controller = new AbortController();
  const onAbort = () => controller.abort(abort.reason);
  abort.addEventListener("abort", onAbort, { once: true });
  let timedOut = false;
  const timer = spec.timeoutMs !== undefined
    ? setTimeout(() => {
      timedOut = true;
      controller.abort(new Error("timed out"));
    }, spec.timeoutMs)
    : undefined;
  const done = () => {
    clearTimeout(timer);
    abort.removeEventListener("abort", onAbort);
  };
  try {
    const response = await httpRequest({
      ...prepared,
      ...(spec.body ? { body: spec.body } : {}),
      redirect: spec.redirectPolicy,
      signal: controller.signal,
    });
    reported?.finished(response.status);
    return { response, done };
  } catch (error) {
    reported?.finished(null);
    done();
    const detail = timedOut
      ? `operation timed out after ${spec.timeoutMs} ms`
      : (error as Error).message;
    const shown = prepared.url.href;
    throw new RpcError(
      ErrorCode.InternalError,
      `http/request failed: error sending request for url (${shown}): ${detail}`,
      { cause: error },
    );
  }
}

/** Why a body read failed, in the reference's words. */
export function bodyErrorMessage(error: unknown): string {
  if (error instanceof HttpBodyError) return error.message;
  if (error instanceof HttpTransportError) return error.message;
  return "error decoding response body";
}

/**
 * Reads a whole body, failing with a clear `-32603` past `limit` bytes
 * (instead of buffering without bound).
 */
export async function readBody(
  body: ReadableStream<Uint8Array>,
  limit: number,
): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = body.getReader();
  try {
    for (;;) {
      let result: ReadableStreamReadResult<Uint8Array>;
      try {
        result = await reader.read();
      } catch (error) {
        throw new RpcError(
          ErrorCode.InternalError,
          `failed to read http/request response body: ${bodyErrorMessage(error)}`,
          { cause: error },
        );
      }
      if (result.done) break;
      total += result.value.length;
      if (total > limit) {
        await reader.cancel().catch(() => {});
        throw new RpcError(
          ErrorCode.InternalError,
          `http/request response body exceeds the buffered limit of ${limit} bytes; use streamResponse: true`,
        );
      }
      chunks.push(result.value);
    }
  } finally {
    reader.releaseLock();
  }
  return concatBytes(chunks, total);
}
