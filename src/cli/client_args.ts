/**
 * Connection flags shared by the client commands (`exec`, `fs`, `info`):
 * `--url ws://… [--token-file F]` or `--stdio "CMD"`.
 *
 * @module
 */

import { connect, type ConnectOptions, type ExecServerClient } from "../client/client.ts";
import { commandLogger, environmentIdFlag, readSecretFile, UsageError } from "./common.ts";
import { resolve } from "node:path";
import { inProcessTransport } from "../client/in_process.ts";
import { ExecServer } from "../server/exec_server.ts";

/** Flag definitions for `parseArgs` (`./args.ts`, node:util's semantics). */
export const CONNECTION_FLAGS = {
  url: { type: "string" },
  remote: { type: "string" },
  "environment-id": { type: "string" },
  "token-file": { type: "string" },
  stdio: { type: "string" },
  "wait-ready": { type: "string" },
  "log-level": { type: "string" },
} as const;

/** Help text for the connection flags. */
export const CONNECTION_USAGE = `Connection (one of):
  --url <ws://HOST:PORT>       a WebSocket exec-server
  --token-file <PATH>          bearer token for --url or --remote
  --remote <URL> --environment-id <ID>
                               an environment behind a registry + relay (end-to-end
                               encrypted; the harness token comes from --token-file)
  --stdio <"CMD ARGS">         spawn a server and speak on its stdio
                               (default: an exec-server inside this command, with its
                               own Deno permissions)
  --wait-ready <URL|"CMD ARGS">
                               the environment is still booting: before connecting, wait
                               until URL answers 2xx (polled, up to 5 min), or until CMD
                               exits 0 (a failure says why)
  --log-level <LEVEL>          client logs on stderr (default warn)`;

/** How long `--wait-ready URL` polls. */
const READY_POLL_MS = 300_000;

/**
 * `--wait-ready`: an http(s) URL polled until it answers 2xx, or a command
 * that must exit 0.
 */
export function readiness(spec: string): () => Promise<void> {
  if (/^https?:\/\//i.test(spec)) {
    return async () => {
      const deadline = Date.now() + READY_POLL_MS;
      let last = "no answer yet";
      while (Date.now() < deadline) {
        try {
          const response = await fetch(spec, { signal: AbortSignal.timeout(2_000) });
          await response.body?.cancel();
          if (response.ok) return;
          last = `HTTP ${response.status}`;
        } catch (error) {
          last = (error as Error).message;
        }
        await new Promise((r) => setTimeout(r, 250));
      }
      throw new Error(`${spec} was not ready after ${READY_POLL_MS / 1000} s (${last})`);
    };
  }
  const argv = splitCommand(spec);
  if (argv.length === 0) throw new UsageError("--wait-ready needs a URL or a command", 2);
  return async () => {
    const out = await new Deno.Command(argv[0]!, {
      args: argv.slice(1),
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).output();
    if (!out.success) {
      const why = new TextDecoder().decode(out.stderr).trim().split("\n").at(-1) ?? "";
      throw new Error(`\`${spec}\` exited with ${out.code}${why ? `: ${why}` : ""}`);
    }
  };
}

/** Splits a command line on spaces, honouring single and double quotes. */
export function splitCommand(command: string): string[] {
  const parts: string[] = [];
  let current = "";
  let quote: string | null = null;
  let any = false;
  for (const ch of command) {
    if (quote) {
      if (ch === quote) quote = null;
      else current += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      any = true;
    } else if (/\s/.test(ch)) {
      if (current || any) parts.push(current);
      current = "";
      any = false;
    } else {
      current += ch;
    }
  }
  if (quote) throw new UsageError(`unterminated quote in --stdio command: ${command}`, 2);
  if (current || any) parts.push(current);
  return parts;
}

/** Builds connect options from parsed flags. */
export function connectOptions(values: {
  url?: string;
  remote?: string;
  "environment-id"?: string;
  "token-file"?: string;
  stdio?: string;
  "wait-ready"?: string;
  "log-level"?: string;
}): ConnectOptions {
  if (values["wait-ready"] === undefined) return connectTarget(values);
  if (values.url === undefined && values.stdio === undefined && values.remote === undefined) {
    throw new UsageError("--wait-ready needs --url, --stdio or --remote", 2);
  }
  const ready = readiness(values["wait-ready"]);
  return { ...connectTarget(values), ready };
}

function connectTarget(values: Parameters<typeof connectOptions>[0]): ConnectOptions {
  const logger = commandLogger(values["log-level"], "warn");
  if ([values.url, values.stdio, values.remote].filter((v) => v !== undefined).length > 1) {
    throw new UsageError("use one of --url, --stdio or --remote", 2);
  }
  if (values.remote !== undefined) {
    const environmentId = environmentIdFlag(
      values["environment-id"],
      "--remote needs --environment-id",
    );
    if (values["token-file"] === undefined) {
      throw new UsageError("--remote needs --token-file (a harness token)", 2);
    }
    return {
      rendezvous: {
        registryUrl: values.remote,
        environmentId,
        token: readSecretFile("token-file", resolve(values["token-file"])),
      },
      reconnect: true,
      logger,
      clientName: "exec-server-cli",
    };
  }
  if (values.url !== undefined) {
    if (!/^wss?:\/\//i.test(values.url)) {
      throw new UsageError(`--url expects a ws:// or wss:// URL, got ${values.url}`, 2);
    }
    const token = values["token-file"] !== undefined
      ? readSecretFile("token-file", resolve(values["token-file"]))
      : undefined;
    return {
      url: values.url,
      ...(token !== undefined ? { token } : {}),
      logger,
      clientName: "exec-server-cli",
    };
  }
  if (values["token-file"] !== undefined) throw new UsageError("--token-file needs --url", 2);
  if (values.stdio === undefined) {
    // This machine: a server inside this process, with this command's own
    // Deno permissions (nothing is re-spawned with more).
    const server = new ExecServer({ logger });
    return {
      transport: inProcessTransport(server),
      logger,
      clientName: "exec-server-cli",
    };
  }
  const argv = splitCommand(values.stdio);
  if (argv.length === 0) throw new UsageError("--stdio needs a command", 2);
  return {
    command: { program: argv[0]!, args: argv.slice(1) },
    logger,
    clientName: "exec-server-cli",
  };
}

/** Connects with parsed flags. */
export function connectFromFlags(
  values: Parameters<typeof connectOptions>[0],
): Promise<ExecServerClient> {
  return connect(connectOptions(values));
}
