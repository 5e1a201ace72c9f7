/**
 * JSON-RPC 2.0 message shapes, classification of untrusted input and
 * serialisation.
 *
 * Ids are integers in the signed 64-bit range or strings, echoed exactly:
 * integers beyond `Number.MAX_SAFE_INTEGER` are carried as `bigint`.
 *
 * @module
 */

import type { TraceContext } from "../log/trace_context.ts";

import { DEFAULT_JSON_LIMITS, parseStrictJson, type StrictJsonLimits } from "./strict_json.ts";

/** A request id: an integer (64-bit range) or a string. */
export type RequestId = number | string | bigint;

/** The error member of a JSON-RPC error response. */
export interface JsonRpcErrorObject {
  /** Numeric error code. */
  code: number;
  /** Human-readable description. */
  message: string;
  /** Optional structured detail. */
  data?: unknown;
}

/** A call that expects a response. */
export interface JsonRpcRequest {
  /** Protocol marker; always `"2.0"` on output, ignored on input. */
  jsonrpc?: string;
  /** Correlates the response. */
  id: RequestId;
  /** Method name. */
  method: string;
  /** Method parameters (absent is treated as `null`). */
  params?: unknown;
  /** W3C trace context of the request (a top-level `trace` member). */
  trace?: TraceContext;
}

export type { TraceContext };

/** A one-way message. */
export interface JsonRpcNotification {
  /** Protocol marker; always `"2.0"` on output, ignored on input. */
  jsonrpc?: string;
  /** Method name. */
  method: string;
  /** Method parameters. */
  params?: unknown;
}

/** A successful response. */
export interface JsonRpcSuccess {
  /** Protocol marker. */
  jsonrpc?: string;
  /** Id of the request being answered. */
  id: RequestId;
  /** The result value. */
  result: unknown;
}

/** An error response. */
export interface JsonRpcFailure {
  /** Protocol marker. */
  jsonrpc?: string;
  /** Id of the request being answered (`-1` for unparsable input). */
  id: RequestId | null;
  /** What went wrong. */
  error: JsonRpcErrorObject;
}

/** Any JSON-RPC message. */
export type JsonRpcMessage =
  | JsonRpcRequest
  | JsonRpcNotification
  | JsonRpcSuccess
  | JsonRpcFailure;

/**
 * A `params` or `result` value already serialised as JSON text, written
 * verbatim by {@linkcode encodeMessage}. The text may be given in parts that
 * are written one after the other: the hot output path keeps a large base64
 * payload as its own part so it is never re-scanned or concatenated.
 */
export class RawJson {
  /** The JSON text, in consecutive parts. */
  readonly parts: readonly JsonPart[];

  /** Wraps JSON text; the caller guarantees the parts form valid JSON. */
  constructor(...parts: JsonPart[]) {
    this.parts = parts;
  }

  /** The whole text. */
  get json(): string {
    return this.parts.join("");
  }

  /** Parses the text back (for in-process consumers). */
  toJSON(): unknown {
    return JSON.parse(this.json);
  }
}

/**
 * Bytes that appear in JSON text as their base64 (inside a string the
 * caller opens and closes). The text is produced piece by piece straight
 * into the output buffer, never as one string: a 64 MiB file reply does not
 * also cost an 85 MiB JavaScript string.
 */
export class Base64Part {
  /** Length of the base64 text (ASCII: also its UTF-8 length). */
  readonly length: number;

  #release: (() => void) | undefined;

  /**
   * Wraps `bytes` (not copied: they must not change until sent);
   * `release` is called once an output sink has encoded them (see
   * {@linkcode Base64Part.release}).
   */
  constructor(readonly bytes: Uint8Array, release?: () => void) {
    this.length = Math.ceil(bytes.length / 3) * 4;
    this.#release = release;
  }

  /**
   * Says the bytes are no longer needed (their base64 is in the output):
   * runs the callback given at construction, once. Output sinks call it;
   * a message consumed otherwise (in process) never does.
   */
  release(): void {
    const release = this.#release;
    this.#release = undefined;
    release?.();
  }

  /** The whole base64 text (slow paths and in-process consumers). */
  toString(): string {
    return this.bytes.toBase64();
  }

  /**
   * The base64 text, for `JSON.stringify`: a value holding decoded input
   * (see `large_message.ts`) serialises as the string that came in.
   */
  toJSON(): string {
    return this.toString();
  }
}

/** One piece of serialised JSON. */
export type JsonPart = string | Base64Part;

/**
 * Input that could not be turned into a message. The connection stays open;
 * the peer answers with an error carrying id `-1`.
 */
export interface MalformedMessage {
  /** Full human-readable description of the problem. */
  malformed: string;
}

/** What a connection's readable side yields. */
export type IncomingMessage = JsonRpcMessage | MalformedMessage;

/** True when `m` is input that failed to parse. */
export function isMalformed(m: IncomingMessage): m is MalformedMessage {
  return (m as MalformedMessage).malformed !== undefined;
}

/** True when `m` is a request. */
export function isRequest(m: JsonRpcMessage): m is JsonRpcRequest {
  return "method" in m && "id" in m;
}

/** True when `m` is a notification. */
export function isNotification(m: JsonRpcMessage): m is JsonRpcNotification {
  return "method" in m && !("id" in m);
}

/** True when `m` is a success response. */
export function isSuccess(m: JsonRpcMessage): m is JsonRpcSuccess {
  return !("method" in m) && "result" in m;
}

/** True when `m` is an error response. */
export function isFailure(m: JsonRpcMessage): m is JsonRpcFailure {
  return !("method" in m) && "error" in m;
}

const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;
const ID_MISMATCH = "data did not match any variant of untagged enum RequestId";

/**
 * How the reference (serde over arbitrary-precision JSON values) names an
 * unexpected value in `invalid type: …, expected …`.
 */
export function describeJsonType(v: unknown): string {
  if (v === null) return "null";
  if (v === undefined) return "unit";
  if (Array.isArray(v)) return "sequence";
  if (typeof v === "object") return "map";
  if (typeof v === "number" || typeof v === "bigint") return "number";
  if (typeof v === "string") return `string ${JSON.stringify(v)}`;
  if (typeof v === "boolean") return `boolean \`${v}\``;
  return typeof v;
}

/** Normalises a parsed id; returns an error string when it is not valid. */
function normaliseId(raw: unknown, source: string | undefined): RequestId | string[] {
  if (typeof raw === "string") return raw;
  if (typeof raw === "bigint") return raw < I64_MIN || raw > I64_MAX ? [ID_MISMATCH] : raw;
  if (typeof raw === "number" && source === undefined) {
    return Number.isSafeInteger(raw) ? raw : [ID_MISMATCH];
  }
  if (typeof raw === "number" && source !== undefined && /^-?\d+$/.test(source)) {
    if (Number.isSafeInteger(raw)) return raw;
    const big = BigInt(source);
    if (big < I64_MIN || big > I64_MAX) return [ID_MISMATCH];
    return big;
  }
  return [ID_MISMATCH];
}

/**
 * Classifies a parsed JSON value as a JSON-RPC message, or explains why it is
 * not one. `idSource` is the raw text of the `id` member when numeric.
 */
export function classifyMessage(
  value: unknown,
  idSource?: string,
): JsonRpcMessage | string {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return "expected a JSON-RPC object";
  }
  const obj = value as Record<string, unknown>;
  let id: RequestId | undefined;
  if ("id" in obj) {
    const normalised = normaliseId(obj.id, idSource);
    if (Array.isArray(normalised)) return normalised[0]!;
    id = normalised;
  }
  if ("method" in obj) {
    if (typeof obj.method !== "string") {
      return `invalid type: ${describeJsonType(obj.method)}, expected a string`;
    }
    const msg: { id?: RequestId; method: string; params?: unknown; trace?: TraceContext } = {
      method: obj.method,
    };
    if (id !== undefined) msg.id = id;
    if ("params" in obj) msg.params = obj.params;
    const trace = obj.trace as Record<string, unknown> | undefined;
    if (id !== undefined && trace && typeof trace.traceparent === "string") {
      msg.trace = { traceparent: trace.traceparent };
      if (typeof trace.tracestate === "string") msg.trace.tracestate = trace.tracestate;
    }
    return msg as JsonRpcMessage;
  }
  if (id === undefined) return "missing field `error`";
  if ("result" in obj) return { id, result: obj.result };
  if ("error" in obj) {
    const e = obj.error;
    if (e === null || typeof e !== "object" || Array.isArray(e)) {
      return `invalid type: ${describeJsonType(e)}, expected struct JSONRPCErrorError`;
    }
    const eo = e as Record<string, unknown>;
    if (typeof eo.code !== "number" || !Number.isInteger(eo.code)) {
      return "missing field `code`";
    }
    if (typeof eo.message !== "string") return "missing field `message`";
    const error: JsonRpcErrorObject = { code: eo.code, message: eo.message };
    if ("data" in eo) error.data = eo.data;
    return { id, error };
  }
  return "missing field `error`";
}

/**
 * Decodes one message from JSON text. Returns a {@linkcode MalformedMessage}
 * (with `prefix: detail` as its text) for anything unacceptable.
 */
export function decodeMessage(
  text: string,
  prefix: string,
  limits: StrictJsonLimits = DEFAULT_JSON_LIMITS,
): IncomingMessage {
  const parsed = parseStrictJson(text, limits);
  if (!parsed.ok) return { malformed: `${prefix}: ${parsed.message}` };
  const msg = classifyMessage(parsed.value, parsed.idSource);
  if (typeof msg === "string") return { malformed: `${prefix}: ${msg}` };
  return msg;
}

function encodeId(id: RequestId | null): string {
  if (typeof id === "bigint") return id.toString();
  return JSON.stringify(id);
}

/** Writes `bigint`s as exact JSON integers. */
function exactIntegers(_key: string, value: unknown): unknown {
  // deno-lint-ignore no-explicit-any
  return typeof value === "bigint" ? (JSON as any).rawJSON(value.toString()) : value;
}

/** `JSON.stringify`, with `bigint`s (integers beyond 2^53) written exactly. */
export function stringifyJson(value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch (error) {
    // Only a bigint makes a plain value fail (cycles cannot come from JSON).
    if (!(error instanceof TypeError)) throw error;
    return JSON.stringify(value, exactIntegers);
  }
}

/** Longest JSON value joined with the text around it (longer ones stay a part of their own). */
const JOIN_MAX = 16 * 1024;

/**
 * The message as parts: `head`, `value` and `tail`; a plain value short
 * enough is joined into one string (one part to encode).
 */
function withValue(head: string, value: unknown, tail: string): JsonPart[] {
  if (value instanceof RawJson) return [head, ...value.parts, tail];
  const json = stringifyJson(value) ?? "null";
  return json.length <= JOIN_MAX ? [head + json + tail] : [head, json, tail];
}

/**
 * Serialises a message as compact JSON with `"jsonrpc":"2.0"` first, as
 * consecutive string parts. `bigint` ids are written as exact integers.
 */
export function encodeMessageParts(msg: JsonRpcMessage): JsonPart[] {
  const m = msg as Partial<JsonRpcRequest & JsonRpcSuccess & JsonRpcFailure>;
  let head = '{"jsonrpc":"2.0"';
  if (m.id !== undefined) head += ',"id":' + encodeId(m.id);
  if (m.method !== undefined) {
    head += ',"method":' + JSON.stringify(m.method);
    const trace = m.id !== undefined && m.trace ? ',"trace":' + JSON.stringify(m.trace) : "";
    if (m.params === undefined) return [head + trace + "}"];
    return withValue(head + ',"params":', m.params, trace + "}");
  }
  if ("error" in m) return [head + ',"error":' + JSON.stringify(m.error) + "}"];
  return withValue(head + ',"result":', m.result, "}");
}

/** Serialises a message as one compact JSON string (see {@linkcode encodeMessageParts}). */
export function encodeMessage(msg: JsonRpcMessage): string {
  return encodeMessageParts(msg).join("");
}
