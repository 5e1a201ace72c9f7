import { assertEquals, assertThrows } from "../helpers/assert.ts";
import { parseArgs as nodeParseArgs, type ParseArgsConfig } from "node:util";
import { parseArgs } from "../../src/cli/args.ts";

type Outcome = { values: Record<string, unknown>; positionals: string[] } | {
  error: string;
  code: string;
};

function outcome(parse: (config: ParseArgsConfig) => unknown, config: ParseArgsConfig): Outcome {
  try {
    const { values, positionals } = parse(config) as { values: object; positionals: string[] };
    return { values: { ...values }, positionals };
  } catch (error) {
    return { error: (error as Error).message, code: (error as { code: string }).code };
  }
}

/** A small deterministic generator (the same vectors every run). */
function* vectors(pool: string[], count: number, seed: number): Generator<string[]> {
  let state = seed;
  const next = () => (state = (state * 1103515245 + 12345) % 2147483648);
  for (let i = 0; i < count; i++) {
    const length = next() % 6;
    yield Array.from({ length }, () => pool[next() % pool.length]!);
  }
}

const OPTIONS = {
  listen: { type: "string" },
  verbose: { type: "boolean", short: "v" },
  config: { type: "string", short: "c", multiple: true },
  recursive: { type: "boolean", short: "r" },
  parents: { type: "boolean", short: "p" },
  level: { type: "string", short: "l" },
} as const;

const POOL = [
  "--listen",
  "--listen=ws://a",
  "--listen=",
  "--listen=-x",
  "stdio",
  "-",
  "--",
  "-v",
  "-vr",
  "-rp",
  "-rvp",
  "-rc",
  "-rcX",
  "-c",
  "-cfile",
  "-c=x",
  "--config",
  "--config=a=b",
  "--verbose",
  "--verbose=1",
  "--unknown",
  "-x",
  "-xy",
  "--no-verbose",
  "--=x",
  "--=a=b",
  "-l",
  "-l-1",
  "--level",
  "-1",
  "x y",
  "--__proto__",
  "--constructor",
  "---",
];

Deno.test("args: node:util parseArgs's values, positionals and error messages for every generated command line", () => {
  let compared = 0;
  for (const allowPositionals of [false, true]) {
    for (const args of vectors(POOL, 4000, allowPositionals ? 7 : 11)) {
      const config = { args, options: OPTIONS, allowPositionals, strict: true } as const;
      assertEquals(
        outcome(parseArgs as (c: ParseArgsConfig) => unknown, config),
        outcome(nodeParseArgs as (c: ParseArgsConfig) => unknown, config),
        JSON.stringify(args),
      );
      compared++;
    }
  }
  assertEquals(compared, 8000);
  // The generator reaches each kind of answer.
  const kinds = new Set<string>();
  for (const args of vectors(POOL, 4000, 11)) {
    const o = outcome(nodeParseArgs as (c: ParseArgsConfig) => unknown, {
      args,
      options: OPTIONS,
      strict: true,
    });
    kinds.add("code" in o ? o.code : "ok");
  }
  assertEquals([...kinds].sort(), [
    "ERR_PARSE_ARGS_INVALID_OPTION_VALUE",
    "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL",
    "ERR_PARSE_ARGS_UNKNOWN_OPTION",
    "ok",
  ]);
});

Deno.test("args: what it does not implement is refused at the call, not approximated", () => {
  assertThrows(
    () => parseArgs({ args: [], options: {}, tokens: true }),
    Error,
    "tokens is not supported",
  );
  assertThrows(
    () => parseArgs({ args: [], options: {}, strict: false }),
    Error,
    "strict: false is not supported",
  );
  assertThrows(
    () => parseArgs({ args: [], options: { a: { type: "string", default: "x" } } }),
    Error,
    "--a: default is not supported",
  );
});
