/**
 * The client's error vocabulary, one class per situation a harness branches
 * on:
 *
 * | Class                    | When                                                              |
 * | ------------------------ | ----------------------------------------------------------------- |
 * | `ConnectTimeoutError`    | the transport did not open within `connectTimeoutMs`              |
 * | `InitializeTimeoutError` | the server did not answer `initialize` within `initializeTimeoutMs` |
 * | `CallTimeoutError`       | a call got no answer within its `timeoutMs`                       |
 * | `DisconnectedError`      | no connection now: the call was not delivered, or its answer lost |
 * | `ClientClosedError`      | `close()` was called (or the client cannot reconnect)             |
 * | `SessionLostError`       | the server no longer had the session; its processes are gone     |
 * | `EnvironmentNotReadyError` | `ConnectOptions.ready` rejected: the environment did not come up |
 * | `RpcError`               | the server answered with an error (`code`, `message`, `data`)    |
 *
 * `DisconnectedError`, `ClientClosedError` and `SessionLostError` are
 * `ConnectionClosedError`s, so code written against that class keeps
 * working.
 *
 * @module
 */

import { CallTimeoutError, ConnectionClosedError, RpcError } from "../jsonrpc/errors.ts";

export { CallTimeoutError, ConnectionClosedError, RpcError };

/** The transport to the server did not open in time. */
export class ConnectTimeoutError extends Error {
  /** What was being opened (the URL or command). */
  readonly target: string;
  /** The deadline. */
  readonly timeoutMs: number;
  /** Opening `target` took longer than `timeoutMs`. */
  constructor(target: string, timeoutMs: number) {
    super(`connect to ${target} timed out after ${timeoutMs} ms`);
    this.name = "ConnectTimeoutError";
    this.target = target;
    this.timeoutMs = timeoutMs;
  }
}

/** The server did not answer `initialize` in time. */
export class InitializeTimeoutError extends Error {
  /** The server (URL or command). */
  readonly target: string;
  /** The deadline. */
  readonly timeoutMs: number;
  /** `target` did not answer `initialize` within `timeoutMs`. */
  constructor(target: string, timeoutMs: number) {
    super(`initialize with ${target} timed out after ${timeoutMs} ms`);
    this.name = "InitializeTimeoutError";
    this.target = target;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * There is no connection now. The call was either never sent (the
 * connection could not be re-established: `cause` says why) or sent and its
 * answer lost with the connection. A later call tries to reconnect.
 */
export class DisconnectedError extends ConnectionClosedError {
  /** Creates the error. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "DisconnectedError";
  }
}

/** The client was closed; it makes no more calls. */
export class ClientClosedError extends ConnectionClosedError {
  /** Creates the error. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ClientClosedError";
  }
}

/**
 * The server no longer knew the client's session (it expired or the server
 * restarted): the session's processes are gone. The client continues in a
 * fresh session.
 */
export class SessionLostError extends ConnectionClosedError {
  /** The session that was lost. */
  readonly sessionId: string;
  /** `sessionId` was lost for `reason`. */
  constructor(sessionId: string, reason: string) {
    super(`session ${sessionId} was lost: ${reason}`);
    this.name = "SessionLostError";
    this.sessionId = sessionId;
  }
}

/** The environment said it would not become ready (`ConnectOptions.ready` rejected). */
export class EnvironmentNotReadyError extends Error {
  /** Creates the error. */
  constructor(label: string, cause: unknown) {
    super(
      `environment ${label} did not become ready: ${
        cause instanceof Error ? cause.message : String(cause)
      }`,
      { cause },
    );
    this.name = "EnvironmentNotReadyError";
  }
}
