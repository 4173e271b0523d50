// The randomizers of ldpkit.sets (src/ldpkit/sets/): users who hold a set of items
// (PaddingSampling) or (key, value) pairs with values in [-1, 1] (PCKV, PrivKV). A value is
// one user's array: item ids for PaddingSampling, [key, value] pairs for the key-value ones.
//
// Every coin is the Python side's, drawn user by user in this order (tests/vectors/sets.json
// replays the Python samplers on fixed 64-bit words in the same order):
// - PaddingSampling: the slot (U below max(L, ell)), then the oracle's report of the
//   picked item (GRR: U; OLH: the public seed word, then U);
// - PCKV: the slot, then the value's coin (a uniform double against (1 + v) / 2), then
//   GRR: U over the 2 d' pairs; UE: one U below 2^53 per key (against 2B and B), then U
//   below 2 (wKeep + wOther) for the sampled key's entry;
// - PrivKV: the key j (U below d), the value's coin (uniform double), the key bit (U below
//   k1 + o1), the value bit (U below k2 + o2), the fake sign (U below 2).
// - PrivSet: a set longer than ell is shuffled (Fisher-Yates from the last slot down: U
//   below i + 1 for i = L - 1, ..., 1) and its first ell items kept; the branch coin (U
//   below 2^62); then a missing subset (Floyd: U below j + 1 for j = m - k, ..., m - 1, or,
//   when k^2 > 8 D, a Fisher-Yates shuffle of [0, D)) or, until kept, a meeting one (her
//   item: U below ell; the k - 1 others by Floyd or a shuffle; the keep coin: U below the
//   number of her items in it).
// The integer weights come from rrWeights and correctly rounded constants (exact.js), so
// they equal Python's bit for bit.

import { crExp, crExpm1, crLog1p, exactRatio } from './exact.js';
import { GRR, OLH, RR_MAX_EPSILON, grrFromUniform, indexDtype, packBits, rrWeights } from './mechanisms.js';
import { localHash } from './hashing.js';
import { checkEpsilon, checkInteger, checkNumber, ratioLoss, uniformBelow } from './numeric.js';
import { secureCoins } from './random.js';

const MAX_PADDING = 2 ** 20; // the Python specs' bound on padding
/** Denominator of PCKV-UE's non-key coin (keyvalue._UE_TOTAL). */
const UE_TOTAL = 1n << 52n;
const MASK53 = (1n << 53n) - 1n;

function checkDomainSize(d) {
  return checkInteger(d, 'domain_size', 2, Number.MAX_SAFE_INTEGER);
}

/** One user's set: an array of distinct integer items in [0, d). */
function checkSet(items, d) {
  if (!Array.isArray(items)) {
    throw new TypeError(`values must be arrays of item ids (one per user), got ${JSON.stringify(items)}`);
  }
  const seen = new Set();
  for (const v of items) {
    if (!Number.isInteger(v) || v < 0 || v >= d) {
      throw new RangeError(`values must be items in [0, ${d}), got ${JSON.stringify(v)}`);
    }
    if (seen.has(v)) throw new RangeError(`values must be distinct within each user's set, got ${v} twice`);
    seen.add(v);
  }
  return items;
}

/** One user's pairs: an array of [key, value], distinct integer keys in [0, d), values in [-1, 1]. */
function checkPairs(pairs, d) {
  if (!Array.isArray(pairs)) {
    throw new TypeError(`values must be arrays of [key, value] pairs (one per user), got ${JSON.stringify(pairs)}`);
  }
  const seen = new Set();
  for (const pair of pairs) {
    if (!Array.isArray(pair) || pair.length !== 2) {
      throw new TypeError(`values must be lists of [key, value] pairs, got ${JSON.stringify(pair)}`);
    }
    const [k, v] = pair;
    if (!Number.isInteger(k) || k < 0 || k >= d) {
      throw new RangeError(`values must be pairs with keys in [0, ${d}), got ${JSON.stringify(k)}`);
    }
    // !(a && b) also refuses NaN
    if (typeof v !== 'number' || !(v >= -1 && v <= 1)) {
      throw new RangeError(`values must be pairs with real values in [-1, 1], got ${JSON.stringify(v)}`);
    }
    if (seen.has(k)) throw new RangeError(`values must be pairs with distinct keys within each user, got ${k} twice`);
    seen.add(k);
  }
  return pairs;
}

/** _input.sample_padded for one user of L items: the slot, uniform over max(L, ell). */
function sampleSlot(length, padding, coins) {
  return Number(uniformBelow(BigInt(Math.max(length, padding)), coins));
}

/** FO17's pick for PaddingSampling's oracle: GRR when d + ell < 3 e^eps + 2. */
function paddingOracleName(epsilon, size) {
  return size < 3.0 * crExp(epsilon) + 2 ? 'grr' : 'olh';
}

/**
 * Padding-and-sampling (Wang, Li, Jha, IEEE S&P 2018, section IV; sets.PaddingSampling):
 * the set is padded with dummies d + L, ..., d + ell - 1, one of max(L, ell) slots is
 * drawn uniformly and its item reported with GRR or OLH over d + ell items.
 */
export class PaddingSampling {
  static PARAMS = ['epsilon', 'domain_size', 'padding', 'oracle'];
  constructor({ epsilon, domain_size, padding, oracle = null }) {
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    this.domainSize = checkDomainSize(domain_size);
    this.padding = checkInteger(padding, 'padding', 1, MAX_PADDING);
    const size = this.domainSize + this.padding;
    if (size > 2 ** 32) throw new RangeError(`domain_size + padding must be <= 2^32, got ${size}`);
    if (oracle !== null && oracle !== 'grr' && oracle !== 'olh') {
      throw new RangeError(`oracle must be one of ['grr', 'olh'] or null, got ${oracle}`);
    }
    this.oracleName = oracle ?? paddingOracleName(this.epsilon, size);
    this.inner = this.oracleName === 'grr'
      ? new GRR({ epsilon: this.epsilon, domain_size: size })
      : new OLH({ epsilon: this.epsilon, domain_size: size, mix_items: false });
  }
  /** The loss of the sent report (PaddingSampling.privacy_loss: below eps for GRR, ell > 1). */
  privacyLoss() {
    if (this.oracleName === 'olh') return this.inner.privacyLoss();
    const { wKeep, wOther } = this.inner;
    return crLog1p(exactRatio(wKeep - wOther, BigInt(this.padding) * wOther));
  }
  /** The padded item a user reports: one of her items, or the dummy d + slot. */
  pick(items, coins) {
    const slot = sampleSlot(items.length, this.padding, coins);
    return slot < items.length ? items[slot] : this.domainSize + slot;
  }
  randomize(values, coins = secureCoins) {
    values.forEach((s) => checkSet(s, this.domainSize)); // all checked before any coin
    const o = this.inner;
    if (this.oracleName === 'grr') {
      const data = values.map((s) => {
        const v = this.pick(s, coins);
        return grrFromUniform(v, o.domainSize, o.wKeep, o.wOther, uniformBelow(o.total, coins, o.limit));
      });
      return { values: { dtype: indexDtype(o.domainSize), shape: [data.length], data } };
    }
    const seeds = [];
    const data = [];
    for (const s of values) {
      const v = this.pick(s, coins);
      const seed = coins.u64();
      seeds.push(seed.toString()); // decimal string: exact past 2^53
      const u = uniformBelow(o.total, coins, o.limit);
      data.push(grrFromUniform(localHash(seed, v, o.g), o.g, o.wKeep, o.wOther, u));
    }
    return {
      seeds: { dtype: '<u8', shape: [seeds.length], data: seeds },
      values: { dtype: indexDtype(o.g), shape: [data.length], data },
    };
  }
}

/** keyvalue._ue_cross_loss: log(2 p (1 - b) / b) on the exact integers. */
function ueCrossLoss(wKeep, wOther, big) {
  const num = 2n * wKeep * (UE_TOTAL - big);
  const den = (wKeep + wOther) * big;
  return num > den ? crLog1p(exactRatio(num - den, den)) : 0;
}

/**
 * keyvalue._grr_law: PCKV-GRR's weights at the amplified budget log(1 + ell (e^eps - 1))
 * (the paper's GRR allocation), lowered by a few ulps until the realized loss is within eps.
 */
export function pckvGrrLaw(epsilon, ell, nOthers) {
  if (ell === 1) return rrWeights(epsilon, nOthers);
  let target = Math.min(crLog1p(ell * crExpm1(epsilon)), RR_MAX_EPSILON);
  for (;;) {
    const [wKeep, wOther] = rrWeights(target, nOthers);
    if (crLog1p(exactRatio(wKeep - wOther, BigInt(ell) * wOther)) <= epsilon) return [wKeep, wOther];
    target -= target * 2 ** -50;
  }
}

/** keyvalue._ue_law: [wKeep, wOther, B] (BigInts) of PCKV-UE at epsilon. */
export function pckvUeLaw(epsilon) {
  const [wKeep, wOther] = rrWeights(epsilon, 1);
  const target = 2.0 / (crExp(epsilon) + 3.0); // b of the paper's allocation
  let big = BigInt(Math.max(1, Math.ceil(target * 2 ** 52))); // * 2^52: exact
  while (ueCrossLoss(wKeep, wOther, big) > epsilon) {
    const step = big >> 50n;
    big += step > 1n ? step : 1n;
  }
  return [wKeep, wOther, big < UE_TOTAL ? big : UE_TOTAL];
}

/**
 * PCKV (Gu, Li, Cheng, Xiong, Cao, USENIX Security 2020; sets.PCKV): padding-and-sampling
 * of one pair (dummy keys d + L, ..., d + ell - 1 with value 0), the value discretized to
 * +-1, then correlated perturbation with UE (fields bits, signs) or GRR over the 2 d'
 * pairs (field values = 2 key + (sign > 0)).
 */
export class PCKV {
  static PARAMS = ['epsilon', 'domain_size', 'padding', 'method'];
  constructor({ epsilon, domain_size, padding, method = 'ue' }) {
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    this.domainSize = checkDomainSize(domain_size);
    this.padding = checkInteger(padding, 'padding', 1, MAX_PADDING);
    if (method !== 'ue' && method !== 'grr') {
      throw new RangeError(`method must be one of ['ue', 'grr'], got ${method}`);
    }
    this.method = method;
    this.slots = this.domainSize + this.padding; // d'
    if (this.slots > 2 ** 31) throw new RangeError(`domain_size + padding must be <= 2^31, got ${this.slots}`);
    if (method === 'grr') {
      [this.wKeep, this.wOther] = pckvGrrLaw(this.epsilon, this.padding, 2 * this.slots - 1);
      this.total = this.wKeep + BigInt(2 * this.slots - 1) * this.wOther;
      this.limit = ((1n << 64n) / this.total) * this.total;
    } else {
      [this.wKeep, this.wOther, this.big] = pckvUeLaw(this.epsilon);
      this.ownTotal = 2n * (this.wKeep + this.wOther);
    }
  }
  /** PCKV.privacy_loss, from the integer weights. */
  privacyLoss() {
    if (this.method === 'grr') {
      return crLog1p(exactRatio(this.wKeep - this.wOther, BigInt(this.padding) * this.wOther));
    }
    return Math.max(ratioLoss(this.wOther, this.wKeep), ueCrossLoss(this.wKeep, this.wOther, this.big));
  }
  /** The sampled (key, v* > 0) of one user (keyvalue._sample_pairs). */
  samplePair(pairs, coins) {
    const slot = sampleSlot(pairs.length, this.padding, coins);
    const [key, value] = slot < pairs.length ? pairs[slot] : [this.domainSize + slot, 0.0];
    return [key, coins.uniform() < (1.0 + value) / 2.0];
  }
  /** One PCKV-UE report (keyvalue._ue_sample): [nonzero bits, sign bits], unpacked. */
  ueEntries(key, positive, coins) {
    const nz = new Array(this.slots);
    const sg = new Array(this.slots);
    const twoBig = 2n * this.big;
    // U below 2^53 per key: 2^64 is a multiple, so no word is rejected and U is the word's
    // low 53 bits (uniformBelow's rule); one batch of words per report
    const words = coins.u64Array(this.slots);
    for (let j = 0; j < this.slots; j++) {
      const u = words[j] & MASK53;
      nz[j] = u < twoBig;
      sg[j] = u < this.big;
    }
    const own = uniformBelow(this.ownTotal, coins);
    const keep = own < this.wKeep;
    const flip = !keep && own < this.wKeep + this.wOther;
    nz[key] = keep || flip;
    sg[key] = (keep && positive) || (flip && !positive);
    return [nz, sg.map((s, j) => s && nz[j])];
  }
  randomize(values, coins = secureCoins) {
    values.forEach((p) => checkPairs(p, this.domainSize)); // all checked before any coin
    if (this.method === 'grr') {
      const size = 2 * this.slots;
      const data = values.map((p) => {
        const [key, positive] = this.samplePair(p, coins);
        const u = uniformBelow(this.total, coins, this.limit);
        return grrFromUniform(2 * key + (positive ? 1 : 0), size, this.wKeep, this.wOther, u);
      });
      return { values: { dtype: indexDtype(size), shape: [data.length], data } };
    }
    const bits = [];
    const signs = [];
    for (const p of values) {
      const [key, positive] = this.samplePair(p, coins);
      const [nz, sg] = this.ueEntries(key, positive, coins);
      bits.push(packBits(nz));
      signs.push(packBits(sg));
    }
    const width = (this.slots + 7) >> 3;
    return {
      bits: { dtype: '|u1', shape: [bits.length, width], data: bits },
      signs: { dtype: '|u1', shape: [signs.length, width], data: signs },
    };
  }
}

/**
 * PrivKV (Ye, Hu, Meng, Zheng, IEEE S&P 2019; sets.PrivKV), one round: a key j uniform in
 * [0, d) (sent), then VPM on the holder's discretized value and LPM on the key bit at
 * eps / 2 each. Fields keys (j) and values in {-1, 0, +1} (0 is <0, 0>).
 */
export class PrivKV {
  static PARAMS = ['epsilon', 'domain_size', 'rounds', 'round', 'fake_means'];
  constructor({ epsilon, domain_size, rounds = 1, round = 0, fake_means = null }) {
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    this.domainSize = checkDomainSize(domain_size);
    // PrivKVM (PrivKV.rounds): key budget eps / 2 in round 0 only, value eps / (2 c) per round
    this.rounds = checkInteger(rounds, 'rounds', 1, 100);
    this.round = checkInteger(round, 'round', 0, this.rounds - 1);
    if (fake_means !== null) {
      if (!Array.isArray(fake_means) || fake_means.length !== this.domainSize) {
        throw new RangeError(`fake_means must hold domain_size = ${this.domainSize} means, got ${fake_means}`);
      }
      fake_means.forEach((m) => checkNumber(m, -1, 1));
    }
    this.fakeMeans = fake_means;
    [this.k1, this.o1] = this.round === 0 ? rrWeights(this.epsilon / 2.0, 1) : [1n, 1n];
    [this.k2, this.o2] = rrWeights(this.epsilon / (2.0 * this.rounds), 1);
    this.p1 = exactRatio(this.k1, this.k1 + this.o1);
    this.p2 = exactRatio(this.k2, this.k2 + this.o2);
  }
  /** The loss of the realized law over the three cases (PrivKV.privacy_loss). */
  privacyLoss() {
    const { p1, p2 } = this;
    const extremes = this.fakeMeans === null ? [0] : [Math.min(...this.fakeMeans), Math.max(...this.fakeMeans)];
    let loss = 0;
    for (const m of extremes) {
      const up = ((1 + m) / 2) * p2 + ((1 - m) / 2) * (1 - p2);
      const rows = [
        [1 - p1, p1 * p2, p1 * (1 - p2)],
        [1 - p1, p1 * (1 - p2), p1 * p2],
        [p1, (1 - p1) * up, (1 - p1) * (1 - up)],
      ];
      for (let c = 0; c < 3; c++) {
        const col = rows.map((r) => r[c]);
        loss = Math.max(loss, Math.log(Math.max(...col) / Math.min(...col)));
      }
    }
    return loss;
  }
  randomize(values, coins = secureCoins) {
    values.forEach((p) => checkPairs(p, this.domainSize)); // all checked before any coin
    const d = BigInt(this.domainSize);
    const t1 = this.k1 + this.o1;
    const t2 = this.k2 + this.o2;
    const keys = [];
    const out = [];
    for (const pairs of values) {
      const j = Number(uniformBelow(d, coins));
      const hit = pairs.find(([k]) => k === j);
      const fake = this.fakeMeans === null ? 0.0 : this.fakeMeans[j];
      const vPos = coins.uniform() < (1.0 + (hit ? hit[1] : fake)) / 2.0;
      const keyKept = uniformBelow(t1, coins) < this.k1;
      const valueKept = uniformBelow(t2, coins) < this.k2;
      const fair = uniformBelow(2n, coins) === 1n;
      keys.push(j);
      if (hit) out.push(keyKept ? (valueKept === vPos ? 1 : -1) : 0);
      else if (this.fakeMeans === null) out.push(keyKept ? 0 : fair ? 1 : -1);
      else out.push(keyKept ? 0 : valueKept === vPos ? 1 : -1); // PrivKVM: from the mean
    }
    return {
      keys: { dtype: indexDtype(this.domainSize), shape: [keys.length], data: keys },
      values: { dtype: '|i1', shape: [out.length], data: out },
    };
  }
}

/** Denominator of PrivSet's branch coin (privset._BRANCH_TOTAL): P = a / 2^62. */
const BRANCH_TOTAL = 1n << 62n;
/** privset._MAX_ITEMS: the largest D = d + ell (reports are D bits). */
const PRIVSET_MAX_ITEMS = 1 << 16;

/** C(n, k) as a BigInt. */
function binomial(n, k) {
  let out = 1n;
  for (let i = 0; i < k; i++) out = (out * BigInt(n - i)) / BigInt(i + 1); // exact at each step
  return out;
}

/**
 * privset._nominal_variance: q (1 - q) / (p - q)^2 for k = 1..d at e^eps (Infinity where
 * the branch coin would not fit 2^62). Only its argmin is used (the default k): a float
 * scan, the same operations in the same order as the Python side.
 */
function privsetNominalVariance(d, ell, epsilon) {
  const big = d + ell;
  const growth = Math.exp(epsilon);
  const out = new Array(d);
  let log = 0;
  for (let i = 0; i < d; i++) {
    log += Math.log((d - i) / (big - i));
    const rho = Math.exp(log);
    const k = i + 1;
    const meet = (growth * (1.0 - rho)) / (growth * (1.0 - rho) + rho);
    const p = (meet * (k / big)) / (1.0 - rho);
    const q = (meet * (k / big - (k / d) * rho)) / (1.0 - rho) + (1.0 - meet) * (k / d);
    const v = (q * (1.0 - q)) / ((p - q) * (p - q));
    out[i] = rho * 2 ** 40 >= 1.0 - rho && Number.isFinite(v) ? v : Infinity;
  }
  return out;
}

/** privset._branch_loss: |log(P N_miss / ((1 - P) N_meet))| for P = a / 2^62, exactly. */
function privsetBranchLoss(a, meet, miss) {
  let num = a * miss;
  let den = (BRANCH_TOTAL - a) * meet;
  if (num < den) [num, den] = [den, num];
  return crLog1p(exactRatio(num - den, den));
}

/** privset._law: [a, N_meet, N_miss] (BigInts) for subset size k. */
function privsetLaw(epsilon, d, ell, k) {
  const miss = binomial(d, k);
  const meet = binomial(d + ell, k) - miss;
  const growth = crExp(epsilon) * exactRatio(meet, miss);
  const x = Math.trunc(2 ** 62 * (growth / (1.0 + growth)));
  let a = BigInt(x);
  if (a > BRANCH_TOTAL - 1n) a = BRANCH_TOTAL - 1n;
  if (a < 1n) a = 1n;
  while (a > 1n && privsetBranchLoss(a, meet, miss) > epsilon) {
    const step = a >> 50n; // down until within, as the Python side
    a -= step > 1n ? step : 1n;
  }
  return [a, meet, miss];
}

/** Shuffle `arr` in place (Fisher-Yates from the last slot down, one U below i + 1 each). */
function shuffle(arr, coins) {
  for (let i = arr.length - 1; i > 0; i--) {
    const j = Number(uniformBelow(BigInt(i + 1), coins));
    [arr[i], arr[j]] = [arr[j], arr[i]];
  }
  return arr;
}

/** privset._floyd for one user: a uniform k-subset of [0, m), in draw order. */
function floyd(m, k, coins) {
  const out = [];
  for (let j = m - k; j < m; j++) {
    const t = Number(uniformBelow(BigInt(j + 1), coins));
    out.push(out.includes(t) ? j : t);
  }
  return out;
}

/** privset._skip for one index: the index-th item of [0, D) not in `excluded` (ascending). */
function skip(index, excluded) {
  let item = index;
  for (const e of excluded) if (e <= item) item += 1;
  return item;
}

/**
 * PrivSet (Wang, Huang, Nie, Wang, Xu, Yang, IEEE INFOCOM 2018, section IV; sets.PrivSet):
 * the set padded to ell items (dummies d + L, ..., d + ell - 1; a longer set sampled down to
 * ell of its items), then a k-subset of the D = d + ell padded items: a uniform one meeting
 * the padded set with probability a / 2^62, else a uniform one missing it, where a is
 * Python's integer (the largest ratio a N_miss / ((2^62 - a) N_meet) within e^eps). Body
 * {bits}: n x ceil(D / 8) packed bits (np.packbits), k bits set per report.
 */
export class PrivSet {
  static PARAMS = ['epsilon', 'domain_size', 'padding', 'subset_size'];
  constructor({ epsilon, domain_size, padding, subset_size = null }) {
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    this.domainSize = checkDomainSize(domain_size);
    this.padding = checkInteger(padding, 'padding', 1, 1 << 10);
    this.items = this.domainSize + this.padding; // D
    if (this.items > PRIVSET_MAX_ITEMS) {
      throw new RangeError(`domain_size + padding must be <= ${PRIVSET_MAX_ITEMS}, got ${this.items}`);
    }
    const variance = privsetNominalVariance(this.domainSize, this.padding, this.epsilon);
    if (subset_size === null) {
      const best = variance.reduce((m, v) => (v < m ? v : m), Infinity);
      if (best === Infinity) {
        throw new RangeError(
          `domain_size and padding must leave a subset size whose law fits 2^62, got ${this.domainSize} and ${this.padding}`,
        );
      }
      this.k = variance.indexOf(best) + 1; // the first minimum, as np.argmin
    } else {
      this.k = checkInteger(subset_size, 'subset_size', 1, this.domainSize);
      if (variance[this.k - 1] === Infinity) {
        throw new RangeError(
          `subset_size must keep C(d + ell, k) / C(d, k) below 2^40 at this domain_size and padding, got ${this.k}`,
        );
      }
    }
    [this.a, this.meet, this.miss] = privsetLaw(this.epsilon, this.domainSize, this.padding, this.k);
  }
  /** PrivSet.privacy_loss: log(P N_miss / ((1 - P) N_meet)) from the integers. */
  privacyLoss() {
    return privsetBranchLoss(this.a, this.meet, this.miss);
  }
  /** The ell padded items of one user: hers and the dummies, or ell of hers uniformly. */
  padded(items, coins) {
    const d = this.domainSize;
    const ell = this.padding;
    if (items.length > ell) return shuffle(items.slice(), coins).slice(0, ell);
    const out = items.slice();
    for (let j = items.length; j < ell; j++) out.push(d + j);
    return out;
  }
  /** The chosen k items of one user (privset.PrivSet.randomize, one row). */
  choose(items, coins) {
    const big = this.items;
    const k = this.k;
    const padded = this.padded(items, coins);
    const mine = new Set(padded);
    const useFloyd = k * k <= 8 * big;
    const meets = uniformBelow(BRANCH_TOTAL, coins) < this.a;
    if (!meets) { // a uniform k-subset of the D - ell items not hers
      if (useFloyd) {
        const excluded = padded.slice().sort((x, y) => x - y);
        return floyd(big - this.padding, k, coins).map((i) => skip(i, excluded));
      }
      return shuffle([...Array(big).keys()], coins).filter((v) => !mine.has(v)).slice(0, k);
    }
    for (;;) { // one of her items + k - 1 others, kept w.p. 1 / |z & x|
      const first = padded[Number(uniformBelow(BigInt(this.padding), coins))];
      const others = useFloyd
        ? floyd(big - 1, k - 1, coins).map((i) => skip(i, [first]))
        : shuffle([...Array(big).keys()], coins).filter((v) => v !== first).slice(0, k - 1);
      const z = [first, ...others];
      const hits = z.filter((v) => mine.has(v)).length;
      if (uniformBelow(BigInt(hits), coins) === 0n) return z;
    }
  }
  randomize(values, coins = secureCoins) {
    values.forEach((s) => checkSet(s, this.domainSize)); // all checked before any coin
    const bits = values.map((s) => {
      const row = new Array(this.items).fill(false);
      for (const v of this.choose(s, coins)) row[v] = true;
      return packBits(row);
    });
    return { bits: { dtype: '|u1', shape: [bits.length, (this.items + 7) >> 3], data: bits } };
  }
}
