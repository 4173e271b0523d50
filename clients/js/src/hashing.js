// OLH's hash family, bit-for-bit the one of ldpkit.frequency.hashing (splitmix64-mixed
// multiply-add-shift on 64-bit words), with BigInt.

const MASK64 = (1n << 64n) - 1n;
const GAMMA = 0x9e3779b97f4a7c15n;
const GAMMA2 = (2n * GAMMA) & MASK64;
const MUL1 = 0xbf58476d1ce4e5b9n;
const MUL2 = 0x94d049bb133111ebn;

/** The splitmix64 finalizer on a 64-bit BigInt. */
export function mix64(z) {
  z = ((z ^ (z >> 30n)) * MUL1) & MASK64;
  z = ((z ^ (z >> 27n)) * MUL2) & MASK64;
  return z ^ (z >> 31n);
}

/** The odd multiplier a and increment b that a 64-bit seed names. */
export function hashParameters(seed) {
  const s = BigInt(seed) & MASK64;
  return [mix64((s + GAMMA) & MASK64) | 1n, mix64((s + GAMMA2) & MASK64)];
}

/**
 * The mixed key of an item in [0, 2^32): MurmurHash3's fmix32, a bijection of 32-bit words
 * (hashing.mix_item_keys); what OLH hashes instead of the item when mix_items is true.
 */
export function mixItemKey(item) {
  let h = item >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** h_seed(item) in [0, g): ((a*item + b mod 2^64) >> 32) * g >> 32. */
export function localHash(seed, item, hashRange) {
  if (!Number.isInteger(item) || item < 0 || item >= 2 ** 32) {
    throw new RangeError(`item must be an integer in [0, 2^32), got ${item}`);
  }
  if (!Number.isInteger(hashRange) || hashRange < 2 || hashRange > 2 ** 32) {
    throw new RangeError(`hashRange must be an integer in [2, 2^32], got ${hashRange}`);
  }
  const [a, b] = hashParameters(seed);
  const x = (a * BigInt(item) + b) & MASK64;
  return Number(((x >> 32n) * BigInt(hashRange)) >> 32n);
}

/** Per-user variance of local hashing with range g (FO17 eq. 10). */
function olhVariance(epsilon, g) {
  const t = Math.exp(-epsilon) / -Math.expm1(-epsilon);
  return (1 + g * t) ** 2 / (g - 1);
}

/** OLH's default g: the better integer neighbour of e^eps + 1 (as optimal_hash_range). */
export function optimalHashRange(epsilon) {
  if (epsilon >= 32 * Math.log(2)) return 2 ** 32;
  const low = Math.max(2, Math.floor(Math.exp(epsilon) + 1));
  // Python's min() keeps the first of equal keys
  const best = olhVariance(epsilon, low + 1) < olhVariance(epsilon, low) ? low + 1 : low;
  return Math.min(best, 2 ** 32);
}
