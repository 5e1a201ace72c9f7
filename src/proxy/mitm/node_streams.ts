/**
 * Adapters between Deno connections and Node streams, for `node:tls`
 * (the only way to run a TLS *server* session on an already-accepted
 * connection in Deno 2.9): a `Duplex` over a `Deno.Conn` (with bytes already
 * read pushed first), and a reader/writer pair over a Node socket with
 * backpressure (pause above a bound, resume when drained; writes wait for
 * `drain`).
 *
 * @module
 */

import { Duplex } from "node:stream";
import type { ChunkReader } from "../../http1/body.ts";
import { type ByteWriter, writeAll } from "../../util/conn_io.ts";

/** A Node `Duplex` over `conn`; `prefix` is read first. */
export function connDuplex(conn: Deno.Conn, prefix: Uint8Array | null): Duplex {
  let reading = false;
  const duplex = new Duplex({
    read() {
      if (reading) return;
      reading = true;
      (async () => {
        try {
          for (;;) {
            const buffer = new Uint8Array(64 * 1024);
            const n = await conn.read(buffer);
            if (n === null) {
              duplex.push(null);
              return;
            }
            if (!duplex.push(buffer.subarray(0, n))) return;
          }
        } catch (error) {
          duplex.destroy(error as Error);
        } finally {
          reading = false;
        }
      })();
    },
    write(chunk: Uint8Array, _encoding, callback) {
      writeAll(conn, chunk).then(() => callback(), (error) => callback(error as Error));
    },
    final(callback) {
      conn.closeWrite().then(() => callback(), () => callback());
    },
    destroy(error, callback) {
      try {
        conn.close();
      } catch { /* closed */ }
      callback(error);
    },
  });
  if (prefix?.length) duplex.unshift(prefix);
  return duplex;
}

interface NodeSocket {
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  once(event: string, listener: (...args: unknown[]) => void): unknown;
  pause(): unknown;
  resume(): unknown;
  write(data: Uint8Array): boolean;
  destroyed: boolean;
}

/** Reads a Node socket as chunks, pausing it while more than `limit` bytes wait. */
export function nodeReader(socket: NodeSocket, limit = 1024 * 1024): ChunkReader {
  const queue: Uint8Array[] = [];
  let queued = 0;
  let ended = false;
  let failure: unknown = null;
  let wake: (() => void) | null = null;
  const notify = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  socket.on("data", (chunk) => {
    const bytes = chunk as Uint8Array;
    queue.push(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    queued += bytes.byteLength;
    if (queued > limit) socket.pause();
    notify();
  });
  socket.on("end", () => {
    ended = true;
    notify();
  });
  socket.on("close", () => {
    ended = true;
    notify();
  });
  socket.on("error", (error) => {
    failure = error;
    notify();
  });
  return {
    async read() {
      for (;;) {
        const next = queue.shift();
        if (next) {
          queued -= next.length;
          if (queued <= limit / 2) socket.resume();
          return { done: false, value: next };
        }
        if (failure) throw failure;
        if (ended) return { done: true, value: undefined };
        await new Promise<void>((resolve) => (wake = resolve));
      }
    },
    cancel() {
      return Promise.resolve();
    },
  };
}

/** Writes to a Node socket, waiting for `drain` when its buffer is full. */
export function nodeWriter(socket: NodeSocket): ByteWriter {
  return {
    write(data: Uint8Array) {
      if (socket.destroyed) return Promise.reject(new Error("socket closed"));
      return new Promise<number>((resolve, reject) => {
        if (socket.write(data)) return resolve(data.length);
        const onDrain = () => resolve(data.length);
        socket.once("drain", onDrain);
        socket.once("close", () => reject(new Error("socket closed")));
      });
    },
  };
}
