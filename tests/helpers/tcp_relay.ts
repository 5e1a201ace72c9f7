// A TCP relay in front of servers on 127.0.0.1, for outages a test controls:
// each connection goes to the first port of `ports()` that accepts; `cut()`
// closes every relayed connection and refuses new ones until `restore()`.

/** A running relay. */
export interface TcpRelay extends AsyncDisposable {
  /** Where it listens. */
  readonly port: number;
  /** Closes the relayed connections and refuses new ones. */
  cut(): void;
  /** Accepts again. */
  restore(): void;
}

/** Starts a relay on a free port to the first of `ports()` that accepts. */
export function tcpRelay(ports: () => readonly number[]): TcpRelay {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const open = new Set<Deno.Conn>();
  let up = true;
  const close = (c: Deno.Conn) => {
    open.delete(c);
    try {
      c.close();
    } catch { /* closed */ }
  };
  const relay = async (conn: Deno.Conn) => {
    open.add(conn);
    let upstream: Deno.Conn | null = null;
    for (const port of ports()) {
      try {
        upstream = await Deno.connect({ hostname: "127.0.0.1", port });
        break;
      } catch { /* the next one */ }
    }
    if (!upstream) {
      close(conn);
      return;
    }
    open.add(upstream);
    await Promise.race([
      conn.readable.pipeTo(upstream.writable).catch(() => {}),
      upstream.readable.pipeTo(conn.writable).catch(() => {}),
    ]);
    close(conn);
    close(upstream);
  };
  const accepting = (async () => {
    for await (const conn of listener) {
      if (up) void relay(conn);
      else conn.close();
    }
  })();
  return {
    port: (listener.addr as Deno.NetAddr).port,
    cut() {
      up = false;
      for (const c of [...open]) close(c);
    },
    restore() {
      up = true;
    },
    async [Symbol.asyncDispose]() {
      this.cut();
      listener.close();
      await accepting.catch(() => {});
    },
  };
}
