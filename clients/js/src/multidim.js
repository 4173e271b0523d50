// Several attributes per user (src/ldpkit/multidim): each user holds a tuple, one item of
// each of d categorical attributes (SPL, SMP, RSFD, CALM, FullDomain) or d reals in
// declared bounds (HDG, TDG, UniformGrid), or a (group, value) pair (GroupMean), and sends
// one report of it under one budget. The reports are the arrays of the JSON wire format
// (ldpkit.io.reports_to_dict), made with the same exact coins as the Python side:
//
// - SPL: per attribute j, GRR at epsilon / d (one U per attribute, in attribute order);
// - SMP: the attribute a (one U below d), then GRR at epsilon on it;
// - RSFD (GRR): the attribute a (U below d), a fake item of every attribute (one U below
//   k_j each, in order: the sampled one's is drawn and dropped), then GRR of her item of a;
// - RSFD (OUE-z): the attribute a (U below d), then one 64-bit word per bit of the
//   concatenated one-hot vector (her bit of a against T_p, every other bit against T_q);
// - CALM: the collected marginal m (U below the number of marginals), then the cell of her tuple in
//   that marginal (row-major) through GRR or OLH (seed word, then U);
// - FullDomain: the cell of her whole tuple through Hadamard response or OLH;
// - HDG, TDG, UniformGrid: the grid m (U below the number of grids), then the cell of her
//   values in it (t = (x - low) / (high - low), floor(t g) clipped to [0, g - 1]) through
//   OLH; the granularities come from the spec dict (the collector sends them resolved);
// - GroupMean: her value rounded to a bit with one uniform, then the (group, bit) item
//   2 group + bit through GRR or OLH.
// - AttributeSampling: a uniform permutation of the d attributes (Fisher-Yates from the
//   last slot down, one U below i + 1 per slot), its first k sorted; then per sampled
//   attribute in order: a numerical one through PM or HM at epsilon / k on [-1, 1] (HM: the
//   branch uniform first; then the rounding uniform and U), its report cell (HM's SR cells
//   after PM's report_cells), a categorical one through GRR at epsilon / k.
// - DuchiMean: one rounding uniform per attribute (her sign, 1 when u < (t + 1) / 2), U
//   below the law's total (the agreement count a: the first a with U < cumulative[a + 1]),
//   then a uniform permutation as above; the first a attributes of it keep her sign, the
//   others flip it.
// - LaplaceMean: one rounding uniform per attribute (k in [0, G]), then the first
//   geometric count of every attribute, in rounds over the attributes still running (one
//   U below w_high per running attribute, in order; it runs on while U < w_low), then the
//   second count likewise; the report k + X1 - X2 clipped to [-2^16, G + 2^16].
// - Fourier: the bit set (U below the number of coefficient masks), then the flip of her
//   parity on it (U below w_keep + w_other, flipped when U < w_other).
// The shared vectors (tests/vectors/multidim.json) replay the Python samplers on fixed
// words and uniforms in this order.

import {
  GRR,
  HadamardResponse,
  MECHANISMS,
  OLH,
  RR_MAX_EPSILON,
  grrFromUniform,
  indexDtype,
  packBits,
  rrWeights,
  unaryThresholds,
} from './mechanisms.js';
import { crExp } from './exact.js';
import {
  HybridMechanism,
  PiecewiseMechanism,
  checkBounds,
  checkEpsilon,
  checkInteger,
  flatBumpCell,
  ratioLoss,
  ratioWeights,
  roundToGrid,
  srSign,
  toUnit,
  uniformBelow,
} from './numeric.js';
import { secureCoins } from './random.js';

/** Most attributes of a categorical spec (_base.MAX_ATTRIBUTES). */
const MAX_ATTRIBUTES = 64;
/** Most attributes of a grid spec (ranges.MAX_GRID_ATTRIBUTES). */
const MAX_GRID_ATTRIBUTES = 16;

function checkSizes(sizes) {
  if (!Array.isArray(sizes) || sizes.length < 2 || sizes.length > MAX_ATTRIBUTES) {
    throw new RangeError(
      `domain_sizes must hold 2 to ${MAX_ATTRIBUTES} domain sizes (one per attribute), got ${JSON.stringify(sizes)}`,
    );
  }
  return sizes.map((k, j) => checkInteger(k, `domain_sizes[${j}]`, 2, 2 ** 32));
}

/** A tuple of items, one per attribute (column j in [0, domain_sizes[j])). */
function checkTuple(row, sizes) {
  if (!Array.isArray(row) || row.length !== sizes.length) {
    throw new RangeError(`value must be a tuple of ${sizes.length} items, got ${JSON.stringify(row)}`);
  }
  row.forEach((v, j) => {
    if (!Number.isInteger(v) || v < 0 || v >= sizes[j]) {
      throw new RangeError(`value[${j}] must be an integer in [0, ${sizes[j]}), got ${v}`);
    }
  });
  return row;
}

/** Row-major index of items of `attrs` in a table of those attributes' sizes. */
function cellOf(row, attrs, sizes) {
  let cell = 0;
  for (const a of attrs) cell = cell * sizes[a] + row[a];
  return cell;
}

/** Every `way`-subset of [0, d) in lexicographic order (itertools.combinations). */
function combinations(d, way) {
  const out = [];
  const pick = (start, chosen) => {
    if (chosen.length === way) {
      out.push(chosen.slice());
      return;
    }
    for (let a = start; a < d; a++) {
      chosen.push(a);
      pick(a + 1, chosen);
      chosen.pop();
    }
  };
  pick(0, []);
  return out;
}

function field(dtype, data, width = null) {
  return { dtype, shape: width === null ? [data.length] : [data.length, width], data };
}

/** One report of `item` through GRR or OLH (OLH: the seed word, then U), as scalars. */
function oracleReport(oracle, item, coins) {
  if (oracle instanceof OLH) {
    const out = oracle.randomize([item], coins);
    return { seed: out.seeds.data[0], value: out.values.data[0] };
  }
  return { value: oracle.randomize([item], coins).values.data[0] };
}

/** SPL: every attribute through GRR at epsilon / d (budget splitting). */
export class SPL {
  static PARAMS = ['epsilon', 'domain_sizes'];
  constructor({ epsilon, domain_sizes }) {
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    this.sizes = checkSizes(domain_sizes);
    const d = this.sizes.length;
    this.oracles = this.sizes.map((k) => new GRR({ epsilon: this.epsilon / d, domain_size: k }));
  }
  privacyLoss() {
    return this.oracles.reduce((s, o) => s + o.privacyLoss(), 0);
  }
  randomize(values, coins = secureCoins) {
    const data = values.map((row) =>
      checkTuple(row, this.sizes).map((v, j) => this.oracles[j].randomize([v], coins).values.data[0]),
    );
    return { values: field(indexDtype(Math.max(...this.sizes)), data, this.sizes.length) };
  }
}

/** SMP: one attribute per user (uniform), through GRR at the whole epsilon. */
export class SMP {
  static PARAMS = ['epsilon', 'domain_sizes'];
  constructor({ epsilon, domain_sizes }) {
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    this.sizes = checkSizes(domain_sizes);
    this.oracles = this.sizes.map((k) => new GRR({ epsilon: this.epsilon, domain_size: k }));
  }
  privacyLoss() {
    return Math.max(...this.oracles.map((o) => o.privacyLoss()));
  }
  randomize(values, coins = secureCoins) {
    const d = this.sizes.length;
    const attributes = [];
    const data = [];
    for (const row of values) {
      checkTuple(row, this.sizes);
      const a = Number(uniformBelow(BigInt(d), coins));
      attributes.push(a);
      data.push(this.oracles[a].randomize([row[a]], coins).values.data[0]);
    }
    return {
      attributes: field(indexDtype(d), attributes),
      values: field(indexDtype(Math.max(...this.sizes)), data),
    };
  }
}

/** RS+FD (Arcolezi et al. CIKM 2021): one sampled attribute, uniform fake data for the rest. */
export class RSFD {
  static PARAMS = ['epsilon', 'domain_sizes', 'protocol'];
  constructor({ epsilon, domain_sizes, protocol = 'grr' }) {
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    this.sizes = checkSizes(domain_sizes);
    if (protocol !== 'grr' && protocol !== 'oue-z') {
      throw new RangeError(`protocol must be 'grr' or 'oue-z', got ${JSON.stringify(protocol)}`);
    }
    this.protocol = protocol;
    this.offsets = [0];
    for (const k of this.sizes) this.offsets.push(this.offsets[this.offsets.length - 1] + k);
    if (protocol === 'grr') {
      this.weights = this.sizes.map((k) => {
        const [wKeep, wOther] = rrWeights(this.epsilon, k - 1);
        const total = wKeep + BigInt(k - 1) * wOther;
        return { wKeep, wOther, total, limit: ((1n << 64n) / total) * total };
      });
    } else {
      // OUE's p = 1/2, q = 1 / (e^eps + 1) at 2^-64 within epsilon (rsfd.RSFD._thresholds)
      [this.big, this.small] = unaryThresholds(0.5, 1.0 / (crExp(this.epsilon) + 1.0), this.epsilon);
    }
  }
  randomize(values, coins = secureCoins) {
    const d = this.sizes.length;
    const data = [];
    for (const row of values) {
      checkTuple(row, this.sizes);
      const a = Number(uniformBelow(BigInt(d), coins));
      if (this.protocol === 'grr') {
        const out = this.sizes.map((k) => Number(uniformBelow(BigInt(k), coins)));
        const w = this.weights[a];
        out[a] = grrFromUniform(row[a], this.sizes[a], w.wKeep, w.wOther, uniformBelow(w.total, coins, w.limit));
        data.push(out);
      } else {
        const total = this.offsets[d];
        const hot = this.offsets[a] + row[a];
        const words = coins.u64Array(total);
        const bits = new Array(total);
        for (let i = 0; i < total; i++) bits[i] = words[i] < (i === hot ? this.big : this.small) ? 1 : 0;
        data.push(packBits(bits));
      }
    }
    if (this.protocol === 'grr') {
      return { values: field(indexDtype(Math.max(...this.sizes)), data, d) };
    }
    return { bits: field('|u1', data, (this.offsets[d] + 7) >> 3) };
  }
}

/** The shared report of specs that send one cell of one group (CALM's marginals, grids). */
function groupedReports(groupName, groups, oracles, cells, valueDtype, coins) {
  const which = [];
  const seeds = [];
  const data = [];
  for (const cellOfGroup of cells) {
    const m = Number(uniformBelow(BigInt(groups), coins));
    which.push(m);
    const r = oracleReport(oracles[m], cellOfGroup(m), coins);
    if (r.seed !== undefined) seeds.push(r.seed);
    data.push(r.value);
  }
  const out = { [groupName]: field(indexDtype(Math.max(groups, 2)), which) };
  if (seeds.length || oracles[0] instanceof OLH) out.seeds = field('<u8', seeds);
  out.values = field(valueDtype, data);
  return out;
}

/**
 * CALM (Zhang et al. CCS 2018): one collected `ell`-marginal per user (every `ell`-subset of
 * the attributes), her cell through GRR or OLH. The server's spec carries `ell` (Python
 * resolves its default, CALM's choice, at construction); without it, `ell = way`. Likewise
 * `mix_items` (OLH hashes the cells' mixed keys): Python's default with OLH, carried by the
 * spec; a spec dict without it means false (the cell index itself, the earlier wire format),
 * a hand-built CALM resolves it as Python does (true with OLH).
 */
export class CALM {
  static PARAMS = ['epsilon', 'domain_sizes', 'way', 'oracle', 'ell', 'mix_items'];
  constructor({ epsilon, domain_sizes, way = 2, oracle = 'olh', ell = null, mix_items = null }) {
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    this.sizes = checkSizes(domain_sizes);
    this.way = checkInteger(way, 'way', 1, this.sizes.length);
    this.ell = ell === null || ell === undefined ? this.way : checkInteger(ell, 'ell', this.way, this.sizes.length);
    if (oracle !== 'olh' && oracle !== 'grr') {
      throw new RangeError(`oracle must be 'olh' or 'grr', got ${JSON.stringify(oracle)}`);
    }
    this.marginals = combinations(this.sizes.length, this.ell);
    const mix = checkMix(mix_items, oracle === 'olh');
    const Cls = oracle === 'grr' ? GRR : OLH;
    const extra = oracle === 'olh' ? { mix_items: mix } : {};
    this.oracles = this.marginals.map(
      (attrs) => new Cls({ epsilon: this.epsilon, domain_size: attrs.reduce((p, a) => p * this.sizes[a], 1), ...extra }),
    );
    // calm.CALM._max_cells: OLH's hash range, or the largest marginal
    const most = oracle === 'olh' ? this.oracles[0].g : Math.max(...this.oracles.map((o) => o.domainSize));
    this.valueDtype = indexDtype(Math.max(most, 2));
  }
  randomize(values, coins = secureCoins) {
    const cells = values.map((row) => {
      checkTuple(row, this.sizes);
      return (m) => cellOf(row, this.marginals[m], this.sizes);
    });
    return groupedReports('marginals', this.marginals.length, this.oracles, cells, this.valueDtype, coins);
  }
}

/**
 * The checked `mix_items` of CALM, FullDomain and the grids: a boolean, true only with OLH;
 * null (a hand-built spec) resolves as Python's does, true with OLH. A spec dict without it
 * reaches here as false (fromSpec: the earlier wire format).
 */
function checkMix(mix, olh) {
  if (mix === null || mix === undefined) return olh;
  if (typeof mix !== 'boolean') throw new TypeError(`mix_items must be true or false, got ${JSON.stringify(mix)}`);
  if (mix && !olh) throw new RangeError("mix_items must be false unless oracle is 'olh'");
  return mix;
}

/**
 * FullDomain: the whole tuple as one cell of the product domain (Hadamard response or OLH;
 * with `mix_items`, OLH hashes the cells' mixed keys, as CALM).
 */
export class FullDomain {
  static PARAMS = ['epsilon', 'domain_sizes', 'oracle', 'mix_items'];
  constructor({ epsilon, domain_sizes, oracle = 'hr', mix_items = null }) {
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    this.sizes = checkSizes(domain_sizes);
    const cells = this.sizes.reduce((p, k) => p * k, 1);
    const mix = checkMix(mix_items, oracle === 'olh');
    if (oracle === 'hr') this.inner = new HadamardResponse({ epsilon: this.epsilon, domain_size: cells });
    else if (oracle === 'olh') this.inner = new OLH({ epsilon: this.epsilon, domain_size: cells, mix_items: mix });
    else throw new RangeError(`oracle must be 'hr' or 'olh', got ${JSON.stringify(oracle)}`);
    this.all = this.sizes.map((_, j) => j);
  }
  randomize(values, coins = secureCoins) {
    const cells = values.map((row) => cellOf(checkTuple(row, this.sizes), this.all, this.sizes));
    return this.inner.randomize(cells, coins);
  }
}

/**
 * Shared base of HDG, TDG and UniformGrid: one grid per user, her cell of it through OLH.
 * With `mix_items` (Python's default, carried by the spec), OLH hashes the cells' mixed
 * keys, as CALM; a spec dict without it means false (the cell index itself, the earlier wire
 * format).
 */
class GridMechanism {
  constructor({ epsilon, low, high, integer = false, mix_items = null }) {
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    this.mix = checkMix(mix_items, true);
    if (!Array.isArray(low) || !Array.isArray(high) || low.length !== high.length || low.length < 1 || low.length > MAX_GRID_ATTRIBUTES) {
      throw new RangeError(
        `low and high must be lists of 1 to ${MAX_GRID_ATTRIBUTES} bounds of the same length, got ${JSON.stringify(low)}, ${JSON.stringify(high)}`,
      );
    }
    low.forEach((lo, j) => checkBounds(lo, high[j]));
    this.low = low;
    this.high = high;
    // the attributes declared integer-valued (the spec's `integer`, left out when none is)
    const flags = Array.isArray(integer) ? integer : low.map(() => integer);
    if (flags.length !== low.length || !flags.every((f) => typeof f === 'boolean')) {
      throw new RangeError(`integer must be a bool or ${low.length} bools, got ${JSON.stringify(integer)}`);
    }
    this.integer = flags;
  }
  /** Set up the grids: `grids` lists each grid's attributes, `shapes` its granularities. */
  setGrids(grids, shapes) {
    this.grids = grids;
    this.shapes = shapes;
    this.oracles = shapes.map(
      (s) => new OLH({ epsilon: this.epsilon, domain_size: Math.max(s.reduce((p, g) => p * g, 1), 2), mix_items: this.mix }),
    );
    this.valueDtype = indexDtype(this.oracles[0].g);
  }
  checkRow(row) {
    const d = this.low.length;
    if (!Array.isArray(row) || row.length !== d) {
      throw new RangeError(`value must be a tuple of ${d} reals, got ${JSON.stringify(row)}`);
    }
    row.forEach((x, j) => {
      if (typeof x !== 'number' || !(x >= this.low[j] && x <= this.high[j])) {
        throw new RangeError(`value[${j}] must be a real number in [${this.low[j]}, ${this.high[j]}], got ${x}`);
      }
      if (this.integer[j] && !Number.isInteger(x)) {
        throw new RangeError(`value[${j}] must be an integer (attribute ${j} is declared integer), got ${x}`);
      }
    });
    return row;
  }
  /** ranges._GridMechanism._cell for one user and grid m. */
  cell(row, m) {
    let cell = 0;
    this.grids[m].forEach((a, i) => {
      const g = this.shapes[m][i];
      const t = (row[a] - this.low[a]) / (this.high[a] - this.low[a]);
      cell = cell * g + Math.min(Math.max(Math.floor(t * g), 0), g - 1);
    });
    return cell;
  }
  randomize(values, coins = secureCoins) {
    const cells = values.map((row) => {
      this.checkRow(row);
      return (m) => this.cell(row, m);
    });
    return groupedReports('grids', this.grids.length, this.oracles, cells, this.valueDtype, coins);
  }
}

function resolved(value, name, spec) {
  if (value == null) {
    throw new RangeError(
      `${name} must be given (the collector's spec dict holds it resolved), got ${value} for ${spec}`,
    );
  }
  return checkInteger(value, name, 2, 1024);
}

/** TDG (Yang et al. VLDB 2020): one g2 x g2 grid per pair of attributes. */
export class TDG extends GridMechanism {
  // population only sizes the grids on the Python side; the spec dict carries them resolved
  static PARAMS = ['epsilon', 'low', 'high', 'population', 'integer', 'mix_items', 'g2'];
  constructor(params) {
    super(params);
    const g2 = resolved(params.g2, 'g2', 'TDG');
    const pairs = combinations(this.low.length, 2);
    this.setGrids(pairs, pairs.map(() => [g2, g2]));
  }
}

/** HDG (Yang et al. VLDB 2020): a g1 grid per attribute, then a g2 x g2 grid per pair. */
export class HDG extends GridMechanism {
  // population only sizes the grids on the Python side; the spec dict carries them resolved
  static PARAMS = ['epsilon', 'low', 'high', 'population', 'integer', 'mix_items', 'g1', 'g2'];
  constructor(params) {
    super(params);
    const g1 = resolved(params.g1, 'g1', 'HDG');
    const g2 = resolved(params.g2, 'g2', 'HDG');
    const d = this.low.length;
    const ones = Array.from({ length: d }, (_, a) => [a]);
    const pairs = combinations(d, 2);
    this.setGrids([...ones, ...pairs], [...ones.map(() => [g1]), ...pairs.map(() => [g2, g2])]);
  }
}

/** UniformGrid: one grid of g cells per attribute over all the attributes. */
export class UniformGrid extends GridMechanism {
  // population only sizes the grids on the Python side; the spec dict carries them resolved
  static PARAMS = ['epsilon', 'low', 'high', 'population', 'integer', 'mix_items', 'g'];
  constructor(params) {
    super(params);
    const g = resolved(params.g, 'g', 'UniformGrid');
    const d = this.low.length;
    this.setGrids([Array.from({ length: d }, (_, a) => a)], [Array(d).fill(g)]);
  }
}

/** GroupMean: (group, value) rows; the value rounded to a bit, (group, bit) through GRR or OLH. */
export class GroupMean {
  static PARAMS = ['epsilon', 'domain_size', 'low', 'high', 'oracle'];
  constructor({ epsilon, domain_size, low = 0.0, high = 1.0, oracle = 'olh' }) {
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    this.domainSize = checkInteger(domain_size, 'domain_size', 2, 2 ** 31);
    checkBounds(low, high);
    this.low = low;
    this.high = high;
    if (oracle === 'grr') this.inner = new GRR({ epsilon: this.epsilon, domain_size: 2 * this.domainSize });
    else if (oracle === 'olh') this.inner = new OLH({ epsilon: this.epsilon, domain_size: 2 * this.domainSize, mix_items: false });
    else throw new RangeError(`oracle must be 'olh' or 'grr', got ${JSON.stringify(oracle)}`);
  }
  randomize(values, coins = secureCoins) {
    const items = values.map((row) => {
      const [g, v] = Array.isArray(row) && row.length === 2 ? row : [NaN, NaN];
      if (!Number.isInteger(g) || g < 0 || g >= this.domainSize || typeof v !== 'number' || !(v >= this.low && v <= this.high)) {
        throw new RangeError(
          `value must be a (group in [0, ${this.domainSize}), value in [${this.low}, ${this.high}]) pair, got ${JSON.stringify(row)}`,
        );
      }
      return 2 * g + roundToGrid((v - this.low) / (this.high - this.low), 1, coins.uniform());
    });
    return this.inner.randomize(items, coins);
  }
}

/** Most categorical items of AttributeSampling in all (_base.MAX_TOTAL_ITEMS). */
const MAX_TOTAL_ITEMS = 1 << 22;

/** The report cell of unit-scale t through PM's exact grid (mean._pm_grid_sample). */
function pmCell(g, t, coins) {
  const k = roundToGrid((t + 1.0) / 2.0, g.steps, coins.uniform());
  return flatBumpCell(k, g.cells, g.wLow, g.bump, uniformBelow(g.total, coins));
}

/** SR's cell (0: -C, 1: +C) of unit-scale t (mean.StochasticRounding._sample_cells). */
function srCell(g, t, coins) {
  const k = roundToGrid((t + 1.0) / 2.0, g.steps, coins.uniform());
  return srSign(g, k, uniformBelow(g.total, coins)) > 0 ? 1 : 0;
}

/**
 * AttributeSampling (Wang et al. ICDE 2019, section IV): k of the d attributes per user,
 * each through PM/HM (numerical, first) or GRR (categorical) at epsilon / k.
 */
export class AttributeSampling {
  static PARAMS = [
    'epsilon',
    'low',
    'high',
    'domain_sizes',
    'mechanism',
    'sampled',
    'report_cells',
  ];
  constructor({ epsilon, low = [0.0], high = [1.0], domain_sizes = [], mechanism = 'hm', sampled = null, report_cells = 1 << 18 }) {
    this.epsilon = checkEpsilon(epsilon, 30.0);
    if (!Array.isArray(low) || !Array.isArray(high) || low.length !== high.length || low.length < 1 || low.length > MAX_ATTRIBUTES) {
      throw new RangeError(
        `low and high must be lists of 1 to ${MAX_ATTRIBUTES} bounds of the same length, got ${JSON.stringify(low)}, ${JSON.stringify(high)}`,
      );
    }
    low.forEach((lo, j) => checkBounds(lo, high[j]));
    if (!Array.isArray(domain_sizes)) {
      throw new RangeError(`domain_sizes must be a list of integers >= 2, got ${JSON.stringify(domain_sizes)}`);
    }
    this.sizes = domain_sizes.map((k, j) => checkInteger(k, `domain_sizes[${j}]`, 2, MAX_TOTAL_ITEMS));
    this.low = low;
    this.high = high;
    this.halfSpans = low.map((lo, j) => (high[j] - lo) / 2.0);
    const d = low.length + this.sizes.length;
    if (d < 2 || d > MAX_ATTRIBUTES) {
      throw new RangeError(`low and domain_sizes must declare 2 to ${MAX_ATTRIBUTES} attributes in all, got ${d}`);
    }
    if (this.sizes.reduce((s, k) => s + k, 0) > MAX_TOTAL_ITEMS) {
      throw new RangeError(`domain_sizes must total at most ${MAX_TOTAL_ITEMS} items, got ${this.sizes.reduce((s, k) => s + k, 0)}`);
    }
    if (mechanism !== 'hm' && mechanism !== 'pm') {
      throw new RangeError(`mechanism must be 'hm' or 'pm', got ${JSON.stringify(mechanism)}`);
    }
    this.d = d;
    // sampling.sampled_attributes: max(1, min(d, floor(epsilon / 2.5)))
    this.k = sampled == null ? Math.max(1, Math.min(d, Math.floor(this.epsilon / 2.5))) : checkInteger(sampled, 'sampled', 1, d);
    const params = { epsilon: this.epsilon / this.k, report_cells };
    this.numeric = mechanism === 'hm' ? new HybridMechanism(params) : new PiecewiseMechanism(params);
    this.reportCells = report_cells;
    this.oracles = this.sizes.map((k) => new GRR({ epsilon: this.epsilon / this.k, domain_size: k }));
  }
  /** The sum of the k largest per-attribute exact losses (AttributeSampling.privacy_loss). */
  privacyLoss() {
    const losses = [...this.low.map(() => this.numeric.privacyLoss()), ...this.oracles.map((o) => o.privacyLoss())];
    return losses.sort((a, b) => b - a).slice(0, this.k).reduce((s, x) => s + x, 0);
  }
  checkRow(row) {
    if (!Array.isArray(row) || row.length !== this.d) {
      throw new RangeError(`value must be a tuple of ${this.d} entries (reals, then items), got ${JSON.stringify(row)}`);
    }
    const dn = this.low.length;
    row.forEach((x, j) => {
      if (j < dn) {
        if (typeof x !== 'number' || !(x >= this.low[j] && x <= this.high[j])) {
          throw new RangeError(`value[${j}] must be a real number in [${this.low[j]}, ${this.high[j]}], got ${x}`);
        }
      } else if (!Number.isInteger(x) || x < 0 || x >= this.sizes[j - dn]) {
        throw new RangeError(`value[${j}] must be an integer in [0, ${this.sizes[j - dn]}), got ${x}`);
      }
    });
    return row;
  }
  /** The report cell of unit-scale t through PM or HM (HM: the branch coin first). */
  numericCell(t, coins) {
    const m = this.numeric;
    if (m instanceof PiecewiseMechanism) return pmCell(m.grid, t, coins);
    if (m.pm !== null && coins.uniform() < m.pmProbability) return pmCell(m.pm, t, coins);
    return srCell(m.sr, t, coins) + (m.pm === null ? 0 : this.reportCells);
  }
  randomize(values, coins = secureCoins) {
    const dn = this.low.length;
    const attributes = [];
    const data = [];
    for (const row of values) {
      this.checkRow(row);
      const which = permutation(this.d, coins).slice(0, this.k).sort((a, b) => a - b);
      attributes.push(which);
      data.push(
        which.map((a) =>
          a < dn
            ? this.numericCell(toUnit(row[a], this.low[a], this.halfSpans[a]), coins)
            : this.oracles[a - dn].randomize([row[a]], coins).values.data[0],
        ),
      );
    }
    return { attributes: field('<i8', attributes, this.k), values: field('<i8', data, this.k) };
  }
}

/** Most attributes of DuchiMean (duchi.MAX_DUCHI_ATTRIBUTES). */
const MAX_DUCHI_ATTRIBUTES = 32;

/** binom(n, k) as a BigInt. */
function binomial(n, k) {
  let out = 1n;
  for (let i = 0; i < k; i++) out = (out * BigInt(n - i)) / BigInt(i + 1);
  return out;
}

/** A uniform permutation of [0, d): Fisher-Yates from the last slot down (U below i + 1). */
function permutation(d, coins) {
  const perm = Array.from({ length: d }, (_, a) => a);
  for (let i = d - 1; i > 0; i--) {
    const j = Number(uniformBelow(BigInt(i + 1), coins));
    [perm[i], perm[j]] = [perm[j], perm[i]];
  }
  return perm;
}

/**
 * DuchiMean (Duchi, Jordan, Wainwright JASA 2018, section 4.2.3): a vertex of the scaled
 * hypercube per user, agreeing with her rounded signs on a coordinates, with the integer
 * weights of duchi._law (w_high when 2a > d, else w_low, times binom(d, a)).
 */
export class DuchiMean {
  static PARAMS = ['epsilon', 'low', 'high'];
  constructor({ epsilon, low = [0.0, 0.0], high = [1.0, 1.0] }) {
    this.epsilon = checkEpsilon(epsilon, 30.0);
    if (!Array.isArray(low) || !Array.isArray(high) || low.length !== high.length || low.length < 2 || low.length > MAX_DUCHI_ATTRIBUTES) {
      throw new RangeError(
        `low and high must be lists of 2 to ${MAX_DUCHI_ATTRIBUTES} bounds of the same length, got ${JSON.stringify(low)}, ${JSON.stringify(high)}`,
      );
    }
    low.forEach((lo, j) => checkBounds(lo, high[j]));
    this.low = low;
    this.high = high;
    this.halfSpans = low.map((lo, j) => (high[j] - lo) / 2.0);
    const d = low.length;
    let nHigh = 0n;
    for (let a = 0; a <= d; a++) if (2 * a > d) nHigh += binomial(d, a);
    const nLow = (1n << BigInt(d)) - nHigh;
    [this.wLow, this.wHigh] = ratioWeights(this.epsilon, Number(nLow), Number(nHigh));
    this.cumulative = [0n];
    for (let a = 0; a <= d; a++) {
      const w = binomial(d, a) * (2 * a > d ? this.wHigh : this.wLow);
      this.cumulative.push(this.cumulative[a] + w);
    }
    this.total = this.cumulative[d + 1];
    this.limit = ((1n << 64n) / this.total) * this.total;
  }
  privacyLoss() {
    return ratioLoss(this.wLow, this.wHigh);
  }
  randomize(values, coins = secureCoins) {
    const d = this.low.length;
    const data = values.map((row) => {
      if (!Array.isArray(row) || row.length !== d) {
        throw new RangeError(`value must be a tuple of ${d} reals, got ${JSON.stringify(row)}`);
      }
      const signs = row.map((x, j) => {
        if (typeof x !== 'number' || !(x >= this.low[j] && x <= this.high[j])) {
          throw new RangeError(`value[${j}] must be a real number in [${this.low[j]}, ${this.high[j]}], got ${x}`);
        }
        return roundToGrid((toUnit(x, this.low[j], this.halfSpans[j]) + 1.0) / 2.0, 1, coins.uniform());
      });
      const u = uniformBelow(this.total, coins, this.limit);
      let agree = 0;
      while (u >= this.cumulative[agree + 1]) agree++;
      const perm = permutation(d, coins);
      const out = signs.slice();
      for (let i = agree; i < d; i++) out[perm[i]] = 1 - signs[perm[i]];
      return out;
    });
    return { signs: field('|u1', data, d) };
  }
}

/** Smallest budget per attribute of LaplaceMean (laplace.MIN_ATTRIBUTE_EPSILON). */
const MIN_ATTRIBUTE_EPSILON = 1e-3;
/** LaplaceMean's reports are clipped to [-MAX_NOISE, G + MAX_NOISE] (laplace.MAX_NOISE). */
const MAX_NOISE = 1 << 16;

/**
 * LaplaceMean: every attribute at epsilon / d by the discrete Laplace (two-sided
 * geometric) mechanism (Ghosh, Roughgarden, Sundararajan STOC 2009) on the grid of G steps,
 * each geometric step one exact integer coin w_low / w_high.
 */
export class LaplaceMean {
  static PARAMS = ['epsilon', 'low', 'high'];
  constructor({ epsilon, low = [0.0, 0.0], high = [1.0, 1.0] }) {
    this.epsilon = checkEpsilon(epsilon, 40.0);
    if (!Array.isArray(low) || !Array.isArray(high) || low.length !== high.length || low.length < 1 || low.length > MAX_ATTRIBUTES) {
      throw new RangeError(
        `low and high must be lists of 1 to ${MAX_ATTRIBUTES} bounds of the same length, got ${JSON.stringify(low)}, ${JSON.stringify(high)}`,
      );
    }
    low.forEach((lo, j) => checkBounds(lo, high[j]));
    const d = low.length;
    if (this.epsilon / d < MIN_ATTRIBUTE_EPSILON) {
      throw new RangeError(`epsilon must be >= ${MIN_ATTRIBUTE_EPSILON} d for ${d} attributes, got ${epsilon}`);
    }
    this.low = low;
    this.high = high;
    this.steps = Math.max(1, Math.ceil((2.0 * this.epsilon) / d));
    [this.wLow, this.wHigh] = ratioWeights(this.epsilon / (d * this.steps), 1, 1.0);
    this.limit = ((1n << 64n) / this.wHigh) * this.wHigh;
  }
  /** d G log(w_high / w_low) (LaplaceMean.privacy_loss). */
  privacyLoss() {
    return this.low.length * this.steps * ratioLoss(this.wLow, this.wHigh);
  }
  /** One geometric count per attribute, P[X >= m] = rho^m, in rounds over the running ones. */
  geometric(d, coins) {
    const out = new Array(d).fill(0);
    let active = Array.from({ length: d }, (_, j) => j);
    while (active.length) {
      active = active.filter(() => uniformBelow(this.wHigh, coins, this.limit) < this.wLow);
      for (const j of active) out[j] += 1;
    }
    return out;
  }
  randomize(values, coins = secureCoins) {
    const d = this.low.length;
    const g = this.steps;
    const data = values.map((row) => {
      if (!Array.isArray(row) || row.length !== d) {
        throw new RangeError(`value must be a tuple of ${d} reals, got ${JSON.stringify(row)}`);
      }
      const k = row.map((x, j) => {
        if (typeof x !== 'number' || !(x >= this.low[j] && x <= this.high[j])) {
          throw new RangeError(`value[${j}] must be a real number in [${this.low[j]}, ${this.high[j]}], got ${x}`);
        }
        const t = Math.min(Math.max((x - this.low[j]) / (this.high[j] - this.low[j]), 0.0), 1.0);
        return roundToGrid(t, g, coins.uniform());
      });
      const up = this.geometric(d, coins);
      const down = this.geometric(d, coins);
      return k.map((kj, j) => Math.min(Math.max(kj + up[j] - down[j], -MAX_NOISE), g + MAX_NOISE));
    });
    return { values: field('<i8', data, d) };
  }
}

/** Most Hadamard coefficients of Fourier (fourier.MAX_COEFFICIENTS). */
const MAX_COEFFICIENTS = 1 << 22;

/**
 * Fourier (Cormode, Kulkarni, Srivastava SIGMOD 2018, InpHT): one bit set of the
 * way-way marginals' bits per user, her parity on it through binary randomized response.
 */
export class Fourier {
  static PARAMS = ['epsilon', 'domain_sizes', 'way'];
  constructor({ epsilon, domain_sizes, way = 2 }) {
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    this.sizes = checkSizes(domain_sizes);
    const d = this.sizes.length;
    this.way = checkInteger(way, 'way', 2, d);
    // Fourier.bit_widths: max(1, (k - 1).bit_length())
    this.widths = this.sizes.map((k) => Math.max(1, (k - 1).toString(2).length));
    const bits = this.widths.reduce((s, b) => s + b, 0);
    if (bits > 62) throw new RangeError(`domain_sizes must fit in 62 bits in all, got ${bits}`);
    this.offsets = [0];
    for (const b of this.widths.slice(0, -1)) this.offsets.push(this.offsets[this.offsets.length - 1] + b);
    const sets = combinations(d, this.way);
    let count = 0;
    for (const attrs of sets) {
      count += 2 ** attrs.reduce((s, a) => s + this.widths[a], 0);
      if (count > MAX_COEFFICIENTS) {
        throw new RangeError(
          `domain_sizes and way must need at most ${MAX_COEFFICIENTS} coefficients, got more for way = ${this.way}`,
        );
      }
    }
    // Fourier.coefficient_masks: every non-empty subset of each marginal's bits, sorted
    const masks = new Set();
    for (const attrs of sets) {
      const positions = attrs.flatMap((a) => Array.from({ length: this.widths[a] }, (_, t) => BigInt(this.offsets[a] + t)));
      for (let local = 1; local < 2 ** positions.length; local++) {
        let mask = 0n;
        positions.forEach((pos, t) => {
          if (Math.floor(local / 2 ** t) % 2 === 1) mask |= 1n << pos;
        });
        masks.add(mask);
      }
    }
    this.masks = [...masks].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    [this.wKeep, this.wOther] = rrWeights(this.epsilon, 1);
  }
  privacyLoss() {
    return ratioLoss(this.wOther, this.wKeep);
  }
  randomize(values, coins = secureCoins) {
    const which = [];
    const data = [];
    const total = this.wKeep + this.wOther;
    for (const row of values) {
      checkTuple(row, this.sizes);
      let code = 0n;
      row.forEach((v, a) => {
        code |= BigInt(v) << BigInt(this.offsets[a]);
      });
      const m = Number(uniformBelow(BigInt(this.masks.length), coins));
      let bits = code & this.masks[m];
      let parity = 0;
      for (; bits; bits &= bits - 1n) parity ^= 1;
      const flip = uniformBelow(total, coins) < this.wOther ? 1 : 0;
      which.push(m);
      data.push(parity ^ flip);
    }
    return { coefficients: field(indexDtype(this.masks.length), which), values: field('|u1', data) };
  }
}

/** The multi-attribute randomizers, by their Python names. */
export const MULTIDIM = { SPL, SMP, RSFD, CALM, FullDomain, HDG, TDG, UniformGrid, GroupMean, AttributeSampling, DuchiMean, LaplaceMean, Fourier };

// fromSpec (mechanisms.js) finds them by name; registered here, since mechanisms.js does not
// import this module (no import cycle)
Object.assign(MECHANISMS, MULTIDIM);
