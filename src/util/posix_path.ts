/**
 * POSIX path arithmetic with the semantics of `node:path`'s `posix`
 * functions, for the modules a server loads at start: importing
 * `node:path` loads Deno's Node compatibility layer (~13 ms before the
 * first request is answered), which these few pure functions do not need.
 * Code off the start-up path keeps using `node:path`.
 *
 * @module
 */

/** Whether `path` is absolute. */
export function isAbsolute(path: string): boolean {
  return path.startsWith("/");
}

/**
 * `path` with `.` and `..` segments and repeated slashes resolved, a
 * trailing slash kept; `"."` for an empty relative result.
 */
export function normalize(path: string): string {
  if (path === "") return ".";
  const absolute = path.startsWith("/");
  const trailing = path.endsWith("/");
  const out: string[] = [];
  for (const segment of path.split("/")) {
    if (segment === "" || segment === ".") continue;
    if (segment === "..") {
      if (out.length > 0 && out[out.length - 1] !== "..") out.pop();
      else if (!absolute) out.push("..");
      continue;
    }
    out.push(segment);
  }
  let joined = out.join("/");
  if (joined === "") return absolute ? "/" : trailing ? "./" : ".";
  if (trailing) joined += "/";
  return absolute ? `/${joined}` : joined;
}

/** The non-empty `parts` joined with `/`, normalized. */
export function join(...parts: string[]): string {
  const kept = parts.filter((part) => part !== "");
  return kept.length === 0 ? "." : normalize(kept.join("/"));
}

/**
 * `parts` resolved right to left into an absolute path (the working
 * directory when none is absolute), normalized, without a trailing slash.
 */
export function resolve(...parts: string[]): string {
  let resolved = "";
  for (let i = parts.length - 1; i >= 0 && !resolved.startsWith("/"); i--) {
    const part = parts[i]!;
    if (part === "") continue;
    resolved = resolved === "" ? part : `${part}/${resolved}`;
  }
  if (!resolved.startsWith("/")) resolved = `${Deno.cwd()}/${resolved}`;
  const normalized = normalize(resolved);
  return normalized.length > 1 && normalized.endsWith("/") ? normalized.slice(0, -1) : normalized;
}

/**
 * The directory part of `path` (`"."` when it has none, `"/"` for the root),
 * the slash before the last segment dropped — and only that one, as Node does.
 */
export function dirname(path: string): string {
  if (path === "") return ".";
  const rooted = path.startsWith("/");
  let end = -1;
  let inSlashes = true;
  for (let i = path.length - 1; i >= 1; i--) {
    if (path[i] === "/") {
      if (!inSlashes) {
        end = i;
        break;
      }
    } else {
      inSlashes = false;
    }
  }
  if (end === -1) return rooted ? "/" : ".";
  if (rooted && end === 1) return "//";
  return path.slice(0, end);
}
