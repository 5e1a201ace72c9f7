/**
 * Joining byte arrays: the one copy loop every buffer-assembling place
 * (frames, bodies, captured output, Noise transcripts) uses.
 *
 * @module
 */

/**
 * The bytes of `parts` one after another in a new array. `total`, when the
 * caller already counted it, saves a pass over the parts.
 */
export function concatBytes(parts: readonly Uint8Array[], total?: number): Uint8Array {
  let size = total ?? 0;
  if (total === undefined) { for (const p of parts) size += p.length; }
  const out = new Uint8Array(size);
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}
