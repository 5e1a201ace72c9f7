/**
 * The file tools' work, on the exec-server's file system through the client
 * library (`fs/*`), with every path checked by the {@linkcode PathGuard}.
 * Results are plain text for the model; refusals throw.
 *
 * @module
 */

import type { RemoteFs } from "../../client/fs.ts";
import { parsePathUri } from "../../protocol/path_uri.ts";
import type { PathGuard } from "./path_guard.ts";
import { applyEdits, type TextEdit } from "./text_edit.ts";

/** Largest file `read_text_file` returns whole. */
export const MAX_TEXT_FILE_BYTES = 16 * 1024 * 1024;

/** A refusal worth showing to the model as a tool error. */
export class FileToolError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "FileToolError";
  }
}

/** Libraries loaded with the tool server (kept off other commands' startup). */
export interface FileToolLibs {
  /** `diff`'s unified patch. */
  readonly createTwoFilesPatch: (
    oldName: string,
    newName: string,
    oldText: string,
    newText: string,
    oldHeader?: string,
    newHeader?: string,
  ) => string;
  /** `minimatch`. */
  readonly minimatch: (path: string, pattern: string, options?: Record<string, unknown>) => boolean;
}

/** Loads {@linkcode FileToolLibs}. */
export async function loadFileToolLibs(): Promise<FileToolLibs> {
  const [diff, mm] = await Promise.all([import("diff"), import("minimatch")]);
  return {
    createTwoFilesPatch: (a, b, x, y, h1, h2) => diff.createTwoFilesPatch(a, b, x, y, h1, h2) ?? "",
    minimatch: (p, pattern, options) => mm.minimatch(p, pattern, options),
  };
}

/** File operations for the tools. */
export class FileOps {
  readonly #fs: RemoteFs;
  readonly #guard: PathGuard;
  readonly #libs: FileToolLibs;

  /** Works through `fs`, checking paths with `guard`. */
  constructor(fs: RemoteFs, guard: PathGuard, libs: FileToolLibs) {
    this.#fs = fs;
    this.#guard = guard;
    this.#libs = libs;
  }

  /** The whole text, or its first/last `head`/`tail` lines. */
  async readText(path: string, head?: number, tail?: number): Promise<string> {
    if (head !== undefined && tail !== undefined) {
      throw new FileToolError("give either head or tail, not both");
    }
    const checked = await this.#guard.check(path);
    const meta = await this.#fs.metadata(checked);
    if (!meta.isFile) throw new FileToolError(`${path} is not a file`);
    if (meta.size > MAX_TEXT_FILE_BYTES && head === undefined && tail === undefined) {
      throw new FileToolError(
        `${path} is ${meta.size} bytes; read at most ${MAX_TEXT_FILE_BYTES} at once (use head or tail)`,
      );
    }
    const text = new TextDecoder().decode(await this.#fs.readFile(checked));
    if (head === undefined && tail === undefined) return text;
    const lines = text.split("\n");
    if (lines.at(-1) === "") lines.pop();
    const picked = head !== undefined
      ? lines.slice(0, head)
      : lines.slice(Math.max(0, lines.length - tail!));
    return picked.join("\n");
  }

  /** Replaces a file's content (atomically on the server). */
  async write(path: string, content: string): Promise<string> {
    const checked = await this.#guard.check(path);
    const bytes = new TextEncoder().encode(content);
    await this.#fs.writeFile(checked, bytes);
    return `wrote ${bytes.length} bytes to ${checked}`;
  }

  /** Applies edits; returns a unified diff (and writes unless `dryRun`). */
  async edit(path: string, edits: readonly TextEdit[], dryRun: boolean): Promise<string> {
    const checked = await this.#guard.check(path);
    const before = new TextDecoder().decode(await this.#fs.readFile(checked));
    const after = applyEdits(before, edits);
    const diff = this.#libs.createTwoFilesPatch(
      checked,
      checked,
      before,
      after,
      "original",
      "modified",
    );
    if (!dryRun && after !== before) {
      await this.#fs.writeFile(checked, new TextEncoder().encode(after));
    }
    return diff;
  }

  /** Creates a directory and its parents (no error if it exists). */
  async mkdir(path: string): Promise<string> {
    const checked = await this.#guard.check(path);
    await this.#fs.mkdir(checked, { recursive: true });
    return `created ${checked}`;
  }

  /** `[DIR] name` / `[FILE] name` lines, sorted by name. */
  async list(path: string): Promise<string> {
    const checked = await this.#guard.check(path);
    const entries = await this.#fs.readDirectory(checked);
    entries.sort((a, b) => (a.fileName < b.fileName ? -1 : a.fileName > b.fileName ? 1 : 0));
    return entries.map((e) =>
      `${e.isDirectory ? "[DIR]" : e.isFile ? "[FILE]" : "[OTHER]"} ${e.fileName}`
    ).join("\n");
  }

  /**
   * Paths under `path` whose relative path matches the glob `pattern` (a
   * pattern without `/` matches base names anywhere), minus `exclude`.
   */
  async search(path: string, pattern: string, exclude: readonly string[] = []): Promise<string> {
    const checked = await this.#guard.check(path);
    const result = await this.#fs.walk(checked);
    const root = checked.endsWith("/") ? checked : checked + "/";
    const options = (p: string) => ({ dot: true, matchBase: !p.includes("/") });
    const matches: string[] = [];
    for (const entry of result.entries) {
      const full = parsePathUri(entry.path);
      const rel = full.startsWith(root) ? full.slice(root.length) : full;
      if (exclude.some((x) => this.#libs.minimatch(rel, x, options(x)))) continue;
      if (this.#libs.minimatch(rel, pattern, options(pattern))) matches.push(full);
    }
    const note = result.truncated ? "\n[the walk hit its limits; results are incomplete]" : "";
    return (matches.length ? matches.join("\n") : "no matches") + note;
  }

  /** Size, times and type. */
  async info(path: string): Promise<string> {
    const checked = await this.#guard.check(path);
    const meta = await this.#fs.metadata(checked);
    const time = (ms: number) => (ms > 0 ? new Date(ms).toISOString() : "unknown");
    const lines = [
      `path: ${checked}`,
      `type: ${meta.isDirectory ? "directory" : meta.isFile ? "file" : "other"}`,
      `size: ${meta.size}`,
      `created: ${time(meta.createdAtMs)}`,
      `modified: ${time(meta.modifiedAtMs)}`,
    ];
    const link = await this.#fs.lstat(checked).catch(() => null);
    if (link?.isSymlink) lines.push("symlink: true");
    return lines.join("\n");
  }

  /** Moves a file or directory; the destination must not exist. */
  async move(source: string, destination: string): Promise<string> {
    const from = await this.#guard.check(source, "source");
    const to = await this.#guard.check(destination, "destination");
    const exists = await this.#fs.lstat(to).then(() => true, () => false);
    if (exists) throw new FileToolError(`destination ${to} already exists`);
    await this.#fs.copy(from, to, { recursive: true });
    await this.#fs.remove(from, { recursive: true });
    return `moved ${from} to ${to}`;
  }
}
