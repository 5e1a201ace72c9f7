/**
 * Absolute paths only, and — when roots are configured — only inside them,
 * checked both lexically and after resolving symlinks on the server (a link
 * inside a root that points outside is refused; for a path that does not
 * exist yet, its nearest existing ancestor is resolved).
 *
 * @module
 */

import { posix } from "node:path";
import type { RemoteFs } from "../../client/fs.ts";
import { parsePathUri } from "../../protocol/path_uri.ts";

/** A path outside the allowed roots, or not absolute. */
export class PathDenied extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "PathDenied";
  }
}

function inside(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith("/") ? root : root + "/");
}

/** Checks paths against the roots. */
export class PathGuard {
  readonly #roots: string[];
  readonly #fs: RemoteFs;
  #resolvedRoots: Promise<string[]> | null = null;

  /** `roots` empty: any absolute path. */
  constructor(fs: RemoteFs, roots: readonly string[]) {
    this.#fs = fs;
    this.#roots = roots.map((r) => posix.normalize(r));
  }

  /** The configured roots. */
  get roots(): readonly string[] {
    return this.#roots;
  }

  /** Returns the normalised absolute path, or throws {@linkcode PathDenied}. */
  async check(path: string, what = "path"): Promise<string> {
    if (!path.startsWith("/")) {
      throw new PathDenied(`${what} must be an absolute path, got ${path}`);
    }
    const normal = posix.normalize(path);
    if (this.#roots.length === 0) return normal;
    const deny = () =>
      new PathDenied(
        `${what} ${path} is outside the allowed directories: ${this.#roots.join(", ")}`,
      );
    if (!this.#roots.some((root) => inside(normal, root))) throw deny();
    this.#resolvedRoots ??= Promise.all(
      this.#roots.map((r) => this.#fs.realPath(r).then((u) => parsePathUri(u), () => r)),
    );
    const roots = await this.#resolvedRoots;
    let probe = normal;
    let suffix = "";
    for (;;) {
      try {
        const real = parsePathUri(await this.#fs.realPath(probe));
        const full = suffix ? posix.join(real, suffix) : real;
        if (!roots.some((root) => inside(full, root))) throw deny();
        return normal;
      } catch (error) {
        if (error instanceof PathDenied) throw error;
        if (probe === "/") throw deny();
        suffix = suffix ? posix.join(posix.basename(probe), suffix) : posix.basename(probe);
        probe = posix.dirname(probe);
      }
    }
  }
}
