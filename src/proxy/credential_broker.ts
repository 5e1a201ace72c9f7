/**
 * Credential masking (`process/start.networkProxy.proxy.credentialMasking`,
 * capability `credentialMasking`): the child never sees the real GitHub and
 * OpenAI credentials of its environment, only stand-ins of the same shape,
 * and its proxy puts the real value back into the `Authorization` header of
 * HTTPS requests to the hosts that credential belongs to.
 *
 * What the reference does, observed side by side (and done the same here):
 *
 * - Only a command run as `bash -c <script>` (exactly three arguments, the
 *   program named `bash`) is masked; any other command keeps the real
 *   values (a login shell, `sh`, `zsh` or extra arguments could re-read them
 *   from files); nor is a start with a shell snapshot, whose replay of the
 *   user's profile could bring the real values back (the server logs that
 *   masking was unavailable).
 * - The credentials: `GH_TOKEN`, `GITHUB_TOKEN`, `GITHUB_PAT`,
 *   `COPILOT_GITHUB_TOKEN`, `GITHUB_API_TOKEN` (github.com, api.github.com,
 *   uploads.github.com and GitHub Enterprise Cloud's `*.ghe.com`);
 *   `GH_ENTERPRISE_TOKEN`, `GITHUB_ENTERPRISE_TOKEN` (the `GH_HOST` server,
 *   and only when `GH_HOST` names one — a host name, not a URL, an IP
 *   address, `localhost` or GitHub's cloud: unbound, they stay as they
 *   are); and
 *   `OPENAI_API_KEY` (api.openai.com). Empty values are left alone.
 * - A stand-in keeps the credential's kind prefix (`ghp_`, `gho_`,
 *   `github_pat_`, … — `ghp_` when none; `sk-proj-`, `sk-` …), then
 *   `masked`, then random letters and digits, as long as the real value and
 *   at least 40 characters (GitHub) or 51 (OpenAI). Every process gets fresh
 *   ones, distinct even for equal values.
 * - The child's environment gains `CODEX_NETWORK_PROXY_CREDENTIAL_BROKER_ACTIVE=1`
 *   and `CODEX_NETWORK_PROXY_BROKERED_CREDENTIALS`, a JSON list of
 *   `[name, stand-in]` pairs: `@alias:NAME` entries, then the names, each
 *   sorted (`[]` when there was nothing to mask).
 * - The proxy intercepts TLS to bound hosts and rewrites `Authorization:
 *   Bearer|token <stand-in>` and `Basic` (a stand-in as user or password)
 *   when the stand-in belongs to that host. Nothing is added to a request
 *   without a stand-in, an explicit credential is left alone, other headers
 *   and URLs are never rewritten, and nothing is injected into plain HTTP.
 * - Custom providers (`proxy.credentialProviders`) add credentials of
 *   their own: see `credential_providers.ts`.
 *
 * @module
 */

import type { CredentialAuthScheme, CredentialProviderConfig } from "../protocol/types.ts";
import { isIpLiteral, normalizeHost } from "../util/host.ts";
import { type BrokerTarget, provideCredentials } from "./credential_providers.ts";

export type { BrokerTarget };

/** Environment variables the broker manages. */
export const BROKER_ACTIVE_ENV = "CODEX_NETWORK_PROXY_CREDENTIAL_BROKER_ACTIVE";
/** The JSON list of `[name, stand-in]` pairs. */
export const BROKERED_CREDENTIALS_ENV = "CODEX_NETWORK_PROXY_BROKERED_CREDENTIALS";

type Family = "github" | "github_enterprise" | "openai";

const CREDENTIALS: ReadonlyArray<readonly [string, Family]> = [
  ["GH_TOKEN", "github"],
  ["GITHUB_TOKEN", "github"],
  ["GITHUB_PAT", "github"],
  ["COPILOT_GITHUB_TOKEN", "github"],
  ["GITHUB_API_TOKEN", "github"],
  ["GH_ENTERPRISE_TOKEN", "github_enterprise"],
  ["GITHUB_ENTERPRISE_TOKEN", "github_enterprise"],
  ["OPENAI_API_KEY", "openai"],
];

interface Shape {
  readonly prefixes: readonly string[];
  readonly fallback: string;
  readonly minLength: number;
}

/** Cloud and Enterprise tokens have the same shapes. */
const GITHUB_SHAPE: Shape = {
  prefixes: ["github_pat_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
  fallback: "ghp_",
  minLength: 40,
};

const SHAPES: Record<Family, Shape> = {
  github: GITHUB_SHAPE,
  github_enterprise: GITHUB_SHAPE,
  openai: {
    prefixes: ["sk-proj-", "sk-svcacct-", "sk-admin-", "sk-"],
    fallback: "sk-",
    minLength: 51,
  },
};

const GITHUB_CLOUD_HOSTS = new Set(["github.com", "api.github.com", "uploads.github.com"]);

const ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/** Random letters and digits (unbiased: bytes ≥ 248 are drawn again). */
function randomAlphanumeric(n: number): string {
  let out = "";
  while (out.length < n) {
    for (const b of crypto.getRandomValues(new Uint8Array(n))) {
      if (b < 248 && out.length < n) out += ALPHANUMERIC[b % 62];
    }
  }
  return out;
}

/** A stand-in of the same shape as `real` (see the module documentation). */
export function standIn(real: string, family: Family): string {
  const shape = SHAPES[family];
  const prefix = shape.prefixes.find((p) => real.startsWith(p)) ?? shape.fallback;
  const head = `${prefix}masked`;
  return head + randomAlphanumeric(Math.max(real.length, shape.minLength) - head.length);
}

/** True for a command the broker masks: `bash -c <script>`, exactly. */
export function maskableCommand(argv: readonly string[]): boolean {
  return argv.length === 3 && argv[0]!.split("/").at(-1) === "bash" && argv[1] === "-c";
}

interface Brokered {
  readonly name: string;
  readonly real: string;
  /** Its TLS is intercepted. */
  readonly binds: (host: string) => boolean;
  /** A request to `target` may carry the real value the `scheme` way. */
  readonly accepts: (target: BrokerTarget, scheme: CredentialAuthScheme) => boolean;
  /** A header of its own (custom providers with `auth: ["header"]`). */
  readonly header: { readonly name: string; readonly prefix: string } | null;
}

/** The built-in credentials go where their host is, as a bearer, token or in Basic. */
function hostBound(binds: (host: string) => boolean): Omit<Brokered, "name" | "real"> {
  return {
    binds,
    accepts: (target, scheme) => scheme !== "header" && binds(normalizeHost(target.host)),
    header: null,
  };
}

/** The stand-ins of one process and the hosts their real values go to. */
export class CredentialBroker {
  readonly #byStandIn: ReadonlyMap<string, Brokered>;

  /** Creates a broker for `entries` (stand-in → credential). */
  constructor(entries: ReadonlyMap<string, Brokered>) {
    this.#byStandIn = entries;
  }

  /** True when some credential belongs to `host` (its TLS is then intercepted). */
  binds(host: string): boolean {
    const h = normalizeHost(host);
    for (const entry of this.#byStandIn.values()) if (entry.binds(h)) return true;
    return false;
  }

  /** The real value for a stand-in that may go to `target` the `scheme` way, else null. */
  #real(candidate: string, target: BrokerTarget, scheme: CredentialAuthScheme): string | null {
    const entry = this.#byStandIn.get(candidate);
    return entry && entry.accepts(target, scheme) ? entry.real : null;
  }

  /**
   * `headers` with stand-ins replaced by the real values that may go to
   * `target`: in `Authorization`, and in a custom provider's own header
   * (the same array when nothing changes).
   */
  rewrite(target: BrokerTarget, headers: Array<[string, string]>): Array<[string, string]> {
    let changed = false;
    const out = headers.map(([name, value]): [string, string] => {
      const lower = name.toLowerCase();
      const rewritten = lower === "authorization"
        ? this.#authorization(value, target)
        : this.#ownHeader(lower, value, target);
      if (rewritten === null) return [name, value];
      changed = true;
      return [name, rewritten];
    });
    return changed ? out : headers;
  }

  /** `prefix` + stand-in in the header a custom provider names. */
  #ownHeader(name: string, value: string, target: BrokerTarget): string | null {
    for (const entry of this.#byStandIn.values()) {
      const h = entry.header;
      if (!h || h.name !== name || !value.startsWith(h.prefix)) continue;
      // The stand-in after the prefix must be this entry's own.
      const candidate = value.slice(h.prefix.length);
      if (this.#byStandIn.get(candidate) === entry && entry.accepts(target, "header")) {
        return h.prefix + entry.real;
      }
    }
    return null;
  }

  #authorization(value: string, target: BrokerTarget): string | null {
    const m = /^(\s*)(\S+)(\s+)(\S+)(\s*)$/.exec(value);
    if (!m) return null;
    const [, lead, scheme, gap, credential, trail] = m as unknown as string[];
    const kind = scheme!.toLowerCase();
    if (kind === "bearer" || kind === "token") {
      const real = this.#real(credential!, target, kind);
      return real === null ? null : `${lead}${scheme}${gap}${real}${trail}`;
    }
    if (kind !== "basic") return null;
    let decoded: string;
    try {
      decoded = new TextDecoder("utf-8", { fatal: true }).decode(
        Uint8Array.fromBase64(credential!),
      );
    } catch {
      return null;
    }
    const colon = decoded.indexOf(":");
    if (colon === -1) return null;
    const user = decoded.slice(0, colon);
    const password = decoded.slice(colon + 1);
    const realUser = this.#real(user, target, "basic");
    const realPassword = this.#real(password, target, "basic");
    if (realUser === null && realPassword === null) return null;
    const pair = `${realUser ?? user}:${realPassword ?? password}`;
    return `${lead}${scheme}${gap}${new TextEncoder().encode(pair).toBase64()}${trail}`;
  }
}

/**
 * The GitHub Enterprise Server named by `GH_HOST` (`host` or `host:port`),
 * or "" when there is none: unset, not a plain host name (a URL), an IP
 * address, `localhost`, or GitHub's own cloud (github.com, `*.ghe.com`).
 */
export function enterpriseServer(ghHost: string | undefined): string {
  const m = /^([^/:\s]+)(?::\d+)?$/.exec(ghHost ?? "");
  if (!m) return "";
  const host = normalizeHost(m[1]!);
  if (host === "" || isIpLiteral(host) || host === "localhost" || host.endsWith(".localhost")) {
    return "";
  }
  if (isGithubCloud(host) || host === "ghe.com") return "";
  return host;
}

function isGithubCloud(host: string): boolean {
  return GITHUB_CLOUD_HOSTS.has(host) || host.endsWith(".ghe.com");
}

/** What {@linkcode maskCredentials} gives the child and its proxy. */
export interface MaskedEnvironment {
  /** The child's environment: stand-ins in place, the broker variables set. */
  readonly env: Record<string, string>;
  /** For the child's proxy. */
  readonly broker: CredentialBroker;
}

/**
 * Replaces the credentials of `env` — the built-in ones and those of
 * `providers` — by stand-ins (see the module documentation).
 */
export async function maskCredentials(
  env: Readonly<Record<string, string>>,
  providers: Readonly<Record<string, CredentialProviderConfig>> = {},
): Promise<MaskedEnvironment> {
  const out = { ...env };
  const entries = new Map<string, Brokered>();
  const enterpriseHost = enterpriseServer(env.GH_HOST);
  for (const [name, family] of CREDENTIALS) {
    const real = env[name];
    if (!real) continue;
    let binds: (host: string) => boolean;
    if (family === "github") {
      binds = isGithubCloud;
    } else if (family === "openai") {
      binds = (h) => h === "api.openai.com";
    } else {
      if (!enterpriseHost) continue; // unbound: left as it is
      binds = (h) => h === enterpriseHost;
    }
    const fake = standIn(real, family);
    out[name] = fake;
    entries.set(fake, { name, real, ...hostBound(binds) });
  }
  const builtIn = new Set(CREDENTIALS.map(([name]) => name));
  for (const provided of await provideCredentials(providers, env, builtIn)) {
    out[provided.name] = provided.standIn;
    entries.set(provided.standIn, {
      name: provided.name,
      real: provided.real,
      binds: (h) => provided.hosts.has(h),
      accepts: provided.accepts,
      header: provided.header,
    });
  }
  const pairs = [...entries].map(([fake, e]) => [e.name, fake] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  out[BROKER_ACTIVE_ENV] = "1";
  out[BROKERED_CREDENTIALS_ENV] = JSON.stringify([
    ...pairs.map(([name, fake]) => [`@alias:${name}`, fake]),
    ...pairs,
  ]);
  return { env: out, broker: new CredentialBroker(entries) };
}
