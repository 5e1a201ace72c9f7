/**
 * The protocol's one table, merged from its families (`lifecycle.ts`,
 * `process.ts`, `fs.ts`, `http.ts`, `network.ts`; see `table.ts`): every
 * request method with its params, result and decoded params
 * ({@linkcode MethodMap}), how the server decodes and dispatches it
 * ({@linkcode REQUESTS}), and every notification with its payload
 * ({@linkcode NotificationMap}). The server's method definitions and the
 * client's calls are typed from it; a method is added by adding its row to
 * its family.
 *
 * @module
 */

import {
  type FsDecoded,
  FsMethod,
  type FsMethods,
  FsNotification,
  type FsNotifications,
  fsRequests,
} from "./fs.ts";
import {
  type HttpDecoded,
  HttpMethod,
  type HttpMethods,
  HttpNotification,
  type HttpNotifications,
  httpRequests,
} from "./http.ts";
import {
  type LifecycleDecoded,
  LifecycleMethod,
  type LifecycleMethods,
  lifecycleRequests,
} from "./lifecycle.ts";
import { NetworkNotification, type NetworkNotifications } from "./network.ts";
import {
  type ProcessDecoded,
  ProcessMethod,
  type ProcessMethods,
  ProcessNotification,
  type ProcessNotifications,
  processRequests,
} from "./process.ts";
import type { RequestRow } from "./table.ts";

export { ClientNotification } from "./lifecycle.ts";
export { ServerRequest } from "./network.ts";
export type { EmptyResult } from "./table.ts";

/** Client → server requests, by name. */
export const Method: Readonly<
  & typeof LifecycleMethod
  & typeof ProcessMethod
  & typeof FsMethod
  & typeof HttpMethod
> = {
  ...LifecycleMethod,
  ...ProcessMethod,
  ...FsMethod,
  ...HttpMethod,
};

/** Server → client notifications, by name. */
export const ServerNotification: Readonly<
  & typeof ProcessNotification
  & typeof HttpNotification
  & typeof FsNotification
  & typeof NetworkNotification
> = {
  ...ProcessNotification,
  ...HttpNotification,
  ...FsNotification,
  ...NetworkNotification,
};

/** Method name → params, result and decoded params (wire shapes: paths are `file:` URIs). */
export interface MethodMap extends LifecycleMethods, ProcessMethods, FsMethods, HttpMethods {}

/** Notification name → payload. */
export interface NotificationMap
  extends ProcessNotifications, FsNotifications, HttpNotifications, NetworkNotifications {}

/** Any request method name. */
export type MethodName = keyof MethodMap;

/** The params of method `M`. */
export type MethodParams<M extends MethodName> = MethodMap[M]["params"];
/** The result of method `M`. */
export type MethodResult<M extends MethodName> = MethodMap[M]["result"];
/** What the families' decoders give their handlers, where more than the params as sent. */
interface DecodedMap extends LifecycleDecoded, ProcessDecoded, FsDecoded, HttpDecoded {}

/** The params of method `M` as its decoder gives them to a handler. */
export type DecodedParams<M extends MethodName> = M extends keyof DecodedMap ? DecodedMap[M]
  : MethodParams<M>;
/** Any server → client notification name. */
export type NotificationName = keyof NotificationMap;

/** The payload of notification `N`. */
export type NotificationParams<N extends NotificationName> = NotificationMap[N];

/** Sends one typed request (what the client's parts share). */
export type RequestFn = <M extends MethodName>(
  method: M,
  params: MethodParams<M>,
) => Promise<MethodResult<M>>;

/** How the server decodes and dispatches each method. */
export const REQUESTS: { readonly [M in MethodName]: RequestRow<DecodedParams<M>> } = {
  ...lifecycleRequests,
  ...processRequests,
  ...fsRequests,
  ...httpRequests,
};

/**
 * Each method's base64 params member (`base64` of its row), for the
 * transports' decoding of large messages.
 */
export const BASE64_MEMBERS: ReadonlyMap<string, string> = new Map(
  Object.entries(REQUESTS as Record<string, RequestRow<unknown>>).flatMap(([method, row]) =>
    row.base64 === undefined ? [] : [[method, row.base64] as const]
  ),
);

// Every name is a row, and every row a name.
type Missing = Exclude<typeof Method[keyof typeof Method], MethodName>;
type Extra = Exclude<MethodName, typeof Method[keyof typeof Method]>;
const complete: [Missing, Extra] extends [never, never] ? true : never = true;
void complete;
