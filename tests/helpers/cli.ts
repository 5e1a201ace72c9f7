// Runs the CLI from the source tree as a child process and collects what it
// printed. Importing this file loads no server.

/** `cli.ts` in this checkout. */
export const CLI = new URL("../../cli.ts", import.meta.url).pathname;

/** What one CLI run printed and its exit code. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Options of {@linkcode runCli}. */
export interface RunCliOptions {
  /** Extra environment variables. */
  env?: Record<string, string>;
  /** Text written to its stdin, then closed (stdin is null without it). */
  stdin?: string;
  /** `deno run` flags before the script, e.g. `--unstable-kv`. */
  denoFlags?: string[];
}

/** Runs `deno run -A [flags] cli.ts <args>` to completion. */
export async function runCli(args: string[], options: RunCliOptions = {}): Promise<CliRun> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", ...(options.denoFlags ?? []), CLI, ...args],
    env: options.env ?? {},
    stdin: options.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (options.stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(options.stdin));
    await writer.close();
  }
  const out = await child.output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}
