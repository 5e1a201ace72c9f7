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

/** Flag definitions for `node:util` `parseArgs`. */
export const CONNECTION_FLAGS = {
  url: { type: "string" },
  remote: { type: "string" },
  "environment-id": { type: "string" },
  "token-file": { type: "string" },
  stdio: { type: "string" },
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
  --log-level <LEVEL>          client logs on stderr (default warn)`;

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
  "log-level"?: string;
}): ConnectOptions {
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
