/**
 * `environment/info`, `environment/status` and `environmentConfig/read`.
 *
 * @module
 */

import { environmentConfigReadParams, noParams } from "../../protocol/lifecycle.ts";
import { readEnvironmentConfig } from "../../codex_config/layers.ts";
import { Method } from "../../protocol/methods.ts";
import type {
  EnvironmentConfigReadResult,
  EnvironmentInfo,
  EnvironmentStatusResult,
} from "../../protocol/types.ts";
import { defineMethod, type MethodTable } from "../handler.ts";

/** Environment methods. */
export const environmentMethods: MethodTable = {
  [Method.EnvironmentInfo]: defineMethod(
    noParams,
    (_params, ctx): EnvironmentInfo => ctx.server.environmentInfo,
  ),
  [Method.EnvironmentStatus]: defineMethod(
    noParams,
    (): EnvironmentStatusResult => ({ status: "ready" }),
  ),
  [Method.EnvironmentConfigRead]: defineMethod(
    environmentConfigReadParams,
    (params): Promise<EnvironmentConfigReadResult> => readEnvironmentConfig(params),
  ),
};
