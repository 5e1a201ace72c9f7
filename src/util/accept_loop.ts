/**
 * The accept loop every listener here shares: accept connections (with
 * `TCP_NODELAY`), hand each to a handler, track them, and on close stop
 * accepting, close every open connection and wait for the handlers.
 *
 * @module
 */

/** A running accept loop. */
export interface ConnectionLoop {
  /** Resolves when accepting has stopped. */
  readonly accepting: Promise<void>;
  /** Stops accepting, closes open connections, waits for their handlers (idempotent). */
  close(): Promise<void>;
}

/** Forgets a connection early (e.g. it was handed over and will be closed elsewhere). */
export type Release = () => void;

/**
 * Accepts from `listener` until it closes; `handle` runs per connection
 * (its errors go to `onError`). Transient accept errors are reported and
 * accepting continues.
 */
export function acceptConnections(
  listener: Deno.Listener,
  handle: (conn: Deno.Conn, release: Release) => Promise<void>,
  onError: (error: unknown, during: "accept" | "handle") => void = () => {},
): ConnectionLoop {
  const open = new Set<Deno.Conn>();
  const tasks = new Set<Promise<void>>();
  const accepting = (async () => {
    for (;;) {
      let conn: Deno.Conn;
      try {
        conn = await listener.accept();
      } catch (error) {
        if (error instanceof Deno.errors.BadResource || error instanceof Deno.errors.Interrupted) {
          return;
        }
        onError(error, "accept");
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
