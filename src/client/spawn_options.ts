/**
 * The options of spawning a remote process, shared by the client and its
 * `RemoteCommand` builder.
 *
 * @module
 */

import type { EnvPolicy, FileSystemSandboxContext, NetworkProxyLaunch } from "../protocol/types.ts";

/** Options of `ExecServerClient.spawn`. */
export interface SpawnOptions {
  /** Working directory (path or `file:` URL). Default: the server's cwd. */
  readonly cwd?: string | URL;
  /** Variables overlaid on the inherited environment. */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * How the environment is derived from the server's. Default: inherit all
   * except `*KEY*`, `*SECRET*`, `*TOKEN*`. `null`: exactly `env`.
   */
  readonly envPolicy?: EnvPolicy | null;
  /** `piped` keeps stdin open for `stdin`; default `null`. */
  readonly stdin?: "piped" | "null";
  /** Deliver or drop stdout. Default `piped` (unless `events`). */
  readonly stdout?: "piped" | "null";
  /** Deliver or drop stderr. Default `piped` (unless `events`). */
  readonly stderr?: "piped" | "null";
  /** Run on a pseudo-terminal. */
  readonly tty?: boolean;
  /** Terminal rows (servers with `ptyResize`). */
  readonly rows?: number;
  /** Terminal columns (servers with `ptyResize`). */
  readonly cols?: number;
  /** What the child sees as `argv[0]`. */
  readonly arg0?: string;
  /** Expose `events` (every event in order). */
  readonly events?: boolean;
  /** Choose the process id (default: generated). */
  readonly processId?: string;
  /** Bytes buffered per output stream before delivery waits. Default 8 MiB. */
  readonly bufferBytes?: number;
  /** Run confined: Codex's `FileSystemSandboxContext` (paths as `file:` URIs). */
  readonly sandbox?: FileSystemSandboxContext;
  /** Route the process's network through the server's managed proxy. */
  readonly enforceManagedNetwork?: boolean;
  /**
   * A proxy of the process's own, with this policy (servers with
   * `networkProxyLaunch`). With `policyDecisionTimeoutMs`, hosts the policy
   * does not allow are put to `ConnectOptions.onNetworkPolicyRequest`.
   */
  readonly networkProxy?: NetworkProxyLaunch;
  /** Terminates the process when aborted (like `Deno.Command`'s `signal`). */
  readonly signal?: AbortSignal;
  /** Terminates the process after this many milliseconds. */
  readonly timeoutMs?: number;
}
