/**
 * Sandboxed `fs/*`: the operation runs inside the sandbox, not beside it.
 *
 * Checking a path against the policy on the host and then using it would
 * race (a symlink or directory swapped between check and use) and would
 * have to re-implement the kernel's path walk. Instead each distinct
 * sandbox gets a worker — this server itself (`serve --listen stdio`),
 * started by bubblewrap with the same mount plan, Deno permissions limited
 * to reading and writing files, no network — and the request (minus its
 * `sandbox`) is forwarded to it. Whatever the worker's kernel allows is
 * what the policy allows: symlinks, `..`, `/proc/self/root` and renames all
 * resolve inside the sandbox's own mount namespace. Results and errors come
 * back unchanged (`Read-only file system (os error 30)`, as the reference).
 *
 * Workers are pooled per plan (at most {@linkcode GatewayOptions.maxWorkers},
 * least recently used closed first) and exit after
 * {@linkcode GatewayOptions.idleMs} without work and without open handles.
 * Policies that do not make `/` readable also get read access to what the
 * worker itself needs to start (the system directories, the Deno runtime
 * and this module's files); the README says so.
 *
 * @module
 */

import { JsonRpcCode, RpcError } from "../jsonrpc/errors.ts";
import { ndjsonConnection } from "../jsonrpc/ndjson.ts";
import { RpcPeer } from "../jsonrpc/peer.ts";
import {
  contestedPaths,
  createdMountPoints,
  holdMountPoints,
  MountPointLease,
  sandboxCommand,
} from "./bwrap.ts";
import { MINIMAL_PATHS, type SandboxPlan, withReadable } from "./policy.ts";
import { VERSION } from "../version.ts";
import { type SelfCommand, selfCommand } from "./self_command.ts";
import { drainLines } from "../util/line_drain.ts";
import { settleWithin } from "../util/async.ts";

/** Pool limits. */
export interface GatewayOptions {
  /** Close a worker after this long without requests or open handles. Default 1 s (its placeholders show on the host while it lives). */
  readonly idleMs?: number;
  /** Most workers alive at once. Default 8. */
  readonly maxWorkers?: number;
}

/** The command that starts this server as a stdio worker, and what it must be able to read. */
function workerCommand(): SelfCommand {
  const serve = ["serve", "--listen", "stdio", "--log-level", "error"];
  return selfCommand(new URL("../../cli.ts", import.meta.url), [], serve, [
    "--allow-read",
    "--allow-write",
    "--allow-env",
    "--allow-sys=uid,gid",
    // libc's listxattr: a file with extended attributes (ACLs) is written in
    // place, a plain one replaced whole; without it every write would be in
    // place. (Deno cannot scope this to libc by soname; the sandbox around
    // the worker is the boundary.)
    "--allow-ffi",
  ]);
}

/** How long a closed worker may take to exit before it is killed. */
const WORKER_EXIT_GRACE_MS = 2000;
/** The last lines of a worker's stderr kept to explain its failure (each at most 1 KiB). */
const STDERR_LINES_KEPT = 8;

/**
 * The worker never started: bubblewrap itself failed to build the sandbox
 * (a path the plan saw was gone when it mounted it). Planning again from
 * what exists now and starting another worker is safe: the new plan
 * protects the path as missing.
 */
class SandboxSetupError extends Error {
  override name = "SandboxSetupError";
}

/** Attempts at starting a worker whose sandbox setup failed, each with a fresh plan. */
const SETUP_ATTEMPTS = 3;

class FsWorker {
  readonly peer: RpcPeer;
  readonly ready: Promise<void>;
  readonly #child: Deno.ChildProcess;
  /** Settles once the worker has exited and its stderr is read to the end. */
  readonly gone: Promise<void>;
  /** The last lines bubblewrap or the worker printed on stderr, and when they are all in. */
  readonly #stderr: string[] = [];
  readonly #stderrDone: Promise<void>;
  #pins = 0;
  #busy = 0;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  lastUsed = Date.now();
  #closing = false;

  constructor(plan: SandboxPlan, readonly idleMs: number, readonly onGone: () => void) {
    const { argv, runtime, env: runtimeEnv } = workerCommand();
    // The worker needs no network; it reads what its runtime needs.
    const confined: SandboxPlan = withReadable(
      { ...plan, network: "restricted" },
      [...MINIMAL_PATHS, ...runtime],
    );
    const [bwrap, ...args] = sandboxCommand(confined, "/", argv);
    // Which placeholders bubblewrap will create is decided before it runs:
    // once it does, they exist and would look like real paths. Locked from
    // here (a failed setup plans again: see SandboxSetupError).
    const mountPoints = createdMountPoints(confined);
    const lease = new MountPointLease();
    lease.add(contestedPaths(confined, mountPoints));
    const env: Record<string, string> = { NO_COLOR: "1", ...runtimeEnv };
    for (const name of ["HOME", "PATH", "TMPDIR"]) {
      const value = Deno.env.get(name);
      if (value !== undefined) env[name] = value;
    }
    try {
      this.#child = new Deno.Command(bwrap!, {
        args,
        env,
        clearEnv: true,
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
        detached: true,
      }).spawn();
    } catch (error) {
      lease.release();
      throw error;
    }
    this.#stderrDone = drainLines(this.#child.stderr, {
      maxLineBytes: 1024,
      onLine: (line) => {
        this.#stderr.push(line);
        if (this.#stderr.length > STDERR_LINES_KEPT) this.#stderr.shift();
      },
    });
    holdMountPoints(mountPoints, this.#child.status, lease);
    // Gone once it has exited and everything it printed is read.
    this.gone = Promise.allSettled([this.#child.status, this.#stderrDone]).then(() => {});
    this.gone.then(() => this.onGone());
    this.peer = new RpcPeer(
      ndjsonConnection(this.#child.stdout, this.#child.stdin, { label: "sandbox fs worker" }),
      { onMalformed: "close" },
    );
    this.peer.closed.then(() => this.close());
    this.ready = this.peer.request("initialize", { clientName: `exec-server ${VERSION} gateway` })
      .then(() => void this.peer.notify("initialized"));
    this.ready.catch(() => this.close());
  }

  async call<T>(method: string, params: unknown): Promise<T> {
    this.#busy++;
    this.#touch();
    let started = false;
    try {
      await this.ready;
      started = true;
      return await this.peer.request<T>(method, params);
    } catch (error) {
      if (error instanceof RpcError) throw error;
      const detail = await this.#exitDetail();
      const message = `${(error as Error).message}${detail.text}`;
      if (!started && detail.setupFailed) throw new SandboxSetupError(message, { cause: error });
      throw new Error(message, { cause: error });
    } finally {
      this.#busy--;
      this.#touch();
    }
  }

  pin(): void {
    this.#pins++;
    this.#touch();
  }

  unpin(): void {
    this.#pins--;
    this.#touch();
  }

  get idle(): boolean {
    return this.#busy === 0 && this.#pins === 0;
  }

  /** True once it was told to close (it takes no more work). */
  get closing(): boolean {
    return this.#closing;
  }

  #touch(): void {
    this.lastUsed = Date.now();
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    if (this.idle && !this.#closing) {
      this.#idleTimer = setTimeout(() => this.close(), this.idleMs);
    }
  }

  close(): void {
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    if (this.#closing) return;
    this.#closing = true;
    // End of input ends the worker and then its sandbox, after bubblewrap
    // has finished its setup: killed mid-setup, it could create a
    // placeholder on the host after the cleanup ran. A worker that does not
    // go in time is killed, with the whole sandbox (its only program).
    this.peer.close("sandbox fs worker closed");
    const timer = setTimeout(() => {
      try {
        Deno.kill(-this.#child.pid, "SIGKILL");
      } catch { /* already gone */ }
    }, WORKER_EXIT_GRACE_MS);
    this.#child.status.finally(() => clearTimeout(timer));
  }

  /**
   * Why the worker went away, once it has (waited for briefly): its exit
   * status and the last lines it printed ("" while it is still running),
   * and whether bubblewrap failed to set the sandbox up (exit code 1 with
   * its own `bwrap:` complaint).
   */
  async #exitDetail(): Promise<{ text: string; setupFailed: boolean }> {
    if (!await settleWithin(this.gone, 1000)) return { text: "", setupFailed: false };
    const { code, signal } = await this.#child.status;
    const how = signal !== null ? `killed by ${signal}` : `exit code ${code}`;
    const said = this.#stderr.join(" | ");
    return {
      text: ` (worker ${how}${said ? `: ${said}` : ""})`,
      setupFailed: code === 1 && this.#stderr.some((line) => line.startsWith("bwrap: ")),
    };
  }
}

/** Forwards fs requests into per-plan sandboxed workers. */
export class SandboxFsGateway implements AsyncDisposable {
  #workers = new Map<string, FsWorker>();
  readonly #idleMs: number;
  readonly #maxWorkers: number;

  /** Creates an empty pool. */
  constructor(options: GatewayOptions = {}) {
    this.#idleMs = options.idleMs ?? 1_000;
    this.#maxWorkers = options.maxWorkers ?? 8;
  }

  /**
   * The worker for `plan`, started when needed. One that is closing (idle,
   * or evicted) takes no more work: the next is started once it has exited
   * (two sandboxes of one plan at once would share the placeholders
   * bubblewrap creates on the host, and the first to exit would remove them).
   */
  async #live(plan: SandboxPlan): Promise<FsWorker> {
    for (;;) {
      const worker = this.#worker(plan);
      if (!worker.closing) return worker;
      await worker.gone;
    }
  }

  #worker(plan: SandboxPlan): FsWorker {
    const existing = this.#workers.get(plan.key);
    if (existing) return existing;
    if (this.#workers.size >= this.#maxWorkers) {
      const idle = [...this.#workers.values()].filter((w) => w.idle)
        .sort((a, b) => a.lastUsed - b.lastUsed)[0];
      idle?.close();
    }
    const worker: FsWorker = new FsWorker(plan, this.#idleMs, () => {
      if (this.#workers.get(plan.key) === worker) this.#workers.delete(plan.key);
    });
    this.#workers.set(plan.key, worker);
    return worker;
  }

  /**
   * Runs `method` with `params` (no `sandbox`) inside the sandbox `plan()`
   * describes; the worker's result, or its error as an RpcError. `plan` is
   * asked again when bubblewrap could not build the sandbox it described
   * (what exists changed in between).
   */
  async call<T>(plan: () => SandboxPlan, method: string, params: unknown): Promise<T> {
    return await this.#guard(
      this.#withSetupRetry(plan, (worker) => worker.call<T>(method, params)),
    );
  }

  /** Runs `use` on a live worker for `plan()`, planning again after a failed sandbox setup. */
  async #withSetupRetry<T>(
    plan: () => SandboxPlan,
    use: (worker: FsWorker) => Promise<T>,
  ): Promise<T> {
    for (let attempt = 1;; attempt++) {
      try {
        return await use(await this.#live(plan()));
      } catch (error) {
        if (!(error instanceof SandboxSetupError) || attempt >= SETUP_ATTEMPTS) throw error;
      }
    }
  }

  /**
   * Like {@linkcode call}, keeping the worker alive until `release` is
   * called (an open handle).
   */
  async callPinned<T>(
    plan: () => SandboxPlan,
    method: string,
    params: unknown,
  ): Promise<
    { result: T; call: <R>(method: string, params: unknown) => Promise<R>; release: () => void }
  > {
    return await this.#guard(this.#withSetupRetry(plan, async (worker) => {
      worker.pin();
      try {
        const result = await worker.call<T>(method, params);
        let released = false;
        return {
          result,
          call: <R>(m: string, p: unknown) => this.#guard(worker.call<R>(m, p)),
          release: () => {
            if (!released) worker.unpin();
            released = true;
          },
        };
      } catch (error) {
        worker.unpin();
        throw error;
      }
    }));
  }

  async #guard<T>(call: Promise<T>): Promise<T> {
    try {
      return await call;
    } catch (error) {
      if (error instanceof RpcError) throw error;
      throw new RpcError(
        JsonRpcCode.InternalError,
        `sandboxed filesystem worker failed: ${(error as Error).message}`,
      );
    }
  }

  /** Workers alive now. */
  get size(): number {
    return this.#workers.size;
  }

  /** Closes every worker and waits for them to exit. */
  async [Symbol.asyncDispose](): Promise<void> {
    const workers = [...this.#workers.values()];
    for (const worker of workers) worker.close();
    await Promise.all(workers.map((w) => w.gone));
    this.#workers.clear();
  }
}
