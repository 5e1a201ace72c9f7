/**
 * Reads a diagnostic byte stream (a child's stderr) line by line with a
 * bound: a line that reaches `maxLineBytes` without a newline is handed out
 * as an overflow and forgotten, so a child printing one endless line costs
 * at most `maxLineBytes` of memory.
 *
 * @module
 */

/** Options of {@linkcode drainLines}. */
export interface DrainLinesOptions {
  /** Longest line kept, in bytes. */
  readonly maxLineBytes: number;
  /** A complete line (trailing CR removed; empty lines skipped). */
  readonly onLine: (line: string) => void;
  /** The first `maxLineBytes` of a longer line. Default: `onLine`. */
  readonly onOverflow?: (partial: string) => void;
  /** Stops reading (the stream is cancelled): a pipe a grandchild holds may never end. */
  readonly signal?: AbortSignal;
}

/** Consumes `stream` to its end (read errors end it quietly). */
export async function drainLines(
  stream: ReadableStream<Uint8Array>,
  options: DrainLinesOptions,
): Promise<void> {
  const decoder = new TextDecoder();
  const buffer = new Uint8Array(options.maxLineBytes);
  let length = 0;
  const emit = (overflow: boolean) => {
    let text = decoder.decode(buffer.subarray(0, length));
    length = 0;
    if (text.endsWith("\r")) text = text.slice(0, -1);
    if (text === "") return;
    if (overflow) (options.onOverflow ?? options.onLine)(text);
    else options.onLine(text);
  };
  const reader = stream.getReader();
  const stop = () => void reader.cancel().catch(() => {});
  if (options.signal?.aborted) stop();
  options.signal?.addEventListener("abort", stop, { once: true });
  try {
    for (;;) {
      const { value: chunk, done } = await reader.read();
      if (done) break;
      let start = 0;
      while (start < chunk.length) {
        const nl = chunk.indexOf(0x0a, start);
        const end = nl === -1 ? chunk.length : nl;
        let from = start;
        while (from < end) {
          const take = Math.min(end - from, buffer.length - length);
          buffer.set(chunk.subarray(from, from + take), length);
          length += take;
          from += take;
          if (length === buffer.length) emit(true);
        }
        if (nl === -1) break;
        emit(false);
        start = nl + 1;
      }
    }
  } catch {
    // The pipe broke: what was read is reported below.
  } finally {
    options.signal?.removeEventListener("abort", stop);
    reader.releaseLock();
  }
  emit(false);
}
