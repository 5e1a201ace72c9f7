/**
 * `exec-server exec`: run a program on an exec-server as if it were local —
 * stdout and stderr stream to this terminal, stdin is forwarded, Ctrl-C
 * interrupts (twice: terminates), and the exit code is the remote one.
 *
 * @module
 */

import { RpcError } from "../jsonrpc/errors.ts";
import type { ExecServerClient } from "../client/client.ts";
import type { RemoteProcess } from "../client/process.ts";
import { connectFromFlags, CONNECTION_FLAGS, CONNECTION_USAGE } from "./client_args.ts";
import { parseCommand, UsageError } from "./common.ts";
import { codexSandbox } from "../client/sandbox_presets.ts";

/** Help text. */
export const EXEC_USAGE =
  `Usage: exec-server exec [CONNECTION] [--cwd DIR] [--env K=V]... [--tty] -- PROGRAM [ARGS...]

Runs PROGRAM on an exec-server, streaming its output here and forwarding stdin.
Ctrl-C sends an interrupt to the remote process group; a second Ctrl-C kills it.
Exits with the remote exit code.

Options:
  --cwd <DIR>        remote working directory (default: the server's)
  --env <K=V>        set a variable (repeatable; the server's environment is inherited
                     minus *KEY*, *SECRET*, *TOKEN*)
  --tty              run on a remote terminal (raw mode here, resizes forwarded)
  --sandbox <MODE>   confine it as Codex does: read-only or workspace-write (the
                     workspace is --cwd, or the server's cwd); the network is closed
  --managed-network  route its network through the server's egress proxy
  -h, --help         show this help

${CONNECTION_USAGE}
`;

function parseEnv(values: string[] | undefined): Record<string, string> {
  const env: Record<string, string> = {};
  for (const item of values ?? []) {
    const eq = item.indexOf("=");
    if (eq <= 0) throw new UsageError(`invalid --env '${item}': expected KEY=VALUE`, 2);
    env[item.slice(0, eq)] = item.slice(eq + 1);
  }
  return env;
}

async function forwardStdin(process: RemoteProcess): Promise<void> {
  try {
    await Deno.stdin.readable.pipeTo(process.stdin);
  } catch {
    // The remote side went away or stdin failed: nothing more to forward.
  }
}

/** Runs `exec`; returns the exit status. */
export async function runExec(args: string[]): Promise<number> {
  const parsed = parseCommand({
    args,
    allowPositionals: true,
    options: {
      ...CONNECTION_FLAGS,
      cwd: { type: "string" },
      env: { type: "string", multiple: true },
      tty: { type: "boolean" },
      sandbox: { type: "string" },
      "managed-network": { type: "boolean" },
    },
  }, EXEC_USAGE);
  if (!parsed) return 0;
  const argv = parsed.positionals;
  if (argv.length === 0) {
    throw new UsageError("exec needs a program: exec-server exec -- PROGRAM [ARGS...]", 2);
  }
  const env = parseEnv(parsed.values.env);
  const mode = parsed.values.sandbox;
  if (mode !== undefined && mode !== "read-only" && mode !== "workspace-write") {
    throw new UsageError(
      `invalid --sandbox '${mode}': expected read-only or workspace-write`,
      2,
    );
  }
  const tty = parsed.values.tty ?? false;
  const client: ExecServerClient = await connectFromFlags(parsed.values);
  let restoreTerminal = () => {};
  const removers: Array<() => void> = [];
  try {
    const size = tty && Deno.stdin.isTerminal() ? Deno.consoleSize() : null;
    // A terminal that reports 0x0 (e.g. under `script`) gets the default.
    const ttySize = size && size.rows > 0 && size.columns > 0 ? size : null;
    const process = await client.spawn(argv, {
      ...(parsed.values.cwd !== undefined ? { cwd: parsed.values.cwd } : {}),
      ...(mode !== undefined
        ? {
          sandbox: codexSandbox(mode, parsed.values.cwd ?? client.environmentInfo!.cwd),
        }
        : {}),
      ...(parsed.values["managed-network"] ? { enforceManagedNetwork: true } : {}),
      env,
      stdin: "piped",
      tty,
      ...(ttySize ? { rows: ttySize.rows, cols: ttySize.columns } : {}),
    }).catch((error) => {
      // The server sends bare OS errors (the reference's texts): say what failed.
      if (!(error instanceof RpcError)) throw error;
      const what = parsed.values.cwd !== undefined ? ` in ${parsed.values.cwd}` : "";
      throw new Error(`cannot run ${argv[0]}${what}: ${error.message}`);
    });
    if (tty && Deno.stdin.isTerminal()) {
      Deno.stdin.setRaw(true);
      restoreTerminal = () => {
        try {
          Deno.stdin.setRaw(false);
        } catch { /* not a terminal any more */ }
      };
      const onResize = () => {
        const now = Deno.consoleSize();
        if (now.rows > 0 && now.columns > 0) process.resize(now.rows, now.columns).catch(() => {});
      };
      Deno.addSignalListener("SIGWINCH", onResize);
      removers.push(() => Deno.removeSignalListener("SIGWINCH", onResize));
      // Being killed must not leave this terminal in raw mode.
      for (const [signal, code] of [["SIGTERM", 143], ["SIGHUP", 129]] as const) {
        const onSignal = () => {
          restoreTerminal();
          process.terminate().catch(() => {}).finally(() => Deno.exit(code));
        };
        Deno.addSignalListener(signal, onSignal);
        removers.push(() => Deno.removeSignalListener(signal, onSignal));
      }
    } else {
      let interrupts = 0;
      const onInterrupt = () => {
        interrupts++;
        (interrupts === 1 ? process.signal("interrupt") : process.terminate().then(() => {})).catch(
          () => {},
        );
      };
      Deno.addSignalListener("SIGINT", onInterrupt);
      removers.push(() => Deno.removeSignalListener("SIGINT", onInterrupt));
    }
    forwardStdin(process);
    const [, , status] = await Promise.all([
      process.stdout.pipeTo(Deno.stdout.writable, { preventClose: true }),
      process.stderr.pipeTo(Deno.stderr.writable, { preventClose: true }),
      process.status,
    ]);
    return status.code;
  } finally {
    restoreTerminal();
    for (const remove of removers) remove();
    await client.close();
  }
}
