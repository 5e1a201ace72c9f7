/**
 * Whether this machine can capture a sandbox's raw TCP (see `capture.ts`):
 * a working sandbox, the TUN clone device, and `setpriv` to drop the
 * bridge's capabilities for the program (the bridge is started with FFI
 * allowed).
 *
 * @module
 */

import { sandboxSupport, TUN_DEVICE } from "../bwrap.ts";

/** What {@linkcode tcpCaptureSupport} found. */
export interface TcpCaptureSupport {
  readonly available: boolean;
  /** Why not, when not. */
  readonly reason: string;
  /** The `setpriv` program, when found. */
  readonly setpriv: string | null;
}

const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv", "/usr/sbin/setpriv", "/sbin/setpriv"];

let support: TcpCaptureSupport | undefined;

/** Checks once, then answers from memory. */
export function tcpCaptureSupport(): TcpCaptureSupport {
  if (support) return support;
  const no = (
    reason: string,
    setpriv: string | null = null,
  ) => (support = { available: false, reason, setpriv });
  const sandbox = sandboxSupport();
  if (!sandbox.available) return no(sandbox.reason);
  if (Deno.build.os !== "linux") return no(`Linux only (this is ${Deno.build.os})`);
  const setpriv = SETPRIV.find((path) => {
    try {
      return Deno.statSync(path).isFile;
    } catch {
      return false;
    }
  }) ?? null;
  if (!setpriv) return no("setpriv (util-linux) is not installed");
  try {
    if (!Deno.statSync(TUN_DEVICE).isCharDevice) {
      return no(`${TUN_DEVICE} is not a device`, setpriv);
    }
  } catch {
    return no(`${TUN_DEVICE} is missing (load the tun module)`, setpriv);
  }
  return (support = { available: true, reason: "", setpriv });
}
