/**
 * Command-line flags parsed exactly as `node:util`'s `parseArgs` parses them
 * in strict mode — the same results, the same error messages — without
 * loading Deno's Node compatibility layer, which importing `node:util` does
 * (~13 ms before a server spawned per environment answers its first
 * request). Options of type `string` or `boolean`, `short` and `multiple`,
 * and `allowPositionals` are supported; `default`, `tokens`,
 * `allowNegative` and `strict: false` are refused at the call (no command
 * uses them), never half-implemented.
 *
 * @module
 */

import type { parseArgs as NodeParseArgs, ParseArgsConfig } from "node:util";

/** A flag error, with the message `node:util` gives and its `code`. */
export class ParseArgsError extends TypeError {
  /** Creates the error. */
  constructor(readonly code: string, message: string) {
    super(message);
    this.name = "TypeError";
  }
}

interface Token {
  readonly name: string;
  readonly rawName: string;
  readonly value: string | undefined;
  readonly inlineValue: boolean;
}

type Spec = { type: "string" | "boolean"; short?: string; multiple?: boolean };

/** `node:util` `parseArgs(config)` for the supported subset (see the module documentation). */
export function parseArgs<const T extends ParseArgsConfig>(
  config: T,
): ReturnType<typeof NodeParseArgs<T>> {
  const unsupported = (["tokens", "allowNegative"] as const).find((key) => config[key]);
  if (unsupported || config.strict === false) {
    throw new Error(`parseArgs: ${unsupported ?? "strict: false"} is not supported`);
  }
  const options = (config.options ?? {}) as Record<string, Spec & { default?: unknown }>;
  for (const [name, spec] of Object.entries(options)) {
    if (spec.default !== undefined) {
      throw new Error(`parseArgs: --${name}: default is not supported`);
    }
  }
  const allowPositionals = config.allowPositionals ?? false;
  const own = (name: string): Spec | undefined =>
    Object.hasOwn(options, name) ? options[name] : undefined;
  const longOf = (short: string): string =>
    Object.keys(options).find((name) => options[name]!.short === short) ?? short;
  const isString = (name: string) => own(name)?.type === "string";

  const values: Record<string, unknown> = { __proto__: null } as unknown as Record<string, unknown>;
  const accept = (token: Token) => store(values, options, check(token, options, allowPositionals));
  const positionals: string[] = [];
  const remaining = [...(config.args ?? [])];
  while (remaining.length > 0) {
    const arg = remaining.shift()!;
    if (arg === "--") {
      const rest = remaining.splice(0);
      if (rest.length > 0 && !allowPositionals) throw unexpected(rest[0]!);
      positionals.push(...rest);
      break;
    }
    if (arg.length === 2 && arg[0] === "-" && arg[1] !== "-") {
      const name = longOf(arg[1]!);
      const value = isString(name) && remaining.length > 0 ? remaining.shift() : undefined;
      accept({ name, rawName: arg, value, inlineValue: false });
      continue;
    }
    if (arg.length > 2 && arg[0] === "-" && arg[1] !== "-") {
      if (!isString(longOf(arg[1]!))) {
        // A group of short flags: `-rp` is `-r -p`; a string flag takes the rest.
        const expanded: string[] = [];
        for (let i = 1; i < arg.length; i++) {
          const short = arg[i]!;
          if (!isString(longOf(short)) || i === arg.length - 1) {
            expanded.push(`-${short}`);
          } else {
            expanded.push(`-${short}`, arg.slice(i + 1));
            break;
          }
        }
        remaining.unshift(...expanded);
        continue;
      }
      const name = longOf(arg[1]!);
      accept({ name, rawName: `-${arg[1]}`, value: arg.slice(2), inlineValue: true });
      continue;
    }
    if (arg.startsWith("--") && arg.length > 2) {
      if (arg.indexOf("=", 3) === -1) {
        const name = arg.slice(2);
        const value = isString(name) && remaining.length > 0 ? remaining.shift() : undefined;
        accept({ name, rawName: arg, value, inlineValue: false });
      } else {
        const equals = arg.indexOf("=");
        const name = arg.slice(2, equals);
        accept({ name, rawName: `--${name}`, value: arg.slice(equals + 1), inlineValue: true });
      }
      continue;
    }
    if (!allowPositionals) throw unexpected(arg);
    positionals.push(arg);
  }
  return { values, positionals } as unknown as ReturnType<typeof NodeParseArgs<T>>;
}

function unexpected(arg: string): ParseArgsError {
  return new ParseArgsError(
    "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL",
    `Unexpected argument '${arg}'. This command does not take positional arguments`,
  );
}

/** The strict checks of one flag (node's messages); returns it. */
function check(token: Token, options: Record<string, Spec>, allowPositionals: boolean): Token {
  const spec = Object.hasOwn(options, token.name) ? options[token.name] : undefined;
  if (!spec) {
    const hint = allowPositionals
      ? `. To specify a positional argument starting with a '-', place it at the end of the command after '--', as in '-- ${
        JSON.stringify(token.rawName)
      }`
      : "";
    throw new ParseArgsError(
      "ERR_PARSE_ARGS_UNKNOWN_OPTION",
      `Unknown option '${token.rawName}'${hint}`,
    );
  }
  const shortAndLong = spec.short ? `-${spec.short}, --${token.name}` : `--${token.name}`;
  if (spec.type === "string") {
    if (token.value === undefined) {
      throw new ParseArgsError(
        "ERR_PARSE_ARGS_INVALID_OPTION_VALUE",
        `Option '${shortAndLong} <value>' argument missing`,
      );
    }
    if (!token.inlineValue && token.value.length > 1 && token.value[0] === "-") {
      const example = token.rawName.startsWith("--")
        ? `'${token.rawName}=-XYZ'`
        : `'--${token.name}=-XYZ' or '${token.rawName}-XYZ'`;
      throw new ParseArgsError(
        "ERR_PARSE_ARGS_INVALID_OPTION_VALUE",
        `Option '${token.rawName}' argument is ambiguous.\n` +
          `Did you forget to specify the option argument for '${token.rawName}'?\n` +
          `To specify an option argument starting with a dash use ${example}.`,
      );
    }
  } else if (token.value !== undefined) {
    throw new ParseArgsError(
      "ERR_PARSE_ARGS_INVALID_OPTION_VALUE",
      `Option '${shortAndLong}' does not take an argument`,
    );
  }
  return token;
}

function store(values: Record<string, unknown>, options: Record<string, Spec>, token: Token): void {
  if (token.name === "__proto__") return;
  const value = token.value ?? true;
  if (options[token.name]!.multiple) {
    const list = (values[token.name] as unknown[] | undefined) ?? [];
    list.push(value);
    values[token.name] = list;
  } else {
    values[token.name] = value;
  }
}
