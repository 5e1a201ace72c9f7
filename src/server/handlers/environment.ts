/**
 * `environment/info`, `environment/status` and `environmentConfig/read`.
 *
 * @module
 */

import { Method } from "../../protocol/methods.ts";
import type {
  EnvironmentConfigReadResult,
  EnvironmentInfo,
  EnvironmentStatusResult,
} from "../../protocol/types.ts";
import { defineMethods, type MethodTable } from "../handler.ts";

/** Environment methods. */
export const environmentMethods: MethodTable = defineMethods({
  [Method.EnvironmentInfo]: (_params, ctx): EnvironmentInfo | Promise<EnvironmentInfo> =>
    ctx.server.environmentInfo(),
  [Method.EnvironmentStatus]: (): EnvironmentStatusResult => ({ status: "ready" }),
  // Codex's configuration layers (and the TOML parser) load when first read.
  [Method.EnvironmentConfigRead]: async (params): Promise<EnvironmentConfigReadResult> =>
    (await import("../../codex_config/layers.ts")).readEnvironmentConfig(params),
});
