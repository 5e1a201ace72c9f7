/**
 * `exec-server responses-proxy`: the auth-injecting Responses API proxy.
 *
 * @module
 */

import { dirname } from "node:path";
import { readApiKeyHeader } from "../sidecars/api_key.ts";
import { DEFAULT_RESPONSES_UPSTREAM, startResponsesProxy } from "../sidecars/responses_proxy.ts";
import { onTerminationSignal, parseCommand, parsePositiveInt, UsageError } from "./common.ts";

/** Help text. */
export const RESPONSES_PROXY_USAGE = `Usage: exec-server responses-proxy [OPTIONS] < API_KEY

A loopback proxy for the OpenAI Responses API that adds the API key read from
stdin (up to 1016 bytes of [A-Za-z0-9_-], ended by a newline or EOF). Only
POST /v1/responses is forwarded; anything else gets an empty 403.

Options:
  --port PORT            listen on 127.0.0.1:PORT (default: a free port)
  --server-info FILE     write {"port":N,"pid":N} and a newline to FILE once listening
  --upstream-url URL     forward to URL (default ${DEFAULT_RESPONSES_UPSTREAM})
  --http-shutdown        GET /shutdown answers 200 and exits 0
  --dump-dir DIR         write each request/response as JSON into DIR
                         (authorization and cookie headers redacted)
  --ca-cert FILE         also trust this PEM CA for an https upstream
  -h, --help             show this help

Example:
  printenv OPENAI_API_KEY | env -u OPENAI_API_KEY exec-server responses-proxy --port 8080
`;

/** Runs `responses-proxy`; returns the exit status. */
export async function runResponsesProxy(args: string[]): Promise<number> {
  const parsed = parseCommand({
    args,
    options: {
      port: { type: "string" },
      "server-info": { type: "string" },
      "upstream-url": { type: "string" },
      "http-shutdown": { type: "boolean" },
      "dump-dir": { type: "string" },
      "ca-cert": { type: "string", multiple: true },
    },
  }, RESPONSES_PROXY_USAGE);
  if (!parsed) return 0;
  const flags = parsed.values;
  const port = flags.port === undefined ? 0 : parsePort(flags.port);
  const caCerts = (flags["ca-cert"] ?? []).map((path) => Deno.readTextFileSync(path));
  // The key is read before anything listens.
  const authorization = await readApiKeyHeader(Deno.stdin);
  const stopped = Promise.withResolvers<void>();
  const proxy = await startResponsesProxy({
    authorization,
    port,
    upstreamUrl: flags["upstream-url"] ?? DEFAULT_RESPONSES_UPSTREAM,
    httpShutdown: flags["http-shutdown"] ?? false,
    onShutdown: () => stopped.resolve(),
    ...(flags["dump-dir"] !== undefined ? { dumpDir: flags["dump-dir"] } : {}),
    ...(caCerts.length > 0 ? { caCerts } : {}),
  }).catch((error) => {
    authorization.fill(0);
    throw error;
  });
  const removeSignals = onTerminationSignal(() => stopped.resolve());
  try {
    const serverInfo = flags["server-info"];
    if (serverInfo !== undefined) {
      await Deno.mkdir(dirname(serverInfo), { recursive: true });
      await Deno.writeTextFile(
        serverInfo,
        JSON.stringify({ port: proxy.addr.port, pid: Deno.pid }) + "\n",
      );
    }
    console.error(`responses-api-proxy listening on 127.0.0.1:${proxy.addr.port}`);
    await stopped.promise;
    return 0;
  } finally {
    removeSignals();
    await proxy.close();
  }
}

function parsePort(text: string): number {
  const port = parsePositiveInt("port", text);
  if (port > 65535) throw new UsageError(`--port must be at most 65535, got ${text}`, 2);
  return port;
}
