/**
 * The primitives Noise needs, from the `@noble` libraries: X25519, ML-KEM-768,
 * SHA-256 with HMAC and the Noise HKDF, and the two AEADs with their Noise
 * nonce layouts (AES-GCM: 4 zero bytes + big-endian u64; ChaCha20-Poly1305:
 * 4 zero bytes + little-endian u64).
 *
 * @module
 */

import { x25519 } from "@noble/curves/ed25519.js";
import { ml_kem768 } from "@noble/post-quantum/ml-kem.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { hmac } from "@noble/hashes/hmac.js";
import { gcm } from "@noble/ciphers/aes.js";
import { chacha20poly1305 } from "@noble/ciphers/chacha.js";

/** SHA-256 output length. */
export const HASHLEN = 32;
/** AEAD tag length. */
export const TAGLEN = 16;

/** SHA-256 of the concatenation of `parts`. */
export function hash(...parts: Uint8Array[]): Uint8Array {
  const h = sha256.create();
  for (const p of parts) h.update(p);
  return h.digest();
}

/** The Noise HKDF with 2 or 3 outputs. */
export function hkdf(ck: Uint8Array, ikm: Uint8Array, outputs: 2 | 3): Uint8Array[] {
  const temp = hmac(sha256, ck, ikm);
  const o1 = hmac(sha256, temp, Uint8Array.of(1));
  const o2 = hmac(sha256, temp, concat(o1, Uint8Array.of(2)));
  if (outputs === 2) return [o1, o2];
  return [o1, o2, hmac(sha256, temp, concat(o2, Uint8Array.of(3)))];
}

/** Concatenates byte arrays. */
export function concat(...parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
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
  encrypt: (k, n, ad, p) => gcm(k, aesGcmNonce(n), ad).encrypt(p),
  decrypt: (k, n, ad, c) => gcm(k, aesGcmNonce(n), ad).decrypt(c),
};

/** ChaCha20-Poly1305 (noble). */
export const ChaChaPoly: NoiseAead = {
  name: "ChaChaPoly",
  encrypt: (k, n, ad, p) => chacha20poly1305(k, chachaNonce(n), ad).encrypt(p),
  decrypt: (k, n, ad, c) => chacha20poly1305(k, chachaNonce(n), ad).decrypt(c),
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
    return { secretKey, publicKey: x25519.getPublicKey(secretKey) };
  },
  dh(secretKey: Uint8Array, publicKey: Uint8Array): Uint8Array {
    return x25519.getSharedSecret(secretKey, publicKey);
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
    const k = ml_kem768.keygen(seed);
    return { secretKey: k.secretKey, publicKey: k.publicKey };
  },
  encapsulate(
    publicKey: Uint8Array,
    randomness?: Uint8Array,
  ): { ciphertext: Uint8Array; sharedSecret: Uint8Array } {
    const r = ml_kem768.encapsulate(publicKey, randomness);
    return { ciphertext: r.cipherText, sharedSecret: r.sharedSecret };
  },
  decapsulate(ciphertext: Uint8Array, secretKey: Uint8Array): Uint8Array {
    return ml_kem768.decapsulate(ciphertext, secretKey);
  },
};
