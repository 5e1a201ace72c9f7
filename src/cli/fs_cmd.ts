/**
 * `exec-server fs` (ls, cat, put, get, stat, rm, mkdir) and
 * `exec-server info`, against any exec-server.
 *
 * @module
 */

import { connectFromFlags, CONNECTION_FLAGS, CONNECTION_USAGE } from "./client_args.ts";
import { parseCommand, printLine, printUsage, UsageError } from "./common.ts";
import type { ExecServerClient } from "../client/client.ts";
import { isRemoteFailure } from "../client/fs.ts";
import { progressStream, wantsProgress } from "./progress.ts";

/** Help text for `fs`. */
export const FS_USAGE = `Usage: exec-server fs COMMAND [CONNECTION] ARGS...

Commands (remote paths are absolute paths or file: URIs):
  ls PATH                 list a directory
  cat PATH                print a file (any size; streamed)
  put LOCAL REMOTE        upload a file (replaced atomically)
  get REMOTE LOCAL        download a file
  stat PATH               metadata as JSON
  rm [-r] PATH            remove (-r: recursively)
  mkdir [-p] PATH         create a directory (-p: with parents)

Options:
  --progress / --no-progress   draw put/get progress on stderr (default: only on a terminal)
  -h, --help                   this help

${CONNECTION_USAGE}
`;

/** Help text for `info`. */
export const INFO_USAGE = `Usage: exec-server info [CONNECTION]

Prints the server's environment/info as JSON.

${CONNECTION_USAGE}
`;

const ARITY: Record<string, number> = { ls: 1, cat: 1, put: 2, get: 2, stat: 1, rm: 1, mkdir: 1 };

/** Runs `fs`; returns the exit status. */
export async function runFs(args: string[]): Promise<number> {
  // Connection flags may come before or after the subcommand.
  const parsed = parseCommand({
    args,
    allowPositionals: true,
    options: {
      ...CONNECTION_FLAGS,
      recursive: { type: "boolean", short: "r" },
      parents: { type: "boolean", short: "p" },
      progress: { type: "boolean" },
      "no-progress": { type: "boolean" },
    },
  }, FS_USAGE);
  if (!parsed) return 0;
  const [sub, ...paths] = parsed.positionals;
  if (sub === undefined) {
    printUsage(FS_USAGE);
    return 2;
  }
  if (!(sub in ARITY)) {
    throw new UsageError(
      `unknown fs command \`${sub}\`; expected ${Object.keys(ARITY).join(", ")}`,
      2,
    );
  }
  if (paths.length !== ARITY[sub]) throw new UsageError(`fs ${sub} takes ${ARITY[sub]} path(s)`, 2);
  await using client = await connectFromFlags(parsed.values);
  const [a, b] = paths as [string, string];
  try {
    const progress = wantsProgress(
      parsed.values["no-progress"] ? false : parsed.values.progress,
    );
    return await fsCommand(client.fs, sub, a, b, { ...parsed.values, progress });
  } catch (error) {
    // The server sends bare OS errors (the reference's texts): name the path.
    if (isRemoteFailure(error)) throw new Error(`${sub === "put" ? b : a}: ${error.message}`);
    throw error;
  }
}

async function fsCommand(
  fs: ExecServerClient["fs"],
  sub: string,
  a: string,
  b: string,
  flags: { recursive?: boolean; parents?: boolean; progress: boolean },
): Promise<number> {
  switch (sub) {
    case "ls": {
      const entries = await fs.readDirectory(a);
      entries.sort((x, y) => (x.fileName < y.fileName ? -1 : x.fileName > y.fileName ? 1 : 0));
      for (const e of entries) {
        await printLine(`${e.isDirectory ? "d" : e.isFile ? "-" : "?"} ${e.fileName}`);
      }
      return 0;
    }
    case "cat": {
      const meta = await fs.metadata(a);
      if (!meta.isFile) throw new UsageError(`${a} is not a file`);
      await using file = await fs.open(a);
      await file.readable.pipeTo(Deno.stdout.writable, { preventClose: true });
      return 0;
    }
    case "put": {
      const local = await Deno.open(a, { read: true });
      const total = (await local.stat()).size;
      await fs.writeFile(
        b,
        flags.progress
          ? local.readable.pipeThrough(progressStream({ label: `put ${a}`, total }))
          : local.readable,
      );
      return 0;
    }
    case "get": {
      const total = flags.progress ? (await fs.metadata(a)).size : 0;
      await using file = await fs.open(a);
      const out = await Deno.open(b, { write: true, create: true, truncate: true });
      await (flags.progress
        ? file.readable.pipeThrough(progressStream({ label: `get ${a}`, total }))
        : file.readable).pipeTo(out.writable);
      return 0;
    }
    case "stat":
      await printLine(JSON.stringify(await fs.metadata(a), null, 2));
      return 0;
    case "rm":
      await fs.remove(a, { recursive: flags.recursive ?? false });
      return 0;
    case "mkdir":
      await fs.mkdir(a, { recursive: flags.parents ?? false });
      return 0;
  }
  return 2;
}

/** Runs `info`; returns the exit status. */
export async function runInfo(args: string[]): Promise<number> {
  const parsed = parseCommand({ args, options: CONNECTION_FLAGS }, INFO_USAGE);
  if (!parsed) return 0;
  await using client = await connectFromFlags(parsed.values);
  await printLine(JSON.stringify(client.environmentInfo, null, 2));
  return 0;
}
