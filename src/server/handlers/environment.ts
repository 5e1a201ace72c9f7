/**
 * `environment/info` and `environment/status`.
 *
 * @module
 */

import { noParams } from "../../protocol/decoders.ts";
import { Method } from "../../protocol/methods.ts";
import type { EnvironmentInfo, EnvironmentStatusResult } from "../../protocol/types.ts";
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
};
