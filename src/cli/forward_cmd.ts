/**
 * `exec-server forward`: registers an exec-server that listens on a
 * WebSocket (ours or the Codex one) as a remote environment, so harnesses
 * reach it through the relay end to end encrypted.
 *
 * @module
 */

import { RemoteExecutor } from "../relay/executor/executor.ts";
import { forwardingServer } from "../relay/executor/forward.ts";
import {
  commandLogger,
  environmentIdFlag,
  onTerminationSignal,
  parseCommand,
  readSecretFile,
  registrationBearer,
  UsageError,
} from "./common.ts";

/** Help text. */
export const FORWARD_USAGE =
  `Usage: exec-server forward --remote URL --environment-id ID --to WS_URL [OPTIONS]

Registers the exec-server listening at WS_URL as a remote environment with the
registry at URL. Harnesses reach it through the rendezvous relay, end to end
encrypted; each harness stream is decrypted here and bridged to its own
WebSocket connection to WS_URL (this implementation or the Codex exec-server),
messages passed through unchanged.

Options:
  --remote <URL>                 the environment registry (with its relay)
  --environment-id <ID>          the environment to register
  --name <NAME>                  human-readable environment name (logs)
  --registration-bearer-stdin    read the registration bearer from stdin (one line);
                                 otherwise EXEC_SERVER_REGISTRATION_BEARER
  --to <WS_URL>                  the exec-server to forward to (ws:// or wss://)
  --to-token-file <FILE>         bearer token for WS_URL (absolute path)
  --log-level <LEVEL>            error, warn, info (default), debug, trace
  -h, --help                     show this help

The reference's sandbox and proxy flags (--linux-sandbox-pid-namespace,
--linux-sandbox-transparent-tcp, --tcp-upstream-proxy) are refused here: they
belong to the exec-server at WS_URL, which runs the processes — start it with them.

Example:
  exec-server serve --listen ws://127.0.0.1:4500 &
  exec-server forward --remote http://127.0.0.1:8800 --environment-id dev-box \\
    --to ws://127.0.0.1:4500 --registration-bearer-stdin < exec.token
`;

/** Flags of the reference's `forward` that only a serving exec-server can apply. */
const SERVER_FLAGS = [
  ["linux-sandbox-pid-namespace", "string"],
  ["linux-sandbox-transparent-tcp", "boolean"],
  ["tcp-upstream-proxy", "string"],
] as const;

/** Runs the command. */
export async function runForward(args: string[]): Promise<number> {
  const parsedArgs = parseCommand({
    args,
    strict: true,
    options: {
      remote: { type: "string" },
      "environment-id": { type: "string" },
      name: { type: "string" },
      "registration-bearer-stdin": { type: "boolean" },
      to: { type: "string" },
      "to-token-file": { type: "string" },
      "log-level": { type: "string" },
      ...Object.fromEntries(SERVER_FLAGS.map(([flag, type]) => [flag, { type }])),
    },
  }, FORWARD_USAGE);
  if (!parsedArgs) return 0;
  const v = parsedArgs.values;
  for (const [flag] of SERVER_FLAGS) {
    if ((v as Record<string, unknown>)[flag] !== undefined) {
      // Accepting it would promise a policy this process cannot apply.
      throw new UsageError(
        `--${flag} has no effect on forward: the exec-server at --to runs the processes; start it with --${flag}`,
        2,
      );
    }
  }
  if (!v.remote) throw new UsageError("--remote URL is required", 2);
  const environmentId = environmentIdFlag(v["environment-id"], "--environment-id is required");
  if (!v.to) throw new UsageError("--to WS_URL is required", 2);
  let target: URL;
  try {
    target = new URL(v.to);
  } catch {
    throw new UsageError(`--to: invalid URL ${v.to}`, 2);
  }
  if (target.protocol !== "ws:" && target.protocol !== "wss:") {
    throw new UsageError("--to must be a ws:// or wss:// URL", 2);
  }
  const logger = commandLogger(v["log-level"], "info");
  const token = v["to-token-file"] ? readSecretFile("to-token-file", v["to-token-file"]) : null;
  const bearer = await registrationBearer(v["registration-bearer-stdin"] ?? false);
  const stop = Promise.withResolvers<string>();
  const removeSignals = onTerminationSignal((signal) => stop.resolve(signal));
  try {
    const executor = await RemoteExecutor.start({
      registry: { url: v.remote, bearer },
      environmentId,
      server: forwardingServer({ url: v.to, ...(token ? { token } : {}), logger }),
      logger,
    });
    logger.info("forward.registered", {
      environment: environmentId,
      name: v.name ?? null,
      to: v.to,
      registration: executor.registration.executorRegistrationId,
    });
    const why = await stop.promise;
    logger.info("forward.stopping", { reason: why });
    await executor.close();
  } finally {
    removeSignals();
  }
  return 0;
}
