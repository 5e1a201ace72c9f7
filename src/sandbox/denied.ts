/**
 * `sandboxDenied`: did a sandboxed child fail because the sandbox refused
 * it something? Decided the way the reference decides (found by
 * experiment, see the README): the child exited non-zero and the last MiB
 * of its combined output mentions a refusal, or it died of SIGSYS (exit 159,
 * a seccomp kill).
 *
 * @module
 */

import { ByteTail } from "../util/bytes.ts";
import type { DenialObserver } from "../process/managed_process.ts";

/** Output the verdict looks at: the most recent bytes, both streams together. */
export const DENIAL_TAIL_BYTES = 1024 * 1024;

/** Lower-case phrases that mark a refusal. */
export const DENIAL_PHRASES: readonly string[] = [
  "operation not permitted",
  "permission denied",
  "read-only file system",
  "seccomp",
  "sandbox",
  "landlock",
  "failed to write file",
];

const SIGSYS_EXIT = 128 + 31;

/** Keeps the last {@linkcode DENIAL_TAIL_BYTES} of output; bounded memory. */
export class DenialDetector implements DenialObserver {
  #tail = new ByteTail(DENIAL_TAIL_BYTES);

  /** Sees one chunk of output (copied: the caller reuses its buffer). */
  observe(chunk: Uint8Array): void {
    this.#tail.push(chunk);
  }

  /** The verdict for a child that exited with `exitCode`. */
  denied(exitCode: number): boolean {
    if (exitCode === 0) return false;
    if (exitCode === SIGSYS_EXIT) return true;
    const text = new TextDecoder().decode(this.#tail.bytes()).toLowerCase();
    return DENIAL_PHRASES.some((phrase) => text.includes(phrase));
  }
}
