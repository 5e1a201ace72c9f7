/**
 * Shared command-line plumbing: the preamble every command runs
 * ({@linkcode parseCommand}, {@linkcode commandLogger}), usage errors, value
 * parsers whose messages name the flag, and process-level signal handling.
 *
 * @module
 */

import { type MetricsAddress, parseMetricsAddress } from "../telemetry/address.ts";
import type { ParseArgsConfig } from "node:util";
import { parseArgs } from "./args.ts";
import { createLogger, type Logger, type LogLevel, parseLogLevel } from "../log/logger.ts";

/** A bad command line; printed as `Error: <message>` with exit status 1 (2 for usage). */
export class UsageError extends Error {
  /** Creates the error. */
  constructor(message: string, readonly exitCode = 1) {
    super(message);
    this.name = "UsageError";
  }
}

/** Parses a positive integer flag value. */
export function parsePositiveInt(flag: string, value: string): number {
  if (!/^\d+$/.test(value)) {
    throw new UsageError(
      `invalid value '${value}' for '--${flag}': expected a positive integer`,
      2,
    );
  }
  const n = Number(value);
  if (n === 0) {
    throw new UsageError(
      `invalid value '${value}' for '--${flag}': must be at least 1`,
      2,
    );
  }
  return n;
}

/**
 * Parses a duration: a plain number is seconds; `ms`, `s`, `m` and `h`
 * suffixes are accepted. Returns milliseconds.
 */
export function parseDuration(flag: string, value: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(value.trim());
  if (!m) {
    throw new UsageError(
      `invalid value '${value}' for '--${flag}': expected a duration like 80, 80s or 500ms`,
      2,
    );
  }
  const n = Number(m[1]);
  const unit = m[2] ?? "s";
  const factor = unit === "ms" ? 1 : unit === "s" ? 1000 : unit === "m" ? 60_000 : 3_600_000;
  return Math.round(n * factor);
}

/** Parses a byte size: plain bytes or with `K`, `M`, `G` (binary) suffixes. */
export function parseByteSize(flag: string, value: string): number {
  const m = /^(\d+)([KMG]i?B?)?$/i.exec(value.trim());
  if (!m) {
    throw new UsageError(`invalid value '${value}' for '--${flag}': expected a size like 256M`, 2);
  }
  const unit = (m[2] ?? "").charAt(0).toUpperCase();
  const factor = unit === "K" ? 1024 : unit === "M" ? 1024 ** 2 : unit === "G" ? 1024 ** 3 : 1;
  return Number(m[1]) * factor;
}

/** Reads a secret file given by an absolute path; content trimmed, must be non-empty. */
export function readSecretFile(flag: string, path: string): string {
  if (!path.startsWith("/")) throw new UsageError(`--${flag} must be an absolute path`);
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (error) {
    throw new UsageError(`cannot read --${flag} ${path}: ${(error as Error).message}`);
  }
  const trimmed = text.trim();
  if (trimmed === "") throw new UsageError(`--${flag} ${path} is empty`);
  return trimmed;
}

/**
 * Calls `onSignal` once on SIGINT, SIGTERM or SIGHUP; returns a function
 * that removes the listeners.
 */
export function onTerminationSignal(onSignal: (signal: Deno.Signal) => void): () => void {
  const signals: Deno.Signal[] = ["SIGINT", "SIGTERM", "SIGHUP"];
  let fired = false;
  const handlers = signals.map((signal) => {
    const handler = () => {
      if (fired) return;
      fired = true;
      onSignal(signal);
    };
    try {
      Deno.addSignalListener(signal, handler);
    } catch {
      // Not supported on this platform.
    }
    return [signal, handler] as const;
  });
  return () => {
    for (const [signal, handler] of handlers) {
      try {
        Deno.removeSignalListener(signal, handler);
      } catch { /* not registered */ }
    }
  };
}

/**
 * `--environment-id`: trimmed, required, never blank (a registry would
 * take `" "` as an id of its own).
 */
export function environmentIdFlag(value: string | undefined, missing: string): string {
  if (value === undefined) throw new UsageError(missing, 2);
  const id = value.trim();
  if (id === "") throw new UsageError("--environment-id is blank", 2);
  return id;
}

/** Prints a line to stdout (protocol-free commands only). */
export async function printLine(line: string): Promise<void> {
  const writer = Deno.stdout.writable.getWriter();
  try {
    await writer.write(new TextEncoder().encode(line + "\n"));
  } finally {
    writer.releaseLock();
  }
}

/** Resolves with the first SIGINT, SIGTERM or SIGHUP (listeners removed after). */
export async function terminationSignal(): Promise<Deno.Signal> {
  const got = Promise.withResolvers<Deno.Signal>();
  const remove = onTerminationSignal((signal) => got.resolve(signal));
  try {
    return await got.promise;
  } finally {
    remove();
  }
}

/** Reads one line (the registration bearer) from stdin. */
async function readBearerLine(): Promise<string> {
  const reader = Deno.stdin.readable.getReader();
  let text = "";
  try {
    while (!text.includes("\n") && text.length < 16 * 1024) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
  } finally {
    reader.releaseLock();
  }
  return text.split("\n")[0]!.trim();
}

/**
 * The registration bearer for `--remote`: one line of stdin with
 * `--registration-bearer-stdin`, else `EXEC_SERVER_REGISTRATION_BEARER`.
 */
export async function registrationBearer(fromStdin: boolean): Promise<string> {
  const bearer = fromStdin
    ? await readBearerLine()
    : Deno.env.get("EXEC_SERVER_REGISTRATION_BEARER") ?? "";
  if (bearer === "") {
    throw new UsageError(
      "--remote needs a registration bearer: --registration-bearer-stdin or EXEC_SERVER_REGISTRATION_BEARER",
    );
  }
  return bearer;
}

/**
 * Prints one human-readable line on standard error when it is a terminal
 * (the JSON log stays as it is; nothing is added when stderr is piped).
 */
export function announce(line: string): void {
  try {
    if (!Deno.stderr.isTerminal()) return;
    Deno.stderr.writeSync(new TextEncoder().encode(line + "\n"));
  } catch {
    // No terminal after all: stay quiet.
  }
}

/**
 * Prints a command's help; every command takes `-h/--help` and `--version`,
 * and the help says so (added when the text does not list them).
 */
export function printUsage(text: string): void {
  const extra: string[] = [];
  if (!/^\s*-h, --help\b/m.test(text)) extra.push("  -h, --help                   show this help");
  if (!/^\s*--version\b/m.test(text)) {
    extra.push("  --version                    print the version and exit");
  }
  const body = text.replace(/\n+$/, "");
  console.log(extra.length ? `${body}\n\nEvery command also takes:\n${extra.join("\n")}\n` : text);
}

/** Every command's `-h/--help`. */
const HELP_FLAG = { help: { type: "boolean", short: "h" } } as const;

/**
 * A command's preamble: parses `config.args` (with `-h/--help` added to its
 * options; a parse error is a {@linkcode UsageError} with status 2) and
 * prints `usage` for `--help` — then it returns null and the command exits 0.
 */
export function parseCommand<const T extends ParseArgsConfig>(
  config: T,
  usage: string,
): ReturnType<typeof parseArgs<T>> | null {
  const parsed = parseFlags(config);
  if (parsed === "help") {
    printUsage(usage);
    return null;
  }
  return parsed;
}

/**
 * {@linkcode parseCommand} without the printing: the parsed flags, or
 * `"help"` when `-h/--help` was given.
 */
export function parseFlags<const T extends ParseArgsConfig>(
  config: T,
): ReturnType<typeof parseArgs<T>> | "help" {
  let parsed;
  try {
    parsed = parseArgs({ ...config, options: { ...config.options, ...HELP_FLAG } });
  } catch (error) {
    throw new UsageError((error as Error).message, 2);
  }
  if ((parsed.values as { help?: boolean }).help) return "help";
  return parsed as unknown as ReturnType<typeof parseArgs<T>>;
}

/** `--log-level` (or `fallback`); an unknown level is a usage error. */
export function logLevelFlag(level: string | undefined, fallback: LogLevel): LogLevel {
  try {
    return parseLogLevel(level ?? fallback);
  } catch (error) {
    throw new UsageError(`--log-level: ${(error as Error).message}`, 2);
  }
}

/** The logger of `--log-level` (see {@linkcode logLevelFlag}). */
export function commandLogger(level: string | undefined, fallback: LogLevel): Logger {
  return createLogger({ level: logLevelFlag(level, fallback) });
}

/** `--metrics-listen [HOST:]PORT` (null when absent); a bad address is a usage error. */
export function metricsListenFlag(value: string | undefined): MetricsAddress | null {
  if (value === undefined) return null;
  try {
    return parseMetricsAddress(value);
  } catch (error) {
    throw new UsageError((error as Error).message, 2);
  }
}
