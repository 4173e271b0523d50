// Randomness from crypto.getRandomValues (browsers, node); never Math.random.

// node 18 exposes Web Crypto only as a module; browsers and node >= 19 as a global
export const cryptoObj = globalThis.crypto ?? (await import('node:crypto')).webcrypto;

// Words are drawn 16 KiB at a time (one getRandomValues call) and each used once.
const POOL_WORDS = 4096;
const pool = new Uint32Array(POOL_WORDS);
let next = POOL_WORDS;

function word32() {
  if (next === POOL_WORDS) {
    cryptoObj.getRandomValues(pool);
    next = 0;
  }
  const w = pool[next];
  pool[next++] = 0; // a used coin does not linger in memory
  return w;
}

/** Source of secure random coins; tests inject fixed coins with the same interface. */
export const secureCoins = {
  /** A uniform double in [0, 1) with 53 random bits (as numpy's Generator.random). */
  uniform() {
    // 27 bits of one word and 26 of another: (a * 2^26 + b) / 2^53
    return ((word32() >>> 5) * 67108864 + (word32() >>> 6)) / 9007199254740992;
  },
  /** A uniform unsigned 64-bit word as a BigInt. */
  u64() {
    return (BigInt(word32()) << 32n) | BigInt(word32());
  },
  /** n uniform 64-bit words (BigUint64Array). */
  u64Array(n) {
    const out = new BigUint64Array(n);
    // getRandomValues fills at most 65536 bytes per call
    for (let i = 0; i < n; i += 8192) {
      cryptoObj.getRandomValues(out.subarray(i, Math.min(n, i + 8192)));
    }
    return out;
  },
};
