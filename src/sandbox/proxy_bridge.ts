/**
 * The proxy bridge, run inside a routed sandbox (see `proxy_route.ts`):
 *
 * ```text
 * proxy_bridge.ts PORT=SOCKET… [--set K=V | --unset K]… [--capture PORT --setpriv PATH]
 *                 -- PROGRAM ARGS…
 * ```
 *
 * listens on `127.0.0.1:PORT` of the sandbox's loopback for each route,
 * relays every connection to its Unix `SOCKET`, runs `PROGRAM` with this
 * environment (after `--set`/`--unset`, which undo what the bridge's own
 * runtime needed) and the same stdio, and exits with its status: its code,
 * or 128 + N after signal N. Signals to the process group reach the program
 * directly; the bridge ignores them from its start to its exit (it is a
 * process of its own: call {@linkcode runProxyBridge} only to be one).
 *
 * `--capture PORT` also captures the program's raw TCP (see
 * `tcp_capture/capture.ts`) through the SOCKS5 listener of route `PORT`.
 * The bridge then holds `CAP_NET_ADMIN` (and `CAP_SETPCAP`): it sets the
 * capture up and runs the program through `setpriv`, which drops every
 * capability — bounding set included — before the program starts.
 *
 * @module
 */

import { forwardConnections } from "../util/conn_io.ts";
import { signalExitCode } from "../process/signals.ts";
import { startTcpCapture, type TcpCapture } from "./tcp_capture/capture.ts";

/** Signals a shell job sends its group: the program handles them, the bridge waits. */
const GROUP_SIGNALS: Deno.Signal[] = [
  "SIGTERM",
  "SIGINT",
  "SIGHUP",
  "SIGQUIT",
  "SIGUSR1",
  "SIGUSR2",
];

/** Runs the bridge; resolves with the exit status. */
export async function runProxyBridge(args: readonly string[]): Promise<number> {
  const end = args.indexOf("--");
  const target = end === -1 ? [] : args.slice(end + 1);
  if (target.length === 0) {
    console.error(
      "proxy bridge: usage: PORT=SOCKET… [--set K=V|--unset K]… [--capture PORT --setpriv PATH] -- PROGRAM ARGS…",
    );
    return 2;
  }
  const env = Deno.env.toObject();
  const routes: Array<[number, string]> = [];
  const options = args.slice(0, end);
  let capturePort: number | null = null;
  let setpriv: string | null = null;
  for (let i = 0; i < options.length; i++) {
    const arg = options[i]!;
    if (arg === "--unset") delete env[options[++i]!];
    else if (arg === "--capture") capturePort = Number(options[++i]);
    else if (arg === "--setpriv") setpriv = options[++i]!;
    else if (arg === "--set") {
      const pair = options[++i]!;
      const eq = pair.indexOf("=");
      env[pair.slice(0, eq)] = pair.slice(eq + 1);
    } else {
      const eq = arg.indexOf("=");
      routes.push([Number(arg.slice(0, eq)), arg.slice(eq + 1)]);
    }
  }
  const loops = routes.map(([port, path]) =>
    forwardConnections(
      Deno.listen({ hostname: "127.0.0.1", port }),
      () => Deno.connect({ transport: "unix", path }),
    )
  );
  let capture: TcpCapture | null = null;
  let program = target;
  if (capturePort !== null) {
    const socks = routes.find(([port]) => port === capturePort)?.[1];
    try {
      if (!socks || !setpriv) throw new Error("no SOCKS5 route or no setpriv");
      capture = await startTcpCapture(() => Deno.connect({ transport: "unix", path: socks }));
    } catch (error) {
      // Asked-for capture that cannot run: nothing runs uncaptured.
      console.error(`proxy bridge: transparent TCP capture failed: ${(error as Error).message}`);
      await Promise.allSettled(loops.map((l) => l.close()));
      return 1;
    }
    const missing = missingProgram(target[0]!, env.PATH);
    if (missing) {
      console.error(`bwrap: execvp ${target[0]}: ${missing}`);
      await Promise.allSettled([...loops.map((l) => l.close()), capture.close()]);
      return 1;
    }
    program = [
      setpriv!,
      "--inh-caps=-all",
      "--ambient-caps=-all",
      "--bounding-set=-all",
      "--",
      ...target,
    ];
  }
  // Ignored until this process exits, never removed: the group's signal
  // reaches the bridge and the program at once, and Deno may take it up only
  // after the program has answered it (its trap ran, it exited) — with the
  // listener gone by then, the bridge would die of it and report 128 + N
  // instead of the program's status.
  const ignore = () => {};
  for (const signal of GROUP_SIGNALS) Deno.addSignalListener(signal, ignore);
  try {
    let child: Deno.ChildProcess;
    try {
      child = new Deno.Command(program[0]!, {
        args: program.slice(1),
        env,
        clearEnv: true,
        stdin: "inherit",
        stdout: "inherit",
        stderr: "inherit",
      }).spawn();
    } catch (error) {
      // What bubblewrap says when it cannot run the program.
      const reason = error instanceof Deno.errors.NotFound
        ? "No such file or directory"
        : error instanceof Deno.errors.PermissionDenied
        ? "Permission denied"
        : (error as Error).message;
      console.error(`bwrap: execvp ${target[0]}: ${reason}`);
      return 1;
    }
    const status = await child.status;
    return status.signal ? signalExitCode(status.signal) : status.code;
  } finally {
    await Promise.allSettled([...loops.map((l) => l.close()), capture?.close()]);
  }
}

/**
 * Why `program` cannot be run (bubblewrap's words), or null: checked before
 * `setpriv` runs it, so that a missing program reads as it does without
 * capture.
 */
function missingProgram(program: string, path = ""): string | null {
  const candidates = program.includes("/")
    ? [program]
    : path.split(":").filter((dir) => dir !== "").map((dir) => `${dir}/${program}`);
  let denied = false;
  for (const candidate of candidates) {
    try {
      const info = Deno.statSync(candidate);
      if (info.isFile && ((info.mode ?? 0) & 0o111) !== 0) return null;
      denied = true;
    } catch (error) {
      if (error instanceof Deno.errors.PermissionDenied) denied = true;
    }
  }
  return denied ? "Permission denied" : "No such file or directory";
}

if (import.meta.main) Deno.exit(await runProxyBridge(Deno.args));
