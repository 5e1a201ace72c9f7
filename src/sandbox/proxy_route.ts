/**
 * A restricted sandbox has a network namespace of its own: only its own
 * loopback, nothing of the host's. To let a sandboxed process reach the
 * managed egress proxy (`enforceManagedNetwork` with a proxy: the server's
 * `--network-proxy` or a `process/start.networkProxy`), and nothing else:
 *
 * - on the host, a {@linkcode ProxyRoute} listens on one Unix socket per
 *   proxy port, in a private directory, and relays each connection to
 *   `127.0.0.1:PORT`;
 * - inside the sandbox, the proxy bridge (`proxy_bridge.ts`) listens on
 *   `127.0.0.1:PORT` of the sandbox's own loopback — the same ports the
 *   child's `HTTP_PROXY`/`ALL_PROXY` name — relays to those sockets, and
 *   runs the command.
 *
 * The sandbox's seccomp filter then allows IP sockets (`"routed"`): the
 * namespace, holding nothing but the bridge, is the wall.
 *
 * @module
 */

import type { ConnectionLoop } from "../util/accept_loop.ts";
import { forwardConnections } from "../util/conn_io.ts";
import { PROXY_BRIDGE_COMMAND, runtimeEnv, selfCommand } from "./self_command.ts";
import { tcpCaptureSupport } from "./tcp_capture/support.ts";

export { PROXY_BRIDGE_COMMAND };

/** Host side: Unix sockets relaying to the proxy's loopback ports. */
export class ProxyRoute {
  /** The private directory holding the sockets. */
  readonly dir: string;
  /** Proxy port → socket path. */
  readonly sockets: ReadonlyMap<number, string>;
  /** The SOCKS5 port the bridge captures raw TCP through, or null. */
  readonly captureVia: number | null;
  readonly #loops: ConnectionLoop[];
  #closing: Promise<void> | null = null;

  private constructor(
    dir: string,
    sockets: Map<number, string>,
    loops: ConnectionLoop[],
    captureVia: number | null,
  ) {
    this.dir = dir;
    this.sockets = sockets;
    this.#loops = loops;
    this.captureVia = captureVia;
  }

  /**
   * Listens for `ports` (distinct loopback ports of the proxy); with
   * `captureVia` (one of them), the bridge captures raw TCP through it.
   */
  static open(ports: readonly number[], captureVia: number | null = null): ProxyRoute {
    const dir = Deno.makeTempDirSync({ prefix: "exec-server-route-" });
    const sockets = new Map<number, string>();
    const loops: ConnectionLoop[] = [];
    try {
      for (const port of new Set(ports)) {
        const path = `${dir}/${port}.sock`;
        const listener = Deno.listen({ transport: "unix", path });
        sockets.set(port, path);
        loops.push(
          forwardConnections(listener, () => Deno.connect({ hostname: "127.0.0.1", port })),
        );
      }
    } catch (error) {
      for (const loop of loops) void loop.close();
      Deno.removeSync(dir, { recursive: true });
      throw error;
    }
    return new ProxyRoute(dir, sockets, loops, captureVia);
  }

  /**
   * The command line that runs `target` behind the bridge, and the
   * variables its runtime needs on top of the child's `env` (the bridge
   * hands the child `env` exactly).
   */
  bridged(
    target: readonly string[],
    env: Readonly<Record<string, string>>,
  ): { argv: string[]; setenv: Record<string, string> } {
    const routes = [...this.sockets].map(([port, path]) => `${port}=${path}`);
    const capture = this.captureVia === null
      ? []
      : ["--capture", `${this.captureVia}`, "--setpriv", tcpCaptureSupport().setpriv!];
    const helper = selfCommand(
      new URL("./proxy_bridge.ts", import.meta.url),
      [PROXY_BRIDGE_COMMAND],
      [...routes, ...restoreArgs(env, Object.keys(runtimeEnv())), ...capture, "--", ...target],
      [
        "--allow-net",
        "--allow-read",
        "--allow-write",
        "--allow-run",
        "--allow-env",
        ...(capture.length ? ["--allow-ffi"] : []),
      ],
    );
    return { argv: helper.argv, setenv: helper.env };
  }

  /** Stops listening, ends open relays and removes the directory (idempotent). */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      await Promise.allSettled(this.#loops.map((l) => l.close()));
      await Deno.remove(this.dir, { recursive: true }).catch(() => {});
    })();
    return this.#closing;
  }
}

/** `--set K=V` / `--unset K` so the child gets `env`'s own values of `keys`. */
function restoreArgs(env: Readonly<Record<string, string>>, keys: readonly string[]): string[] {
  return keys.flatMap((k) => env[k] === undefined ? ["--unset", k] : ["--set", `${k}=${env[k]}`]);
}
