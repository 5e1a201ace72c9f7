#!/usr/bin/env -S deno run --allow-all
/**
 * The `exec-server` command line.
 *
 * ```sh
 * deno run -A jsr:@org/exec-server/cli serve --listen stdio
 * deno run -A jsr:@org/exec-server/cli serve --listen ws://127.0.0.1:0
 * ```
 *
 * Run `exec-server help` for every command and flag.
 *
 * @module
 */

import { main } from "./src/cli/main.ts";

export { main };

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
