/**
 * Model-visible names for MCP tools, built the way Codex builds them: the
 * namespace `mcp__SERVER__` and the tool name are each sanitised to
 * `[A-Za-z0-9_]` (anything else becomes `_`); a namespace or name shared by
 * different raw identities gets `_` + 12 hex digits of the SHA-1 of its raw
 * identity; candidates are then taken in raw-identity order and any full
 * name longer than 64 bytes or already used is shortened and suffixed until
 * unique. The raw `(server, tool)` pair is kept for the call.
 *
 * @module
 */

import { createHash } from "node:crypto";

/** Longest model-visible name. */
export const MAX_TOOL_NAME_LENGTH = 64;
const HASH_LEN = 12;
const DELIMITER = "__";

/** A tool before naming. */
export interface RawToolName {
  /** Server name. */
  readonly server: string;
  /** The tool's own name (sent back on calls). */
  readonly tool: string;
}

/** A named tool. */
export interface QualifiedToolName extends RawToolName {
  /** `mcp__server__` after sanitising (and any suffix). */
  readonly namespace: string;
  /** The tool part. */
  readonly callableName: string;
  /** `namespace + callableName`: what a model sees. */
  readonly qualifiedName: string;
}

/** Replaces every character outside `[A-Za-z0-9_]` with `_` (empty → `_`). */
export function sanitizeToolName(name: string): string {
  const out = name.replace(/[^A-Za-z0-9_]/g, "_");
  return out === "" ? "_" : out;
}

function sha1Hex(text: string): string {
  return createHash("sha1").update(text).digest("hex");
}

function suffix(identity: string): string {
  return `_${sha1Hex(identity).slice(0, HASH_LEN)}`;
}

function namespaceWithSuffix(namespace: string, identity: string): string {
  return namespace.endsWith(DELIMITER)
    ? `${namespace.slice(0, -DELIMITER.length)}${suffix(identity)}${DELIMITER}`
    : `${namespace}${suffix(identity)}`;
}

function fitWithHash(namespace: string, tool: string, identity: string): [string, string] {
  const s = suffix(identity);
  const room = MAX_TOOL_NAME_LENGTH - namespace.length;
  if (room >= s.length) return [namespace, `${tool.slice(0, room - s.length)}${s}`];
  return [namespace.slice(0, MAX_TOOL_NAME_LENGTH - s.length), s];
}

interface Candidate {
  raw: RawToolName;
  namespaceIdentity: string;
  toolIdentity: string;
  namespace: string;
  name: string;
}

/**
 * Names every tool; duplicates of the same raw pair are dropped. The result
 * is in raw-identity order (deterministic whatever the input order).
 */
export function qualifyToolNames(tools: Iterable<RawToolName>): QualifiedToolName[] {
  const seen = new Set<string>();
  const candidates: Candidate[] = [];
  for (const raw of tools) {
    const namespace = `mcp${DELIMITER}${raw.server}${DELIMITER}`;
    const namespaceIdentity = `${raw.server}\0${namespace}\0`;
    const toolIdentity = `${namespaceIdentity}\0${raw.tool}\0${raw.tool}`;
    if (seen.has(toolIdentity)) continue;
    seen.add(toolIdentity);
    candidates.push({
      raw,
      namespaceIdentity,
      toolIdentity,
      namespace: sanitizeToolName(namespace),
      name: sanitizeToolName(raw.tool),
    });
  }
  const collide = <K>(key: (c: Candidate) => K, identity: (c: Candidate) => string) => {
    const groups = new Map<K, Set<string>>();
    for (const c of candidates) {
      const k = key(c);
      if (!groups.has(k)) groups.set(k, new Set());
      groups.get(k)!.add(identity(c));
    }
    return (c: Candidate) => groups.get(key(c))!.size > 1;
  };
  const namespaceCollides = collide((c) => c.namespace, (c) => c.namespaceIdentity);
  for (const c of candidates.filter(namespaceCollides)) {
    c.namespace = namespaceWithSuffix(c.namespace, c.namespaceIdentity);
  }
  const toolCollides = collide((c) => `${c.namespace}\0${c.name}`, (c) => c.toolIdentity);
  for (const c of candidates.filter(toolCollides)) c.name = `${c.name}${suffix(c.toolIdentity)}`;

  candidates.sort((a, b) =>
    a.toolIdentity < b.toolIdentity ? -1 : a.toolIdentity > b.toolIdentity ? 1 : 0
  );
  const used = new Set<string>();
  return candidates.map((c) => {
    let [namespace, name] = [c.namespace, c.name];
    if (`${namespace}${name}`.length > MAX_TOOL_NAME_LENGTH || used.has(`${namespace}${name}`)) {
      for (let attempt = 0;; attempt++) {
        const identity = attempt === 0 ? c.toolIdentity : `${c.toolIdentity}\0${attempt}`;
        [namespace, name] = fitWithHash(c.namespace, c.name, identity);
        if (!used.has(`${namespace}${name}`)) break;
      }
    }
    used.add(`${namespace}${name}`);
    return { ...c.raw, namespace, callableName: name, qualifiedName: `${namespace}${name}` };
  });
}
