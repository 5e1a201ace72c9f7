/**
 * HMAC-SHA-256 through WebCrypto, as the base64url text tokens carry.
 *
 * @module
 */

const encoder = new TextEncoder();

/** `base64url(HMAC-SHA-256(secret, text))`, unpadded. */
export async function hmacSha256Base64Url(secret: Uint8Array, text: string): Promise<string> {
  const key = await crypto.subtle.importKey(
    "raw",
    secret as Uint8Array<ArrayBuffer>,
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(text)));
  return mac.toBase64({ alphabet: "base64url", omitPadding: true });
}
