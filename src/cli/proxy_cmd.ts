/**
 * `exec-server proxy`: the egress policy proxy on its own.
 *
 * @module
 */

import type { NetworkDecision, NetworkPolicyRequest } from "../proxy/decision.ts";
import { startNetworkProxyFromFile } from "../proxy/start.ts";
import { loadNetworkRequirementsFile } from "../proxy/config_file.ts";
import {
  commandLogger,
  metricsListenFlag,
  parseCommand,
  parseDuration,
  printLine,
  terminationSignal,
  UsageError,
} from "./common.ts";
import { formatHostPort } from "../util/host.ts";
import { ProxyMetrics } from "../proxy/metrics.ts";
import { startCommandMetrics } from "../telemetry/command.ts";
import { metricsUrl } from "../telemetry/address.ts";

/** Help text. */
export const PROXY_USAGE = `Usage: exec-server proxy --config FILE [OPTIONS]

An egress policy proxy: HTTP/1.1 (absolute-form and CONNECT) and SOCKS5 (TCP
and UDP), allow/deny domain patterns, local/private targets blocked unless
allowed, limited mode (GET/HEAD/OPTIONS, HTTPS intercepted), MITM hooks.
FILE is JSON or TOML (the runtime keys, or a Codex permissions profile) and
is reloaded when it changes. Prints one JSON line with the addresses, the
CA certificate and the trust bundle for clients (and the metrics URL, with
--metrics-listen).

Options:
  --config <FILE>           configuration (required)
  --requirements <FILE>     an administrator's requirements (JSON or TOML: enabled, http_port,
                            socks_port, allow_upstream_proxy, dangerously_allow_non_loopback_proxy,
                            dangerously_allow_all_unix_sockets, domains, managed_allowed_domains_only,
                            unix_sockets, allow_local_binding, mode): they override FILE and every
                            reload or edit must stay within them
  --ephemeral               listen on fresh loopback ports instead of proxy_url/socks_url
  --home <DIR>              where proxy/ CA files go (default $CODEX_HOME or ~/.codex)
  --prompt                  ask about hosts outside the allow list over stdio: a JSON line
                            {"type":"decision_request","id":N,"protocol","host","port",...}
                            on stdout, answered by {"id":N,"decision":"allow"|"deny"|"ask"} on stdin
  --prompt-timeout <DUR>    deny unanswered prompts after this long (default 60s)
  --metrics-listen <[HOST:]PORT>
                            serve GET /metrics (Prometheus text format) on its own listener
                            (loopback for a bare port): decisions, connections, interceptions
  --log-level <LEVEL>       diagnostics and audit events on stderr (default info)
  -h, --help                show this help

Example:
  exec-server proxy --config proxy.toml
  HTTPS_PROXY=http://127.0.0.1:3128 curl https://api.github.com/
`;

function stdioDecider(
  timeoutMs: number,
): (request: NetworkPolicyRequest) => Promise<NetworkDecision> {
  let next = 0;
  const pending = new Map<number, (d: NetworkDecision) => void>();
  (async () => {
    const decoder = new TextDecoder();
    let buffered = "";
    try {
      for await (const chunk of Deno.stdin.readable) {
        buffered += decoder.decode(chunk, { stream: true });
        let nl;
        while ((nl = buffered.indexOf("\n")) !== -1) {
          const line = buffered.slice(0, nl).trim();
          buffered = buffered.slice(nl + 1);
          if (!line) continue;
          try {
            const answer = JSON.parse(line) as { id?: number; decision?: string; reason?: string };
            const resolve = pending.get(answer.id ?? -1);
            if (!resolve) continue;
            pending.delete(answer.id!);
            resolve(
              answer.decision === "allow" ? { allow: true } : {
                allow: false,
                reason: answer.reason ?? "not_allowed",
                source: "decider",
                decision: answer.decision === "ask" ? "ask" : "deny",
              },
            );
          } catch { /* not an answer */ }
        }
      }
    } catch { /* stdin closed */ }
  })();
  return async (request) => {
    const id = ++next;
    const answer = new Promise<NetworkDecision>((resolve) => pending.set(id, resolve));
    await printLine(JSON.stringify({ type: "decision_request", id, ...request }));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<NetworkDecision>((resolve) => {
      timer = setTimeout(() => {
        pending.delete(id);
        resolve({ allow: false, reason: "not_allowed", source: "decider", decision: "deny" });
      }, timeoutMs);
    });
    try {
      return await Promise.race([answer, timeout]);
    } finally {
      clearTimeout(timer);
    }
  };
}

/** Runs `proxy`; returns the exit status. */
export async function runProxy(args: string[]): Promise<number> {
  const parsed = parseCommand({
    args,
    options: {
      config: { type: "string" },
      ephemeral: { type: "boolean" },
      requirements: { type: "string" },
      home: { type: "string" },
      prompt: { type: "boolean" },
      "prompt-timeout": { type: "string" },
      "metrics-listen": { type: "string" },
      "log-level": { type: "string" },
    },
  }, PROXY_USAGE);
  if (!parsed) return 0;
  const flags = parsed.values;
  if (!flags.config) throw new UsageError("--config FILE is required", 2);
  const logger = commandLogger(flags["log-level"], "info");
  const timeout = parseDuration("prompt-timeout", flags["prompt-timeout"] ?? "60s");
  const metricsListen = metricsListenFlag(flags["metrics-listen"]);
  const requirements = flags.requirements
    ? await loadNetworkRequirementsFile(flags.requirements)
    : null;
  const measured = await startCommandMetrics(metricsListen, () => new ProxyMetrics(), {
    serviceName: "exec-server-proxy",
    logger,
  });
  await using _telemetry = measured?.telemetry;
  const proxy = await startNetworkProxyFromFile(flags.config, {
    metrics: measured?.metrics ?? null,
    managed: flags.ephemeral ?? false,
    logger,
    ...(requirements ? { requirements } : {}),
    ...(flags.home ? { home: flags.home } : {}),
    ...(flags.prompt ? { decider: stdioDecider(timeout) } : {}),
  });
  try {
    if (!proxy.addresses.http) throw new UsageError("network.enabled is false; nothing to serve");
    const addr = (a: Deno.NetAddr | null) => a ? (formatHostPort(a.hostname, a.port)) : null;
    // Listen for the signal before saying we are up (a prompt SIGTERM exits 0).
    const signalled = terminationSignal();
    await printLine(JSON.stringify({
      type: "listening",
      http: addr(proxy.addresses.http),
      socks: addr(proxy.addresses.socks),
      trustBundle: proxy.trustBundlePath,
      ...(measured?.telemetry.prometheusAddr
        ? { metrics: metricsUrl(measured.telemetry.prometheusAddr) }
        : {}),
    }));
    await signalled;
    return 0;
  } finally {
    await proxy.shutdown();
  }
}
