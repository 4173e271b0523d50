// Randomness from crypto.getRandomValues (browsers and node >= 18); no Math.random.

const cryptoObj = globalThis.crypto;

/** Source of secure random coins; tests inject fixed coins with the same interface. */
export const secureCoins = {
  /** A uniform double in [0, 1) with 53 random bits (as numpy's Generator.random). */
  uniform() {
    const w = new Uint32Array(2);
    cryptoObj.getRandomValues(w);
    // 27 high bits of one word and 26 of the other: (a * 2^26 + b) / 2^53
    return ((w[0] >>> 5) * 67108864 + (w[1] >>> 6)) / 9007199254740992;
  },
  /** A uniform unsigned 64-bit word as a BigInt. */
  u64() {
    const w = new BigUint64Array(1);
    cryptoObj.getRandomValues(w);
    return w[0];
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
