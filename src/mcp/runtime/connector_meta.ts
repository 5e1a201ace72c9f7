/**
 * The trust boundary on tool metadata: `_meta` keys that claim a connector
 * identity (`connector_id`, `connector_name`, `connector_display_name`,
 * `connector_description`, `connectorDescription`) are removed from the
 * tools of every server except the one trusted name — bare or under any
 * `prefix/` (`openai/connector_id`, `com.example/connector_name`; Codex
 * strips only the bare spellings). Look-alikes (`connectorFutureField`,
 * `CONNECTOR_ID`) and unrelated keys stay.
 *
 * @module
 */

/** The server name whose connector metadata is trusted (Codex's). */
export const TRUSTED_CONNECTOR_SERVER = "codex_apps";

/** The reserved keys. */
export const CONNECTOR_META_KEYS: readonly string[] = [
  "connector_id",
  "connector_name",
  "connector_display_name",
  "connector_description",
  "connectorDescription",
];

/** True for a reserved key, bare or prefixed. */
export function isConnectorMetaKey(key: string): boolean {
  const slash = key.lastIndexOf("/");
  return CONNECTOR_META_KEYS.includes(slash < 0 ? key : key.slice(slash + 1));
}

/**
 * A tool with the reserved keys removed from its `_meta` (the same object
 * when there is nothing to remove; never mutates its argument).
 */
export function stripConnectorMeta<T extends { _meta?: unknown }>(tool: T): T {
  const meta = tool._meta;
  if (meta === null || typeof meta !== "object" || Array.isArray(meta)) return tool;
  const keys = Object.keys(meta);
  if (!keys.some(isConnectorMetaKey)) return tool;
  const kept: Record<string, unknown> = {};
  for (const key of keys) {
    if (!isConnectorMetaKey(key)) {
      Object.defineProperty(kept, key, {
        value: (meta as Record<string, unknown>)[key],
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
  }
  return { ...tool, _meta: kept };
}
