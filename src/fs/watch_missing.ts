/**
 * `fs/watchMissing` (README, "Codex's executor-side features"): one one-shot watch per connection that
 * fires when any listed path — or a missing ancestor directory of one —
 * comes into existence.
 *
 * The nearest existing ancestor of every missing path is watched with
 * inotify (`Deno.watchFs`, not recursive); every event re-checks the paths.
 * A slow poll backs it up for filesystems without events.
 *
 * @module
 */

import { lexists } from "./metadata.ts";

async function nearestExistingAncestor(path: string): Promise<string> {
  let current = path;
  while (current !== "/" && current !== "") {
    current = current.slice(0, current.lastIndexOf("/")) || "/";
    if (await lexists(current)) return current;
  }
  return "/";
}

interface ActiveWatch {
  readonly id: number;
  readonly paths: string[];
  readonly ancestors: Map<string, string>;
  readonly watcher: Deno.FsWatcher | null;
  readonly poll: ReturnType<typeof setInterval>;
  fired: boolean;
}

/** The watch state of one connection. */
export class MissingPathWatch {
  #highestId = -1;
  #active: ActiveWatch | null = null;
  #notify: (watchId: number) => void;
  #pollMs: number;

  /** `notify` sends `fs/missingChanged`. */
  constructor(notify: (watchId: number) => void, pollMs = 1000) {
    this.#notify = notify;
    this.#pollMs = pollMs;
  }

  /**
   * Replaces the watch. Returns false (changing nothing) for an id not above
   * every earlier one; returns false and cancels the watch when nothing
   * listed is missing.
   */
  async watch(watchId: number, paths: string[]): Promise<boolean> {
    if (watchId <= this.#highestId) return false;
    this.#highestId = watchId;
    this.#cancel();
    const missing: string[] = [];
    for (const p of paths) if (!(await lexists(p))) missing.push(p);
    if (missing.length === 0 || watchId !== this.#highestId) return false;
    const ancestors = new Map<string, string>();
    for (const p of missing) ancestors.set(p, await nearestExistingAncestor(p));
    if (watchId !== this.#highestId) return false;
    let watcher: Deno.FsWatcher | null = null;
    try {
      watcher = Deno.watchFs([...new Set(ancestors.values())], { recursive: false });
    } catch {
      watcher = null; // the poll still works
    }
    const active: ActiveWatch = {
      id: watchId,
      paths: missing,
      ancestors,
      watcher,
      poll: setInterval(() => this.#check(active), this.#pollMs),
      fired: false,
    };
    this.#active = active;
    if (watcher) {
      (async () => {
        try {
          for await (const _ of watcher) await this.#check(active);
        } catch {
          // closed
        }
      })();
    }
    await this.#check(active); // created between the check and the watch
    return true;
  }

  async #check(active: ActiveWatch): Promise<void> {
    if (active.fired || this.#active !== active) return;
    for (const path of active.paths) {
      const appeared = (await lexists(path)) ||
        (await nearestExistingAncestor(path)) !== active.ancestors.get(path);
      if (appeared && !active.fired && this.#active === active) {
        active.fired = true;
        this.#cancel();
        this.#notify(active.id);
        return;
      }
    }
  }

  #cancel(): void {
    const active = this.#active;
    if (!active) return;
    this.#active = null;
    clearInterval(active.poll);
    try {
      active.watcher?.close();
    } catch { /* closed */ }
  }

  /** Stops watching (connection end). */
  dispose(): void {
    this.#cancel();
  }
}
