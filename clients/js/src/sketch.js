// The open-domain oracles of ldpkit.frequency (sketch.py: CMS, HCMS; flh.py: FLH): item
// keys (format ldpkit.item/1, _items.py), the sketches' public row hashes, and the
// randomizers, with the same exact integer laws as the Python side. Per user, the client
// draws from 64-bit words in this order (tests/vectors/make_vectors.py replays it):
//   CMS:  row j = U below depth, then `width` words (bit b set iff word < T_p or T_q);
//   HCMS: row j = U below depth, coefficient l = U below width, then the keep coin U below
//         wKeep + wOther (kept iff U < wKeep);
//   FLH:  row j = U below num_hashes, then GRR's U below T over [g].
// (U below T: a word w < floor(2^64 / T) T gives w mod T, else the next word.)

import { blake2b } from './blake2b.js';
import { crExp, exactRatio } from './exact.js';
import { hashParameters, mix64, optimalHashRange } from './hashing.js';
import {
  MECHANISMS,
  RR_MAX_EPSILON,
  grrFromUniform,
  indexDtype,
  rrWeights,
  unaryThresholds,
  unaryPrivacyLoss,
} from './mechanisms.js';
import { checkEpsilon, checkInteger, ratioLoss, uniformBelow } from './numeric.js';
import { secureCoins } from './random.js';

/** Version of the item-key format (_items.ITEM_KEY_FORMAT). */
export const ITEM_KEY_FORMAT = 'ldpkit.item/1';
const PERSON = new TextEncoder().encode('ldpkit.item.v1');
const MASK64 = (1n << 64n) - 1n;

// positions of a 64-bit word's high and low 32-bit halves in a Uint32Array view
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
const HI = LITTLE_ENDIAN ? 1 : 0;
const LO = 1 - HI;

/** Largest sketch width and depth (sketch.MAX_WIDTH, MAX_DEPTH), FLH family (MAX_HASHES). */
export const MAX_WIDTH = 1 << 20;
export const MAX_DEPTH = 1 << 20;
export const MAX_HASHES = 1 << 20;
/** Cap of FLH's default hash range (flh.DEFAULT_MAX_RANGE). */
export const FLH_DEFAULT_MAX_RANGE = 1 << 12;

/** The tagged bytes of an item: "s" + UTF-8, or "i" + two's complement big-endian. */
export function itemBytes(item) {
  if (typeof item === 'string') {
    // TextEncoder would replace a lone surrogate by U+FFFD; Python's UTF-8 refuses it
    if (/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(item)) {
      throw new RangeError(`values must be strings encodable as UTF-8, got ${JSON.stringify(item)}`);
    }
    const utf8 = new TextEncoder().encode(item);
    const out = new Uint8Array(utf8.length + 1);
    out[0] = 0x73; // "s"
    out.set(utf8, 1);
    return out;
  }
  let x;
  if (typeof item === 'bigint') x = item;
  else if (typeof item === 'number' && Number.isSafeInteger(item)) x = BigInt(item);
  else {
    throw new TypeError(`values must be strings or integers (safe integers or BigInts), got ${String(item)}`);
  }
  const bitLength = (x < 0n ? -x : x).toString(2).length - (x === 0n ? 1 : 0);
  const size = Math.floor((bitLength + 8) / 8); // Python: (x.bit_length() + 8) // 8
  let u = x < 0n ? (1n << BigInt(8 * size)) + x : x; // two's complement in `size` bytes
  const out = new Uint8Array(size + 1);
  out[0] = 0x69; // "i"
  for (let i = size; i >= 1; i--) {
    out[i] = Number(u & 0xffn);
    u >>= 8n;
  }
  return out;
}

/** The 64-bit key (BigInt) of one item: BLAKE2b-8, person "ldpkit.item.v1", little-endian. */
export function itemKey(item) {
  const d = blake2b(itemBytes(item), 8, PERSON);
  let k = 0n;
  for (let i = 7; i >= 0; i--) k = (k << 8n) | BigInt(d[i]);
  return k;
}

/** h_row(key) in [0, width): x = mix64(a_row key + b_row mod 2^64), ((x >> 32) width) >> 32. */
export function rowHash(row, key, width) {
  const [a, b] = hashParameters(BigInt(row));
  const x = mix64((a * BigInt.asUintN(64, key) + b) & MASK64);
  return Number(((x >> 32n) * BigInt(width)) >> 32n);
}

/** Shared parts of CMS, HCMS and FLH: the optional closed domain and the keys of a batch. */
class OpenDomainOracle {
  constructor(domainSize) {
    this.domainSize = domainSize == null ? null : checkInteger(domainSize, 'domain_size', 2, Number.MAX_SAFE_INTEGER);
  }
  /** One key per value, every value checked before any coin; each distinct item hashed once. */
  keys(values) {
    const cache = new Map();
    return values.map((v) => {
      if (typeof v === 'boolean') throw new TypeError(`values must be strings or integers, got ${v}`);
      if (this.domainSize !== null && !(Number.isInteger(v) && v >= 0 && v < this.domainSize)) {
        throw new RangeError(`values must be integers in [0, ${this.domainSize}), got ${String(v)}`);
      }
      // strings and numbers apart ("1" and 1 are different items); BigInts as numbers when safe
      const tag = typeof v === 'string' ? `s${v}` : `i${String(v)}`;
      let k = cache.get(tag);
      if (k === undefined) {
        k = itemKey(v);
        cache.set(tag, k);
      }
      return k;
    });
  }
}

function checkShape(width, depth) {
  return [checkInteger(width, 'width', 2, MAX_WIDTH), checkInteger(depth, 'depth', 1, MAX_DEPTH)];
}

/** Apple's count-mean sketch (sketch.CMS): a row, then `width` bits at eps/2 each. */
export class CMS extends OpenDomainOracle {
  static PARAMS = ['epsilon', 'domain_size', 'width', 'depth'];
  constructor({ epsilon, width = 1024, depth = 256, domain_size = null }) {
    super(domain_size);
    this.epsilon = checkEpsilon(epsilon, 50.0);
    [this.width, this.depth] = checkShape(width, depth);
    const t = crExp(-this.epsilon / 2.0); // correctly rounded, as _crmath.exp
    [this.truePerm, this.otherPerm] = unaryThresholds(1.0 / (1.0 + t), t / (1.0 + t), this.epsilon);
    // thresholds < 2^64 as 32-bit halves (a word w < T iff (w_hi, w_lo) < (T_hi, T_lo))
    this.trueHalves = [Number(this.truePerm >> 32n), Number(this.truePerm & 0xffffffffn)];
    this.otherHalves = [Number(this.otherPerm >> 32n), Number(this.otherPerm & 0xffffffffn)];
  }
  privacyLoss() {
    return unaryPrivacyLoss(this.truePerm, this.otherPerm);
  }
  /**
   * One report's packed bits (np.packbits order) from `width` 64-bit words (a
   * BigUint64Array): bit b set iff word_b < T (T_p at b = h, T_q elsewhere). The words are
   * compared as (high, low) 32-bit halves, exactly and without a BigInt per bit.
   */
  bitsFromWords(h, words) {
    const w32 = new Uint32Array(words.buffer, words.byteOffset, 2 * this.width);
    const out = new Array((this.width + 7) >> 3).fill(0);
    const [qHi, qLo] = this.otherHalves;
    for (let b = 0; b < this.width; b++) {
      const hi = w32[2 * b + HI];
      if (hi < qHi || (hi === qHi && w32[2 * b + LO] < qLo)) out[b >> 3] |= 0x80 >> (b & 7);
    }
    // the hashed bit against T_p instead (its word was compared with T_q above)
    const [pHi, pLo] = this.trueHalves;
    const hi = w32[2 * h + HI];
    out[h >> 3] &= ~(0x80 >> (h & 7));
    if (hi < pHi || (hi === pHi && w32[2 * h + LO] < pLo)) out[h >> 3] |= 0x80 >> (h & 7);
    return out;
  }
  randomize(values, coins = secureCoins) {
    const keys = this.keys(values);
    const rows = [];
    const data = keys.map((k) => {
      const j = Number(uniformBelow(BigInt(this.depth), coins));
      rows.push(j);
      return this.bitsFromWords(rowHash(j, k, this.width), coins.u64Array(this.width));
    });
    return {
      rows: { dtype: indexDtype(this.depth), shape: [rows.length], data: rows },
      bits: { dtype: '|u1', shape: [data.length, (this.width + 7) >> 3], data },
    };
  }
}

function popcount32(x) {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (((x + (x >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
}

/** Apple's Hadamard count-mean sketch (sketch.HCMS): one randomized sign per report. */
export class HCMS extends OpenDomainOracle {
  static PARAMS = ['epsilon', 'domain_size', 'width', 'depth'];
  constructor({ epsilon, width = 1024, depth = 256, domain_size = null }) {
    super(domain_size);
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    [this.width, this.depth] = checkShape(width, depth);
    if (this.width & (this.width - 1)) {
      throw new RangeError(`width must be a power of two in [2, ${MAX_WIDTH}], got ${width}`);
    }
    [this.wKeep, this.wOther] = rrWeights(this.epsilon, 1);
    this.total = this.wKeep + this.wOther;
    this.limit = ((1n << 64n) / this.total) * this.total;
    this.p = exactRatio(this.wKeep, this.total);
  }
  privacyLoss() {
    return ratioLoss(this.wOther, this.wKeep);
  }
  /** The sent bit (1 for +1) of hashed value h at coefficient l and keep coin U. */
  sign(h, l, u) {
    const plus = (popcount32(l & h) & 1) === 0; // H[l, h] = +1 (Sylvester order)
    return plus === (u < this.wKeep) ? 1 : 0;
  }
  randomize(values, coins = secureCoins) {
    const keys = this.keys(values);
    const n = keys.length;
    const [rows, index, bits] = [new Array(n), new Array(n), new Array(n)];
    keys.forEach((k, i) => {
      rows[i] = Number(uniformBelow(BigInt(this.depth), coins));
      index[i] = Number(uniformBelow(BigInt(this.width), coins));
      bits[i] = this.sign(rowHash(rows[i], k, this.width), index[i], uniformBelow(this.total, coins, this.limit));
    });
    return {
      rows: { dtype: indexDtype(this.depth), shape: [n], data: rows },
      index: { dtype: indexDtype(this.width), shape: [n], data: index },
      bits: { dtype: '|u1', shape: [n], data: bits },
    };
  }
}

/** Fast local hashing (flh.FLH): a public row of a fixed family, then GRR over [g]. */
export class FLH extends OpenDomainOracle {
  static PARAMS = ['epsilon', 'domain_size', 'num_hashes', 'hash_range'];
  constructor({ epsilon, num_hashes = 1024, hash_range = null, domain_size = null }) {
    super(domain_size);
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    this.numHashes = checkInteger(num_hashes, 'num_hashes', 1, MAX_HASHES);
    this.g = hash_range == null
      ? Math.min(optimalHashRange(this.epsilon), FLH_DEFAULT_MAX_RANGE)
      : checkInteger(hash_range, 'hash_range', 2, 2 ** 32);
    [this.wKeep, this.wOther] = rrWeights(this.epsilon, this.g - 1);
    this.total = this.wKeep + BigInt(this.g - 1) * this.wOther;
    this.limit = ((1n << 64n) / this.total) * this.total;
    this.p = exactRatio(this.wKeep, this.total);
  }
  privacyLoss() {
    return ratioLoss(this.wOther, this.wKeep);
  }
  randomize(values, coins = secureCoins) {
    const keys = this.keys(values);
    const n = keys.length;
    const [rows, data] = [new Array(n), new Array(n)];
    keys.forEach((k, i) => {
      rows[i] = Number(uniformBelow(BigInt(this.numHashes), coins));
      const u = uniformBelow(this.total, coins, this.limit);
      data[i] = grrFromUniform(rowHash(rows[i], k, this.g), this.g, this.wKeep, this.wOther, u);
    });
    return {
      rows: { dtype: indexDtype(this.numHashes), shape: [n], data: rows },
      values: { dtype: indexDtype(this.g), shape: [n], data },
    };
  }
}

// fromSpec (mechanisms.js) finds them by name; registered here, since mechanisms.js does not
// import this module (no import cycle)
Object.assign(MECHANISMS, { CMS, HCMS, FLH });
