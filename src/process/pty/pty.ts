/**
 * A pseudo-terminal master, from Deno.
 *
 * Why this shape (see the module header of `spawn_pty.ts` for the spawn):
 * Deno has no PTY API, so the master comes from libc through FFI
 * (`posix_openpt` with `O_CLOEXEC` — without it every later child inherits
 * the master and hang-ups never happen — then `grantpt`, `unlockpt`,
 * `ptsname_r`, and `TIOCSWINSZ` for the size before the child starts).
 * Reading goes through `node:tty`'s `ReadStream`, which registers the fd
 * with Deno's reactor: no thread per terminal, pause/resume for
 * backpressure, and `EIO` once the last slave closes (end of output). It is
 * loaded by {@linkcode loadTerminalReader} before the first terminal (Node's
 * modules would cost every server megabytes of memory it may never use).
 * Writing does not use that stream (in Deno 2.9.6 a write that meets a full
 * terminal input buffer never completes): it is a plain FFI `write()`, and
 * on `EAGAIN` a non-blocking FFI `poll(POLLOUT)` waits for room.
 *
 * @module
 */

import type { ReadStream } from "node:tty";
import { C, errno, type Libc, strerror } from "../../util/libc.ts";

let TerminalReader: typeof ReadStream | undefined;

/** Loads what reads a terminal; resolves at once once loaded. Await it before the first {@linkcode Pty}. */
export async function loadTerminalReader(): Promise<void> {
  TerminalReader ??= (await import("node:tty")).ReadStream;
}

/** Sets the window size of the terminal behind `fd`. */
export function setWindowSize(libc: Libc, fd: number, rows: number, cols: number): void {
  const size = new Uint16Array([rows, cols, 0, 0]);
  if (libc.ioctl(fd, C.TIOCSWINSZ, size) !== 0) {
    throw new Error(`TIOCSWINSZ failed: ${strerror(libc, errno(libc))}`);
  }
}

/** An open master with its slave's path. */
export class Pty {
  /** The slave device, e.g. `/dev/pts/3`. */
  readonly slavePath: string;
  /** Output of the terminal (everything the child writes), ends at hang-up. */
  readonly readable: ReadableStream<Uint8Array>;
  /** Input to the terminal, in order. Closing it sends end-of-file (`^D`). */
  readonly writable: WritableStream<Uint8Array>;

  #libc: Libc;
  #fd: number;
  #slaveFd: number;
  #closed = false;
  #stream: ReadStream;

  /** Allocates a master sized `rows` × `cols`. Throws when the OS refuses. */
  constructor(libc: Libc, rows: number, cols: number) {
    this.#libc = libc;
    if (!TerminalReader) throw new Error("internal error: a terminal before loadTerminalReader()");
    const fd = libc.posix_openpt(C.O_RDWR | C.O_NOCTTY | C.O_CLOEXEC);
    if (fd < 0) throw new Error(`posix_openpt failed: ${strerror(libc, errno(libc))}`);
    this.#fd = fd;
    const name = new Uint8Array(128);
    if (
      libc.grantpt(fd) !== 0 || libc.unlockpt(fd) !== 0 ||
      libc.ptsname_r(fd, name, BigInt(name.length)) !== 0
    ) {
      const why = strerror(libc, errno(libc));
      libc.close(fd);
      throw new Error(`cannot prepare the pseudo-terminal: ${why}`);
    }
    this.slavePath = new TextDecoder().decode(name.subarray(0, name.indexOf(0)));
    setWindowSize(libc, fd, rows, cols);
    // Hold a slave open until the child has exited: end of output (EIO)
    // then always comes — even for a child killed before it opened the
    // terminal — and the pts number cannot be recycled under the child.
    this.#slaveFd = libc.open(
      new TextEncoder().encode(this.slavePath + "\0"),
      C.O_RDWR | C.O_NOCTTY | C.O_CLOEXEC,
    );
    if (this.#slaveFd < 0) {
      const why = strerror(libc, errno(libc));
      libc.close(fd);
      throw new Error(`cannot open ${this.slavePath}: ${why}`);
    }
    // From here the stream owns the fd (it closes it at EIO or destroy()).
    this.#stream = new TerminalReader(fd);
    this.readable = this.#makeReadable();
    this.writable = new WritableStream<Uint8Array>({
      write: (chunk) => this.#writeAll(chunk),
      close: () => this.#writeAll(new Uint8Array([0x04])).catch(() => {}),
    });
  }

  /** True once the master is closed (after hang-up or {@linkcode close}). */
  get closed(): boolean {
    return this.#closed;
  }

  #makeReadable(): ReadableStream<Uint8Array> {
    const stream = this.#stream;
    return new ReadableStream<Uint8Array>({
      start: (controller) => {
        stream.on("data", (data: Uint8Array) => {
          controller.enqueue(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
          const size = controller.desiredSize;
          if (size !== null && size <= 0) stream.pause();
        });
        // EIO: the last slave closed. Every byte written before is already read.
        stream.on("error", () => {});
        stream.on("close", () => {
          this.#closed = true;
          try {
            controller.close();
          } catch { /* cancelled */ }
        });
      },
      pull: () => {
        if (stream.isPaused()) stream.resume();
      },
      cancel: () => this.close(),
    }, new ByteLengthQueuingStrategy({ highWaterMark: 256 * 1024 }));
  }

  async #writeAll(bytes: Uint8Array): Promise<void> {
    const libc = this.#libc;
    let offset = 0;
    const pollfd = new Uint8Array(8);
    const view = new DataView(pollfd.buffer);
    while (offset < bytes.length) {
      if (this.#closed) throw new Error("the terminal is closed");
      const n = Number(libc.write(this.#fd, bytes.subarray(offset), BigInt(bytes.length - offset)));
      if (n >= 0) {
        offset += n;
        continue;
      }
      const e = errno(libc);
      if (e === C.EINTR) continue;
      if (e !== C.EAGAIN) throw new Error(`write to the terminal failed: ${strerror(libc, e)}`);
      // Full: wait (off the main thread) until the terminal takes input again.
      view.setInt32(0, this.#fd, true);
      view.setInt16(4, C.POLLOUT, true);
      view.setInt16(6, 0, true);
      await libc.poll(pollfd, 1n, 100);
    }
  }

  /** Changes the window size; the kernel sends SIGWINCH to the foreground group. */
  resize(rows: number, cols: number): void {
    if (this.#closed) throw new Error("the terminal is closed");
    setWindowSize(this.#libc, this.#fd, rows, cols);
  }

  /** The terminal's foreground process group, when it has one. */
  foregroundGroup(): number | null {
    if (this.#closed) return null;
    const out = new Int32Array(1);
    return this.#libc.ioctl(this.#fd, C.TIOCGPGRP, new Uint8Array(out.buffer)) === 0 && out[0]! > 0
      ? out[0]!
      : null;
  }

  /** Closes our slave descriptor (call once the child has exited). */
  releaseSlave(): void {
    if (this.#slaveFd < 0) return;
    this.#libc.close(this.#slaveFd);
    this.#slaveFd = -1;
  }

  /** Closes the master (the session gets SIGHUP if still running). */
  close(): void {
    this.releaseSlave();
    if (this.#closed) return;
    this.#closed = true;
    this.#stream.destroy();
  }
}
