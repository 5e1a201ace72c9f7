/**
 * Noise's CipherState and SymmetricState (SHA-256), with the PQNoise
 * `MixKeyAndHash` that hybrid `skem` tokens use.
 *
 * @module
 */

import { concat, hash, HASHLEN, hkdf, type NoiseAead, TAGLEN } from "./primitives.ts";

/** Largest nonce ever used (2^64 − 1 is reserved). */
const MAX_NONCE = (1n << 64n) - 2n;

/** A key and a nonce counter. */
export class CipherState {
  #key: Uint8Array | null;
  #n = 0n;
  readonly aead: NoiseAead;

  /** Uses `aead` with `key` (or none yet). */
  constructor(aead: NoiseAead, key: Uint8Array | null = null) {
    this.aead = aead;
    this.#key = key;
  }

  /** True once a key is set. */
  get hasKey(): boolean {
    return this.#key !== null;
  }

  /** The key (for transport fast paths); throws without one. */
  get key(): Uint8Array {
    if (!this.#key) throw new Error("no cipher key");
    return this.#key;
  }

  /** The next nonce. */
  get nonce(): bigint {
    return this.#n;
  }

  /** Sets a new key and resets the nonce. */
  initializeKey(key: Uint8Array): void {
    this.#key = key;
    this.#n = 0n;
  }

  /** Takes the next nonce (throws when exhausted: no wrap, no reuse). */
  nextNonce(): bigint {
    if (this.#n > MAX_NONCE) throw new Error("Noise nonce exhausted");
    return this.#n++;
  }

  /** Encrypts (or passes through without a key). */
  encryptWithAd(ad: Uint8Array, plaintext: Uint8Array): Uint8Array {
    if (!this.#key) return plaintext;
    return this.aead.encrypt(this.#key, this.nextNonce(), ad, plaintext);
  }

  /** Decrypts (or passes through without a key); the nonce advances only on success. */
  decryptWithAd(ad: Uint8Array, ciphertext: Uint8Array): Uint8Array {
    if (!this.#key) return ciphertext;
    if (ciphertext.length < TAGLEN) throw new Error("Noise ciphertext is shorter than its tag");
    if (this.#n > MAX_NONCE) throw new Error("Noise nonce exhausted");
    const plaintext = this.aead.decrypt(this.#key, this.#n, ad, ciphertext);
    this.#n++;
    return plaintext;
  }
}

/** The chaining key, the handshake hash and a cipher. */
export class SymmetricState {
  ck: Uint8Array;
  h: Uint8Array;
  readonly cipher: CipherState;

  /** Initialises from the protocol name. */
  constructor(protocolName: string, aead: NoiseAead) {
    const name = new TextEncoder().encode(protocolName);
    if (name.length <= HASHLEN) {
      this.h = new Uint8Array(HASHLEN);
      this.h.set(name);
    } else {
      this.h = hash(name);
    }
    this.ck = this.h;
    this.cipher = new CipherState(aead);
  }

  /** `h = HASH(h || data)`. */
  mixHash(data: Uint8Array): void {
    this.h = hash(this.h, data);
  }

  /** `(ck, k) = HKDF(ck, ikm, 2)`. */
  mixKey(ikm: Uint8Array): void {
    const [ck, k] = hkdf(this.ck, ikm, 2);
    this.ck = ck!;
    this.cipher.initializeKey(k!);
  }

  /** `(ck, th, k) = HKDF(ck, ikm, 3)`; MixHash(th). */
  mixKeyAndHash(ikm: Uint8Array): void {
    const [ck, th, k] = hkdf(this.ck, ikm, 3);
    this.ck = ck!;
    this.mixHash(th!);
    this.cipher.initializeKey(k!);
  }

  /** Encrypts with `h` as AD, then mixes the ciphertext into `h`. */
  encryptAndHash(plaintext: Uint8Array): Uint8Array {
    const c = this.cipher.encryptWithAd(this.h, plaintext);
    this.mixHash(c);
    return c;
  }

  /** Decrypts with `h` as AD, then mixes the received bytes into `h`. */
  decryptAndHash(ciphertext: Uint8Array): Uint8Array {
    const p = this.cipher.decryptWithAd(this.h, ciphertext);
    this.mixHash(ciphertext);
    return p;
  }

  /** Two transport cipher states (initiator→responder, responder→initiator). */
  split(): [CipherState, CipherState] {
    const [k1, k2] = hkdf(this.ck, new Uint8Array(0), 2);
    return [new CipherState(this.cipher.aead, k1!), new CipherState(this.cipher.aead, k2!)];
  }
}

/** Length of `EncryptAndHash(p)` for a `len`-byte `p`. */
export function sealedLength(len: number, keyed: boolean): number {
  return keyed ? len + TAGLEN : len;
}

export { concat };
