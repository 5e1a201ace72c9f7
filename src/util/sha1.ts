/**
 * SHA-1 (FIPS 180-4), synchronously, for the one place it is needed: the
 * WebSocket handshake's `Sec-WebSocket-Accept` (RFC 6455 §4.2.2), a checksum
 * with no security role. WebCrypto's digest is asynchronous and runs on a
 * worker thread (one thread hop per connection, and a burst of connections
 * grows the blocking pool); `node:crypto` would load Node's compatibility
 * modules into every server (about 5 MiB of resident memory). Tested against
 * `node:crypto` (`tests/wire/sha1_test.ts`).
 *
 * @module
 */

const W = new Int32Array(80);

/** The 20-byte SHA-1 digest of `data`. */
export function sha1(data: Uint8Array): Uint8Array {
  // The message, a 1 bit, zeros, and its length in bits (64-bit big endian).
  const blocks = new Uint8Array(((data.length + 8) >>> 6) * 64 + 64);
  blocks.set(data);
  blocks[data.length] = 0x80;
  const view = new DataView(blocks.buffer);
  view.setUint32(blocks.length - 8, Math.floor(data.length / 0x20000000));
  view.setUint32(blocks.length - 4, (data.length << 3) >>> 0);
  let h0 = 0x67452301,
    h1 = 0xefcdab89 | 0,
    h2 = 0x98badcfe | 0,
    h3 = 0x10325476,
    h4 = 0xc3d2e1f0 | 0;
  for (let at = 0; at < blocks.length; at += 64) {
    for (let i = 0; i < 16; i++) W[i] = view.getInt32(at + i * 4);
    for (let i = 16; i < 80; i++) {
      const x = W[i - 3]! ^ W[i - 8]! ^ W[i - 14]! ^ W[i - 16]!;
      W[i] = (x << 1) | (x >>> 31);
    }
    let a = h0, b = h1, c = h2, d = h3, e = h4;
    for (let i = 0; i < 80; i++) {
      const f = i < 20
        ? ((b & c) | (~b & d)) + 0x5a827999
        : i < 40
        ? (b ^ c ^ d) + 0x6ed9eba1
        : i < 60
        ? ((b & c) | (b & d) | (c & d)) + 0x8f1bbcdc
        : (b ^ c ^ d) + 0xca62c1d6;
      const t = (((a << 5) | (a >>> 27)) + f + e + W[i]!) | 0;
      e = d;
      d = c;
      c = (b << 30) | (b >>> 2);
      b = a;
      a = t;
    }
    h0 = (h0 + a) | 0;
    h1 = (h1 + b) | 0;
    h2 = (h2 + c) | 0;
    h3 = (h3 + d) | 0;
    h4 = (h4 + e) | 0;
  }
  const out = new Uint8Array(20);
  const outView = new DataView(out.buffer);
  [h0, h1, h2, h3, h4].forEach((h, i) => outView.setInt32(i * 4, h));
  return out;
}
