// The longitudinal randomizers of ldpkit.longitudinal: L-GRR and the chained
// unary encodings L-OUE, L-OSUE, L-SUE, L-SOUE; LOLOHA; dBitFlipPM and 1BitMean. A report chains a *permanent* round (budget
// epsilon_inf, memoized per value by a Device: device.js) and a fresh *instantaneous* round
// (one report: epsilon_1). The integer laws are Python's bit for bit (lgrr_weights,
// unary_round_thresholds: correctly rounded constants, exact BigInt losses), and the
// permanent round consumes 64-bit words in the order of Python's _permanent_from_words:
// L-GRR one uniform U in [0, T) (rejection), a unary encoding one word per bit.

import { crExp, crLog1p, exactRatio } from './exact.js';
import { localHash } from './hashing.js';
import {
  MECHANISMS,
  RR_MAX_EPSILON,
  grrFromUniform,
  indexDtype,
  packBits,
  rrWeights,
  unaryPrivacyLoss,
  unaryThresholds,
} from './mechanisms.js';
import {
  SR_INPUT_STEPS,
  StochasticRounding,
  checkEpsilon,
  checkInteger,
  checkNumber,
  ratioLoss,
  roundToGrid,
  toUnit,
  uniformBelow,
} from './numeric.js';
import { secureCoins } from './random.js';

const SCALE = 1n << 64n;
const SCALE2 = 1n << 128n;

function checkDomain(d, high) {
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

function ulp(x) {
  const buf = new DataView(new ArrayBuffer(8));
  buf.setFloat64(0, x);
  buf.setBigUint64(0, buf.getBigUint64(0) + 1n);
  return buf.getFloat64(0) - x;
}

/** The budgets (epsilon_1 < epsilon_inf) of a longitudinal spec's params. */
function budgets({ epsilon, epsilon_inf }, maxInf, maxOne) {
  const one = checkEpsilon(epsilon, maxOne);
  const inf = checkEpsilon(epsilon_inf, maxInf);
  if (!(one < inf)) {
    throw new RangeError(`epsilon (epsilon_1) must be < epsilon_inf = ${inf}, got ${one}`);
  }
  return [one, inf];
}

/** log(P (1 - Q) / (Q (1 - P))) for P = big / scale, Q = small / scale (composite_loss). */
function compositeLoss(big, small, scale) {
  if (small <= 0n || big >= scale) return Infinity;
  const num = big * (scale - small);
  const den = small * (scale - big);
  return crLog1p(exactRatio(num - den, den));
}

/** lgrr_weights: [[a, b], [c, e]] (BigInts) of L-GRR's permanent and instantaneous GRR. */
export function lgrrWeights(epsilonInf, epsilon1, d) {
  const [a, b] = rrWeights(epsilonInf, d - 1);
  const t1 = a + BigInt(d - 1) * b;
  const p1 = exactRatio(a, t1);
  const q1 = exactRatio(b, t1);
  const growth = crExp(epsilon1);
  const denominator = p1 - growth * q1;
  const g = denominator > 0 ? (growth * (1.0 - q1) - (1.0 - p1)) / denominator : Infinity;
  if (!(g < crExp(RR_MAX_EPSILON))) {
    throw new RangeError(
      `epsilon (epsilon_1) must leave room below epsilon_inf = ${epsilonInf} at domain_size = ${d}, got ${epsilon1}`,
    );
  }
  let [c, e] = rrWeights(Math.max(crLog1p(g - 1.0), 1e-12), d - 1);
  const chainedLoss = (cc) => ratioLoss(b * cc + (t1 - b) * e, a * cc + (t1 - a) * e);
  while (c > e && chainedLoss(c) > epsilon1) {
    const step = c >> 50n;
    c -= step > 1n ? step : 1n;
  }
  return [
    [a, b],
    [c, e],
  ];
}

/** L-GRR: a memoized GRR answer at epsilon_inf, re-randomized by GRR (one report: epsilon_1). */
export class LGRR {
  static PARAMS = ['epsilon', 'domain_size', 'epsilon_inf'];
  constructor({ epsilon, epsilon_inf, domain_size }) {
    [this.epsilon, this.epsilonInf] = budgets({ epsilon, epsilon_inf }, RR_MAX_EPSILON, 30.0);
    this.domainSize = checkDomain(domain_size, 2 ** 53);
    const d = BigInt(this.domainSize - 1);
    [[this.a, this.b], [this.c, this.e]] = lgrrWeights(this.epsilonInf, this.epsilon, this.domainSize);
    this.t1 = this.a + d * this.b;
    this.t2 = this.c + d * this.e;
    this.keep = this.a * this.c + (this.t1 - this.a) * this.e;
    this.other = this.b * this.c + (this.t1 - this.b) * this.e;
    this.p = exactRatio(this.keep, this.t1 * this.t2);
    this.q = exactRatio(this.other, this.t1 * this.t2);
  }
  privacyLoss() {
    return ratioLoss(this.other, this.keep);
  }
  longitudinalPrivacyLoss(distinctValues = 1) {
    return Math.min(distinctValues, this.domainSize) * ratioLoss(this.b, this.a);
  }
  /** The permanent answer (an item) of value v from a word source {u64()}. */
  permanentFromWords(v, words) {
    return grrFromUniform(checkValue(v, this.domainSize), this.domainSize, this.a, this.b, uniformBelow(this.t1, words));
  }
  /** One fresh report of each permanent answer (the instantaneous GRR). */
  instantaneous(permanent, coins = secureCoins) {
    const data = permanent.map((y) =>
      grrFromUniform(checkValue(y, this.domainSize), this.domainSize, this.c, this.e, uniformBelow(this.t2, coins)),
    );
    return { values: { dtype: indexDtype(this.domainSize), shape: [data.length], data } };
  }
  /** Fresh two-round reports (no memo): permanent then instantaneous, from `coins`. */
  randomize(values, coins = secureCoins) {
    return this.instantaneous(values.map((v) => this.permanentFromWords(v, coins)), coins);
  }
}

function firstRound(kind, epsilonInf) {
  if (kind === 'oue') {
    const t = crExp(-epsilonInf);
    return unaryThresholds(0.5, t / (1.0 + t), epsilonInf);
  }
  const t = crExp(-epsilonInf / 2.0);
  return unaryThresholds(1.0 / (1.0 + t), t / (1.0 + t), epsilonInf);
}

/** unary_round_thresholds: [[Tp1, Tq1], [Tp2, Tq2]] (BigInts, units of 2^-64). */
export function unaryRoundThresholds(first, second, epsilonInf, epsilon1) {
  const [tp1, tq1] = firstRound(first, epsilonInf);
  const limit = epsilon1 - 4 * ulp(epsilon1);
  const loss = (tp2, tq2) =>
    compositeLoss(tp1 * tp2 + (SCALE - tp1) * tq2, tq1 * tp2 + (SCALE - tq1) * tq2, SCALE2);
  let top;
  if (second === 'oue') {
    const half = SCALE / 2n;
    top = loss(half, 1n);
    if (top > limit) {
      let lo = 1n;
      let hi = half;
      while (hi - lo > 1n) {
        const mid = (lo + hi) / 2n;
        if (loss(half, mid) <= limit) hi = mid;
        else lo = mid;
      }
      return [
        [tp1, tq1],
        [half, hi],
      ];
    }
  } else {
    top = loss(SCALE - 1n, 1n);
    if (top > limit) {
      let lo = SCALE / 2n;
      let hi = SCALE - 1n;
      while (hi - lo > 1n) {
        const mid = (lo + hi) / 2n;
        if (loss(mid, SCALE - mid) <= limit) lo = mid;
        else hi = mid;
      }
      return [
        [tp1, tq1],
        [lo, SCALE - lo],
      ];
    }
  }
  throw new RangeError(
    `epsilon (epsilon_1) must be < ${top} for epsilon_inf = ${epsilonInf} with this chaining, got ${epsilon1}`,
  );
}

/** Two chained unary encodings; reports are packed bits (reports.bits). */
class LongitudinalUnary {
  constructor({ epsilon, epsilon_inf, domain_size }, [first, second], maxInf, maxOne) {
    [this.epsilon, this.epsilonInf] = budgets({ epsilon, epsilon_inf }, maxInf, maxOne);
    this.domainSize = checkDomain(domain_size, 2 ** 24);
    [[this.tp1, this.tq1], [this.tp2, this.tq2]] = unaryRoundThresholds(first, second, this.epsilonInf, this.epsilon);
    this.big = this.tp1 * this.tp2 + (SCALE - this.tp1) * this.tq2;
    this.small = this.tq1 * this.tp2 + (SCALE - this.tq1) * this.tq2;
    this.p = exactRatio(this.big, SCALE2);
    this.q = exactRatio(this.small, SCALE2);
  }
  privacyLoss() {
    return compositeLoss(this.big, this.small, SCALE2);
  }
  longitudinalPrivacyLoss(distinctValues = 1) {
    return Math.min(distinctValues, this.domainSize) * unaryPrivacyLoss(this.tp1, this.tq1);
  }
  /** Packed permanent bits of value v: one word per bit, bit j = word < (j === v ? Tp1 : Tq1). */
  permanentFromWords(v, words) {
    checkValue(v, this.domainSize);
    const bits = new Array(this.domainSize);
    for (let j = 0; j < this.domainSize; j++) bits[j] = words.u64() < (j === v ? this.tp1 : this.tq1) ? 1 : 0;
    return packBits(bits);
  }
  /** One fresh report of each packed permanent row: bit j = word < (permanent bit ? Tp2 : Tq2). */
  instantaneous(permanent, coins = secureCoins) {
    const width = (this.domainSize + 7) >> 3;
    const data = permanent.map((row) => {
      if (!Array.isArray(row) || row.length !== width) {
        throw new RangeError(`permanent rows must be ${width} packed bytes, got ${row}`);
      }
      const words = coins.u64Array(this.domainSize);
      const bits = new Array(this.domainSize);
      for (let j = 0; j < this.domainSize; j++) {
        const set = (row[j >> 3] >> (7 - (j & 7))) & 1;
        bits[j] = words[j] < (set ? this.tp2 : this.tq2) ? 1 : 0;
      }
      return packBits(bits);
    });
    return { bits: { dtype: '|u1', shape: [data.length, width], data } };
  }
  randomize(values, coins = secureCoins) {
    return this.instantaneous(values.map((v) => this.permanentFromWords(v, coins)), coins);
  }
}

// max epsilon_inf and max epsilon_1 of each class, as the Python classes
export class LOUE extends LongitudinalUnary {
  static PARAMS = ['epsilon', 'domain_size', 'epsilon_inf'];
  constructor(params) {
    super(params, ['oue', 'oue'], 30.0, 29.5);
  }
}
export class LOSUE extends LongitudinalUnary {
  static PARAMS = ['epsilon', 'domain_size', 'epsilon_inf'];
  constructor(params) {
    super(params, ['oue', 'sue'], 30.0, 29.9);
  }
}
export class LSUE extends LongitudinalUnary {
  static PARAMS = ['epsilon', 'domain_size', 'epsilon_inf'];
  constructor(params) {
    super(params, ['sue', 'sue'], 50.0, 49.9);
  }
}
export class LSOUE extends LongitudinalUnary {
  static PARAMS = ['epsilon', 'domain_size', 'epsilon_inf'];
  constructor(params) {
    super(params, ['sue', 'oue'], 50.0, 25.5);
  }
}

/**
 * LOLOHA (Arcolezi, Pinzón, Palamidessi, Gambs, EDBT 2023): one hash seed per device
 * (kept), L-GRR over [g] of the hashed value, memoized per hashed value. The spec dict must
 * carry hash_range (Python's to_dict() writes the resolved g). Reports {seeds, values}.
 */
export class LOLOHA {
  static PARAMS = ['epsilon', 'domain_size', 'epsilon_inf', 'hash_range'];
  constructor({ epsilon, epsilon_inf, domain_size, hash_range }) {
    [this.epsilon, this.epsilonInf] = budgets({ epsilon, epsilon_inf }, RR_MAX_EPSILON, 30.0);
    this.domainSize = checkDomain(domain_size, 2 ** 32);
    if (!Number.isInteger(hash_range) || hash_range < 2 || hash_range > 2 ** 32) {
      throw new RangeError(`hash_range must be an integer in [2, ${2 ** 32}], got ${hash_range}`);
    }
    this.g = hash_range;
    const g1 = BigInt(this.g - 1);
    [[this.a, this.b], [this.c, this.e]] = lgrrWeights(this.epsilonInf, this.epsilon, this.g);
    this.t1 = this.a + g1 * this.b;
    this.t2 = this.c + g1 * this.e;
    this.keep = this.a * this.c + (this.t1 - this.a) * this.e;
    this.other = this.b * this.c + (this.t1 - this.b) * this.e;
    this.p = exactRatio(this.keep, this.t1 * this.t2);
  }
  privacyLoss() {
    return ratioLoss(this.other, this.keep);
  }
  longitudinalPrivacyLoss(distinctValues = 1) {
    return Math.min(distinctValues, this.g) * ratioLoss(this.b, this.a);
  }
  /** The device's hash seed (a BigInt) from its state words. */
  stateFromWords(words) {
    return words.u64();
  }
  /** The memo key of value v under the device's seed: its hashed value. */
  memoKey(v, seed) {
    return localHash(seed, checkValue(v, this.domainSize), this.g);
  }
  /** The permanent row [seed, answer] (decimal strings) of one hashed value. */
  permanentFromWords(key, words, seed) {
    const answer = grrFromUniform(key, this.g, this.a, this.b, uniformBelow(this.t1, words));
    return [seed.toString(), String(answer)];
  }
  instantaneous(permanent, coins = secureCoins) {
    const seeds = [];
    const data = [];
    for (const [seed, answer] of permanent) {
      seeds.push(String(seed));
      data.push(grrFromUniform(Number(answer), this.g, this.c, this.e, uniformBelow(this.t2, coins)));
    }
    return {
      seeds: { dtype: '<u8', shape: [seeds.length], data: seeds },
      values: { dtype: indexDtype(this.g), shape: [data.length], data },
    };
  }
  /** Fresh devices: per value a seed word, then the permanent answer, then the instantaneous round. */
  randomize(values, coins = secureCoins) {
    const permanent = values.map((v) => {
      const seed = coins.u64();
      return this.permanentFromWords(this.memoKey(v, seed), coins, seed);
    });
    return this.instantaneous(permanent, coins);
  }
}

// --- dBitFlipPM and 1BitMean (Ding, Kulkarni, Yekhanin, NeurIPS 2017) -----------------------
// A device keeps a per-device state (dBitFlipPM: its d sampled buckets; 1BitMean: its alpha)
// and memoizes its whole report per memo key (no instantaneous round): the permanent rows and
// the word order are Python's _device_state_from_words / _permanent_from_words.

/**
 * dBitFlipPM: d buckets sampled once per device (Floyd's algorithm), one bit per sampled
 * bucket (SUE's thresholds at epsilon), memoized per position of the value among the sampled
 * buckets (d when none holds it). Reports {buckets, bits}, shape [n, d].
 */
export class DBitFlipPM {
  static PARAMS = ['epsilon', 'domain_size', 'sampled_bits'];
  constructor({ epsilon, domain_size, sampled_bits = 1 }) {
    this.epsilon = checkEpsilon(epsilon, 50.0);
    this.domainSize = checkDomain(domain_size, 2 ** 32);
    this.sampledBits = checkInteger(sampled_bits, 'sampled_bits', 1, this.domainSize);
    const t = crExp(-this.epsilon / 2.0);
    [this.tp, this.tq] = unaryThresholds(1.0 / (1.0 + t), t / (1.0 + t), this.epsilon);
    // words a device precomputes: d draws below j + 1 <= 2^32 (a word is rejected with
    // probability < 2^-32, so 64 spare words run out with probability < 2^-2048); d bits
    this.stateWords = this.sampledBits + 64;
    this.permanentWords = this.sampledBits;
  }
  /** log(p (1-q) / (q (1-p))) for d >= 2 (two bits differ), log(p / q) for d = 1. */
  privacyLoss() {
    if (this.sampledBits >= 2) return unaryPrivacyLoss(this.tp, this.tq);
    return crLog1p(exactRatio(this.tp - this.tq, this.tq));
  }
  longitudinalPrivacyLoss(distinctValues = 1) {
    return Math.min(distinctValues, this.sampledBits + 1) * this.privacyLoss();
  }
  /** The device's sampled buckets (ascending Numbers): Floyd, t = below(j + 1) per draw. */
  stateFromWords(words) {
    const chosen = [];
    for (let j = this.domainSize - this.sampledBits; j < this.domainSize; j++) {
      const t = Number(uniformBelow(BigInt(j + 1), words));
      chosen.push(chosen.includes(t) ? j : t);
    }
    return chosen.sort((a, b) => a - b);
  }
  /** The memo key of value v: its position among the sampled buckets, d when not sampled. */
  memoKey(v, buckets) {
    const at = buckets.indexOf(checkValue(v, this.domainSize));
    return at < 0 ? this.sampledBits : at;
  }
  /** The permanent row [buckets..., bits...]: bit i is word < (i === key ? Tp : Tq). */
  permanentFromWords(key, words, buckets) {
    const bits = buckets.map((_, i) => (words.u64() < (i === key ? this.tp : this.tq) ? 1 : 0));
    return [...buckets, ...bits];
  }
  /** The reports of permanent rows (the memoized report itself: no second round). */
  instantaneous(permanent) {
    const d = this.sampledBits;
    for (const row of permanent) {
      if (!Array.isArray(row) || row.length !== 2 * d) {
        throw new RangeError(`permanent rows must be ${2 * d} integers, got ${row}`);
      }
    }
    const shape = [permanent.length, d];
    return {
      buckets: { dtype: indexDtype(this.domainSize), shape, data: permanent.map((r) => r.slice(0, d)) },
      bits: { dtype: '|u1', shape, data: permanent.map((r) => r.slice(d)) },
    };
  }
  /** Fresh devices: per value its buckets, then its bits (Python's word order). */
  randomize(values, coins = secureCoins) {
    return this.instantaneous(
      values.map((v) => {
        const buckets = this.stateFromWords(coins);
        return this.permanentFromWords(this.memoKey(v, buckets), coins, buckets);
      }),
    );
  }
}

/**
 * 1BitMean with alpha-point rounding: the SR law (one bit, +-C' on the [-1, 1] scale) at
 * the grid points k / s; a device draws alpha once and memoizes the bit per grid point
 * k = floor(x s) + [frac(x s) > alpha] (x on [0, 1]). Reports {values} as SR's.
 */
export class OneBitMean extends StochasticRounding {
  static PARAMS = ['epsilon', 'low', 'high', 'points'];
  constructor(params) {
    super(params);
    const s = checkInteger(params.points ?? 64, 'points', 1, SR_INPUT_STEPS);
    if (s & (s - 1)) throw new RangeError(`points must be a power of two in [1, ${SR_INPUT_STEPS}], got ${s}`);
    this.points = s;
    this.stateWords = 1;
    this.permanentWords = 64; // one U below T < 2^62 by rejection (each word: < 1/4)
  }
  longitudinalPrivacyLoss(distinctValues = 1) {
    return Math.min(distinctValues, this.points + 1) * this.privacyLoss();
  }
  /** The device's alpha, an integer in [0, 2^32) (alpha = state / 2^32): a word's top 32 bits. */
  stateFromWords(words) {
    return Number(words.u64() >> 32n);
  }
  /** x in [0, 1] times s (OneBitMean._unit, the same float operations). */
  scaled(v) {
    checkNumber(v, this.low, this.high);
    return ((toUnit(v, this.low, this.halfSpan) + 1.0) / 2.0) * this.points;
  }
  /** Alpha-point rounding: the grid point of v under the device's alpha. */
  memoKey(v, alpha) {
    const scaled = this.scaled(v);
    const low = Math.floor(scaled);
    return Math.min(low + ((scaled - low) * 2 ** 32 > alpha ? 1 : 0), this.points);
  }
  /** The memoized cell [1] (+C') or [0] (-C') of grid point k: SR's exact bit, U = below(T). */
  permanentFromWords(k, words) {
    const g = this.grid;
    const big = BigInt(k * (SR_INPUT_STEPS / this.points));
    const threshold = g.wLow * (BigInt(g.steps) - big) + g.wHigh * big;
    return [uniformBelow(g.total, words) < threshold ? 1 : 0];
  }
  instantaneous(permanent) {
    const data = permanent.map(([cell]) => this.fromUnit(cell ? this.grid.magnitude : -this.grid.magnitude));
    return { values: { dtype: '<f8', shape: [data.length], data } };
  }
  /** Fresh reports (Python's randomize): unbiased rounding to the s-grid (one uniform), then U. */
  randomize(values, coins = secureCoins) {
    return this.instantaneous(
      values.map((v) => {
        checkNumber(v, this.low, this.high);
        const k = roundToGrid((toUnit(v, this.low, this.halfSpan) + 1.0) / 2.0, this.points, coins.uniform());
        return this.permanentFromWords(k, coins);
      }),
    );
  }
}


export const LONGITUDINAL = { LGRR, LOUE, LOSUE, LSUE, LSOUE, LOLOHA, DBitFlipPM, OneBitMean };

/** A longitudinal randomizer from a spec dict {mechanism, params} (Mechanism.to_dict()). */
export function longitudinalFromSpec(spec) {
  const cls = LONGITUDINAL[spec?.mechanism];
  if (cls === undefined) {
    throw new Error(`mechanism must be one of ${Object.keys(LONGITUDINAL).join(', ')}, got ${spec?.mechanism}`);
  }
  return new cls(spec.params);
}

// fromSpec/buildBody (mechanisms.js) know them too: a fresh two-round report, as Python's
// spec.randomize (a first day; memoized reporting goes through Device.report).
Object.assign(MECHANISMS, LONGITUDINAL);
