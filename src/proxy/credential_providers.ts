/**
 * Custom credential providers (`networkProxy.proxy.credentialProviders`,
 * Codex 0.171, capability `credentialMaskingCustomProviders`): more
 * credentials for the broker, each described by the variables holding it,
 * patterns its values match, the `https://` URL prefixes it is sent to and
 * how a request presents it. What the reference does, observed side by side:
 *
 * - A provider is ignored as a whole (nothing masked, no error) when it
 *   names no variable, shares one with the built-in credentials or an
 *   earlier provider (by name), has no pattern, a pattern that does not
 *   compile or that matches the empty string, no usable prefix (only
 *   `https://` URLs — one without a scheme is taken as one;
 *   `url_prefix_from_env` names a variable of the child's environment
 *   holding one more), or `auth: ["header"]` without `header`.
 * - A variable is masked when its value matches one of the patterns whole;
 *   its stand-in is a fresh random value matching that same pattern
 *   (unbounded repetitions kept short), never the real value.
 * - The proxy replaces a stand-in only in requests whose URL starts with
 *   one of the prefixes (same origin, path prefix), and only in the ways
 *   `auth` allows: `Authorization: Bearer`, `token`, `Basic` (user or
 *   password), or the `header` whose value is `prefix` + stand-in.
 *
 * @module
 */

import type { CredentialAuthScheme, CredentialProviderConfig } from "../protocol/types.ts";
import { bracketHost, formatHostPort, normalizeHost } from "../util/host.ts";

/** Where a request goes, as the broker sees it. */
export interface BrokerTarget {
  /** The host the request goes to. */
  readonly host: string;
  /** Its port. */
  readonly port: number;
  /** Path and query. */
  readonly path: string;
}

/** One masked variable of a provider. */
export interface ProvidedCredential {
  readonly name: string;
  readonly real: string;
  readonly standIn: string;
  /** The hosts whose TLS the proxy must intercept. */
  readonly hosts: ReadonlySet<string>;
  /** True when a request to `target` may carry the real value in the `scheme` way. */
  accepts(target: BrokerTarget, scheme: CredentialAuthScheme): boolean;
  /** The header of `auth: ["header"]`, lower-cased, and its prefix. */
  readonly header: { readonly name: string; readonly prefix: string } | null;
}

/** Generates strings matching a pattern. */
type RandExpClass = new (source: string) => { max: number; gen(): string };

let randExp: Promise<RandExpClass> | undefined;

/** `randexp`, loaded on first use (npm packages load lazily: see the README). */
function loadRandExp(): Promise<RandExpClass> {
  // CommonJS: the class is its default export at run time.
  randExp ??= import("randexp").then((m) => {
    const exported = (m as { default?: unknown }).default ?? m;
    return ((exported as { default?: unknown }).default ?? exported) as RandExpClass;
  });
  return randExp;
}

/** Repetitions a stand-in uses for `*`, `+` and `{n,}`. */
const MAX_REPEAT = 16;
/** Attempts at a stand-in that matches and differs from the real value. */
const ATTEMPTS = 16;
/** Stand-ins are bounded: longer ones are not generated. */
const MAX_STAND_IN = 4096;

interface Prefix {
  readonly origin: string;
  /** Its host, normalised (the TLS the proxy intercepts). */
  readonly host: string;
  readonly path: string;
}

/** An `https://` prefix (one without a scheme is taken as `https://`), or null. */
function httpsPrefix(text: string | undefined): Prefix | null {
  if (!text) return null;
  let url: URL;
  try {
    url = new URL(text.includes("://") ? text : `https://${text}`);
  } catch {
    return null;
  }
  if (url.protocol !== "https:" || url.username || url.password) return null;
  return { origin: url.origin, host: normalizeHost(url.hostname), path: url.pathname + url.search };
}

function targetOrigin(target: BrokerTarget): string {
  const { host, port } = target;
  return `https://${port === 443 ? bracketHost(host) : formatHostPort(host, port)}`;
}

function wholeMatch(source: string): RegExp | null {
  try {
    return new RegExp(`^(?:${source})$`, "u");
  } catch {
    return null;
  }
}

/** A random value matching `pattern` whole and differing from `real`, or null. */
function generateStandIn(
  RandExp: RandExpClass,
  source: string,
  whole: RegExp,
  real: string,
): string | null {
  let generator: InstanceType<RandExpClass>;
  try {
    generator = new RandExp(source);
  } catch {
    return null;
  }
  generator.max = MAX_REPEAT;
  for (let i = 0; i < ATTEMPTS; i++) {
    const candidate = generator.gen();
    if (candidate.length > MAX_STAND_IN || candidate === real) continue;
    if (whole.test(candidate)) return candidate;
  }
  return null;
}

/**
 * The credentials `providers` mask in `env` (see the module documentation);
 * `builtIn` are the variables the broker masks by itself.
 */
export async function provideCredentials(
  providers: Readonly<Record<string, CredentialProviderConfig>>,
  env: Readonly<Record<string, string>>,
  builtIn: ReadonlySet<string>,
): Promise<ProvidedCredential[]> {
  if (Object.keys(providers).length === 0) return [];
  const RandExp = await loadRandExp();
  const claimed = new Set(builtIn);
  const out: ProvidedCredential[] = [];
  for (const name of Object.keys(providers).sort()) {
    const provider = providers[name]!;
    const variables = provider.env ?? [];
    if (variables.length === 0 || variables.some((v) => claimed.has(v))) continue;
    for (const v of variables) claimed.add(v);
    const patterns = (provider.patterns ?? []).map((source) => ({
      source,
      whole: wholeMatch(source),
    }));
    if (patterns.length === 0 || patterns.some((p) => !p.whole || p.whole.test(""))) continue;
    const parsed = [
      ...(provider.url_prefixes ?? []).map(httpsPrefix),
      ...(provider.url_prefix_from_env ? [httpsPrefix(env[provider.url_prefix_from_env])] : []),
    ];
    const prefixes = parsed.filter((p): p is Prefix => p !== null);
    if (prefixes.length === 0 || prefixes.length !== parsed.length) continue;
    const schemes = new Set<CredentialAuthScheme>(provider.auth ?? ["bearer"]);
    if (schemes.has("header") && !provider.header) continue;
    const header = schemes.has("header")
      ? { name: provider.header!.toLowerCase(), prefix: provider.prefix ?? "" }
      : null;
    const hosts = new Set(prefixes.map((p) => p.host));
    const accepts = (target: BrokerTarget, scheme: CredentialAuthScheme) => {
      if (!schemes.has(scheme)) return false;
      const origin = targetOrigin(target);
      return prefixes.some((p) => p.origin === origin && target.path.startsWith(p.path));
    };
    for (const variable of variables) {
      const real = env[variable];
      if (!real) continue;
      const pattern = patterns.find((p) => p.whole!.test(real));
      if (!pattern) continue;
      const standIn = generateStandIn(RandExp, pattern.source, pattern.whole!, real);
      if (standIn === null) continue;
      out.push({ name: variable, real, standIn, hosts, accepts, header });
    }
  }
  return out;
}
