/**
 * Signal names on the wire, their POSIX counterparts, and delivery to a
 * whole process group.
 *
 * @module
 */

/** Protocol signal name → POSIX signal. */
export const SIGNALS = {
  interrupt: "SIGINT",
  terminate: "SIGTERM",
  kill: "SIGKILL",
  hangup: "SIGHUP",
  quit: "SIGQUIT",
  user1: "SIGUSR1",
  user2: "SIGUSR2",
} as const satisfies Record<string, Deno.Signal>;

/** A protocol signal name. */
export type SignalName = keyof typeof SIGNALS;

/** Linux signal numbers of the signals above (for exit codes). */
export const SIGNAL_NUMBERS: Readonly<Record<string, number>> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGABRT: 6,
  SIGKILL: 9,
  SIGUSR1: 10,
  SIGSEGV: 11,
  SIGUSR2: 12,
  SIGPIPE: 13,
  SIGALRM: 14,
  SIGTERM: 15,
};

/**
 * Sends `signal` to the process group `pgid`. Returns false when the group
 * no longer exists; other failures throw.
 */
export function signalGroup(pgid: number, signal: Deno.Signal): boolean {
  try {
    Deno.kill(-pgid, signal);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    // ESRCH surfaces as NotFound; a group whose members are all zombies can
    // report EPERM on some kernels: it is as good as gone.
    if (error instanceof Deno.errors.PermissionDenied) return false;
    throw error;
  }
}

/** The exit code the protocol reports for a death by `signal`: 128 + N. */
export function signalExitCode(signal: string): number {
  return 128 + (SIGNAL_NUMBERS[signal] ?? 0);
}
