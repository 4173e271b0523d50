// BLAKE2b (RFC 7693) in plain JS, with BigInt words: unkeyed, digest of 1-64 bytes, an
// optional 16-byte personalization. Enough for ldpkit's item keys (one hash per distinct
// item), not a general-purpose fast hash.

const MASK64 = (1n << 64n) - 1n;

const IV = [
  0x6a09e667f3bcc908n, 0xbb67ae8584caa73bn, 0x3c6ef372fe94f82bn, 0xa54ff53a5f1d36f1n,
  0x510e527fade682d1n, 0x9b05688c2b3e6c1fn, 0x1f83d9abfb41bd6bn, 0x5be0cd19137e2179n,
];

const SIGMA = [
  [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
  [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
  [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
  [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
  [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
  [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
  [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
  [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
  [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
  [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
];

const rotr = (x, n) => ((x >> n) | (x << (64n - n))) & MASK64;

/** 8 little-endian bytes at `offset` of `bytes` (zero past the end) as a BigInt. */
function word(bytes, offset) {
  let w = 0n;
  for (let i = 7; i >= 0; i--) w = (w << 8n) | BigInt(bytes[offset + i] ?? 0);
  return w;
}

/** The compression function F on state h, block bytes at `offset`, counter t, last flag. */
function compress(h, bytes, offset, t, last) {
  const m = new Array(16);
  for (let i = 0; i < 16; i++) m[i] = word(bytes, offset + 8 * i);
  const v = [...h, ...IV];
  v[12] ^= t & MASK64;
  v[13] ^= t >> 64n;
  if (last) v[14] ^= MASK64;
  const g = (a, b, c, d, x, y) => {
    v[a] = (v[a] + v[b] + x) & MASK64;
    v[d] = rotr(v[d] ^ v[a], 32n);
    v[c] = (v[c] + v[d]) & MASK64;
    v[b] = rotr(v[b] ^ v[c], 24n);
    v[a] = (v[a] + v[b] + y) & MASK64;
    v[d] = rotr(v[d] ^ v[a], 16n);
    v[c] = (v[c] + v[d]) & MASK64;
    v[b] = rotr(v[b] ^ v[c], 63n);
  };
  for (let r = 0; r < 12; r++) {
    const s = SIGMA[r % 10];
    g(0, 4, 8, 12, m[s[0]], m[s[1]]);
    g(1, 5, 9, 13, m[s[2]], m[s[3]]);
    g(2, 6, 10, 14, m[s[4]], m[s[5]]);
    g(3, 7, 11, 15, m[s[6]], m[s[7]]);
    g(0, 5, 10, 15, m[s[8]], m[s[9]]);
    g(1, 6, 11, 12, m[s[10]], m[s[11]]);
    g(2, 7, 8, 13, m[s[12]], m[s[13]]);
    g(3, 4, 9, 14, m[s[14]], m[s[15]]);
  }
  for (let i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
}

/**
 * BLAKE2b digest (Uint8Array of `digestSize` bytes) of `data` (Uint8Array), unkeyed, with
 * the personalization `person` (bytes, at most 16, zero-padded), as Python's
 * hashlib.blake2b(data, digest_size=..., person=...).
 */
export function blake2b(data, digestSize = 64, person = new Uint8Array(0)) {
  if (!Number.isInteger(digestSize) || digestSize < 1 || digestSize > 64) {
    throw new RangeError(`digestSize must be an integer in [1, 64], got ${digestSize}`);
  }
  if (person.length > 16) {
    throw new RangeError(`person must be at most 16 bytes, got ${person.length}`);
  }
  const h = IV.slice();
  h[0] ^= 0x01010000n ^ BigInt(digestSize); // fanout 1, depth 1, no key
  const p = new Uint8Array(16);
  p.set(person);
  h[6] ^= word(p, 0);
  h[7] ^= word(p, 8);
  const n = data.length;
  let offset = 0;
  while (n - offset > 128) {
    compress(h, data, offset, BigInt(offset + 128), false);
    offset += 128;
  }
  const block = new Uint8Array(128); // the last block (possibly empty), zero-padded
  block.set(data.subarray(offset));
  compress(h, block, 0, BigInt(n), true);
  const out = new Uint8Array(digestSize);
  for (let i = 0; i < digestSize; i++) out[i] = Number((h[i >> 3] >> BigInt(8 * (i & 7))) & 0xffn);
  return out;
}
