/**
 * Files the interception writes under `<home>/proxy/`: the CA certificate
 * (`ca-<sha256 of the PEM>.pem`) and the child trust bundle
 * (`ca-bundle-<sha256>.pem`), created atomically and never overwritten
 * (identical content is reused, anything else — including a symlink — is
 * refused); a shared lease lock per CA held for the process's lifetime, and
 * pruning of CAs no live process holds.
 *
 * @module
 */

import { basename, dirname, join } from "node:path";
import { lockFile } from "../../util/file_lock.ts";

/** SHA-256 of `data` as lower-case hex. */
export async function sha256Hex(data: Uint8Array | string): Promise<string> {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  const digest = new Uint8Array(
    await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>),
  );
  return [...digest].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Creates `path` with `data` (temp file, fsync, hard link into place so an
 * existing file is never replaced), or reuses it when its bytes are equal.
 */
export async function writeAtomicCreateNewOrReuse(
  path: string,
  data: Uint8Array,
  mode = 0o644,
): Promise<void> {
  const existing = await Deno.lstat(path).catch(() => null);
  if (existing) {
    if (existing.isSymlink) throw new Error(`refusing to reuse symlink ${path}`);
    const current = await Deno.readFile(path);
    if (current.length === data.length && current.every((b, i) => b === data[i])) return;
    throw new Error(`refusing to replace ${path}: it holds different content`);
  }
  const temp = join(
    dirname(path),
    `.${basename(path)}.tmp.${Deno.pid}.${Date.now()}${Math.floor(performance.now() * 1e6) % 1e6}`,
  );
  const file = await Deno.open(temp, { write: true, createNew: true, mode });
  try {
    await file.write(data).then(async (n) => {
      let offset = n;
      while (offset < data.length) offset += await file.write(data.subarray(offset));
    });
    await file.sync();
  } finally {
    file.close();
  }
  try {
    await Deno.link(temp, path);
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) {
      await Deno.rename(temp, path).catch(() => {});
      return;
    }
    await Deno.remove(temp).catch(() => {});
    return await writeAtomicCreateNewOrReuse(path, data, mode);
  }
  await Deno.remove(temp).catch(() => {});
  try {
    const dir = await Deno.open(dirname(path), { read: true });
    await dir.sync().catch(() => {});
    dir.close();
  } catch { /* best effort */ }
}

const CA_NAME = /^ca-([0-9a-f]{64})\.pem$/;
const BUNDLE_NAME = /^ca-bundle-([0-9a-f]{64})\.pem$/;

/**
 * Removes CA certificates whose lease nobody holds (and their lock files),
 * then bundles that contain none of the remaining CAs. Unrelated files stay.
 */
export async function pruneArtifacts(dir: string): Promise<void> {
  const artifacts = await lockFile(join(dir, ".artifacts.lock"), true, true);
  try {
    const remaining: string[] = [];
    for await (const entry of Deno.readDir(dir)) {
      const m = CA_NAME.exec(entry.name);
      if (!m || !entry.isFile) continue;
      const lease = await lockFile(join(dir, `.${entry.name}.lock`), true, false);
      if (lease === null) {
        remaining.push(await Deno.readTextFile(join(dir, entry.name)).catch(() => ""));
        continue;
      }
      await Deno.remove(join(dir, entry.name)).catch(() => {});
      await Deno.remove(join(dir, `.${entry.name}.lock`)).catch(() => {});
      lease.release();
    }
    for await (const entry of Deno.readDir(dir)) {
      if (!BUNDLE_NAME.test(entry.name) || !entry.isFile) continue;
      const text = await Deno.readTextFile(join(dir, entry.name)).catch(() => "");
      if (!remaining.some((ca) => ca.trim() !== "" && text.includes(ca.trim()))) {
        await Deno.remove(join(dir, entry.name)).catch(() => {});
      }
    }
  } finally {
    artifacts?.release();
  }
}

/**
 * True when `path` is a trust bundle this proxy generated and its content
 * still hashes to its name (`<home>/proxy/ca-bundle-<sha256>.pem`).
 */
export async function isManagedTrustBundlePath(path: string, home: string): Promise<boolean> {
  if (dirname(path) !== join(home, "proxy")) return false;
  const m = BUNDLE_NAME.exec(basename(path));
  if (!m) return false;
  try {
    return (await sha256Hex(await Deno.readFile(path))) === m[1];
  } catch {
    return false;
  }
}
