/**
 * The HTTP family (`http/request` and its body flow extensions): wire
 * types, decoders, its rows of the method table and its notification (see
 * `table.ts`).
 *
 * @module
 */

import {
  array,
  boolean,
  bytes,
  type DecodedOf,
  nullable,
  optional,
  string,
  struct,
  structOf,
  u64,
  unitEnum,
  withDefault,
} from "./decode.ts";
import type { RequestTable, Row } from "./table.ts";

/**
 * Params of `http/request/pauseBody`, `http/request/resumeBody` and
 * `http/request/cancelBody` (extension): one streamed response body.
 */
export interface HttpBodyFlowParams {
  /** The `requestId` of the streamed `http/request`. */
  requestId: string;
}

/** Result of the body flow methods. */
export interface HttpBodyFlowResult {
  /** The stream was still active (false: it had already ended). */
  active: boolean;
}

/** One request header. */
export interface HttpHeaderParam {
  /** Header name. */
  name: string;
  /** Value (prefix when `valueEnvVar` is set). */
  value: string;
  /** Append the value of this server environment variable. */
  valueEnvVar?: string | null;
}

/** Params of `http/request`. */
export interface HttpRequestParams {
  /** Method, sent as given. */
  method: string;
  /** Absolute `http(s)` URL. */
  url: string;
  /** Ordered headers, repeats kept. */
  headers?: HttpHeaderParam[];
  /** Body (base64). */
  bodyBase64?: string | null;
  /** Deadline for the whole exchange (milliseconds). */
  timeoutMs?: number | null;
  /** `follow` (default) or `stop`. */
  redirectPolicy?: "follow" | "stop";
  /** Stream id for body deltas. */
  requestId: string;
  /** Deliver the body as `http/request/bodyDelta` notifications. */
  streamResponse?: boolean;
}

/** One response header. */
export interface HttpHeader {
  /** Lower-case name. */
  name: string;
  /** Value. */
  value: string;
}

/** Result of `http/request`. */
export interface HttpResponseResult {
  /** Status code. */
  status: number;
  /** Headers in order. */
  headers: HttpHeader[];
  /** Body (base64; empty when streamed). */
  bodyBase64: string;
}

/** `http/request/bodyDelta` notification. */
export interface HttpBodyDeltaNotification {
  /** The stream. */
  requestId: string;
  /** From 1. */
  seq: number;
  /** Bytes (base64). */
  deltaBase64: string;
  /** Last delta. */
  done: boolean;
  /** Failure message on the last delta, else null. */
  error: string | null;
}

/** `http/request/pauseBody`, `resumeBody` and `cancelBody`. */
const httpBodyFlowParams = struct<HttpBodyFlowParams>("HttpBodyFlowParams", {
  requestId: string,
});

const httpHeader = struct<HttpHeaderParam>("HttpHeader", {
  name: string,
  value: string,
  valueEnvVar: nullable(string),
});

/** `http/request`. */
const httpRequestParams = structOf("HttpRequestParams", {
  method: string,
  url: string,
  headers: withDefault(array(httpHeader), []),
  bodyBase64: optional(bytes),
  timeoutMs: optional(u64),
  redirectPolicy: withDefault(unitEnum(["follow", "stop"]), "follow"),
  requestId: string,
  streamResponse: withDefault(boolean, false),
});

/** Decoded `http/request` params (body bytes decoded, defaults applied). */
export type DecodedHttpRequest = DecodedOf<typeof httpRequestParams>;

/** The family's request names. */
export const HttpMethod = {
  HttpRequest: "http/request",
  HttpPauseBody: "http/request/pauseBody",
  HttpResumeBody: "http/request/resumeBody",
  HttpCancelBody: "http/request/cancelBody",
} as const;

/** The family's notification names (server → client). */
export const HttpNotification = {
  HttpBodyDelta: "http/request/bodyDelta",
} as const;

/** The family's rows of the method table. */
export interface HttpMethods {
  /** `http/request`. */
  [HttpMethod.HttpRequest]: Row<HttpRequestParams, HttpResponseResult>;
  /** `http/request/pauseBody` (extension). */
  [HttpMethod.HttpPauseBody]: Row<HttpBodyFlowParams, HttpBodyFlowResult>;
  /** `http/request/resumeBody` (extension). */
  [HttpMethod.HttpResumeBody]: Row<HttpBodyFlowParams, HttpBodyFlowResult>;
  /** `http/request/cancelBody` (extension). */
  [HttpMethod.HttpCancelBody]: Row<HttpBodyFlowParams, HttpBodyFlowResult>;
}

/** The family's notification payloads. */
export interface HttpNotifications {
  /** `http/request/bodyDelta`. */
  [HttpNotification.HttpBodyDelta]: HttpBodyDeltaNotification;
}

/** What the family's decoders give its handlers, where more than the params as sent. */
export interface HttpDecoded {
  [HttpMethod.HttpRequest]: DecodedHttpRequest;
}

/** How the server decodes and dispatches the family's requests. */
export const httpRequests: RequestTable<HttpMethods, HttpDecoded> = {
  [HttpMethod.HttpRequest]: { decode: httpRequestParams, base64: "bodyBase64" },
  [HttpMethod.HttpPauseBody]: { decode: httpBodyFlowParams, lane: "control" },
  [HttpMethod.HttpResumeBody]: { decode: httpBodyFlowParams, lane: "control" },
  [HttpMethod.HttpCancelBody]: { decode: httpBodyFlowParams, lane: "control" },
};
