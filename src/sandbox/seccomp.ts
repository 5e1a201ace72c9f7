/**
 * The seccomp filter bubblewrap installs (`--seccomp FD`) before it runs a
 * sandboxed program, as a classic BPF program (`struct sock_filter[]`).
 *
 * What it refuses with `EPERM` matches what the reference's Linux sandbox
 * refuses (probed syscall by syscall against codex 0.169.0):
 *
 * - always: `io_uring_setup`, `io_uring_enter`, `io_uring_register` (a
 *   side door around the other checks) and `socket`/`socketpair` of
 *   `AF_VSOCK` (the host's hypervisor channel);
 * - always, beyond the reference: what a confined command never needs and
 *   what reaches past the sandbox's namespaces — the kernel keyrings
 *   (`add_key`, `request_key`, `keyctl`: a sandbox of a root server wrote
 *   to the host root's keyring), `perf_event_open`, `bpf`, `userfaultfd`,
 *   kernel modules and `kexec`, `open_by_handle_at`/`name_to_handle_at`
 *   (file handles bypass the mount namespace), `acct`, `swapon`/`swapoff`,
 *   `reboot`, `syslog`, `vhangup`, `quotactl`, `lookup_dcookie`, and on
 *   x86-64 `iopl`/`ioperm`. The list is Docker's default profile's blocked
 *   calls minus those that only an administrator's capabilities allow
 *   (bubblewrap drops them all) and minus what ordinary programs use;
 * - `ioctl` `TIOCSTI` and `TIOCLINUX` (typing into a terminal), refused by
 *   the reference as well;
 * - `network: "routed"` (a restricted sandbox routed to the managed
 *   proxy): `socket`/`socketpair` of families other than `AF_UNIX`,
 *   `AF_INET` and `AF_INET6`, and the inspection calls below;
 * - with `network: "restricted"`: `socket`/`socketpair` of every family
 *   but `AF_UNIX`; `connect`, `accept`, `accept4`, `bind`, `listen`,
 *   `sendto`, `sendmmsg`, `recvmmsg`, `shutdown`, `getsockname`,
 *   `getpeername`, `setsockopt`, `getsockopt` for every socket (a socket
 *   pair still works: `sendmsg`/`recvmsg`/`recvfrom` stay allowed); and
 *   `ptrace`, `process_vm_readv`, `process_vm_writev`.
 *
 * Programs of another architecture (32-bit `int 0x80`, x32) are refused
 * outright so that they cannot bypass the table. The network namespace
 * bubblewrap also creates for a restricted network stays as a second wall.
 *
 * @module
 */

/** The syscall numbers the filter needs, per architecture. */
interface SyscallTable {
  readonly auditArch: number;
  /** Syscall numbers at or above this are another ABI (x32). */
  readonly abiMask: number;
  readonly socket: number;
  readonly socketpair: number;
  /** Refused for every socket when the network is restricted. */
  readonly network: readonly number[];
  /** Refused when the network is restricted (cross-process inspection). */
  readonly inspection: readonly number[];
  /** Refused always. */
  readonly always: readonly number[];
  /** `ioctl`, whose terminal-injection requests are refused. */
  readonly ioctl: number;
}

const TABLES: Record<string, SyscallTable> = {
  x86_64: {
    auditArch: 0xc000003e,
    abiMask: 0x40000000,
    socket: 41,
    socketpair: 53,
    // connect accept sendto shutdown bind listen getsockname getpeername
    // setsockopt getsockopt accept4 recvmmsg sendmmsg
    network: [42, 43, 44, 48, 49, 50, 51, 52, 54, 55, 288, 299, 307],
    // ptrace process_vm_readv process_vm_writev
    inspection: [101, 310, 311],
    // io_uring_setup io_uring_enter io_uring_register; add_key request_key
    // keyctl perf_event_open bpf userfaultfd; init_module finit_module
    // delete_module kexec_load kexec_file_load; name_to_handle_at
    // open_by_handle_at acct swapon swapoff reboot syslog vhangup quotactl
    // lookup_dcookie iopl ioperm
    always: [
      425,
      426,
      427,
      248,
      249,
      250,
      298,
      321,
      323,
      175,
      313,
      176,
      246,
      320,
      303,
      304,
      163,
      167,
      168,
      169,
      103,
      153,
      179,
      212,
      172,
      173,
    ],
    ioctl: 16,
  },
  aarch64: {
    auditArch: 0xc00000b7,
    abiMask: 0,
    socket: 198,
    socketpair: 199,
    network: [203, 202, 206, 210, 200, 201, 204, 205, 208, 209, 242, 243, 269],
    inspection: [117, 270, 271],
    // The same calls (aarch64 has no iopl/ioperm).
    always: [
      425,
      426,
      427,
      217,
      218,
      219,
      241,
      280,
      282,
      105,
      273,
      106,
      104,
      294,
      264,
      265,
      89,
      224,
      225,
      142,
      116,
      58,
      60,
      18,
    ],
    ioctl: 29,
  },
};

const AF_UNIX = 1;
const AF_INET = 2;
const AF_INET6 = 10;
const AF_VSOCK = 40;

/**
 * `restricted`: Unix sockets only; `enabled`: everything but vsock;
 * `routed`: a restricted sandbox reaching the managed proxy through its own
 * loopback (Unix and IP sockets, the network namespace is the wall;
 * cross-process inspection still refused).
 */
export type SeccompNetwork = "restricted" | "enabled" | "routed";

// BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const RET_K = 0x06;
const RET_ALLOW = 0x7fff0000;
const RET_EPERM = 0x00050000 | 1;
// struct seccomp_data: nr at 0, arch at 4, args[0] (low half) at 16, args[1] at 24.
const NR = 0;
const ARCH = 4;
const ARG0 = 16;
const ARG1 = 24;
/** `ioctl` requests that type into a terminal. */
const TIOCSTI = 0x5412;
const TIOCLINUX = 0x541c;

interface Insn {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

/**
 * The filter for `network` on this machine's architecture, as the bytes
 * bubblewrap reads; null where the architecture is not known here.
 */
export function seccompProgram(
  network: SeccompNetwork,
  arch: string = Deno.build.arch,
): Uint8Array | null {
  const table = TABLES[arch];
  if (!table) return null;
  const restricted = network === "restricted";
  const denied = [
    ...table.always,
    ...(restricted ? table.network : []),
    ...(network !== "enabled" ? table.inspection : []),
  ];
  const program: Insn[] = [];
  const stmt = (code: number, k: number) => program.push({ code, jt: 0, jf: 0, k });
  // Labels are resolved once the program is laid out: jumps here only go
  // forward to the shared ALLOW / EPERM returns or the socket check.
  type Target = "allow" | "deny" | "socket" | "ioctl";
  const jumps: { at: number; target: Target; when: boolean }[] = [];
  const jump = (code: number, k: number, target: Target) => {
    jumps.push({ at: program.length, target, when: true });
    program.push({ code, jt: 0, jf: 0, k });
  };

  stmt(LD_W_ABS, ARCH);
  // Wrong architecture: refuse (jump to deny when not equal).
  jumps.push({ at: program.length, target: "deny", when: false });
  program.push({ code: JEQ_K, jt: 0, jf: 0, k: table.auditArch });
  stmt(LD_W_ABS, NR);
  if (table.abiMask) jump(JGE_K, table.abiMask, "deny");
  for (const nr of denied) jump(JEQ_K, nr, "deny");
  jump(JEQ_K, table.socket, "socket");
  jump(JEQ_K, table.socketpair, "socket");
  jump(JEQ_K, table.ioctl, "ioctl");
  stmt(RET_K, RET_ALLOW);
  const ioctlAt = program.length;
  stmt(LD_W_ABS, ARG1);
  jump(JEQ_K, TIOCSTI, "deny");
  jump(JEQ_K, TIOCLINUX, "deny");
  stmt(RET_K, RET_ALLOW);
  const socketAt = program.length;
  stmt(LD_W_ABS, ARG0);
  if (restricted) {
    jump(JEQ_K, AF_UNIX, "allow");
    stmt(RET_K, RET_EPERM);
  } else if (network === "routed") {
    jump(JEQ_K, AF_UNIX, "allow");
    jump(JEQ_K, AF_INET, "allow");
    jump(JEQ_K, AF_INET6, "allow");
    stmt(RET_K, RET_EPERM);
  } else {
    jump(JEQ_K, AF_VSOCK, "deny");
  }
  const allowAt = program.length;
  stmt(RET_K, RET_ALLOW);
  const denyAt = program.length;
  stmt(RET_K, RET_EPERM);

  const targets = { allow: allowAt, deny: denyAt, socket: socketAt, ioctl: ioctlAt };
  for (const { at, target, when } of jumps) {
    const offset = targets[target] - at - 1;
    if (offset < 0 || offset > 255) throw new Error("seccomp program too long");
    if (when) program[at]!.jt = offset;
    else program[at]!.jf = offset;
  }

  const bytes = new Uint8Array(program.length * 8);
  const view = new DataView(bytes.buffer);
  program.forEach((insn, i) => {
    view.setUint16(i * 8, insn.code, true);
    view.setUint8(i * 8 + 2, insn.jt);
    view.setUint8(i * 8 + 3, insn.jf);
    view.setUint32(i * 8 + 4, insn.k >>> 0, true);
  });
  return bytes;
}
