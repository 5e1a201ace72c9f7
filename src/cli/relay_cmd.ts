/**
 * `exec-server relay`: a self-hostable environment registry and rendezvous
 * relay; `exec-server relay token create` issues tokens.
 *
 * @module
 */

import { startRelayServer } from "../relay/server/relay_server.ts";
import { openRelayStore } from "../relay/server/store_open.ts";
import {
  announce,
  commandLogger,
  metricsListenFlag,
  parseCommand,
  printLine,
  printUsage,
  readSecretFile,
  terminationSignal,
  UsageError,
} from "./common.ts";
import { VERSION } from "../version.ts";
import { RelayMetrics } from "../relay/server/metrics.ts";
import { startCommandMetrics } from "../telemetry/command.ts";

/** Help text. */
export const RELAY_USAGE = `Usage: exec-server relay --listen http://IP:PORT [OPTIONS]
       exec-server relay token create --role executor|harness --environment ID --store URL|PATH

Serves the environment registry (register, validate, connect) and the
rendezvous WebSockets on one port. Executors behind NAT register and dial out;
harnesses connect through it end to end encrypted: the relay forwards
ciphertext and never holds a key. State lives in a store: Redis (or any
Redis-protocol server) shared by nodes on several machines behind one address,
or Deno KV (--unstable-kv; set in this package's deno.json) — a local file, or
in memory for a single node.

Options:
  --listen <http://IP:PORT>   where to listen (port 0 picks one); the URL is printed
  --store <URL|PATH>          redis://[user:pass@]host:port/db, rediss://… (TLS), or a
                              Deno KV file (default: in memory)
  --kv <PATH|URL>             same as --store
  --store-password-file <F>   the Redis password, read from F (not in the URL or argv)
  --public-url <URL>          the URL clients reach this node at (default: the listen URL)
  --metrics-listen <[HOST:]PORT>
                              serve GET /metrics (Prometheus text format) on its own listener
                              (loopback for a bare port): requests, upgrades, sockets, bytes, store
  --log-level <LEVEL>         diagnostics on stderr (default info)

Tokens (stored hashed in the store; the token is printed once):
  relay token create --role executor --environment ID --store URL   for \`serve --remote\`
  relay token create --role harness --environment ID --store URL    for clients (--remote ... --token-file)
`;

/** `--store`/`--kv` and the password file. */
function storeFlags(
  flags: { store?: string; kv?: string; "store-password-file"?: string },
): { location: string | undefined; password: string | undefined } {
  if (flags.store !== undefined && flags.kv !== undefined && flags.store !== flags.kv) {
    throw new UsageError("use one of --store and --kv", 2);
  }
  const file = flags["store-password-file"];
  return {
    location: flags.store ?? flags.kv,
    password: file === undefined ? undefined : readSecretFile("store-password-file", file),
  };
}

function parseListen(value: string): { hostname: string; port: number } {
  const m = /^http:\/\/(\[[0-9a-fA-F:.]+\]|[0-9.]+|localhost):(\d{1,5})\/?$/.exec(value);
  if (!m || Number(m[2]) > 65535) {
    throw new UsageError(`invalid --listen URL \`${value}\`; expected http://IP:PORT`, 2);
  }
  return { hostname: m[1]!.replace(/^\[(.*)\]$/, "$1"), port: Number(m[2]) };
}

/** Runs `relay`; returns the exit status. */
export async function runRelay(args: string[]): Promise<number> {
  if (args[0] === "token") return await runToken(args.slice(1));
  const parsed = parseCommand({
    args,
    options: {
      listen: { type: "string" },
      kv: { type: "string" },
      store: { type: "string" },
      "store-password-file": { type: "string" },
      "public-url": { type: "string" },
      "metrics-listen": { type: "string" },
      "log-level": { type: "string" },
    },
  }, RELAY_USAGE);
  if (!parsed) return 0;
  const flags = parsed.values;
  const listen = parseListen(flags.listen ?? "http://127.0.0.1:0");
  const logger = commandLogger(flags["log-level"], "info");
  const { location, password } = storeFlags(flags);
  const metricsListen = metricsListenFlag(flags["metrics-listen"]);
  const measured = await startCommandMetrics(metricsListen, () => new RelayMetrics(), {
    serviceName: "exec-server-relay",
    logger,
  });
  await using _telemetry = measured?.telemetry;
  const relay = await startRelayServer({
    ...listen,
    logger,
    metrics: measured?.metrics ?? null,
    ...(location !== undefined ? { store: location } : {}),
    ...(password !== undefined ? { storePassword: password } : {}),
    ...(flags["public-url"] ? { publicUrl: flags["public-url"] } : {}),
  });
  // Listen for the signal before saying we are up (a prompt SIGTERM exits 0).
  const signalled = terminationSignal();
  await printLine(relay.url);
  announce(
    `exec-server ${VERSION} relay listening on ${relay.url}, store ${relay.store.description} (Ctrl-C to stop)`,
  );
  await signalled;
  await relay.close();
  return 0;
}

const RELAY_TOKEN_USAGE =
  `exec-server relay token create — mint a relay token into the relay's store

Usage: exec-server relay token create --role executor|harness --environment ID --store URL|PATH

Options:
  --role <ROLE>                 executor or harness
  --environment <ID>            the environment the token is for
  --store <URL|PATH>            the relay's store (redis://…, or Deno KV)
  --kv <PATH|URL>              same as --store
  --store-password-file <PATH>  the store's password, from a file
`;

async function runToken(args: string[]): Promise<number> {
  if (args[0] === "--help" || args[0] === "-h") {
    printUsage(RELAY_TOKEN_USAGE);
    return 0;
  }
  if (args[0] !== "create") {
    throw new UsageError("usage: exec-server relay token create --role ROLE --environment ID", 2);
  }
  const parsed = parseCommand({
    args: args.slice(1),
    options: {
      role: { type: "string" },
      environment: { type: "string" },
      kv: { type: "string" },
      store: { type: "string" },
      "store-password-file": { type: "string" },
    },
  }, RELAY_TOKEN_USAGE);
  if (!parsed) return 0;
  const { role, environment } = parsed.values;
  const { location, password } = storeFlags(parsed.values);
  if (role !== "executor" && role !== "harness") {
    throw new UsageError("--role must be executor or harness", 2);
  }
  if (!environment) throw new UsageError("--environment ID is required", 2);
  if (!location) throw new UsageError("--store URL|PATH is required (the relay's store)", 2);
  using store = await openRelayStore(location, password !== undefined ? { password } : {});
  await printLine(await store.createToken(role, environment));
  return 0;
}
