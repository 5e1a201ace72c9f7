/**
 * What the server sends a client unasked, routed: process events to their
 * {@linkcode RemoteProcess} (never holding up the connection: each process
 * has its own flow control), HTTP body deltas to their `Response` bodies,
 * network policy questions and decisions to the harness's callbacks. Also
 * ends them all when the session is lost or the client closes.
 *
 * @module
 */

import { JsonRpcCode, RpcError } from "../jsonrpc/errors.ts";
import type { Logger } from "../log/logger.ts";
import { ServerNotification, ServerRequest } from "../protocol/methods.ts";
import type {
  HttpBodyDeltaNotification,
  NetworkPolicyDecisionNotification,
  NetworkPolicyRequestParams,
  NetworkPolicyRequestResult,
  ProcessClosedNotification,
  ProcessExitedNotification,
  ProcessOutputNotification,
} from "../protocol/types.ts";
import { BodyStreams } from "./fetch.ts";
import { chunkEvent, type RemoteProcess } from "./process.ts";

/** The harness's answers to what the server asks or tells (see `ConnectOptions`). */
export interface RouterHooks {
  /** Decides `network/policyRequest`; without it the answer is an error (the proxy denies). */
  readonly onNetworkPolicyRequest?: (
    question: NetworkPolicyRequestParams,
  ) => NetworkPolicyRequestResult["decision"] | Promise<NetworkPolicyRequestResult["decision"]>;
  /** Hears every `network/policyDecision`. */
  readonly onNetworkPolicyDecision?: (decision: NetworkPolicyDecisionNotification) => void;
  /** Unknown notifications are logged here at `debug`. */
  readonly logger: Logger;
}

/** See the module documentation. */
export class ClientRouter {
  /** The session's processes this client follows, by id. */
  readonly processes: Map<string, RemoteProcess> = new Map();
  /** Streamed `http/request` bodies being received. */
  readonly bodies: BodyStreams = new BodyStreams();
  readonly #hooks: RouterHooks;

  /** A router answering with `hooks`. */
  constructor(hooks: RouterHooks) {
    this.#hooks = hooks;
  }

  /** A request from the server: only `network/policyRequest` is one. */
  async onServerRequest(method: string, params: unknown): Promise<NetworkPolicyRequestResult> {
    const decide = this.#hooks.onNetworkPolicyRequest;
    if (method !== ServerRequest.NetworkPolicyRequest || !decide) {
      throw new RpcError(JsonRpcCode.MethodNotFound, `method not found: ${method}`);
    }
    return { decision: await decide(params as NetworkPolicyRequestParams) };
  }

  /** A notification from the server (a promise only while a body's reader is behind). */
  onNotification(method: string, params: unknown): Promise<void> | void {
    switch (method) {
      case ServerNotification.ProcessOutput: {
        const p = params as ProcessOutputNotification;
        this.processes.get(p.processId)?.accept(chunkEvent(p));
        return;
      }
      case ServerNotification.ProcessExited: {
        const p = params as ProcessExitedNotification;
        this.processes.get(p.processId)?.accept({
          kind: "exited",
          seq: p.seq,
          code: p.exitCode,
          signal: p.signal ?? null,
        });
        return;
      }
      case ServerNotification.ProcessClosed: {
        const p = params as ProcessClosedNotification;
        this.processes.get(p.processId)?.accept({ kind: "closed", seq: p.seq });
        return;
      }
      case ServerNotification.HttpBodyDelta:
        return this.bodies.accept(params as HttpBodyDeltaNotification) ?? undefined;
      case ServerNotification.NetworkPolicyDecision:
        this.#hooks.onNetworkPolicyDecision?.(params as NetworkPolicyDecisionNotification);
        return;
      default:
        this.#hooks.logger.debug("client.notification", { method });
    }
  }

  /** Ends every process and body with `reason` (the session is gone). */
  failAll(reason: string, error?: Error): void {
    for (const p of [...this.processes.values()]) p.fail(reason, error);
    this.processes.clear();
    this.bodies.failAll(reason);
  }

  /** After a resume: each process reads what it missed. */
  async catchUpAll(): Promise<void> {
    await Promise.all([...this.processes.values()].map((p) => p.catchUp().catch(() => {})));
  }
}
