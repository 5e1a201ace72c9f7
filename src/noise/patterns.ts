/**
 * Handshake patterns: every classic pattern of the Noise specification
 * (one-way, interactive, deferred) with `pskN` modifiers, and the PQNoise
 * hybrid IK pattern Codex uses (KEM tokens `ekem`, `skem`).
 *
 * @module
 */

/** A handshake token. */
export type Token = "e" | "s" | "ee" | "es" | "se" | "ss" | "psk" | "ekem" | "skem";

/** A parsed pattern. */
export interface HandshakePattern {
  /** Pattern name (`IK`, `XXpsk3`, `hybridIK`). */
  readonly name: string;
  /** Keys the responder knows of the initiator in advance. */
  readonly preInitiator: readonly ("s" | "e")[];
  /** Keys the initiator knows of the responder in advance. */
  readonly preResponder: readonly ("s" | "e")[];
  /** Messages in order (even index: initiator → responder). */
  readonly messages: readonly (readonly Token[])[];
  /** Has a `psk` token (then `e` also mixes the key). */
  readonly psk: boolean;
  /** One-way patterns send transport messages initiator → responder only. */
  readonly oneWay: boolean;
}

// Notation: pre-messages before "...", messages separated by ";".
const BASE: Record<string, string> = {
  N: "<- s ... -> e, es",
  K: "-> s; <- s ... -> e, es, ss",
  X: "<- s ... -> e, es, s, ss",
  NN: "-> e; <- e, ee",
  NK: "<- s ... -> e, es; <- e, ee",
  NX: "-> e; <- e, ee, s, es",
  KN: "-> s ... -> e; <- e, ee, se",
  KK: "-> s; <- s ... -> e, es, ss; <- e, ee, se",
  KX: "-> s ... -> e; <- e, ee, se, s, es",
  XN: "-> e; <- e, ee; -> s, se",
  XK: "<- s ... -> e, es; <- e, ee; -> s, se",
  XX: "-> e; <- e, ee, s, es; -> s, se",
  IN: "-> e, s; <- e, ee, se",
  IK: "<- s ... -> e, es, s, ss; <- e, ee, se",
  IX: "-> e, s; <- e, ee, se, s, es",
  NK1: "<- s ... -> e; <- e, ee, es",
  NX1: "-> e; <- e, ee, s; -> es",
  X1N: "-> e; <- e, ee; -> s; <- se",
  X1K: "<- s ... -> e, es; <- e, ee; -> s; <- se",
  XK1: "<- s ... -> e; <- e, ee, es; -> s, se",
  X1K1: "<- s ... -> e; <- e, ee, es; -> s; <- se",
  X1X: "-> e; <- e, ee, s, es; -> s; <- se",
  XX1: "-> e; <- e, ee, s; -> es, s, se",
  X1X1: "-> e; <- e, ee, s; -> es, s; <- se",
  K1N: "-> s ... -> e; <- e, ee; -> se",
  K1K: "-> s; <- s ... -> e, es; <- e, ee; -> se",
  KK1: "-> s; <- s ... -> e; <- e, ee, se, es",
  K1K1: "-> s; <- s ... -> e; <- e, ee, es; -> se",
  K1X: "-> s ... -> e; <- e, ee, s, es; -> se",
  KX1: "-> s ... -> e; <- e, ee, se, s; -> es",
  K1X1: "-> s ... -> e; <- e, ee, s; -> se, es",
  I1N: "-> e, s; <- e, ee; -> se",
  I1K: "<- s ... -> e, es, s; <- e, ee; -> se",
  IK1: "<- s ... -> e, s; <- e, ee, se, es",
  I1K1: "<- s ... -> e, s; <- e, ee, es; -> se",
  I1X: "-> e, s; <- e, ee, s, es; -> se",
  IX1: "-> e, s; <- e, ee, se, s; -> es",
  I1X1: "-> e, s; <- e, ee, s; -> se, es",
  // PQNoise hybrid IK as Codex 0.169 (clatter 2.2) runs it.
  hybridIK: "<- s ... -> skem, e, es, s, ss; <- ekem, skem, e, ee, se",
};

function tokens(text: string): Token[] {
  return text.replace(/^(->|<-)\s*/, "").split(",").map((t) => t.trim()).filter(Boolean) as Token[];
}

/** Parses a pattern name (`IK`, `NNpsk0`, `XXpsk3`, `hybridIK`). */
export function parsePattern(name: string): HandshakePattern {
  const m = /^([A-Za-z0-9]+?)((?:psk\d)+)?$/.exec(name);
  const base = m ? BASE[m[1]!] : undefined;
  if (!m || base === undefined) throw new Error(`unsupported Noise handshake pattern ${name}`);
  const [pre, body] = base.includes("...") ? base.split("...") as [string, string] : ["", base];
  const preInitiator: ("s" | "e")[] = [];
  const preResponder: ("s" | "e")[] = [];
  for (const line of pre.split(";").map((l) => l.trim()).filter(Boolean)) {
    (line.startsWith("->") ? preInitiator : preResponder).push(...(tokens(line) as ("s" | "e")[]));
  }
  const messages = body.split(";").map((l) => tokens(l.trim()));
  const psks = [...(m[2] ?? "").matchAll(/psk(\d)/g)].map((x) => Number(x[1]));
  for (const p of psks) {
    if (p === 0) messages[0] = ["psk", ...messages[0]!];
    else if (p - 1 < messages.length) messages[p - 1] = [...messages[p - 1]!, "psk"];
    else throw new Error(`invalid psk modifier in ${name}`);
  }
  return {
    name,
    preInitiator,
    preResponder,
    messages,
    psk: psks.length > 0,
    oneWay: name.length > 0 && /^[NKX](psk\d)*$/.test(name),
  };
}
