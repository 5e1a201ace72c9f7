/**
 * The `--dump-dir` exchange recorder of the Responses API proxy: each
 * forwarded request writes `<seq:06>-<unix_ms>-request.json` before it is
 * forwarded and `<seq:06>-<unix_ms>-response.json` when the upstream body
 * ends (or the client went away; the body is then partial). Pretty JSON, the
 * body embedded as JSON when it parses, else as text. `authorization` and
 * every header whose name contains `cookie` are replaced by `[REDACTED]`;
 * bodies are not redacted.
 *
 * The captured response body is bounded ({@linkcode DUMP_BODY_LIMIT}); past it
 * the dump keeps the head and says `"bodyTruncated": true`.
 *
 * @module
 */

import { concatBytes } from "../util/bytes.ts";

/** Most response-body bytes one dump holds. */
export const DUMP_BODY_LIMIT = 64 * 1024 * 1024;

/** A header as dumped. */
interface DumpedHeader {
  name: string;
  value: string;
}

function redact(headers: ReadonlyArray<readonly [string, string]>): DumpedHeader[] {
  return headers.map(([name, value]) => {
    const lower = name.toLowerCase();
    const secret = lower === "authorization" || lower.includes("cookie");
    return { name, value: secret ? "[REDACTED]" : value };
  });
}

function bodyValue(bytes: Uint8Array): unknown {
  const text = new TextDecoder().decode(bytes);
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function pad(seq: number): string {
  return String(seq).padStart(6, "0");
}

/**
 * Writes `doc` as pretty JSON to `path` atomically (a temporary file in the
 * same directory, then a rename): a dump that exists is always complete.
 */
async function writeDumpFile(path: string, doc: unknown): Promise<void> {
  const temporary = `${path}.${crypto.randomUUID()}.partial`;
  try {
    await Deno.writeTextFile(temporary, JSON.stringify(doc, null, 2) + "\n");
    await Deno.rename(temporary, path);
  } catch (error) {
    await Deno.remove(temporary).catch(() => {});
    throw error;
  }
}

/** Writes the dumps into one directory. */
export class ExchangeDumper {
  #seq = 0;
  readonly #dir: string;
  readonly #report: (line: string) => void;

  /** Uses `dir` (created by {@linkcode ExchangeDumper.create}). */
  private constructor(dir: string, report: (line: string) => void) {
    this.#dir = dir;
    this.#report = report;
  }

  /** Creates `dir` (recursively) and a dumper writing there. */
  static async create(dir: string, report: (line: string) => void): Promise<ExchangeDumper> {
    try {
      await Deno.mkdir(dir, { recursive: true });
    } catch (error) {
      throw new Error(`creating --dump-dir: ${(error as Error).message}`, { cause: error });
    }
    return new ExchangeDumper(dir, report);
  }

  /**
   * Dumps a request; returns the recorder for its response, or `null` when
   * the request dump could not be written (forwarding goes on undumped).
   */
  async request(
    method: string,
    url: string,
    headers: ReadonlyArray<readonly [string, string]>,
    body: Uint8Array,
  ): Promise<ResponseDump | null> {
    const stem = `${this.#dir}/${pad(++this.#seq)}-${Date.now()}`;
    const doc = { method, url, headers: redact(headers), body: bodyValue(body) };
    try {
      await writeDumpFile(`${stem}-request.json`, doc);
    } catch (error) {
      this.#report(`responses-api-proxy failed to dump request: ${(error as Error).message}`);
      return null;
    }
    return new ResponseDump(`${stem}-response.json`, this.#report);
  }
}

/** Collects one response and writes it once. */
export class ResponseDump {
  readonly #path: string;
  readonly #report: (line: string) => void;
  #status = 0;
  #headers: ReadonlyArray<readonly [string, string]> = [];
  #chunks: Uint8Array[] = [];
  #size = 0;
  #truncated = false;
  #written = false;

  /** Writes to `path`. */
  constructor(path: string, report: (line: string) => void) {
    this.#path = path;
    this.#report = report;
  }

  /** Records the status and upstream headers. */
  head(status: number, headers: ReadonlyArray<readonly [string, string]>): void {
    this.#status = status;
    this.#headers = headers;
  }

  /** Records body bytes (up to {@linkcode DUMP_BODY_LIMIT}). */
  chunk(bytes: Uint8Array): void {
    const room = DUMP_BODY_LIMIT - this.#size;
    if (bytes.length > room) this.#truncated = true;
    if (room <= 0) return;
    const kept = bytes.length > room ? bytes.slice(0, room) : bytes.slice();
    this.#chunks.push(kept);
    this.#size += kept.length;
  }

  /**
   * A pass-through stream that records what flows through it and writes the
   * dump at its end or cancellation.
   */
  tee(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
    const reader = body.getReader();
    return new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        try {
          const { value, done } = await reader.read();
          if (done) {
            controller.close();
            await this.write();
            return;
          }
          this.chunk(value);
          controller.enqueue(value);
        } catch (error) {
          await this.write();
          controller.error(error);
        }
      },
      cancel: async (reason) => {
        await this.write();
        await reader.cancel(reason).catch(() => {});
      },
    }, { highWaterMark: 0 });
  }

  /** Writes the dump (once). */
  async write(): Promise<void> {
    if (this.#written) return;
    this.#written = true;
    const body = concatBytes(this.#chunks, this.#size);
    this.#chunks = [];
    const doc: Record<string, unknown> = {
      status: this.#status,
      headers: redact(this.#headers),
      body: bodyValue(body),
    };
    if (this.#truncated) doc.bodyTruncated = true;
    try {
      await writeDumpFile(this.#path, doc);
    } catch (error) {
      this.#report(
        `responses-api-proxy failed to write ${this.#path}: ${(error as Error).message}`,
      );
    }
  }
}
