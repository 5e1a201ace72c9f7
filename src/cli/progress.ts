/**
 * A one-line transfer progress display for long CLI work (`fs put`,
 * `fs get`): bytes, rate and ETA, redrawn at most every 100 ms on a
 * terminal, silent when the output is piped.
 *
 * @module
 */

/** Where the bar is drawn: anything with a synchronous `writeSync`. */
export interface ProgressOutput {
  /** Writes bytes. */
  writeSync(bytes: Uint8Array): number;
}

/** Options of {@linkcode progressStream}. */
export interface ProgressOptions {
  /** What is moving (shown first). */
  label: string;
  /** Expected total bytes, when known. */
  total?: number;
  /** Where to draw; default: standard error. */
  output?: ProgressOutput;
  /** Minimum milliseconds between redraws; default 100. */
  intervalMs?: number;
  /** Clock; default `performance.now`. */
  now?: () => number;
}

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

/** Formats a byte count with a binary unit: `1.5 MiB`. */
export function formatBytes(n: number): string {
  let i = 0;
  let v = n;
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(1)} ${UNITS[i]}`;
}

function formatSeconds(s: number): string {
  if (!Number.isFinite(s)) return "--";
  const t = Math.round(s);
  return t >= 60 ? `${Math.floor(t / 60)}m${String(t % 60).padStart(2, "0")}s` : `${t}s`;
}

/** Renders one progress line (without the leading carriage return). */
export function progressLine(
  label: string,
  done: number,
  total: number | undefined,
  elapsedMs: number,
): string {
  const rate = elapsedMs > 0 ? done / (elapsedMs / 1000) : 0;
  const parts = [label];
  if (total !== undefined && total > 0) {
    const pct = Math.min(100, Math.floor((done / total) * 100));
    const width = 20;
    const filled = Math.round((pct / 100) * width);
    parts.push(`[${"#".repeat(filled)}${" ".repeat(width - filled)}] ${pct}%`);
    parts.push(`${formatBytes(done)} / ${formatBytes(total)}`);
  } else {
    parts.push(formatBytes(done));
  }
  parts.push(`${formatBytes(Math.round(rate))}/s`);
  if (total !== undefined && total > 0 && done < total) {
    parts.push(`ETA ${formatSeconds(rate > 0 ? (total - done) / rate : Infinity)}`);
  }
  return parts.join("  ");
}

/**
 * A pass-through byte stream that draws progress as chunks flow; the final
 * line (with the total time) is drawn when the stream ends.
 *
 * @example
 * ```ts
 * import { progressStream } from "./progress.ts";
 * const sink: Uint8Array[] = [];
 * const out = { writeSync: (b: Uint8Array) => (sink.push(b), b.length) };
 * await ReadableStream.from([new Uint8Array(10)])
 *   .pipeThrough(progressStream({ label: "demo", total: 10, output: out }))
 *   .pipeTo(new WritableStream());
 * ```
 */
export function progressStream(options: ProgressOptions): TransformStream<Uint8Array, Uint8Array> {
  const output = options.output ?? Deno.stderr;
  const now = options.now ?? (() => performance.now());
  const interval = options.intervalMs ?? 100;
  const encoder = new TextEncoder();
  const start = now();
  let done = 0;
  let lastDraw = -Infinity;
  let width = 0;
  const draw = (final: boolean) => {
    const t = now();
    if (!final && t - lastDraw < interval) return;
    lastDraw = t;
    let line = progressLine(options.label, done, options.total, t - start);
    if (final) line += `  in ${formatSeconds((t - start) / 1000)}`;
    const pad = Math.max(0, width - line.length);
    width = line.length;
    try {
      output.writeSync(encoder.encode(`\r${line}${" ".repeat(pad)}${final ? "\n" : ""}`));
    } catch {
      // A closed terminal must not fail the transfer.
    }
  };
  return new TransformStream({
    transform(chunk, controller) {
      done += chunk.byteLength;
      controller.enqueue(chunk);
      draw(false);
    },
    flush() {
      draw(true);
    },
  });
}

/**
 * Whether progress should be drawn: `--progress`/`--no-progress` win,
 * otherwise only when standard error is a terminal.
 */
export function wantsProgress(flag: boolean | undefined): boolean {
  if (flag !== undefined) return flag;
  try {
    return Deno.stderr.isTerminal();
  } catch {
    return false;
  }
}
