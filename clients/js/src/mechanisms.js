// The randomizers of ldpkit's frequency oracles, producing the arrays of the JSON wire
// format (ldpkit.io.reports_to_dict). Every coin is exact, as on the Python side:
// a randomized-response coin is one uniform integer below an integer total <= 2^62 (drawn
// from 64-bit words by rejection) against the integer weights of _exact.rr_weights, and a
// unary bit is a 64-bit word against an integer threshold T (P = T / 2^64). The weights and
// thresholds come from correctly rounded constants (exact.js), so they equal Python's bit
// for bit; the shared vectors (tests/vectors) check this and the reports of fixed words.

import { localHash, mixItemKey, optimalHashRange } from './hashing.js';
import { crExp, crLog1p, exactRatio } from './exact.js';
import {
  DiscreteSquareWave,
  HybridMechanism,
  PiecewiseMechanism,
  SquareWave,
  StochasticRounding,
  checkBounds,
  checkEpsilon,
  checkInteger,
  checkNumber,
  ratioLoss,
  ratioWeights,
  uniformBelow,
} from './numeric.js';
import { secureCoins } from './random.js';
import * as sets from './sets.js';

const SCALE = 1n << 64n;

/** numpy dtype string of the smallest unsigned type holding 0..size-1 (index_dtype). */
export function indexDtype(size) {
  if (size - 1 <= 0xff) return '|u1';
  if (size - 1 <= 0xffff) return '<u2';
  if (size - 1 <= 0xffffffff) return '<u4';
  return '<u8';
}

function checkDomain(d, high = 2 ** 32) {
  if (!Number.isInteger(d) || d < 2 || d > high) {
    throw new RangeError(`domain_size must be an integer in [2, ${high}], got ${d}`);
  }
  return d;
}

function checkValue(v, d) {
  if (!Number.isInteger(v) || v < 0 || v >= d) {
    throw new RangeError(`value must be an integer in [0, ${d}), got ${v}`);
  }
  return v;
}

/** Largest epsilon of the randomized-response coins (_exact.RR_MAX_EPSILON). */
export const RR_MAX_EPSILON = 40.0;

/** Largest epsilon of OUE (unary.OUE.max_epsilon: q ~ e^-eps still has 2^44 / 2^64). */
export const OUE_MAX_EPSILON = 30.0;

/**
 * _exact.rr_weights: BigInts [wKeep, wOther], wKeep / wOther <= e^eps, with
 * nFavoured * wKeep + nOthers * wOther <= 2^62 (the same integers as Python's).
 */
export function rrWeights(epsilon, nOthers, nFavoured = 1) {
  const [wOther, wKeep] = ratioWeights(epsilon, nOthers, nFavoured);
  return [wKeep, wOther];
}

/**
 * GRR over [size] with integer weights (grr.grr_sample) for one user: U uniform in
 * [0, T), T = wKeep + (size - 1) wOther; U < wKeep keeps v, else (U - wKeep) // wOther
 * indexes the size - 1 other items.
 */
export function grrFromUniform(v, size, wKeep, wOther, u) {
  if (u < wKeep) return v;
  const other = Number((u - wKeep) / wOther);
  return other >= v ? other + 1 : other;
}

/** Generalized randomized response (FO17 section 4.1), exact integer coins. */
export class GRR {
  static PARAMS = ['epsilon', 'domain_size'];
  constructor({ epsilon, domain_size }) {
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    this.domainSize = checkDomain(domain_size, 2 ** 53);
    [this.wKeep, this.wOther] = rrWeights(this.epsilon, this.domainSize - 1);
    this.total = this.wKeep + BigInt(this.domainSize - 1) * this.wOther;
    this.limit = ((1n << 64n) / this.total) * this.total; // rejection limit of the coin words
    // realized probabilities (what Python's p, q and privacy_loss() use)
    this.p = exactRatio(this.wKeep, this.total);
    this.q = exactRatio(this.wOther, this.total);
  }
  privacyLoss() {
    return ratioLoss(this.wOther, this.wKeep);
  }
  randomize(values, coins = secureCoins) {
    const data = values.map((v) =>
      grrFromUniform(
        checkValue(v, this.domainSize),
        this.domainSize,
        this.wKeep,
        this.wOther,
        uniformBelow(this.total, coins, this.limit),
      ),
    );
    return { values: { dtype: indexDtype(this.domainSize), shape: [data.length], data } };
  }
}

/** log(p (1 - q) / (q (1 - p))) at thresholds (T_p, T_q), as unary_privacy_loss. */
export function unaryPrivacyLoss(big, small) {
  if (small <= 0n || big >= SCALE) return Infinity;
  const num = big * (SCALE - small);
  const den = small * (SCALE - big);
  return crLog1p(exactRatio(num - den, den)); // correctly rounded, as unary.py
}

/** Integer thresholds (T_p, T_q) at resolution 2^-64 within epsilon (unary_thresholds). */
export function unaryThresholds(p, q, epsilon) {
  let big = BigInt(Math.floor(p * 2 ** 64));
  if (big > SCALE - 1n) big = SCALE - 1n;
  let small = BigInt(Math.ceil(q * 2 ** 64));
  if (small < 1n) small = 1n;
  const limit = epsilon - 4 * ulp(epsilon);
  if (big > small && unaryPrivacyLoss(big, small) > limit) {
    let lo = small;
    let hi = big;
    while (hi - lo > 1n) {
      const mid = (lo + hi) / 2n;
      if (unaryPrivacyLoss(big, mid) <= limit) hi = mid;
      else lo = mid;
    }
    small = hi;
  }
  if (big <= small) {
    throw new RangeError(`epsilon ${epsilon} is too small for unary encoding at 2^-64 resolution`);
  }
  return [big, small];
}

function ulp(x) {
  const buf = new DataView(new ArrayBuffer(8));
  buf.setFloat64(0, x);
  buf.setBigUint64(0, buf.getBigUint64(0) + 1n);
  return buf.getFloat64(0) - x;
}

/** Pack 0/1 bits into bytes, first bit as the most significant (np.packbits). */
export function packBits(bits) {
  const out = new Array((bits.length + 7) >> 3).fill(0);
  bits.forEach((b, i) => {
    if (b) out[i >> 3] |= 0x80 >> (i & 7);
  });
  return out;
}

/** Optimized unary encoding (FO17 section 4.3): bit v kept w.p. 1/2, others set w.p. 1/(e^eps+1). */
export class OUE {
  static PARAMS = ['epsilon', 'domain_size'];
  constructor({ epsilon, domain_size }) {
    this.epsilon = checkEpsilon(epsilon, OUE_MAX_EPSILON);
    this.domainSize = checkDomain(domain_size, 2 ** 24);
    const t = crExp(-this.epsilon); // correctly rounded: Python's nominal_q, bit for bit
    [this.truePerm, this.otherPerm] = unaryThresholds(0.5, t / (1 + t), this.epsilon);
  }
  /** log(p (1 - q) / (q (1 - p))) at the realized thresholds (unary_privacy_loss). */
  privacyLoss() {
    return unaryPrivacyLoss(this.truePerm, this.otherPerm);
  }
  /** One report's packed bits from d uniform 64-bit words: bit j set iff word_j < T. */
  bitsFromWords(v, words) {
    const bits = new Array(this.domainSize);
    for (let j = 0; j < this.domainSize; j++) {
      bits[j] = words[j] < (j === v ? this.truePerm : this.otherPerm) ? 1 : 0;
    }
    return packBits(bits);
  }
  randomize(values, coins = secureCoins) {
    const data = values.map((v) =>
      this.bitsFromWords(checkValue(v, this.domainSize), coins.u64Array(this.domainSize)),
    );
    const width = (this.domainSize + 7) >> 3;
    return { bits: { dtype: '|u1', shape: [data.length, width], data } };
  }
}

/** Optimized local hashing (FO17 section 4.5): a fresh hash seed, then GRR over [g]. */
export class OLH {
  static PARAMS = ['epsilon', 'domain_size', 'hash_range', 'mix_items'];
  constructor({ epsilon, domain_size, hash_range = null, mix_items = true }) {
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    this.domainSize = checkDomain(domain_size);
    if (typeof mix_items !== 'boolean') {
      throw new TypeError(`mix_items must be true or false, got ${JSON.stringify(mix_items)}`);
    }
    // hash the item's mixed key, as Python's OLH() does by default (a spec dict without
    // mix_items means the item itself, the earlier wire format: fromSpec passes false)
    this.mixItems = mix_items;
    this.g = hash_range == null ? optimalHashRange(this.epsilon) : hash_range;
    if (!Number.isInteger(this.g) || this.g < 2 || this.g > 2 ** 32) {
      throw new RangeError(`hash_range must be an integer in [2, ${2 ** 32}], got ${hash_range}`);
    }
    [this.wKeep, this.wOther] = rrWeights(this.epsilon, this.g - 1);
    this.total = this.wKeep + BigInt(this.g - 1) * this.wOther;
    this.limit = ((1n << 64n) / this.total) * this.total;
    this.p = exactRatio(this.wKeep, this.total);
  }
  privacyLoss() {
    return ratioLoss(this.wOther, this.wKeep);
  }
  randomize(values, coins = secureCoins) {
    const seeds = [];
    const data = [];
    for (const v of values) {
      checkValue(v, this.domainSize);
      const seed = coins.u64();
      seeds.push(seed.toString()); // decimal string: exact past 2^53
      // the seed is public, the coin secret: independent words (crypto.getRandomValues)
      const u = uniformBelow(this.total, coins, this.limit);
      const key = this.mixItems ? mixItemKey(v) : v;
      data.push(grrFromUniform(localHash(seed, key, this.g), this.g, this.wKeep, this.wOther, u));
    }
    return {
      seeds: { dtype: '<u8', shape: [seeds.length], data: seeds },
      values: { dtype: indexDtype(this.g), shape: [data.length], data },
    };
  }
}

function popcount32(x) {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (((x + (x >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
}

/** Hadamard response (Acharya, Sun, Zhang 2019): y uniform in C_v w.p. e^eps/(e^eps+1). */
export class HadamardResponse {
  static PARAMS = ['epsilon', 'domain_size'];
  constructor({ epsilon, domain_size }) {
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    this.domainSize = checkDomain(domain_size, 2 ** 31 - 1);
    this.size = 2 ** this.domainSize.toString(2).length; // K = 2^bit_length(d)
    [this.wKeep, this.wFlip] = rrWeights(this.epsilon, 1);
    this.total = this.wKeep + this.wFlip;
    this.limit = ((1n << 64n) / this.total) * this.total;
    this.p = exactRatio(this.wKeep, this.total);
  }
  privacyLoss() {
    return ratioLoss(this.wFlip, this.wKeep);
  }
  /** y from a uniform index j in [K] and U uniform in [0, wKeep + wFlip) (hadamard.py). */
  respond(v, j, u) {
    const row = v + 1;
    const wantInside = u < this.wKeep;
    const inside = (popcount32(row & j) & 1) === 0;
    return inside !== wantInside ? (j ^ (row & -row)) >>> 0 : j;
  }
  randomize(values, coins = secureCoins) {
    const data = values.map((v) => {
      checkValue(v, this.domainSize);
      const j = Number(coins.u64() & BigInt(this.size - 1));
      return this.respond(v, j, uniformBelow(this.total, coins, this.limit));
    });
    return { values: { dtype: indexDtype(this.size), shape: [data.length], data } };
  }
}

// --- hierarchical histogram and AutoDistribution (src/ldpkit/numeric/hierarchy.py, auto.py) ---

/** Largest number of (padded) leaves of a tree (hierarchy.MAX_LEAVES). */
const MAX_LEAVES = 1 << 24;

/** Oracles the JS client's hierarchical histogram can use at a level (SW20's two). */
const LEVEL_ORACLES = { GRR, OLH };

/** Smallest h with branching^h >= buckets (hierarchy._tree_height). */
function treeHeight(buckets, branching) {
  let h = 0;
  for (let size = 1; size < buckets; size *= branching) h++;
  return h;
}

/** SW20's oracle of a level of `size` nodes: GRR when size < 3 e^eps + 2, else OLH (binning.cfo_oracle). */
function cfoOracleName(epsilon, size) {
  // crExp: the same double as Python's math.exp at a boundary (size is an integer)
  return epsilon > 50.0 || size < 3.0 * crExp(epsilon) + 2.0 ? 'GRR' : 'OLH';
}

/**
 * Hierarchical histogram (Kulkarni, Cormode, Srivastava, PVLDB 2019; SW20 section 4.2;
 * hierarchy.HierarchicalHistogram): a B-ary tree over `buckets` equal buckets of
 * [low, high]; each user draws her level k in 1..h uniformly (independently of her value)
 * and reports the node holding her value at that level through the level's oracle with
 * the full budget: GRR or OLH by SW20's rule, or the one `oracle` names (GRR or OLH here;
 * the Python side's other compact oracles are refused rather than sent wrong).
 */
export class HierarchicalHistogram {
  static PARAMS = ['epsilon', 'low', 'high', 'buckets', 'branching', 'oracle'];
  constructor({ epsilon, low = 0.0, high = 1.0, buckets = 1024, branching = 4, oracle = null }) {
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    checkBounds(low, high);
    this.low = low;
    this.high = high;
    this.buckets = checkInteger(buckets, 'buckets', 2, MAX_LEAVES);
    this.branching = checkInteger(branching, 'branching', 2, MAX_LEAVES);
    if (oracle !== null && !(oracle in LEVEL_ORACLES)) {
      throw new RangeError(`oracle must be null or one of ${Object.keys(LEVEL_ORACLES).join(', ')} in the JS client, got ${oracle}`);
    }
    this.height = treeHeight(this.buckets, this.branching);
    if (this.branching ** this.height > MAX_LEAVES) {
      throw new RangeError(`buckets must give at most ${MAX_LEAVES} (padded) leaves for branching ${this.branching}, got ${this.buckets}`);
    }
    // levels[k - 1]: the oracle of depth k (B^k nodes), built now so that a bad epsilon is
    // refused here, as on the Python side
    this.levels = [];
    for (let k = 1; k <= this.height; k++) {
      const size = this.branching ** k;
      const name = oracle ?? cfoOracleName(this.epsilon, size);
      const o = new LEVEL_ORACLES[name]({ epsilon: this.epsilon, domain_size: size });
      o.name = name;
      o.span = this.branching ** (this.height - k); // leaves per node
      this.levels.push(o);
    }
    this.hasSeeds = this.levels.some((o) => o.name === 'OLH');
    // numpy's result_type of the levels' report dtypes: the widest index dtype
    this.valuesDtype = indexDtype(Math.max(...this.levels.map((o) => (o.name === 'OLH' ? o.g : o.domainSize))));
  }
  /** The leaf (equal bucket of [low, high]) of a checked value (distribution.bucket_index). */
  leafIndex(v) {
    const idx = Math.trunc((v - this.low) * (this.buckets / (this.high - this.low)));
    return Math.min(Math.max(idx, 0), this.buckets - 1);
  }
  /** The loss of the level oracles' largest (the level is drawn independently of the value). */
  privacyLoss() {
    return Math.max(...this.levels.map((o) => o.privacyLoss()));
  }
  /**
   * One user's report {level, item, seed} for a checked value: the level from one uniform
   * integer below h (64-bit words by rejection), capped at `top` (AutoDistribution's
   * hybrid: hhTopLevel), then the level oracle's report of her node (GRR: U;
   * OLH: a fresh public seed word, then U), as GRR.randomize / OLH.randomize draw.
   */
  reportOne(v, coins, top = this.height) {
    const k = Math.min(1 + Number(uniformBelow(BigInt(this.height), coins)), top);
    const o = this.levels[k - 1];
    const node = Math.floor(this.leafIndex(v) / o.span);
    if (o.name === 'GRR') {
      const u = uniformBelow(o.total, coins, o.limit);
      return { level: k, item: grrFromUniform(node, o.domainSize, o.wKeep, o.wOther, u), seed: '0' };
    }
    const seed = coins.u64();
    const u = uniformBelow(o.total, coins, o.limit);
    return { level: k, item: grrFromUniform(localHash(seed, node, o.g), o.g, o.wKeep, o.wOther, u), seed: seed.toString() };
  }
  randomize(values, coins = secureCoins) {
    values.forEach((v) => checkNumber(v, this.low, this.high)); // all checked before any coin
    const reports = values.map((v) => this.reportOne(v, coins));
    const n = reports.length;
    const out = {
      levels: { dtype: '|u1', shape: [n], data: reports.map((r) => r.level) },
      values: { dtype: this.valuesDtype, shape: [n], data: reports.map((r) => r.item) },
    };
    if (this.hasSeeds) out.seeds = { dtype: '<u8', shape: [n], data: reports.map((r) => r.seed) };
    return out;
  }
}

/** Branching factor of AutoDistribution's tree (auto.HH_BRANCHING). */
export const HH_BRANCHING = 4;

/** auto.default_buckets: 2^clip(ceil(log2(n) / 2) + 2, 6, 10); 1024 without n. */
export function defaultBuckets(expectedN = null) {
  if (expectedN === null) return 1024;
  checkInteger(expectedN, 'expected_n', 1, Number.MAX_SAFE_INTEGER);
  // ceil(log2(n) / 2) = the smallest m with 4^m >= n, in integers (no log2 rounding)
  let m = 0;
  while (4 ** m < expectedN) m++;
  const level = expectedN > 1 ? m + 2 : 0;
  return 1 << Math.min(10, Math.max(6, level));
}

/** auto.HH_MAX_NODES: the hybrid's HH users report at levels of at most this many nodes. */
export const HH_MAX_NODES = 1024;

/**
 * auto.hh_top_level: the finest level a hybrid HH user reports at, the finest of the tree's
 * levels with at most HH_MAX_NODES nodes (at least 1): her level is uniform over 1..h with
 * the finer levels' shares moved to that one (uniform up to d = 1024; d = 4096: level 6's to 5).
 */
export function hhTopLevel(height, branching = HH_BRANCHING) {
  let top = 1;
  while (top < height && branching ** (top + 1) <= HH_MAX_NODES) top++;
  return top;
}

/** auto.default_hh_share: 0.25 at every epsilon. */
export function defaultHhShare(epsilon) {
  checkEpsilon(epsilon, Infinity);
  return 0.25;
}

/**
 * AutoDistribution's client (auto.AutoDistribution.randomize). With hh_share = 0 it is
 * exactly SquareWave (same coins, same body: {values}). With hh_share = r > 0 every user
 * first draws HH with probability r from one uniform that never sees her value, then sends
 * ONE report with the full epsilon: a Square Wave report, or a hierarchical-histogram
 * report (B = 4 over the same buckets; levels up to hhTopLevel). Fields: levels (0 for SW, else the HH level),
 * values (the SW report; 0 for HH users), items (the level oracle's report; 0 for SW
 * users) and, when some level uses OLH, seeds (decimal strings; 0 for the others).
 */
export class AutoDistribution {
  static PARAMS = ['epsilon', 'low', 'high', 'expected_n', 'buckets', 'hh_share'];
  constructor({ epsilon, low = 0.0, high = 1.0, expected_n = null, buckets = null, hh_share = null }) {
    this.epsilon = checkEpsilon(epsilon, 40.0); // SquareWave's max_epsilon
    if (expected_n !== null) checkInteger(expected_n, 'expected_n', 1, Number.MAX_SAFE_INTEGER);
    this.buckets = buckets === null ? defaultBuckets(expected_n) : checkInteger(buckets, 'buckets', 2, 1 << 20);
    this.wave = new SquareWave({ epsilon, low, high, buckets: this.buckets });
    this.low = low;
    this.high = high;
    if (hh_share !== null && !(typeof hh_share === 'number' && hh_share >= 0 && hh_share <= 1)) {
      throw new RangeError(`hh_share must be a number in [0, 1], got ${hh_share}`);
    }
    this.hhShare = hh_share === null ? defaultHhShare(this.epsilon) : hh_share;
    this.tree = this.hhShare > 0
      ? new HierarchicalHistogram({ epsilon, low, high, buckets: this.buckets, branching: HH_BRANCHING })
      : null;
  }
  privacyLoss() {
    const loss = this.wave.privacyLoss();
    return this.tree ? Math.max(loss, this.tree.privacyLoss()) : loss;
  }
  randomize(values, coins = secureCoins) {
    if (this.tree === null) return this.wave.randomize(values, coins);
    values.forEach((v) => checkNumber(v, this.low, this.high)); // all checked before any coin
    const n = values.length;
    const levels = new Array(n);
    const out = new Array(n);
    const items = new Array(n);
    const seeds = new Array(n);
    values.forEach((v, i) => {
      // the branch coin: a uniform double against r, drawn before and apart from the value
      if (coins.uniform() < this.hhShare) {
        const r = this.tree.reportOne(v, coins, hhTopLevel(this.tree.height));
        [levels[i], out[i], items[i], seeds[i]] = [r.level, 0.0, r.item, r.seed];
      } else {
        [levels[i], out[i], items[i], seeds[i]] = [0, this.wave.randomizeOne(v, coins), 0, '0'];
      }
    });
    const fields = {
      levels: { dtype: '|u1', shape: [n], data: levels },
      values: { dtype: '<f8', shape: [n], data: out },
      items: { dtype: '<i8', shape: [n], data: items },
    };
    if (this.tree.hasSeeds) fields.seeds = { dtype: '<u8', shape: [n], data: seeds };
    return fields;
  }
}

export const MECHANISMS = {
  GRR,
  OUE,
  OLH,
  HadamardResponse,
  SquareWave,
  DiscreteSquareWave,
  StochasticRounding,
  PiecewiseMechanism,
  HybridMechanism,
  HierarchicalHistogram,
  AutoDistribution,
};
// the set-valued family (sets.js builds on this module's oracles, so it is looked up when
// used: either module may be imported first)
for (const name of ['PaddingSampling', 'PCKV', 'PrivKV', 'PrivSet']) {
  Object.defineProperty(MECHANISMS, name, { get: () => sets[name], enumerable: true });
}

/** The randomizer for a spec dict {mechanism, params} (ldpkit Mechanism.to_dict()). */
export function fromSpec(spec) {
  const cls = MECHANISMS[spec.mechanism];
  if (cls === undefined) {
    throw new Error(
      `mechanism must be one of ${Object.keys(MECHANISMS).join(', ')}, got ${spec.mechanism}`,
    );
  }
  // A parameter this client does not know would be ignored by the constructor, and the
  // reports sent under the spec's fingerprint would mean something else (an older client
  // given OLH's mix_items): refuse it instead. Each class declares PARAMS, the Python spec's
  // field names (tests/vectors/params.json; clients/js/test/params.test.js checks them).
  let params = spec.params ?? {};
  // Python leaves mix_items out of a spec dict when it is false (the wire format from before
  // it existed), while a hand-built spec mixes by default: absent here means false.
  if (cls.PARAMS.includes('mix_items') && !('mix_items' in params)) params = { ...params, mix_items: false };
  const unknown = Object.keys(params).filter((k) => !cls.PARAMS.includes(k));
  if (unknown.length > 0) {
    throw new Error(
      `params of ${spec.mechanism} must be among ${cls.PARAMS.join(', ')}, got ${unknown.join(', ')} ` +
        '(the spec is newer than this client: update the client)',
    );
  }
  return new cls(params);
}
