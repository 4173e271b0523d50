// The numerical randomizers of ldpkit as they are on the wire: a report is
// one value of a fixed finite grid, drawn from an exact integer law (src/ldpkit/_exact.py).
// The grid constants are computed here with the very float operations of the Python side
// (numeric/square_wave.py, numeric/mean.py; exp, expm1 and log1p correctly rounded on
// both sides, exact.js and ldpkit/_crmath.py, so that no engine's libm changes them), and the cell is drawn with one uniform
// integer U in [0, T) made by rejection from 64-bit words, so P[cell | grid input k] is
// the same ratio of integers as in Python. Checked against tests/vectors/numeric.json.

import { crExp, crExpm1, crLog1p, exactRatio } from './exact.js';
import { secureCoins } from './random.js';

/** Smallest accepted budget (ldpkit._validation.MIN_EPSILON). */
export const MIN_EPSILON = 1e-6;
const TOTAL_LIMIT = 2 ** 62; // _exact.TOTAL_LIMIT, as Python's int / float sees it
const TWO64 = 1n << 64n;
const MIN_INPUT_STEPS = 1 << 14; // square_wave.MIN_INPUT_STEPS
export const SR_INPUT_STEPS = 1 << 16; // mean.SR_INPUT_STEPS
const HYBRID_THRESHOLD = 0.61;

/** The budget in [MIN_EPSILON, high] (high: the mechanism's max_epsilon), else RangeError. */
export function checkEpsilon(epsilon, high) {
  if (typeof epsilon !== 'number' || !(epsilon >= MIN_EPSILON && epsilon <= high)) {
    throw new RangeError(`epsilon must be a number in [${MIN_EPSILON}, ${high}], got ${epsilon}`);
  }
  return epsilon;
}

export function checkInteger(x, name, low, high) {
  if (!Number.isInteger(x) || x < low || x > high) {
    throw new RangeError(`${name} must be an integer in [${low}, ${high}], got ${x}`);
  }
  return x;
}

export function checkBounds(low, high) {
  if (typeof low !== 'number' || typeof high !== 'number' || !Number.isFinite(low) || !Number.isFinite(high) || !(low < high)) {
    throw new RangeError(`low and high must be finite numbers with low < high, got [${low}, ${high}]`);
  }
  if (!Number.isFinite(high - low)) {
    throw new RangeError(`high - low must be finite, got [${low}, ${high}]`);
  }
}

export function checkNumber(v, low, high) {
  // !(a && b) also refuses NaN, as check_numeric_values
  if (typeof v !== 'number' || !(v >= low && v <= high)) {
    throw new RangeError(`value must be a real number in [${low}, ${high}], got ${v}`);
  }
  return v;
}

/** Python's round(): halves to even (float in, integer-valued float out). */
export function roundHalfEven(x) {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** _exact.ratio_weights: integers (w_low, w_high), w_high / w_low <= e^eps (BigInts). */
export function ratioWeights(epsilon, nLow, nHigh) {
  const growth = crExp(epsilon);
  const wLowF = Math.floor((TOTAL_LIMIT / (nLow + nHigh * growth)) * (1.0 - 1e-12));
  if (!(wLowF >= 1)) {
    throw new RangeError(`epsilon must be small enough for the integer grid law, got ${epsilon}`);
  }
  const wLow = BigInt(wLowF);
  let wHigh = BigInt(Math.floor(wLowF * growth));
  // step down until the exact ratio (log1p of the correctly rounded rational) is <= eps
  while (wHigh > wLow && crLog1p(exactRatio(wHigh - wLow, wLow)) > epsilon) {
    const step = wHigh >> 50n;
    wHigh -= step > 1n ? step : 1n;
  }
  return [wLow, wHigh];
}

/** log(w_high / w_low) from the integers (_exact.ratio_loss). */
export function ratioLoss(wLow, wHigh) {
  return crLog1p(exactRatio(wHigh - wLow, wLow));
}

/**
 * A uniform integer in [0, total) (BigInt), exactly: rejection on 64-bit words. `limit`
 * (floor(2^64 / total) total) may be passed precomputed by a caller that draws many.
 */
export function uniformBelow(total, coins, limit = (TWO64 / total) * total) {
  for (;;) {
    const w = coins.u64();
    if (w < limit) return w % total;
  }
}

/** _exact.round_to_grid for one x in [0, 1] and one uniform u: k in [0, steps]. */
export function roundToGrid(x, steps, u) {
  const scaled = Math.min(Math.max(x, 0.0), 1.0) * steps;
  const low = Math.floor(scaled);
  return Math.min(low + (u < scaled - low ? 1 : 0), steps);
}

/** _exact.sample_flat_bump for one user given U: the cell (a Number). */
export function flatBumpCell(start, cells, wLow, extra, u) {
  const base = BigInt(cells) * wLow;
  if (u < base) return Number(u / wLow);
  return start + Number((u - base) / extra);
}

// --- Square Wave -------------------------------------------------------------------------
/** e^x - 1 - x (square_wave._f, same series and terms). */
function f(x) {
  if (Math.abs(x) < 0.1) {
    let term = (x * x) / 2.0;
    let total = 0.0;
    for (let k = 3; k < 15; k++) {
      total += term;
      term *= x / k;
    }
    return total;
  }
  return crExpm1(x) - x;
}

function plateauRatio(epsilon) {
  if (epsilon > 30.0) {
    const r = crExp(-epsilon);
    return (epsilon - 1.0 + r) / (1.0 - (1.0 + epsilon) * r);
  }
  return (f(-epsilon) * crExp(epsilon)) / f(epsilon);
}

/** SW20's b (square_wave_bandwidth). */
export function squareWaveBandwidth(epsilon) {
  checkEpsilon(epsilon, Infinity);
  return 0.5 * plateauRatio(epsilon) * crExp(-epsilon);
}

/** Square Wave (SW20 section 5.2) on ldpkit's exact grid (square_wave._Wave). */
export class SquareWave {
  static PARAMS = ['epsilon', 'low', 'high', 'buckets', 'output_buckets', 'bandwidth', 'log_scale'];
  constructor({
    epsilon,
    low = 0.0,
    high = 1.0,
    buckets = 1024,
    output_buckets = null,
    bandwidth = null,
    log_scale = null,
  }) {
    this.epsilon = checkEpsilon(epsilon, 40.0);
    checkBounds(low, high);
    this.low = low;
    this.high = high;
    this.span = high - low;
    this.logScale = null;
    this.logSpan = null;
    if (log_scale != null) {
      // SquareWave._validate: s > 0 with (high - low) / s finite and > 0
      const ratio = this.span / log_scale;
      const positive = typeof log_scale === 'number' && log_scale > 0 && Number.isFinite(log_scale);
      if (!positive || !(Number.isFinite(ratio) && ratio > 0)) {
        throw new RangeError(
          `log_scale must be a positive number with (high - low) / log_scale finite and > 0, got ${log_scale} for [${low}, ${high}]`,
        );
      }
      this.logScale = log_scale;
      // SquareWave.log_span, Lambda = log(1 + (high - low) / s): a grid constant, so
      // correctly rounded on both sides (_crmath.log1p)
      this.logSpan = crLog1p(ratio);
    }
    this.buckets = checkInteger(buckets, 'buckets', 2, 1 << 20);
    if (output_buckets != null) checkInteger(output_buckets, 'output_buckets', 2, 1 << 20);
    if (bandwidth != null && !(typeof bandwidth === 'number' && bandwidth > 0 && bandwidth <= 1)) {
      throw new RangeError(`bandwidth must be a number in (0, 1], got ${bandwidth}`);
    }
    const b = bandwidth == null ? squareWaveBandwidth(epsilon) : bandwidth;
    // square_wave._wave_grid with ratio 1 (a flat bump of 2w cells)
    this.steps = buckets * Math.max(1, Math.ceil(MIN_INPUT_STEPS / buckets));
    this.half = Math.max(1, roundHalfEven(b * this.steps));
    const width = 2 * this.half;
    this.cells = this.steps + width;
    [this.wLow, this.wHigh] = ratioWeights(epsilon, this.steps + width, width);
    // np.floor((w_high - w_low) * shape): the difference passes through a float64
    this.extra = BigInt(Math.floor(Number(this.wHigh - this.wLow)));
    this.total = BigInt(this.cells) * this.wLow + BigInt(width) * this.extra;
  }
  /** The report cell of grid input k given U in [0, T) (sample_flat_bump). */
  cellOf(k, u) {
    return flatBumpCell(k, this.cells, this.wLow, this.extra, u);
  }
  /**
   * Grid input k in [0, steps] of value v given one uniform u (_grid_inputs): unbiased
   * randomized rounding, of (v - low) / span to k / L (linear), or on the log scale of v
   * itself to the geometric grid low + s (e^(Lambda k / L) - 1) (SquareWave._grid_inputs,
   * the same float operations in the same order). The per-user log1p/expm1 are the
   * engine's (numpy's on the Python side): an ulp there moves the rounding probability by
   * ~1e-12, never the law's weights nor the report grid.
   */
  gridInput(v, u) {
    if (this.logScale === null) return roundToGrid((v - this.low) / this.span, this.steps, u);
    const steps = this.steps;
    const lam = this.logSpan;
    const x = (v - this.low) / this.logScale;
    const k = Math.min(Math.max(Math.floor((Math.log1p(x) / lam) * steps), 0), steps - 1);
    const below = Math.expm1((lam * k) / steps);
    const above = Math.expm1((lam * (k + 1)) / steps);
    const p = Math.min(Math.max((x - below) / (above - below), 0.0), 1.0);
    return k + (u < p ? 1 : 0);
  }
  /** The report value of cell j: its centre in the original units (report_values()). */
  value(j) {
    return this.low + ((j + 0.5 - this.half) / this.steps) * this.span;
  }
  privacyLoss() {
    return ratioLoss(this.wLow, this.wLow + this.extra);
  }
  randomizeOne(v, coins) {
    checkNumber(v, this.low, this.high);
    const k = this.gridInput(v, coins.uniform());
    return this.value(this.cellOf(k, uniformBelow(this.total, coins)));
  }
  randomize(values, coins = secureCoins) {
    const data = values.map((v) => this.randomizeOne(v, coins));
    return { values: { dtype: '<f8', shape: [data.length], data } };
  }
}

// --- SR, PM, HM (numeric/mean.py) ----------------------------------------------------------
export function toUnit(v, low, halfSpan) {
  return Math.min(Math.max((v - low) / halfSpan - 1.0, -1.0), 1.0);
}

class MeanBase {
  constructor({ epsilon, low = -1.0, high = 1.0 }, maxEpsilon) {
    this.epsilon = checkEpsilon(epsilon, maxEpsilon);
    checkBounds(low, high);
    this.low = low;
    this.high = high;
    this.halfSpan = (high - low) / 2.0;
  }
  /** A unit-scale report value in the original units (mean._report_tables). */
  fromUnit(y) {
    return this.low + (y + 1.0) * this.halfSpan;
  }
  randomize(values, coins = secureCoins) {
    const data = values.map((v) => {
      checkNumber(v, this.low, this.high);
      return this.fromUnit(this.unitOne(toUnit(v, this.low, this.halfSpan), coins));
    });
    return { values: { dtype: '<f8', shape: [data.length], data } };
  }
}

/** SR's grid (mean._sr_grid). */
function srGrid(epsilon) {
  const [wLow, wHigh] = ratioWeights(epsilon, SR_INPUT_STEPS, SR_INPUT_STEPS);
  return {
    steps: SR_INPUT_STEPS,
    wLow,
    wHigh,
    total: BigInt(SR_INPUT_STEPS) * (wLow + wHigh),
    magnitude: exactRatio(wLow + wHigh, wHigh - wLow),
  };
}

/** +1 or -1 from grid input k and U (mean._sr_grid_sample). */
export function srSign(g, k, u) {
  const threshold = g.wLow * BigInt(g.steps - k) + g.wHigh * BigInt(k);
  return u < threshold ? 1 : -1;
}

/** Stochastic rounding (Duchi et al.) on its exact grid: +-C' on the [-1, 1] scale. */
export class StochasticRounding extends MeanBase {
  static PARAMS = ['epsilon', 'low', 'high'];
  constructor(params) {
    super(params, 30.0);
    this.grid = srGrid(this.epsilon);
  }
  unitOne(t, coins) {
    const g = this.grid;
    const k = roundToGrid((t + 1.0) / 2.0, g.steps, coins.uniform());
    return srSign(g, k, uniformBelow(g.total, coins)) * g.magnitude;
  }
  privacyLoss() {
    return ratioLoss(this.grid.wLow, this.grid.wHigh);
  }
}

/** PM's grid (mean._pm_grid). */
function pmGrid(epsilon, cells) {
  const eHalf = crExp(Math.min(epsilon / 2.0, 700.0));
  const plateau = Math.min(Math.max(1, roundHalfEven(cells / (eHalf + 1.0))), cells - 1);
  const steps = cells - plateau;
  const [wLow, wHigh] = ratioWeights(epsilon, cells - plateau, plateau);
  const bump = wHigh - wLow;
  const bc = BigInt(cells);
  const bp = BigInt(plateau);
  const total = bc * wLow + bp * bump;
  const slope = exactRatio(bump * bp, total);
  const intercept = exactRatio(wLow * ((bc * (bc - 1n)) / 2n) + bump * ((bp * (bp - 1n)) / 2n), total);
  return { cells, plateau, steps, wLow, wHigh, bump, total, slope, intercept };
}

/** The unit-scale value of PM's cell j (_PMGrid.values). */
function pmValue(g, j) {
  return -1.0 + (2.0 / g.steps) * ((j - g.intercept) / g.slope);
}

function pmUnit(g, t, coins) {
  const k = roundToGrid((t + 1.0) / 2.0, g.steps, coins.uniform());
  return pmValue(g, flatBumpCell(k, g.cells, g.wLow, g.bump, uniformBelow(g.total, coins)));
}

/** Piecewise Mechanism (Wang et al., ICDE 2019) on its exact grid of report_cells cells. */
export class PiecewiseMechanism extends MeanBase {
  static PARAMS = ['epsilon', 'low', 'high', 'report_cells'];
  constructor(params) {
    super(params, 40.0);
    const cells = params.report_cells ?? 1 << 18;
    this.grid = pmGrid(this.epsilon, checkInteger(cells, 'report_cells', 4, 1 << 24));
  }
  unitOne(t, coins) {
    return pmUnit(this.grid, t, coins);
  }
  privacyLoss() {
    return ratioLoss(this.grid.wLow, this.grid.wHigh);
  }
}

/** Hybrid Mechanism: PM w.p. 1 - e^(-eps/2) when eps > 0.61, else SR (ICDE 2019 III-C). */
export class HybridMechanism extends MeanBase {
  static PARAMS = ['epsilon', 'low', 'high', 'report_cells'];
  constructor(params) {
    super(params, 30.0);
    const cells = checkInteger(params.report_cells ?? 1 << 18, 'report_cells', 4, 1 << 24);
    this.pmProbability = this.epsilon > HYBRID_THRESHOLD ? -crExpm1(-this.epsilon / 2.0) : 0.0;
    this.sr = srGrid(this.epsilon);
    this.pm = this.pmProbability > 0 ? pmGrid(this.epsilon, cells) : null;
  }
  unitOne(t, coins) {
    // the branch coin does not depend on the value (a float coin is harmless, as in Python)
    if (this.pm !== null && coins.uniform() < this.pmProbability) return pmUnit(this.pm, t, coins);
    const g = this.sr;
    const k = roundToGrid((t + 1.0) / 2.0, g.steps, coins.uniform());
    return srSign(g, k, uniformBelow(g.total, coins)) * g.magnitude;
  }
  privacyLoss() {
    const sr = ratioLoss(this.sr.wLow, this.sr.wHigh);
    return this.pm === null ? sr : Math.max(sr, ratioLoss(this.pm.wLow, this.pm.wHigh));
  }
}

/** Discrete Square Wave over d buckets (SW20 section 5.4), exact integer law. */
export class DiscreteSquareWave {
  static PARAMS = ['epsilon', 'buckets', 'low', 'high'];
  constructor({ epsilon, buckets, low = 0.0, high = 1.0 }) {
    this.epsilon = checkEpsilon(epsilon, 40.0);
    this.buckets = checkInteger(buckets, 'buckets', 2, 1 << 24);
    checkBounds(low, high);
    const b = 0.5 * plateauRatio(this.epsilon) * crExp(-this.epsilon);
    this.halfWidth = Math.floor(b * this.buckets);
    this.nOutputs = this.buckets + 2 * this.halfWidth;
    const w = 2 * this.halfWidth + 1;
    [this.wLow, this.wHigh] = ratioWeights(this.epsilon, this.buckets - 1, w);
    this.total = BigInt(this.nOutputs) * this.wLow + BigInt(w) * (this.wHigh - this.wLow);
  }
  randomize(values, coins = secureCoins) {
    const extra = this.wHigh - this.wLow;
    const data = values.map((v) => {
      if (!Number.isInteger(v) || v < 0 || v >= this.buckets) {
        throw new RangeError(`value must be an integer in [0, ${this.buckets}), got ${v}`);
      }
      return flatBumpCell(v, this.nOutputs, this.wLow, extra, uniformBelow(this.total, coins));
    });
    const dtype = this.nOutputs - 1 <= 0xff ? '|u1' : this.nOutputs - 1 <= 0xffff ? '<u2' : '<u4';
    return { values: { dtype, shape: [data.length], data } };
  }
}
