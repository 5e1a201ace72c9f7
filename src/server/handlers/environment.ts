/**
 * `environment/info`, `environment/status` and `environmentConfig/read`.
 *
 * @module
 */

import { readEnvironmentConfig } from "../../codex_config/layers.ts";
import { Method } from "../../protocol/methods.ts";
import type {
  EnvironmentConfigReadResult,
  EnvironmentInfo,
  EnvironmentStatusResult,
} from "../../protocol/types.ts";
import { defineMethods, type MethodTable } from "../handler.ts";

/** Environment methods. */
export const environmentMethods: MethodTable = defineMethods({
  [Method.EnvironmentInfo]: (_params, ctx): EnvironmentInfo => ctx.server.environmentInfo,
  [Method.EnvironmentStatus]: (): EnvironmentStatusResult => ({ status: "ready" }),
  [Method.EnvironmentConfigRead]: (params): Promise<EnvironmentConfigReadResult> =>
    readEnvironmentConfig(params),
});
