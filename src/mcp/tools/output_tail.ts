/**
 * Collects a process's output for a model: everything up to a bound, then
 * only the newest bytes, counting what was dropped — memory stays bounded
 * however much a command prints, and the process is never slowed down.
 *
 * @module
 */

import { concatBytes } from "../../util/bytes.ts";

/** A bounded output collector; {@linkcode OutputTail.take} drains it. */
export class OutputTail {
  #chunks: Uint8Array[] = [];
  #size = 0;
  #dropped = 0;

  /** Keeps at most `limit` bytes between two takes. */
  constructor(readonly limit: number) {}

  /** Adds bytes, dropping the oldest beyond the limit. */
  push(bytes: Uint8Array): void {
    this.#chunks.push(bytes.slice());
    this.#size += bytes.length;
    while (this.#size > this.limit) {
      const head = this.#chunks[0]!;
      const excess = this.#size - this.limit;
      if (head.length <= excess) {
        this.#chunks.shift();
        this.#size -= head.length;
        this.#dropped += head.length;
      } else {
        this.#chunks[0] = head.subarray(excess);
        this.#size -= excess;
        this.#dropped += excess;
      }
    }
  }

  /** Returns the collected text and how many bytes were dropped, and resets. */
  take(): { text: string; omittedBytes: number } {
    const all = concatBytes(this.#chunks, this.#size);
    const result = { text: new TextDecoder().decode(all), omittedBytes: this.#dropped };
    this.#chunks = [];
    this.#size = 0;
    this.#dropped = 0;
    return result;
  }
}

/** Pumps `stream` into `tail` until it ends (errors end it quietly). */
export async function collectInto(
  stream: ReadableStream<Uint8Array>,
  tail: OutputTail,
): Promise<void> {
  try {
    for await (const chunk of stream) tail.push(chunk);
  } catch {
    // The process or the connection went away; what arrived is kept.
  }
}
