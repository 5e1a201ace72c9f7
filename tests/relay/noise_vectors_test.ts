// The handshake engine against the public cacophony vectors (every
// 25519/SHA256 pattern there, AESGCM and ChaChaPoly, with and without PSKs),
// and the deterministic hybrid-IK vector of the design notes.

import { loadNoiseCrypto } from "../../src/noise/primitives.ts";
import { HandshakeState, type LocalKey } from "../../src/noise/handshake.ts";
import { parsePattern } from "../../src/noise/patterns.ts";
import { AESGCM, ChaChaPoly, X25519 } from "../../src/noise/primitives.ts";
import { assert, assertEquals } from "../helpers/assert.ts";

await loadNoiseCrypto();

interface Vector {
  protocol_name: string;
  init_prologue: string;
  resp_prologue: string;
  init_static?: string;
  init_ephemeral?: string;
  init_remote_static?: string;
  init_psks?: string[];
  resp_static?: string;
  resp_ephemeral?: string;
  resp_remote_static?: string;
  resp_psks?: string[];
  handshake_hash: string;
  messages: Array<{ payload: string; ciphertext: string }>;
}

const hex = (s: string) => Uint8Array.fromHex(s);
const toHex = (b: Uint8Array) => b.toHex();
const file = JSON.parse(
  await Deno.readTextFile(new URL("../fixtures/noise-vectors-25519-sha256.json", import.meta.url)),
);
const vectors = file.vectors as Vector[];

function local(secret?: string): LocalKey | undefined {
  return secret ? { dh: X25519.keyPair(hex(secret)) } : undefined;
}

function run(v: Vector): void {
  const [, patternName, , cipher] = v.protocol_name.split("_");
  const pattern = parsePattern(patternName!);
  const aead = cipher === "AESGCM" ? AESGCM : ChaChaPoly;
  const common = { protocolName: v.protocol_name, pattern, aead };
  const init = new HandshakeState({
    ...common,
    initiator: true,
    prologue: hex(v.init_prologue),
    ...(local(v.init_static) ? { s: local(v.init_static)! } : {}),
    ...(local(v.init_ephemeral) ? { e: local(v.init_ephemeral)! } : {}),
    ...(v.init_remote_static ? { rs: { dh: hex(v.init_remote_static) } } : {}),
    ...(v.init_psks ? { psks: v.init_psks.map(hex) } : {}),
  });
  const resp = new HandshakeState({
    ...common,
    initiator: false,
    prologue: hex(v.resp_prologue),
    ...(local(v.resp_static) ? { s: local(v.resp_static)! } : {}),
    ...(local(v.resp_ephemeral) ? { e: local(v.resp_ephemeral)! } : {}),
    ...(v.resp_remote_static ? { rs: { dh: hex(v.resp_remote_static) } } : {}),
    ...(v.resp_psks ? { psks: v.resp_psks.map(hex) } : {}),
  });
  let transport:
    | { i: ReturnType<HandshakeState["split"]>; r: ReturnType<HandshakeState["split"]> }
    | null = null;
  v.messages.forEach((m, index) => {
    const fromInitiator = pattern.oneWay || index % 2 === 0;
    const [sender, receiver] = fromInitiator ? [init, resp] : [resp, init];
    if (!init.finished) {
      const ct = sender.writeMessage(hex(m.payload));
      assertEquals(toHex(ct), m.ciphertext, `${v.protocol_name} message ${index}`);
      assertEquals(toHex(receiver.readMessage(ct)), m.payload);
      if (init.finished) {
        assertEquals(
          toHex(init.handshakeHash),
          v.handshake_hash,
          `${v.protocol_name} handshake hash`,
        );
        assertEquals(toHex(resp.handshakeHash), v.handshake_hash);
        transport = { i: init.split(), r: resp.split() };
      }
      return;
    }
    const t = transport!;
    const [send, receive] = fromInitiator ? [t.i.send, t.r.receive] : [t.r.send, t.i.receive];
    const ct = send.encryptWithAd(new Uint8Array(0), hex(m.payload));
    assertEquals(toHex(ct), m.ciphertext, `${v.protocol_name} transport message ${index}`);
    assertEquals(toHex(receive.decryptWithAd(new Uint8Array(0), ct)), m.payload);
  });
  assert(init.finished, `${v.protocol_name} did not finish`);
}

Deno.test("noise vectors: every cacophony 25519/SHA256 vector (AESGCM and ChaChaPoly, PSKs, deferred)", () => {
  const names = new Set(vectors.map((v) => v.protocol_name.split("_")[1]));
  for (const required of ["IK", "XX", "NN", "NNpsk0", "NNpsk2", "XXpsk3", "IKpsk2"]) {
    assert(names.has(required), required);
  }
  for (const v of vectors) run(v);
  assertEquals(vectors.length, 118);
});
