/**
 * The primitives Noise needs, from the `@noble` libraries: X25519, ML-KEM-768,
 * SHA-256 with HMAC and the Noise HKDF, and the two AEADs with their Noise
 * nonce layouts (AES-GCM: 4 zero bytes + big-endian u64; ChaCha20-Poly1305:
 * 4 zero bytes + little-endian u64).
 *
 * The libraries (~10 MiB resident) are loaded on first use so commands
 * that never touch Noise do not pay for them: call
 * {@linkcode loadNoiseCrypto} (once) before any handshake.
 *
 * @module
 */

import { concatBytes } from "../util/bytes.ts";
import { loadOpenSslAesGcm } from "./aes_gcm_openssl.ts";

interface Noble {
  x25519: typeof import("@noble/curves/ed25519.js").x25519;
  ml_kem768: typeof import("@noble/post-quantum/ml-kem.js").ml_kem768;
  sha256: typeof import("@noble/hashes/sha2.js").sha256;
  hmac: typeof import("@noble/hashes/hmac.js").hmac;
  gcm: typeof import("@noble/ciphers/aes.js").gcm;
  chacha20poly1305: typeof import("@noble/ciphers/chacha.js").chacha20poly1305;
}

let noble: Noble | null = null;
let loading: Promise<void> | null = null;

/**
 * Loads the crypto libraries (idempotent), and the system's libcrypto for
 * transport records when FFI is granted (see aes_gcm_openssl.ts). Needed
 * before `generateIdentity()` and handshakes; `connect()` with a
 * rendezvous and the executor call it themselves. Under `deno test` with
 * the resource sanitizer, call it at module level: the dynamic library it
 * opens stays open for the life of the process.
 */
export function loadNoiseCrypto(): Promise<void> {
  loading ??= (async () => {
    loadOpenSslAesGcm();
    const [curves, pq, sha2, mac, aes, chacha] = await Promise.all([
      import("@noble/curves/ed25519.js"),
      import("@noble/post-quantum/ml-kem.js"),
      import("@noble/hashes/sha2.js"),
      import("@noble/hashes/hmac.js"),
      import("@noble/ciphers/aes.js"),
      import("@noble/ciphers/chacha.js"),
    ]);
    noble = {
      x25519: curves.x25519,
      ml_kem768: pq.ml_kem768,
      sha256: sha2.sha256,
      hmac: mac.hmac,
      gcm: aes.gcm,
      chacha20poly1305: chacha.chacha20poly1305,
    };
  })();
  return loading;
}

function lib(): Noble {
  if (!noble) throw new Error("Noise crypto is not loaded: await loadNoiseCrypto() first");
  return noble;
}

/** SHA-256 output length. */
export const HASHLEN = 32;
/** AEAD tag length. */
export const TAGLEN = 16;

/** SHA-256 of the concatenation of `parts`. */
export function hash(...parts: Uint8Array[]): Uint8Array {
  const h = lib().sha256.create();
  for (const p of parts) h.update(p);
  return h.digest();
}

/** The Noise HKDF with 2 or 3 outputs. */
export function hkdf(ck: Uint8Array, ikm: Uint8Array, outputs: 2 | 3): Uint8Array[] {
  const { hmac, sha256 } = lib();
  const temp = hmac(sha256, ck, ikm);
  const o1 = hmac(sha256, temp, Uint8Array.of(1));
  const o2 = hmac(sha256, temp, concat(o1, Uint8Array.of(2)));
  if (outputs === 2) return [o1, o2];
  return [o1, o2, hmac(sha256, temp, concat(o2, Uint8Array.of(3)))];
}

/** Concatenates byte arrays. */
export function concat(...parts: Uint8Array[]): Uint8Array {
  return concatBytes(parts);
}

/** An AEAD with its Noise nonce encoding. */
export interface NoiseAead {
  /** `AESGCM` or `ChaChaPoly`. */
  readonly name: "AESGCM" | "ChaChaPoly";
  /** Encrypts with nonce `n`. */
  encrypt(key: Uint8Array, n: bigint, ad: Uint8Array, plaintext: Uint8Array): Uint8Array;
  /** Decrypts with nonce `n`; throws on authentication failure. */
  decrypt(key: Uint8Array, n: bigint, ad: Uint8Array, ciphertext: Uint8Array): Uint8Array;
}

/** The 12-byte AES-GCM nonce: 4 zero bytes, then `n` big-endian. */
export function aesGcmNonce(n: bigint): Uint8Array {
  const nonce = new Uint8Array(12);
  new DataView(nonce.buffer).setBigUint64(4, n, false);
  return nonce;
}

function chachaNonce(n: bigint): Uint8Array {
  const nonce = new Uint8Array(12);
  new DataView(nonce.buffer).setBigUint64(4, n, true);
  return nonce;
}

/** AES-256-GCM (noble). */
export const AESGCM: NoiseAead = {
  name: "AESGCM",
  encrypt: (k, n, ad, p) => lib().gcm(k, aesGcmNonce(n), ad).encrypt(p),
  decrypt: (k, n, ad, c) => lib().gcm(k, aesGcmNonce(n), ad).decrypt(c),
};

/** ChaCha20-Poly1305 (noble). */
export const ChaChaPoly: NoiseAead = {
  name: "ChaChaPoly",
  encrypt: (k, n, ad, p) => lib().chacha20poly1305(k, chachaNonce(n), ad).encrypt(p),
  decrypt: (k, n, ad, c) => lib().chacha20poly1305(k, chachaNonce(n), ad).decrypt(c),
};

/** An X25519 key pair. */
export interface DhKeyPair {
  /** Private scalar (32 bytes). */
  readonly secretKey: Uint8Array;
  /** Public key (32 bytes). */
  readonly publicKey: Uint8Array;
}

/** X25519: key pairs (random or from a secret) and DH (a low-order result throws). */
export const X25519 = {
  keyPair(secretKey: Uint8Array = crypto.getRandomValues(new Uint8Array(32))): DhKeyPair {
    return { secretKey, publicKey: lib().x25519.getPublicKey(secretKey) };
  },
  dh(secretKey: Uint8Array, publicKey: Uint8Array): Uint8Array {
    return lib().x25519.getSharedSecret(secretKey, publicKey);
  },
};

/** An ML-KEM-768 key pair. */
export interface KemKeyPair {
  /** Decapsulation key (2400 bytes). */
  readonly secretKey: Uint8Array;
  /** Encapsulation key (1184 bytes). */
  readonly publicKey: Uint8Array;
}

/** ML-KEM-768 (FIPS 203). */
export const MLKEM768 = {
  publicKeyBytes: 1184,
  ciphertextBytes: 1088,
  keyPair(seed?: Uint8Array): KemKeyPair {
    const k = lib().ml_kem768.keygen(seed);
    return { secretKey: k.secretKey, publicKey: k.publicKey };
  },
  encapsulate(
    publicKey: Uint8Array,
    randomness?: Uint8Array,
  ): { ciphertext: Uint8Array; sharedSecret: Uint8Array } {
    const r = lib().ml_kem768.encapsulate(publicKey, randomness);
    return { ciphertext: r.cipherText, sharedSecret: r.sharedSecret };
  },
  decapsulate(ciphertext: Uint8Array, secretKey: Uint8Array): Uint8Array {
    return lib().ml_kem768.decapsulate(ciphertext, secretKey);
  },
};
