/**
 * Domain patterns: `example.com` (exact), `*.example.com` (subdomains, not
 * the apex), `**.example.com` (apex and subdomains), `*` (everything; allow
 * list only), and other glob syntax (`*` also matches dots, `?`, `[...]`,
 * `{a,b}`), case-insensitive, normalised like hosts.
 *
 * @module
 */

import { normalizeHost, unscoped } from "../util/host.ts";

/** A compiled set of patterns. */
export interface DomainMatcher {
  /** The normalised, de-duplicated patterns. */
  readonly patterns: readonly string[];
  /** Hosts that patterns name exactly (no glob characters). */
  readonly exact: ReadonlySet<string>;
  /** True when `host` (normalised) matches some pattern. */
  matches(host: string): boolean;
}

/** A pattern that cannot be used. */
export class DomainPatternError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "DomainPatternError";
  }
}

const GLOBAL_MESSAGE = (p: string) =>
  `unsupported global wildcard domain pattern "${p}"; use exact hosts or scoped wildcards like *.example.com or **.example.com`;

/** Normalises a pattern like a host (keeping glob characters). */
export function normalizePattern(pattern: string): string {
  const trimmed = pattern.trim();
  const prefix = /^(\*\*?\.)/.exec(trimmed)?.[1] ?? "";
  const rest = trimmed.slice(prefix.length);
  // Brackets around an IPv6 literal (or `*`) are host syntax; anywhere else
  // they are a glob character class and must stay.
  const bracketed = /^\[([^\]]*)\](:\d+)?$/.exec(rest);
  if (
    rest.startsWith("[") && !(bracketed && (bracketed[1] === "*" || bracketed[1]!.includes(":")))
  ) {
    return prefix + rest.toLowerCase().replace(/\.+$/, "");
  }
  return prefix + normalizeHost(rest);
}

/** True for `*` and its bracketed spellings (`[*]`, `**.[*]`). */
export function isGlobalWildcard(pattern: string): boolean {
  const p = normalizePattern(pattern);
  return p === "*" || p === "**" || p === "**.*";
}

/** True when the pattern has glob characters. */
export function hasGlob(pattern: string): boolean {
  return /[*?[\]{}]/.test(pattern);
}

function globToRegex(glob: string, original: string): string {
  let out = "";
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i]!;
    if (ch === "*") out += ".*";
    else if (ch === "?") out += ".";
    else if (ch === "[") {
      const end = glob.indexOf("]", i + 2);
      if (end === -1) {
        throw new DomainPatternError(
          `invalid domain pattern "${original}": unclosed character class`,
        );
      }
      let cls = glob.slice(i + 1, end);
      if (cls.startsWith("!")) cls = "^" + cls.slice(1);
      out += `[${cls.replace(/\\/g, "\\\\")}]`;
      i = end;
    } else if (ch === "{") {
      const end = glob.indexOf("}", i);
      if (end === -1) {
        throw new DomainPatternError(`invalid domain pattern "${original}": unclosed alternation`);
      }
      out += `(?:${
        glob.slice(i + 1, end).split(",").map((a) => globToRegex(a, original)).join("|")
      })`;
      i = end;
    } else if (ch === "]" || ch === "}") {
      throw new DomainPatternError(`invalid domain pattern "${original}": unbalanced ${ch}`);
    } else out += ch.replace(/[.+^$()|\\/]/g, "\\$&");
  }
  return out;
}

/**
 * Compiles `patterns`. The global wildcard is accepted only with
 * `allowGlobal` (allow lists); elsewhere it is an error, as are invalid globs.
 */
export function compileDomainPatterns(
  patterns: readonly string[],
  options: { allowGlobal: boolean },
): DomainMatcher {
  const normal = [...new Set(patterns.map(normalizePattern))].filter((p) => p !== "");
  const exact = new Set<string>();
  const sources: string[] = [];
  let everything = false;
  for (const p of normal) {
    if (isGlobalWildcard(p)) {
      if (!options.allowGlobal) throw new DomainPatternError(GLOBAL_MESSAGE(p));
      everything = true;
      continue;
    }
    if (p.startsWith("**.")) {
      const apex = p.slice(3);
      sources.push(`(?:${globToRegex(apex, p)}|.+\\.${globToRegex(apex, p)})`);
    } else if (p.startsWith("*.")) {
      sources.push(`.+\\.${globToRegex(p.slice(2), p)}`);
    } else {
      if (!hasGlob(p)) exact.add(p);
      sources.push(globToRegex(p, p));
    }
  }
  const regex = sources.length ? new RegExp(`^(?:${sources.join("|")})$`, "i") : null;
  return {
    patterns: normal,
    exact,
    matches(host: string) {
      if (everything) return true;
      if (!regex) return false;
      if (regex.test(host)) return true;
      const bare = unscoped(host);
      return bare !== host && regex.test(bare);
    },
  };
}
