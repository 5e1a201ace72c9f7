/**
 * The process family (`process/*`): wire types, decoders, its rows of the
 * method table and its notifications (see `table.ts`).
 *
 * @module
 */

import {
  array,
  boolean,
  bytes,
  type DecodedOf,
  DecodeError,
  type Decoder,
  join,
  nonEmptyString,
  nullable,
  optional,
  record,
  string,
  struct,
  structOf,
  u16,
  u64,
  unknownValue,
  usize,
  variant,
  withDefault,
} from "./decode.ts";
import type { EmptyResult, RequestTable, Row } from "./table.ts";
import { cwdUri } from "./path_uri.ts";
import { type NetworkProxyLaunch, networkProxyLaunch } from "./network.ts";
import { type FileSystemSandboxContext, optionalSandbox } from "./sandbox.ts";

/** The shell a snapshot is taken of. */
export interface ShellSpec {
  /** `bash`, `zsh`, `sh`, `powershell` or `cmd`. */
  name: string;
  /** Its absolute path. */
  path: string;
}

/** `process/start.shellSnapshot`. */
export interface ShellSnapshotParams {
  /** Commands of one scope (a Codex thread) share one snapshot. */
  scopeId: string;
  /** The shell. */
  shell: ShellSpec;
}

/** Output stream names. */
export type OutputStream = "stdout" | "stderr" | "pty";

/** Which of the server's variables a child starts from. */
export type EnvInherit = "all" | "core" | "none";

/** How to derive a child's environment from the server's. */
export interface EnvPolicy {
  /** Starting set. */
  inherit: EnvInherit;
  /** Skip dropping `*KEY*`, `*SECRET*`, `*TOKEN*`. */
  ignoreDefaultExcludes: boolean;
  /** Globs of names to drop (case-insensitive). */
  exclude: string[];
  /** Variables to set. */
  set: Record<string, string>;
  /** When non-empty, keep only names matching one of these globs. */
  includeOnly: string[];
}

/** Telemetry attached to a process (not interpreted). */
export interface ProcessMetadata {
  /** A UUID. */
  threadId?: string | null;
  /** Opaque id. */
  toolCallId?: string | null;
}

/** Params of `process/start`. */
export interface ProcessStartParams {
  /** Client-chosen id, unique within the session. */
  processId: string;
  /** Telemetry. */
  metadata?: ProcessMetadata | null;
  /** Program and arguments (non-empty). */
  argv: string[];
  /** Working directory (`file:` URI). */
  cwd: string;
  /** Derive the environment from the server's (else exactly `env`). */
  envPolicy?: EnvPolicy | null;
  /**
   * Codex's shell snapshot: the login shell's state is captured once per
   * scope and restored for each `SHELL -lc CMD` of that scope instead of a
   * login (capability `shellSnapshotV2`).
   */
  shellSnapshot?: ShellSnapshotParams | null;
  /** Variables for the child (overlaid last). */
  env: Record<string, string>;
  /** Run on a pseudo-terminal. */
  tty: boolean;
  /** Keep stdin open for `process/write`. */
  pipeStdin?: boolean;
  /** What the child sees as `argv[0]`. */
  arg0?: string | null;
  /** Confine the process (null or absent: unconfined). */
  sandbox?: FileSystemSandboxContext | null;
  /** Managed network enforcement (no effect without a sandbox). */
  enforceManagedNetwork?: boolean;
  /** Managed network settings. */
  managedNetwork?: unknown;
  /**
   * An executor-local egress proxy for this process alone (`networkProxyLaunch`):
   * started before the child, its address put in the child's proxy variables,
   * stopped when the process closes.
   */
  networkProxy?: NetworkProxyLaunch | null;
  /** Extension: terminal rows (default 24). */
  rows?: number;
  /** Extension: terminal columns (default 80). */
  cols?: number;
}

/** Result of `process/start`. */
export interface ProcessStartResult {
  /** The id. */
  processId: string;
  /** `linuxSeccomp` when confined (as the reference reports), `none` otherwise. */
  sandboxType: string;
}

/** Params of `process/read`. */
export interface ProcessReadParams {
  /** The process. */
  processId: string;
  /** Return chunks with a greater `seq` (default 0). */
  afterSeq?: number;
  /** Stop after this many bytes (at least one chunk is returned). */
  maxBytes?: number;
  /** Long-poll up to this many milliseconds for something new. */
  waitMs?: number;
}

/** One retained output chunk. */
export interface OutputChunk {
  /** Sequence number. */
  seq: number;
  /** Stream it came from. */
  stream: OutputStream;
  /** Bytes (base64). */
  chunk: string;
}

/** Result of `process/read`. */
export interface ProcessReadResult {
  /** Retained chunks after `afterSeq`, oldest first. */
  chunks: OutputChunk[];
  /** Where to continue reading. */
  nextSeq: number;
  /** The child has exited. */
  exited: boolean;
  /** Its exit code, once exited. */
  exitCode: number | null;
  /** Output and exit are complete. */
  closed: boolean;
  /** Backend failure (always null here). */
  failure: string | null;
  /** Sandbox denial (always false here). */
  sandboxDenied: boolean;
}

/** Params of `process/write`. */
export interface ProcessWriteParams {
  /** The process. */
  processId: string;
  /** Bytes to write (base64). */
  chunk: string;
  /** Idempotency key (non-empty). */
  writeId: string;
}

/** Outcome of a write or of closing stdin. */
export type WriteStatus = "accepted" | "unknownProcess" | "stdinClosed" | "starting";

/** Result of `process/write` and `process/closeStdin`. */
export interface ProcessWriteResult {
  /** What happened. */
  status: WriteStatus;
}

/** Signals `process/signal` accepts (`interrupt` only in the reference). */
export type ProcessSignalName =
  | "interrupt"
  | "terminate"
  | "kill"
  | "hangup"
  | "quit"
  | "user1"
  | "user2";

/** Params of `process/signal`. */
export interface ProcessSignalParams {
  /** The process. */
  processId: string;
  /** Signal to send to its process group. */
  signal: ProcessSignalName;
}

/** Params of `process/terminate`. */
export interface ProcessTerminateParams {
  /** The process. */
  processId: string;
  /** Extension: SIGTERM first, SIGKILL after this many milliseconds. */
  graceMs?: number;
}

/** Result of `process/terminate`. */
export interface ProcessTerminateResult {
  /** The process was running (and is now being killed). */
  running: boolean;
}

/** Params of `process/pauseOutput` and `process/resumeOutput` (extension). */
export interface ProcessFlowParams {
  /** The process. */
  processId: string;
}

/** Params of `process/closeStdin` (extension). */
export interface ProcessCloseStdinParams {
  /** The process. */
  processId: string;
}

/** Params of `process/resize` (extension). */
export interface ProcessResizeParams {
  /** The process (must run on a terminal). */
  processId: string;
  /** New number of rows. */
  rows: number;
  /** New number of columns. */
  cols: number;
}

/** `process/output` notification. */
export interface ProcessOutputNotification {
  /** The process. */
  processId: string;
  /** Sequence number. */
  seq: number;
  /** Stream. */
  stream: OutputStream;
  /** Bytes (base64). */
  chunk: string;
}

/** `process/exited` notification. */
export interface ProcessExitedNotification {
  /** The process. */
  processId: string;
  /** Sequence number. */
  seq: number;
  /** Exit code (128+N for a death by signal N). */
  exitCode: number;
  /** Always false here. */
  sandboxDenied: boolean;
  /** Extension: name of the signal that killed it, when one did. */
  signal?: string;
}

/** `process/closed` notification. */
export interface ProcessClosedNotification {
  /** The process. */
  processId: string;
  /** Sequence number (the last one). */
  seq: number;
}

const uuidChars = /^[0-9a-fA-F-]$/;

/** A UUID string, checked like the reference (`uuid` crate wording). */
const uuid: Decoder<string> = (v, path) => {
  const s = string(v, path);
  const body = s.startsWith("urn:uuid:") ? s.slice(9) : s;
  const offset = s.length - body.length;
  for (let i = 0; i < body.length; i++) {
    if (!uuidChars.test(body[i]!)) {
      throw new DecodeError(
        `invalid character: expected an optional prefix of \`urn:uuid:\` followed by [0-9a-fA-F-], found \`${
          body[i]
        }\` at ${offset + i + 1}`,
        path,
      );
    }
  }
  if (
    !/^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[0-9a-fA-F]{32})$/
      .test(body)
  ) {
    throw new DecodeError(`invalid length: expected a UUID, found ${body.length} characters`, path);
  }
  return s;
};

const metadata = struct<ProcessMetadata>("ExecMetadata", {
  threadId: nullable(uuid),
  toolCallId: nullable(string),
});

const envPolicy = struct<EnvPolicy>("ExecEnvPolicy", {
  inherit: variant(["core", "all", "none"]),
  ignoreDefaultExcludes: boolean,
  exclude: array(string),
  set: record(string),
  includeOnly: array(string),
});

const argv: Decoder<string[]> = (v, path) => {
  const list = array(string)(v, path);
  if (list.length === 0) throw new DecodeError("argv must not be empty", "");
  return list;
};

/** Shells Codex knows; snapshots are refused for any other. */
const SNAPSHOT_SHELLS = new Set(["bash", "zsh", "sh", "powershell", "pwsh", "cmd"]);

const shellSnapshot: Decoder<ShellSnapshotParams> = (v, path) => {
  const params = struct<ShellSnapshotParams>("ShellSnapshot", {
    scopeId: string,
    shell: struct<ShellSpec>("Shell", { name: string, path: string }),
  })(v, path);
  if (!SNAPSHOT_SHELLS.has(params.shell.name.toLowerCase())) {
    throw new DecodeError(
      `shell snapshots are unsupported for shell \`${params.shell.name}\``,
      join(path, "shell.name"),
    );
  }
  return params;
};

/** `process/start`. */
const processStartParams = structOf("ExecParams", {
  processId: string,
  metadata: nullable(metadata),
  argv,
  cwd: cwdUri,
  envPolicy: nullable(envPolicy),
  shellSnapshot: nullable(shellSnapshot),
  env: record(string),
  tty: boolean,
  pipeStdin: withDefault(boolean, false),
  arg0: nullable(string),
  sandbox: optionalSandbox,
  enforceManagedNetwork: withDefault(boolean, false),
  managedNetwork: optional(unknownValue),
  networkProxy: nullable(networkProxyLaunch),
  rows: optional(u16),
  cols: optional(u16),
});

/** Decoded `process/start` params (paths resolved to native ones, defaults applied). */
export type DecodedProcessStart = DecodedOf<typeof processStartParams>;

/** `process/read`. */
const processReadParams = struct<ProcessReadParams>("ReadParams", {
  processId: string,
  afterSeq: optional(u64),
  maxBytes: optional(usize),
  waitMs: optional(u64),
});

/** `process/write`. */
const processWriteParams = structOf("WriteParams", {
  processId: string,
  chunk: bytes,
  writeId: nonEmptyString("writeId must not be empty"),
});

/** Decoded `process/write` params (bytes decoded). */
export type DecodedProcessWrite = DecodedOf<typeof processWriteParams>;

/** Every signal name; `interrupt` is the only one the reference knows. */
const SIGNAL_NAMES: readonly ProcessSignalName[] = [
  "interrupt",
  "terminate",
  "kill",
  "hangup",
  "quit",
  "user1",
  "user2",
];

/** `process/signal`. */
const processSignalParams = struct<ProcessSignalParams>("SignalParams", {
  processId: string,
  signal: variant(SIGNAL_NAMES),
});

/** `process/terminate`. */
const processTerminateParams = struct<ProcessTerminateParams>("TerminateParams", {
  processId: string,
  graceMs: optional(u64),
});

/** `process/pauseOutput` and `process/resumeOutput`. */
const processFlowParams = struct<ProcessFlowParams>("FlowParams", { processId: string });

/** `process/closeStdin`. */
const processCloseStdinParams = struct<ProcessCloseStdinParams>("CloseStdinParams", {
  processId: string,
});

/** `process/resize`. */
const processResizeParams = struct<ProcessResizeParams>("ResizeParams", {
  processId: string,
  rows: u16,
  cols: u16,
});

/** The family's request names. */
export const ProcessMethod = {
  ProcessStart: "process/start",
  ProcessRead: "process/read",
  ProcessWrite: "process/write",
  ProcessSignal: "process/signal",
  ProcessTerminate: "process/terminate",
  ProcessCloseStdin: "process/closeStdin",
  ProcessResize: "process/resize",
  ProcessPauseOutput: "process/pauseOutput",
  ProcessResumeOutput: "process/resumeOutput",
} as const;

/** The family's notification names (server → client). */
export const ProcessNotification = {
  ProcessOutput: "process/output",
  ProcessExited: "process/exited",
  ProcessClosed: "process/closed",
} as const;

/** The family's rows of the method table. */
export interface ProcessMethods {
  /** `process/start`. */
  [ProcessMethod.ProcessStart]: Row<ProcessStartParams, ProcessStartResult>;
  /** `process/read`. */
  [ProcessMethod.ProcessRead]: Row<ProcessReadParams, ProcessReadResult>;
  /** `process/write`. */
  [ProcessMethod.ProcessWrite]: Row<ProcessWriteParams, ProcessWriteResult>;
  /** `process/signal`. */
  [ProcessMethod.ProcessSignal]: Row<ProcessSignalParams, EmptyResult>;
  /** `process/terminate`. */
  [ProcessMethod.ProcessTerminate]: Row<ProcessTerminateParams, ProcessTerminateResult>;
  /** `process/closeStdin` (extension): answered like a write. */
  [ProcessMethod.ProcessCloseStdin]: Row<ProcessCloseStdinParams, ProcessWriteResult>;
  /** `process/resize` (extension). */
  [ProcessMethod.ProcessResize]: Row<ProcessResizeParams, EmptyResult>;
  /** `process/pauseOutput` (extension). */
  [ProcessMethod.ProcessPauseOutput]: Row<ProcessFlowParams, EmptyResult>;
  /** `process/resumeOutput` (extension). */
  [ProcessMethod.ProcessResumeOutput]: Row<ProcessFlowParams, EmptyResult>;
}

/** The family's notification payloads. */
export interface ProcessNotifications {
  /** `process/output`. */
  [ProcessNotification.ProcessOutput]: ProcessOutputNotification;
  /** `process/exited`. */
  [ProcessNotification.ProcessExited]: ProcessExitedNotification;
  /** `process/closed`. */
  [ProcessNotification.ProcessClosed]: ProcessClosedNotification;
}

/** What the family's decoders give its handlers, where more than the params as sent. */
export interface ProcessDecoded {
  [ProcessMethod.ProcessStart]: DecodedProcessStart;
  [ProcessMethod.ProcessWrite]: DecodedProcessWrite;
}

/** How the server decodes and dispatches the family's requests (all about one process). */
export const processRequests: RequestTable<ProcessMethods, ProcessDecoded> = {
  [ProcessMethod.ProcessStart]: { decode: processStartParams, orderedBy: "processId" },
  [ProcessMethod.ProcessRead]: { decode: processReadParams, orderedBy: "processId" },
  [ProcessMethod.ProcessWrite]: {
    decode: processWriteParams,
    orderedBy: "processId",
    base64: "chunk",
  },
  [ProcessMethod.ProcessSignal]: {
    decode: processSignalParams,
    lane: "control",
    orderedBy: "processId",
  },
  [ProcessMethod.ProcessTerminate]: {
    decode: processTerminateParams,
    lane: "control",
    orderedBy: "processId",
  },
  [ProcessMethod.ProcessCloseStdin]: { decode: processCloseStdinParams, orderedBy: "processId" },
  [ProcessMethod.ProcessResize]: {
    decode: processResizeParams,
    lane: "control",
    orderedBy: "processId",
  },
  [ProcessMethod.ProcessPauseOutput]: {
    decode: processFlowParams,
    lane: "control",
    orderedBy: "processId",
  },
  [ProcessMethod.ProcessResumeOutput]: {
    decode: processFlowParams,
    lane: "control",
    orderedBy: "processId",
  },
};
