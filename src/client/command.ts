/**
 * `RemoteCommand`: the `Deno.Command` shape for a remote program.
 *
 * @module
 */

import type { SpawnOptions } from "./spawn_options.ts";
import type { RemoteProcess, RemoteStatus } from "./process.ts";

/** What a command needs of its client: starting processes. */
export interface ProcessSpawner {
  /** Starts `argv` (see `ExecServerClient.spawn`). */
  spawn(argv: readonly string[], options?: SpawnOptions): Promise<RemoteProcess>;
}

/** Options of a remote command (arguments plus spawn options). */
export interface RemoteCommandOptions extends SpawnOptions {
  /** Arguments after the program. */
  readonly args?: readonly string[];
}

/** What `output()` returns (like `Deno.CommandOutput`). */
export interface RemoteCommandOutput extends RemoteStatus {
  /** Everything written to stdout. */
  readonly stdout: Uint8Array;
  /** Everything written to stderr. */
  readonly stderr: Uint8Array;
}

/** See the module documentation. */
export class RemoteCommand {
  #client: ProcessSpawner;
  #program: string;
  #options: RemoteCommandOptions;

  /** Use `client.command(program, options)`. */
  constructor(client: ProcessSpawner, program: string, options: RemoteCommandOptions) {
    this.#client = client;
    this.#program = program;
    this.#options = options;
  }

  /** Starts the program; the caller reads its streams. */
  spawn(): Promise<RemoteProcess> {
    const { args = [], ...spawn } = this.#options;
    return this.#client.spawn([this.#program, ...args], spawn);
  }

  /** Runs to completion and collects stdout and stderr. */
  async output(): Promise<RemoteCommandOutput> {
    const { args = [], ...spawn } = this.#options;
    const process = await this.#client.spawn([this.#program, ...args], {
      ...spawn,
      stdout: "piped",
      stderr: "piped",
      events: false,
    });
    return await process.output();
  }
}
