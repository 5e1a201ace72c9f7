/**
 * Structured logging: one JSON object per line (`ts`, `level`, `event`, then
 * fields) written to stderr by default. Secrets are never passed as fields.
 *
 * @module
 */

/** Severity levels, most severe first. */
export type LogLevel = "error" | "warn" | "info" | "debug" | "trace";

/** Every level, in order of decreasing severity. */
export const LOG_LEVELS: readonly LogLevel[] = ["error", "warn", "info", "debug", "trace"];

/** Extra structured data attached to a log record. */
export type LogFields = Record<string, unknown>;

/** A structured logger. */
export interface Logger {
  /** Logs at `error`. */
  error(event: string, fields?: LogFields): void;
  /** Logs at `warn`. */
  warn(event: string, fields?: LogFields): void;
  /** Logs at `info`. */
  info(event: string, fields?: LogFields): void;
  /** Logs at `debug`. */
  debug(event: string, fields?: LogFields): void;
  /** Logs at `trace`. */
  trace(event: string, fields?: LogFields): void;
  /** True when records at `level` are written. */
  enabled(level: LogLevel): boolean;
  /** A logger adding `fields` to every record. */
  child(fields: LogFields): Logger;
}

/** Options for {@linkcode createLogger}. */
export interface LoggerOptions {
  /** Least severe level written. Default `info`. */
  readonly level?: LogLevel;
  /** Receives each formatted line (without newline). Default: stderr. */
  readonly write?: (line: string) => void;
  /** Fields added to every record. */
  readonly fields?: LogFields;
}

const encoder = new TextEncoder();

function writeStderr(line: string): void {
  try {
    Deno.stderr.writeSync(encoder.encode(line + "\n"));
  } catch {
    // stderr is gone; nowhere left to report.
  }
}

function serialiseField(value: unknown): unknown {
  if (value instanceof Error) {
    return { name: value.name, message: value.message, stack: value.stack };
  }
  if (typeof value === "bigint") return value.toString();
  return value;
}

/**
 * Writes a line through `console.error`: the same bytes on stderr, and
 * captured as a log record when Deno's OpenTelemetry export is on.
 */
export function consoleWrite(line: string): void {
  console.error(line);
}

/** Creates a logger writing JSON lines. */
export function createLogger(options: LoggerOptions = {}): Logger {
  return new JsonLogger(
    LOG_LEVELS.indexOf(options.level ?? "info"),
    options.write ?? writeStderr,
    options.fields ?? {},
  );
}

/** A logger writing JSON lines; children share its methods (one object each). */
class JsonLogger implements Logger {
  readonly #threshold: number;
  readonly #write: (line: string) => void;
  readonly #fields: LogFields;

  constructor(threshold: number, write: (line: string) => void, fields: LogFields) {
    this.#threshold = threshold;
    this.#write = write;
    this.#fields = fields;
  }

  error(event: string, extra?: LogFields): void {
    this.#log("error", event, extra);
  }

  warn(event: string, extra?: LogFields): void {
    this.#log("warn", event, extra);
  }

  info(event: string, extra?: LogFields): void {
    this.#log("info", event, extra);
  }

  debug(event: string, extra?: LogFields): void {
    this.#log("debug", event, extra);
  }

  trace(event: string, extra?: LogFields): void {
    this.#log("trace", event, extra);
  }

  enabled(level: LogLevel): boolean {
    return LOG_LEVELS.indexOf(level) <= this.#threshold;
  }

  child(more: LogFields): Logger {
    return new JsonLogger(this.#threshold, this.#write, { ...this.#fields, ...more });
  }

  #log(level: LogLevel, event: string, extra: LogFields | undefined): void {
    if (!this.enabled(level)) return;
    const record: Record<string, unknown> = {
      ts: new Date().toISOString(),
      level,
      event,
    };
    for (const [k, v] of Object.entries(this.#fields)) record[k] = serialiseField(v);
    if (extra) { for (const [k, v] of Object.entries(extra)) record[k] = serialiseField(v); }
    let line: string;
    try {
      line = JSON.stringify(record);
    } catch {
      line = JSON.stringify({ ts: record.ts, level, event, note: "unserialisable fields" });
    }
    this.#write(line);
  }
}

/** A logger that discards everything. */
export const nullLogger: Logger = {
  error() {},
  warn() {},
  info() {},
  debug() {},
  trace() {},
  enabled: () => false,
  child: () => nullLogger,
};

/** Parses a level name; throws with the accepted names otherwise. */
export function parseLogLevel(value: string): LogLevel {
  const level = value.toLowerCase() as LogLevel;
  if (!LOG_LEVELS.includes(level)) {
    throw new Error(`invalid log level \`${value}\`; expected one of ${LOG_LEVELS.join(", ")}`);
  }
  return level;
}
