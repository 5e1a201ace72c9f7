/**
 * A byte relay between this process's stdio and a Unix domain socket, so an
 * MCP client that can only launch stdio servers can reach a long-running
 * server on a socket (the reference's `codex-stdio-to-uds`).
 *
 * stdin → socket, then the socket's write half is shut down so the peer sees
 * end of input; socket → stdout until the socket ends. The relay finishes
 * only when both directions have. No framing, no logging.
 *
 * @module
 */

/** The socket could not be reached or the relay broke; the message is the reference's. */
export class StdioRelayError extends Error {
  /** Creates the error. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "StdioRelayError";
  }
}

/** Streams to relay (default: this process's stdin and stdout). */
export interface StdioRelayOptions {
  /** Bytes for the socket. */
  readonly input?: ReadableStream<Uint8Array>;
  /** Receives the socket's bytes; closed only if `closeOutput`. */
  readonly output?: WritableStream<Uint8Array>;
  /** Close `output` when the socket ends (default false: stdout stays open). */
  readonly closeOutput?: boolean;
}

/**
 * Connects to the socket at `path` and relays until both directions are
 * done; throws {@linkcode StdioRelayError}.
 */
export async function relayStdioToUnixSocket(
  path: string,
  options: StdioRelayOptions = {},
): Promise<void> {
  let conn: Deno.UnixConn;
  try {
    conn = await Deno.connect({ transport: "unix", path });
  } catch (error) {
    throw new StdioRelayError(
      `failed to connect to socket at ${path}: ${(error as Error).message}`,
      {
        cause: error,
      },
    );
  }
  const input = options.input ?? Deno.stdin.readable;
  const output = options.output ?? Deno.stdout.writable;
  const upstream = (async () => {
    try {
      await input.pipeTo(conn.writable, { preventClose: true });
    } catch (error) {
      throw new StdioRelayError(
        `failed to relay data between stdio and socket: failed to copy data from stdin to socket: ${
          (error as Error).message
        }`,
        { cause: error },
      );
    }
    try {
      await conn.closeWrite();
    } catch (error) {
      // The peer may already be gone.
      if (!(error instanceof Deno.errors.NotConnected)) throw error;
    }
  })();
  const downstream = (async () => {
    // Read with `conn.read`: ending `conn.readable` would close the whole
    // socket, and stdin may still be flowing to a peer that only half-closed.
    const writer = output.getWriter();
    try {
      for (;;) {
        const buffer = new Uint8Array(64 * 1024);
        const n = await conn.read(buffer);
        if (n === null) break;
        await writer.write(buffer.subarray(0, n));
      }
      if (options.closeOutput) await writer.close();
    } catch (error) {
      throw new StdioRelayError(
        `failed to relay data between stdio and socket: failed to copy data from socket to stdout: ${
          (error as Error).message
        }`,
        { cause: error },
      );
    } finally {
      writer.releaseLock();
    }
  })();
  try {
    // The first failure ends the relay; closing the socket ends the other side.
    await Promise.all([upstream, downstream]);
  } finally {
    try {
      conn.close();
    } catch { /* closed by a pipe */ }
  }
}
