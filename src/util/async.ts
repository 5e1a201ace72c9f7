/**
 * Small async helpers.
 *
 * @module
 */

/**
 * Waits for `promise` (ignoring its outcome) for at most `ms` milliseconds.
 * Resolves true when it settled in time. Leaves no timer behind.
 */
export async function settleWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let settled = false;
  await Promise.race([
    promise.then(() => (settled = true), () => (settled = true)),
    new Promise<void>((resolve) => (timer = setTimeout(resolve, ms))),
  ]);
  clearTimeout(timer);
  return settled;
}

/** Resolves after `ms` milliseconds, or early (rejecting) when `signal` aborts. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Runs `fn` in a later task (after the I/O now pending, like
 * `setTimeout(fn, 0)`), without keeping the process alive and without
 * Deno's Node-compatible timers, which it loads on the first
 * `setTimeout`/`clearTimeout` (~10 ms a server's first answer should not
 * wait for). Not cancellable: `fn` checks whether it is still wanted.
 */
export function nextTask(fn: () => void): void {
  AbortSignal.timeout(0).addEventListener("abort", fn, { once: true });
}
