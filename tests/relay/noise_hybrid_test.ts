// Codex's hybrid IK: the deterministic vector of the design notes, the
// prologue vector, key JSON validation, and tampering (flipped bits,
// replayed, reordered, truncated and oversized records are all rejected).

import { loadNoiseCrypto } from "../../src/noise/primitives.ts";
import {
  authorizationFromPayload,
  buildPrologue,
  decodePublicKey,
  encodePublicKey,
  generateIdentity,
  initiatorHandshake,
  NOISE_SUITE,
  responderHandshake,
} from "../../src/noise/hybrid_ik.ts";
import { HandshakeError } from "../../src/noise/handshake.ts";
import { AESGCM, hash, MLKEM768, X25519 } from "../../src/noise/primitives.ts";
import { MAX_RECORD_PLAINTEXT, RecordCipher } from "../../src/noise/transport.ts";
import { assert, assertEquals, assertRejects, assertThrows } from "../helpers/assert.ts";

await loadNoiseCrypto();

const fill = (n: number, b: number) => new Uint8Array(n).fill(b);
const key = (x: number, k: number) => ({
  dh: X25519.keyPair(fill(32, x)),
  kem: MLKEM768.keyPair(fill(64, k)),
});

function vectorPair(payload = "harness-key-authorization") {
  const initiator = generateIdentity({ x25519: fill(32, 0x11), mlkem: fill(64, 0x12) });
  const responder = generateIdentity({ x25519: fill(32, 0x21), mlkem: fill(64, 0x22) });
  const prologue = buildPrologue("env-1", "registration-1", "stream-1");
  const i = initiatorHandshake(
    initiator,
    { dh: responder.key.dh.publicKey, kem: responder.key.kem.publicKey },
    prologue,
    {
      e: key(0x31, 0x32),
      encapsulations: [fill(32, 0x33)],
    },
  );
  const r = responderHandshake(responder, prologue, {
    e: key(0x41, 0x42),
    encapsulations: [fill(32, 0x43), fill(32, 0x44)],
  });
  return { initiator, responder, i, r, payload: new TextEncoder().encode(payload) };
}

Deno.test("hybrid IK: the prologue vector", () => {
  assertEquals(
    buildPrologue("env-1", "registration-1", "stream-1").toHex(),
    "0000000000000020636f6465782d657865632d7365727665722d72656c61792d6e6f6973652f7631" +
      "0000000000000005656e762d31000000000000000e726567697374726174696f6e2d31000000000000000873747265616d2d31",
  );
});

Deno.test("hybrid IK: the deterministic vector (keys, messages, hash, split keys, first records)", async () => {
  const { initiator, responder, i, r, payload } = vectorPair();
  assertEquals(
    initiator.key.dh.publicKey.toHex(),
    "7b4e909bbe7ffe44c465a220037d608ee35897d31ef972f07f74892cb0f73f13",
  );
  assertEquals(
    responder.key.dh.publicKey.toHex(),
    "7d34a4815fa6b982535e60af3bd9b49556816080f1641ff81d2b7c8ae8268a44",
  );
  assertEquals(
    hash(initiator.key.kem.publicKey).toHex(),
    "f2135130829b3bf199d8df4f578d6666fa53407c9f8affa5396c40d18782f701",
  );
  assertEquals(
    hash(responder.key.kem.publicKey).toHex(),
    "35818cf22b7ec19f99e196636a482c55a7b33aa58764d0fdf00d5b456876d23f",
  );
  const msg1 = i.writeMessage(payload);
  assertEquals(msg1.length, 3593);
  assertEquals(
    msg1.subarray(0, 32).toHex(),
    "4b25ed022dc438f054d03c8842fe7f816c1d13092aac6c3e4dd739c9d6c56013",
  );
  assertEquals(
    hash(msg1).toHex(),
    "ed4635b7d8bc5661e63e3bea5774a03583bf185602e6404ede41d538bf4962d1",
  );
  assertEquals(new TextDecoder().decode(r.readMessage(msg1)), "harness-key-authorization");
  assertEquals(r.remoteStatic!.dh.toHex(), initiator.key.dh.publicKey.toHex());
  const msg2 = r.writeMessage();
  assertEquals(msg2.length, 3424);
  assertEquals(
    hash(msg2).toHex(),
    "bee2bf4a4f1dd53c53fe80e43a6670efe42920642a46d0a7d4c772d300180178",
  );
  assertEquals(i.readMessage(msg2).length, 0);
  const a = i.split();
  const b = r.split();
  assertEquals(
    a.handshakeHash.toHex(),
    "6112fe007d0789866e36f084bfb37038c54fb4c73d443c84425cbb394b5a65cb",
  );
  assertEquals(
    a.send.key.toHex(),
    "03cdd64d2921580f7882ccc638df5823bde97cb74f9eb830e83cacdc57fab366",
  );
  assertEquals(
    a.receive.key.toHex(),
    "9b3eb1d7e96b06ec089247617249f9e1dea154bf18eae422d621335eb4ce0c03",
  );
  assertEquals(b.send.key.toHex(), a.receive.key.toHex());
  const record = Uint8Array.fromHex("0000000772657175657374");
  assertEquals(
    (await new RecordCipher(a.send).seal(record)).toHex(),
    "ec7aa6fb9e5bf6686469f4a286fc07f7b5cfbe2e6f945596475470",
  );
  assertEquals(
    (await new RecordCipher(b.send).seal(record)).toHex(),
    "3ccfbee948048d5ae1128a5ee76268364b0903b51639cb74f666ff",
  );
});

Deno.test("hybrid IK: msg 1 fails with a wrong responder key half or a different prologue", () => {
  const responder = generateIdentity();
  const other = generateIdentity();
  const harness = generateIdentity();
  const p = buildPrologue("env", "reg", "s1");
  const wrongKem = initiatorHandshake(harness, {
    dh: responder.key.dh.publicKey,
    kem: other.key.kem.publicKey,
  }, p);
  assertThrows(
    () => responderHandshake(responder, p).readMessage(wrongKem.writeMessage()),
    HandshakeError,
  );
  const wrongDh = initiatorHandshake(harness, {
    dh: other.key.dh.publicKey,
    kem: responder.key.kem.publicKey,
  }, p);
  assertThrows(
    () => responderHandshake(responder, p).readMessage(wrongDh.writeMessage()),
    HandshakeError,
  );
  const ok = initiatorHandshake(harness, {
    dh: responder.key.dh.publicKey,
    kem: responder.key.kem.publicKey,
  }, p);
  assertThrows(
    () =>
      responderHandshake(responder, buildPrologue("env", "reg", "s2")).readMessage(
        ok.writeMessage(),
      ),
    HandshakeError,
  );
});

Deno.test("hybrid IK: tampered, truncated and oversized handshake messages; payload limits", () => {
  const { i, r, payload } = vectorPair();
  const msg1 = i.writeMessage(payload);
  for (const at of [0, 1100, 2400, 3000, msg1.length - 1]) {
    const bad = msg1.slice();
    bad[at] = bad[at]! ^ 0x01;
    const { r: fresh } = vectorPair();
    assertThrows(() => fresh.readMessage(bad), HandshakeError, undefined);
  }
  assertThrows(
    () => vectorPair().r.readMessage(msg1.subarray(0, 3000)),
    HandshakeError,
    "truncated",
  );
  assertThrows(
    () => vectorPair().r.readMessage(new Uint8Array(70000)),
    HandshakeError,
    "too large",
  );
  r.readMessage(msg1);
  assertThrows(
    () => vectorPair().i.writeMessage(new Uint8Array(65535)),
    HandshakeError,
    "handshake payload is too large",
  );
  assertEquals(authorizationFromPayload(new Uint8Array(4096).fill(65)).length, 4096);
  assertThrows(
    () => authorizationFromPayload(new Uint8Array(4097).fill(65)),
    HandshakeError,
    "too long",
  );
  assertThrows(() => authorizationFromPayload(Uint8Array.of(0xff)), HandshakeError, "not UTF-8");
});

Deno.test("transport: flipped, replayed, reordered, short and oversized records are rejected; WebCrypto = noble", async () => {
  const { i, r, payload } = vectorPair();
  r.readMessage(i.writeMessage(payload));
  i.readMessage(r.writeMessage());
  const a = i.split();
  const b = r.split();
  const send = new RecordCipher(a.send);
  const recv = new RecordCipher(b.receive);
  const r0 = await send.seal(new TextEncoder().encode("zero"));
  const r1 = await send.seal(new TextEncoder().encode("one"));
  const flipped = r0.slice();
  flipped[2] = flipped[2]! ^ 1;
  await assertRejects(() => recv.open(flipped), Error, "failed to decrypt");
  await assertRejects(() => recv.open(r1), Error, "failed to decrypt"); // out of order
  assertEquals(new TextDecoder().decode(await recv.open(r0)), "zero");
  await assertRejects(() => recv.open(r0), Error, "failed to decrypt"); // replay
  assertEquals(new TextDecoder().decode(await recv.open(r1)), "one");
  await assertRejects(() => recv.open(new Uint8Array(15)), Error, "shorter than its tag");
  await assertRejects(() => recv.open(new Uint8Array(65536)), Error, "exceeds 65535");
  await assertRejects(
    () => send.seal(new Uint8Array(MAX_RECORD_PLAINTEXT + 1)),
    Error,
    "exceeds maximum length",
  );
  // A peer sealing more than the record limit is refused after decryption.
  const big = AESGCM.encrypt(
    b.receive.key,
    b.receive.nonce,
    new Uint8Array(0),
    new Uint8Array(MAX_RECORD_PLAINTEXT + 1),
  );
  await assertRejects(() => recv.open(big), Error, "exceeds maximum length");
  // libcrypto (FFI), WebCrypto and noble produce the same records, and each
  // opens the others'.
  const pairs = () => {
    const x = vectorPair();
    x.r.readMessage(x.i.writeMessage(x.payload));
    x.i.readMessage(x.r.writeMessage());
    return x.i.split();
  };
  const kinds = {
    native: { native: true },
    webcrypto: { native: false, webCryptoThreshold: 0 },
    noble: { native: false, webCryptoThreshold: Infinity },
  };
  assert(new RecordCipher(pairs().send, kinds.native).native, "libcrypto loads on this machine");
  for (const length of [0, 1, 4096, MAX_RECORD_PLAINTEXT]) {
    const data = crypto.getRandomValues(new Uint8Array(length));
    const sealed: Record<string, string> = {};
    for (const [name, options] of Object.entries(kinds)) {
      const sender = new RecordCipher(pairs().send, options);
      for (let k = 0; k < 3; k++) sealed[`${name}${k}`] = (await sender.seal(data)).toHex();
    }
    for (let k = 0; k < 3; k++) {
      assertEquals(sealed[`native${k}`], sealed[`noble${k}`]);
      assertEquals(sealed[`webcrypto${k}`], sealed[`noble${k}`]);
    }
    for (const options of Object.values(kinds)) {
      const receiver = new RecordCipher(pairs().receive, options);
      // Sealed by the responder's send state = the initiator's receive state.
      const responder = vectorPair();
      responder.r.readMessage(responder.i.writeMessage(responder.payload));
      responder.i.readMessage(responder.r.writeMessage());
      const sender = new RecordCipher(responder.r.split().send, { native: false });
      for (let k = 0; k < 3; k++) {
        const record = await sender.seal(data);
        if (k === 1) {
          const tampered = record.slice();
          tampered[tampered.length - 1]! ^= 0x80;
          await assertRejects(() => receiver.open(tampered), Error, "failed to decrypt");
        }
        assertEquals((await receiver.open(record)).toHex(), data.toHex());
      }
    }
  }
});

Deno.test("keys: JSON encoding and strict validation with the reference's messages", () => {
  const id = generateIdentity();
  const json = id.publicKey;
  assertEquals(json.suite, NOISE_SUITE);
  assertEquals(json.x25519_public_key.length, 44);
  assertEquals(json.mlkem768_public_key.length, 1580);
  const back = decodePublicKey(JSON.parse(JSON.stringify(json)));
  assertEquals(back.dh.toHex(), id.key.dh.publicKey.toHex());
  assertEquals(encodePublicKey(back), json);
  assertThrows(
    () => decodePublicKey({ ...json, suite: "Noise_IK" }),
    Error,
    "unsupported Noise channel suite",
  );
  assertThrows(() => decodePublicKey({ ...json, extra: 1 }), Error, "unknown field");
  assertThrows(
    () => decodePublicKey({ ...json, x25519_public_key: "AAAA" }),
    Error,
    "invalid X25519 public key length",
  );
  assertThrows(
    () => decodePublicKey({ ...json, x25519_public_key: "A".repeat(48) }),
    Error,
    "invalid X25519 public key length",
  );
  assertThrows(
    () => decodePublicKey({ ...json, x25519_public_key: "!".repeat(44) }),
    Error,
    "invalid X25519 public key",
  );
  assertThrows(
    () => decodePublicKey({ ...json, mlkem768_public_key: "AAAA" }),
    Error,
    "invalid ML-KEM-768 public key length",
  );
  assert(true);
});
