/**
 * `capabilityRoots/discoverV1` (Codex skills and plugins under the roots
 * the harness names, each root scanned inside its own sandbox when it has
 * one; see `discovery/roots.ts`) and `capabilities/discoverV2` (the skills
 * and plugins of the executor's Codex home; see `discovery/discover_v2.ts`).
 *
 * @module
 */

import { discoverRoot, type TreeReader } from "../../discovery/roots.ts";
import { walk } from "../../fs/walk.ts";
import { decodeBase64 } from "../../protocol/decode.ts";
import { discoverCapabilities } from "../../discovery/discover_v2.ts";
import { defaultConfigLocations } from "../../codex_config/layers.ts";
import { Method } from "../../protocol/methods.ts";
import { parsePathUri, pathToUri } from "../../protocol/path_uri.ts";
import type {
  CapabilitiesDiscoverResult,
  CapabilityRootsDiscoverResult,
  FileSystemSandboxContext,
  FsMetadata,
  FsWalkResult,
} from "../../protocol/types.ts";
import type { SandboxFsGateway } from "../../sandbox/fs_gateway.ts";
import type { SandboxPlan } from "../../sandbox/policy.ts";
import { osErrorText } from "../../util/os_error.ts";
import { defineMethods, type MethodTable } from "../handler.ts";
import { plannerFor } from "./sandbox_plan.ts";

/** Reads this machine's filesystem directly. */
const directReader: TreeReader = {
  async isDirectory(path) {
    try {
      return (await Deno.stat(path)).isDirectory;
    } catch (error) {
      throw new Error(osErrorText(error));
    }
  },
  walk: (path, options) => walk(path, options),
  async size(path) {
    try {
      return (await Deno.stat(path)).size;
    } catch (error) {
      throw new Error(osErrorText(error));
    }
  },
  async readFile(path) {
    try {
      return await Deno.readFile(path);
    } catch (error) {
      throw new Error(osErrorText(error));
    }
  },
};

/** Reads through the sandbox filesystem worker of `plan`. */
function sandboxedReader(gateway: SandboxFsGateway, plan: () => SandboxPlan): TreeReader {
  const metadata = (path: string) =>
    gateway.call<FsMetadata>(plan, Method.FsGetMetadata, { path: pathToUri(path) });
  return {
    isDirectory: async (path) => (await metadata(path)).isDirectory,
    async walk(path, options) {
      const result = await gateway.call<FsWalkResult>(plan, Method.FsWalk, {
        path: pathToUri(path),
        options,
      });
      return {
        entries: result.entries.map((e) => ({ path: parsePathUri(e.path), kind: e.kind })),
        errors: result.errors.map((e) => ({ path: parsePathUri(e.path), message: e.message })),
        truncated: result.truncated,
      };
    },
    size: async (path) => (await metadata(path)).size,
    async readFile(path) {
      const { dataBase64 } = await gateway.call<{ dataBase64: string }>(
        plan,
        Method.FsReadFile,
        { path: pathToUri(path) },
      );
      return decodeBase64(dataBase64);
    },
  };
}

function readerFor(
  gateway: SandboxFsGateway,
  sandbox: FileSystemSandboxContext | undefined,
): TreeReader {
  const plan = plannerFor(sandbox, "read");
  return plan ? sandboxedReader(gateway, plan) : directReader;
}

/** Capability discovery methods. */
export const discoveryMethods: MethodTable = defineMethods({
  [Method.CapabilityRootsDiscoverV1]: async (p, ctx): Promise<CapabilityRootsDiscoverResult> => {
    const roots = [];
    for (const root of p.roots) {
      roots.push(
        await discoverRoot(root.id, root.path, readerFor(ctx.server.sandboxFs, root.sandbox)),
      );
    }
    return { roots };
  },
  [Method.CapabilitiesDiscoverV2]: (p, ctx): Promise<CapabilitiesDiscoverResult> =>
    discoverCapabilities(
      defaultConfigLocations().codexHome,
      readerFor(ctx.server.sandboxFs, p.sandbox),
    ),
});
