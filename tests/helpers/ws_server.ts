// Ours (the CLI) or the reference on a WebSocket, as a client reaches them.

import { referenceBin, referenceHome } from "./reference.ts";
import { CLI } from "./wire_client.ts";

/** A running WebSocket exec-server. */
export interface WsServer {
  /** Its `ws://` URL. */
  readonly url: string;
  /** The server process. */
  readonly child: Deno.ChildProcess;
  /** What it printed so far (stdout and stderr). */
  readonly logs: string[];
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Starts our server (`kind: "ours"`, extra `args` appended) or the
 * reference (which must be installed) on `ws://127.0.0.1:0`; resolves with
 * its URL once it listens.
 */
export async function startWsServer(
  kind: "ours" | "reference",
  options: { env?: Record<string, string>; args?: string[] } = {},
): Promise<WsServer> {
  const env = options.env ?? {};
  const child = kind === "ours"
    ? new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        CLI,
        "serve",
        "--listen",
        "ws://127.0.0.1:0",
        "--log-level",
        "warn",
        ...(options.args ?? []),
      ],
      env,
      stdout: "piped",
      stderr: "piped",
    }).spawn()
    : new Deno.Command(referenceBin()!, {
      args: ["exec-server", "--listen", "ws://127.0.0.1:0", ...(options.args ?? [])],
      env: { CODEX_HOME: referenceHome(), ...env },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  const logs: string[] = [];
  const found = Promise.withResolvers<string>();
  const watch = async (stream: ReadableStream<Uint8Array>) => {
    for await (const text of stream.pipeThrough(new TextDecoderStream())) {
      logs.push(text);
      const url = logs.join("").match(/ws:\/\/127\.0\.0\.1:\d+/);
      if (url) found.resolve(url[0]);
    }
  };
  const pumps = Promise.all([watch(child.stdout), watch(child.stderr)]);
  child.status.then(() => found.reject(new Error(`server exited: ${logs.join("")}`)));
  const url = await found.promise;
  return {
    url,
    child,
    logs,
    async [Symbol.asyncDispose]() {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      await child.status;
      await pumps;
    },
  };
}

/** The kinds of server a side-by-side test runs: ours, and the reference when installed. */
export function serverKinds(): Array<"ours" | "reference"> {
  if (referenceBin()) return ["ours", "reference"];
  console.warn("note: reference exec-server not found (CODEX_REFERENCE_BIN); ours only");
  return ["ours"];
}
