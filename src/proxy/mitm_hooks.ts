/**
 * MITM hooks: per-host rules that match intercepted requests (method, path
 * prefix, query and header constraints) and rewrite them (strip headers,
 * inject secrets from the environment or a file). A host with hooks accepts
 * only requests some hook matches.
 *
 * Matcher strings: plain text is literal (a prefix for paths, exact for
 * values); `pattern:<glob>` is a glob (`*` and `?` stop at `/` in paths,
 * backslash escapes); `literal:<text>` is literal even when the text starts
 * with `pattern:`.
 *
 * @module
 */

import type { MitmHookConfig } from "./config.ts";
import { NetworkConfigError } from "./config.ts";
import { normalizeHost } from "../util/host.ts";

/** A request as the hooks see it. */
export interface HookRequest {
  /** Method. */
  readonly method: string;
  /** Path without the query. */
  readonly path: string;
  /** Raw query (without `?`). */
  readonly query: string;
  /** Header fields. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
}

/** What a hook does to a matching request. */
export interface HookActions {
  /** Header names removed (case-insensitive). */
  readonly strip: readonly string[];
  /** Headers set (replacing any present). */
  readonly inject: ReadonlyArray<readonly [string, string]>;
}

/** The result of evaluating a host's hooks. */
export type HookOutcome =
  | { readonly kind: "no_hooks" }
  | { readonly kind: "matched"; readonly actions: HookActions }
  | { readonly kind: "no_match" };

type Matcher = (value: string) => boolean;

interface CompiledHook {
  host: string;
  methods: Set<string>;
  paths: Matcher[];
  query: Array<[string, Matcher[]]>;
  headers: Array<[string, Matcher[]]>;
  actions: HookActions;
}

/** Compiled hooks by host. */
export interface MitmHooks {
  /** True when `host` has hooks. */
  has(host: string): boolean;
  /** Evaluates `host`'s hooks for a request. */
  evaluate(host: string, request: HookRequest): HookOutcome;
}

const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

function globRegex(glob: string, pathMode: boolean, where: string): RegExp {
  const any = pathMode ? "[^/]" : ".";
  let out = "";
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i]!;
    if (ch === "\\") {
      const next = glob[++i];
      if (next === undefined) throw new NetworkConfigError(`${where}: dangling escape in pattern`);
      out += next.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
    } else if (ch === "*") out += `${any}*`;
    else if (ch === "?") out += any;
    else if (ch === "[") {
      const end = glob.indexOf("]", i + 2);
      if (end === -1) throw new NetworkConfigError(`${where}: invalid pattern \`${glob}\``);
      let cls = glob.slice(i + 1, end);
      if (cls.startsWith("!")) cls = "^" + cls.slice(1);
      out += `[${cls.replace(/\\/g, "\\\\")}]`;
      i = end;
    } else if (ch === "]") {
      throw new NetworkConfigError(`${where}: invalid pattern \`${glob}\``);
    } else out += ch.replace(/[.+^${}()|\\/]/g, "\\$&");
  }
  return new RegExp(pathMode ? `^${out}` : `^${out}$`);
}

function matcher(text: string, pathMode: boolean, where: string): Matcher {
  if (text.startsWith("literal:")) {
    const literal = text.slice(8);
    return pathMode ? (v) => v.startsWith(literal) : (v) => v === literal;
  }
  if (text.startsWith("pattern:")) {
    const regex = globRegex(text.slice(8), pathMode, where);
    return (v) => regex.test(v);
  }
  return pathMode ? (v) => v.startsWith(text) : (v) => v === text;
}

function readSecret(
  inject: NonNullable<NonNullable<MitmHookConfig["actions"]>["inject_request_headers"]>[number],
  where: string,
  env: (name: string) => string | undefined,
): string {
  const hasEnv = inject.secret_env_var !== undefined;
  const hasFile = inject.secret_file !== undefined;
  if (hasEnv === hasFile) {
    throw new NetworkConfigError(`${where}: expected exactly one of secret_env_var or secret_file`);
  }
  if (hasFile) {
    if (!inject.secret_file!.startsWith("/")) {
      throw new NetworkConfigError(`${where}: secret_file must be an absolute path`);
    }
    try {
      return Deno.readTextFileSync(inject.secret_file!).trim();
    } catch (error) {
      throw new NetworkConfigError(
        `${where}: cannot read secret_file: ${(error as Error).message}`,
      );
    }
  }
  const value = env(inject.secret_env_var!);
  if (value === undefined) {
    throw new NetworkConfigError(
      `${where}: missing required environment variable ${inject.secret_env_var}`,
    );
  }
  return value;
}

/**
 * Validates and compiles hooks (secrets are read now). `mitm` must be on
 * when any hook exists.
 */
export function compileMitmHooks(
  hooks: readonly MitmHookConfig[],
  mitm: boolean,
  env: (name: string) => string | undefined = (n) => Deno.env.get(n),
): MitmHooks {
  if (hooks.length > 0 && !mitm) {
    throw new NetworkConfigError("network.mitm_hooks requires network.mitm = true");
  }
  const byHost = new Map<string, CompiledHook[]>();
  hooks.forEach((hook, i) => {
    const where = `invalid network.mitm_hooks[${i}]`;
    const host = normalizeHost(hook.host ?? "");
    if (host === "" || /[*?]/.test(host)) {
      throw new NetworkConfigError(`${where}.host: must be an exact host`);
    }
    const match = hook.match ?? {};
    if (match.body !== undefined) {
      throw new NetworkConfigError(
        `${where}.match.body is reserved for a future release and is not yet supported`,
      );
    }
    const methods = (match.methods ?? []).map((m) => m.trim().toUpperCase()).filter((m) =>
      m !== ""
    );
    if (methods.length === 0) {
      throw new NetworkConfigError(`${where}.match.methods must not be empty`);
    }
    const prefixes = match.path_prefixes ?? [];
    if (prefixes.length === 0 || prefixes.some((p) => p === "")) {
      throw new NetworkConfigError(
        `${where}.match.path_prefixes must be non-empty without empty entries`,
      );
    }
    const constraints = (table: Record<string, string[]> | undefined, kind: string) =>
      Object.entries(table ?? {}).map(([name, values]) => {
        if (name === "") throw new NetworkConfigError(`${where}.match.${kind}: empty name`);
        if (kind === "headers" && !HEADER_NAME.test(name)) {
          throw new NetworkConfigError(`${where}.match.headers: invalid header name \`${name}\``);
        }
        if (kind === "query" && (!Array.isArray(values) || values.length === 0)) {
          throw new NetworkConfigError(`${where}.match.query.${name} needs at least one value`);
        }
        return [
          kind === "headers" ? name.toLowerCase() : name,
          (values ?? []).map((v) => matcher(v, false, where)),
        ] as [string, Matcher[]];
      });
    const inject = (hook.actions?.inject_request_headers ?? []).map((h, j) => {
      const w = `${where}.actions.inject_request_headers[${j}]`;
      if (!HEADER_NAME.test(h.name ?? "")) {
        throw new NetworkConfigError(`${w}: invalid header name`);
      }
      return [h.name.toLowerCase(), (h.prefix ?? "") + readSecret(h, w, env)] as const;
    });
    const compiled: CompiledHook = {
      host,
      methods: new Set(methods),
      paths: prefixes.map((p) => matcher(p, true, where)),
      query: constraints(match.query, "query"),
      headers: constraints(match.headers, "headers"),
      actions: {
        strip: (hook.actions?.strip_request_headers ?? []).map((h) => h.toLowerCase()),
        inject,
      },
    };
    byHost.set(host, [...(byHost.get(host) ?? []), compiled]);
  });

  const matches = (hook: CompiledHook, request: HookRequest): boolean => {
    if (!hook.methods.has(request.method.toUpperCase())) return false;
    if (!hook.paths.some((m) => m(request.path))) return false;
    const params = new URLSearchParams(request.query);
    for (const [name, allowed] of hook.query) {
      const values = params.getAll(name);
      if (!values.some((v) => allowed.some((m) => m(v)))) return false;
    }
    for (const [name, allowed] of hook.headers) {
      const values = request.headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);
      if (values.length === 0) return false;
      if (allowed.length > 0 && !values.some((v) => allowed.some((m) => m(v)))) return false;
    }
    return true;
  };

  return {
    has: (host) => byHost.has(normalizeHost(host)),
    evaluate(host, request) {
      const list = byHost.get(normalizeHost(host));
      if (!list) return { kind: "no_hooks" };
      const hit = list.find((h) => matches(h, request));
      return hit ? { kind: "matched", actions: hit.actions } : { kind: "no_match" };
    },
  };
}

/** Applies hook actions: strip, then inject (replacing). */
export function applyHookActions(
  headers: ReadonlyArray<readonly [string, string]>,
  actions: HookActions,
): Array<[string, string]> {
  const drop = new Set([...actions.strip, ...actions.inject.map(([n]) => n)]);
  const out = headers.filter(([n]) => !drop.has(n.toLowerCase())).map(([n, v]) =>
    [n, v] as [string, string]
  );
  for (const [n, v] of actions.inject) out.push([n, v]);
  return out;
}
