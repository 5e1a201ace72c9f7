/**
 * The accept loop every listener here shares: accept connections (with
 * `TCP_NODELAY`), hand each to a handler, track them, and on close stop
 * accepting, close every open connection and wait for the handlers.
 *
 * @module
 */

/** A running accept loop. */
export interface ConnectionLoop {
  /**
   * Resolves when accepting has stopped: `null` when the listener was
   * closed, else why it died (accept kept failing).
   */
  readonly accepting: Promise<Error | null>;
  /** Stops accepting, closes open connections, waits for their handlers (idempotent). */
  close(): Promise<void>;
}

/** Forgets a connection early (e.g. it was handed over and will be closed elsewhere). */
export type Release = () => void;

/** Consecutive failed accepts (with backoff, about 1.3 s in all) after which a listener is dead. */
export const MAX_ACCEPT_FAILURES = 8;

/**
 * Accepts from `listener` until it closes; `handle` runs per connection
 * (its errors go to `onError`). A failed accept is reported and retried
 * after a backoff (5 ms, doubling, at most 1 s) — never in a busy loop —
 * and after {@linkcode MAX_ACCEPT_FAILURES} in a row the listener is
 * dead: accepting stops and `accepting` resolves with the last error.
 */
export function acceptConnections(
  listener: Deno.Listener,
  handle: (conn: Deno.Conn, release: Release) => Promise<void>,
  onError: (error: unknown, during: "accept" | "handle") => void = () => {},
): ConnectionLoop {
  const open = new Set<Deno.Conn>();
  const tasks = new Set<Promise<void>>();
  let closed = false;
  const accepting = (async (): Promise<Error | null> => {
    let failures = 0;
    for (;;) {
      let conn: Deno.Conn;
      try {
        conn = await listener.accept();
        failures = 0;
      } catch (error) {
        if (
          closed || error instanceof Deno.errors.BadResource ||
          error instanceof Deno.errors.Interrupted
        ) {
          return closed ? null : error instanceof Error ? error : new Error(String(error));
        }
        onError(error, "accept");
        if (++failures >= MAX_ACCEPT_FAILURES) {
          return error instanceof Error ? error : new Error(String(error));
        }
        await new Promise((r) => setTimeout(r, Math.min(1000, 5 * 2 ** (failures - 1))));
        continue;
      }
      try {
        // Small messages must not wait for Nagle's algorithm.
        (conn as Deno.TcpConn).setNoDelay(true);
      } catch { /* not TCP */ }
      open.add(conn);
      const task = handle(conn, () => open.delete(conn))
        .catch((error) => onError(error, "handle"))
        .finally(() => {
          open.delete(conn);
          tasks.delete(task);
        });
      tasks.add(task);
    }
  })();
  let closing: Promise<void> | null = null;
  return {
    accepting,
    close() {
      closing ??= (async () => {
        closed = true;
        try {
          listener.close();
        } catch { /* closed */ }
        await accepting;
        for (const c of open) {
          try {
            c.close();
          } catch { /* closed */ }
        }
        open.clear();
        await Promise.allSettled([...tasks]);
      })();
      return closing;
    },
  };
}
