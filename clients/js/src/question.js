// Specs, encoders and questions as the Python side has them (ldpkit.spec, ldpkit.Encoder,
// ldpkit.Question): full parameter lists with Python's defaults, the encoder's mapping of
// labels to items (unknown -> "<other>", missing -> "<missing>"), numerical clipping, and
// the fingerprints (sha256 of Python's canonical json.dumps, first 16 hex digits).

import { defaultBuckets, defaultHhShare } from './mechanisms.js';
import { cryptoObj } from './random.js';

const F = 'float';
const I = 'int';
const S = 'str';
const FS = 'floats'; // a list of Python floats, or null (PrivKV's fake_means)
const OPTIONAL = true;

/**
 * Every supported mechanism's parameters: [name, Python type, default] (undefined: required);
 * a 4th entry OPTIONAL marks a parameter that Python's to_dict() leaves out when it is None
 * (SquareWave's log_scale: the linear wave's spec and fingerprint are unchanged).
 */
export const PARAMS = {
  GRR: [['epsilon', F], ['domain_size', I]],
  OUE: [['epsilon', F], ['domain_size', I]],
  LGRR: [['epsilon', F], ['domain_size', I], ['epsilon_inf', F]],
  LOUE: [['epsilon', F], ['domain_size', I], ['epsilon_inf', F]],
  LOSUE: [['epsilon', F], ['domain_size', I], ['epsilon_inf', F]],
  LSUE: [['epsilon', F], ['domain_size', I], ['epsilon_inf', F]],
  LSOUE: [['epsilon', F], ['domain_size', I], ['epsilon_inf', F]],
  LOLOHA: [['epsilon', F], ['domain_size', I], ['epsilon_inf', F], ['hash_range', I]],
  DBitFlipPM: [['epsilon', F], ['domain_size', I], ['sampled_bits', I, 1]],
  OneBitMean: [['epsilon', F], ['low', F, -1.0], ['high', F, 1.0], ['points', I, 64]],
  OLH: [['epsilon', F], ['domain_size', I], ['hash_range', I, null]],
  HadamardResponse: [['epsilon', F], ['domain_size', I]],
  SquareWave: [
    ['epsilon', F],
    ['low', F, 0.0],
    ['high', F, 1.0],
    ['buckets', I, 1024],
    ['output_buckets', I, null],
    ['bandwidth', F, null],
    ['log_scale', F, null, OPTIONAL],
  ],
  DiscreteSquareWave: [['epsilon', F], ['buckets', I], ['low', F, 0.0], ['high', F, 1.0]],
  StochasticRounding: [['epsilon', F], ['low', F, -1.0], ['high', F, 1.0]],
  PiecewiseMechanism: [['epsilon', F], ['low', F, -1.0], ['high', F, 1.0], ['report_cells', I, 262144]],
  HybridMechanism: [['epsilon', F], ['low', F, -1.0], ['high', F, 1.0], ['report_cells', I, 262144]],
  HierarchicalHistogram: [
    ['epsilon', F],
    ['low', F, 0.0],
    ['high', F, 1.0],
    ['buckets', I, 1024],
    ['branching', I, 4],
    ['oracle', S, null],
  ],
  // buckets and hh_share: null resolves to Python's defaults (to_dict() holds the resolved values)
  AutoDistribution: [
    ['epsilon', F],
    ['low', F, 0.0],
    ['high', F, 1.0],
    ['expected_n', I, null],
    ['buckets', I, null],
    ['hh_share', F, null],
  ],
  // the set-valued family (ldpkit.sets; users' sets or key-value pairs: no encoder)
  PaddingSampling: [['epsilon', F], ['domain_size', I], ['padding', I], ['oracle', S, null]],
  PCKV: [['epsilon', F], ['domain_size', I], ['padding', I], ['method', S, 'ue']],
  PrivKV: [['epsilon', F], ['domain_size', I], ['rounds', I, 1], ['round', I, 0], ['fake_means', FS, null]],
  PrivSet: [['epsilon', F], ['domain_size', I], ['padding', I], ['subset_size', I, null]],
};

/** Parameters whose null Python's _validate replaces by a default (so to_dict() never holds null). */
const RESOLVED = {
  AutoDistribution: {
    buckets: (p) => defaultBuckets(p.expected_n),
    hh_share: (p) => defaultHhShare(p.epsilon),
  },
};

/** {mechanism, params} with every parameter present (Python's defaults filled in). */
export function normalizeSpec(spec) {
  const fields = PARAMS[spec?.mechanism];
  if (fields === undefined) {
    throw new Error(`mechanism must be one of ${Object.keys(PARAMS).join(', ')}, got ${spec?.mechanism}`);
  }
  const given = spec.params ?? {};
  const names = fields.map((f) => f[0]);
  const extra = Object.keys(given).filter((k) => !names.includes(k));
  if (extra.length) throw new Error(`params of ${spec.mechanism} must be among ${names.join(', ')}, got ${extra.join(', ')}`);
  const params = {};
  for (const [name, type, fallback, optional] of fields) {
    let v = given[name] === undefined ? fallback : given[name];
    if (v === undefined) throw new Error(`params of ${spec.mechanism} must include ${name}`);
    if (v === null && optional) continue;
    if (type === S) {
      if (v !== null && typeof v !== 'string') throw new TypeError(`${name} must be null or a string, got ${v}`);
    } else if (type === FS) {
      if (v !== null && !(Array.isArray(v) && v.every((x) => typeof x === 'number' && Number.isFinite(x)))) {
        throw new TypeError(`${name} must be null or a list of finite numbers, got ${v}`);
      }
    } else if (v !== null && (typeof v !== 'number' || !Number.isFinite(v) || (type === I && !Number.isInteger(v)))) {
      throw new TypeError(`${name} must be ${type === I ? 'an integer' : 'a finite number'}, got ${v}`);
    }
    params[name] = v;
  }
  for (const [name, resolve] of Object.entries(RESOLVED[spec.mechanism] ?? {})) {
    if (params[name] === null) params[name] = resolve(params);
  }
  return { mechanism: spec.mechanism, params };
}

// --- Python's json.dumps(sort_keys=True, separators=(",", ":")) ----------------------------
class PyFloat {
  constructor(value) {
    this.value = value;
  }
}

/** repr(float) of Python: shortest round-trip digits, exponent below 1e-4 and from 1e16. */
export function pyFloatRepr(x) {
  if (Number.isNaN(x)) return 'NaN';
  if (!Number.isFinite(x)) return x > 0 ? 'Infinity' : '-Infinity';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const [mant, exp] = Math.abs(x).toExponential().split('e'); // shortest digits
  const digits = mant.replace('.', '');
  const e = Number(exp);
  const sign = x < 0 ? '-' : '';
  if (e < -4 || e >= 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${sign}${m}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`;
  }
  if (e < 0) return `${sign}0.${'0'.repeat(-e - 1)}${digits}`;
  if (digits.length <= e + 1) return `${sign}${digits}${'0'.repeat(e + 1 - digits.length)}.0`;
  return `${sign}${digits.slice(0, e + 1)}.${digits.slice(e + 1)}`;
}

/** A JSON string as Python writes it (ensure_ascii: \\uXXXX for everything past '~'). */
function pyString(s) {
  return JSON.stringify(s).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Canonical Python JSON of a value; PyFloat marks Python floats (JS numbers are ints). */
export function pyDumps(v) {
  if (v === null) return 'null';
  if (v instanceof PyFloat) return pyFloatRepr(v.value);
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : pyFloatRepr(v);
  if (typeof v === 'string') return pyString(v);
  if (Array.isArray(v)) return `[${v.map(pyDumps).join(',')}]`;
  const keys = Object.keys(v).sort();
  return `{${keys.map((k) => `${pyString(k)}:${pyDumps(v[k])}`).join(',')}}`;
}

/** The spec dict with its float parameters marked, as Mechanism.to_dict() types them. */
function typedSpec(spec) {
  const s = normalizeSpec(spec);
  const params = {};
  for (const [name, type] of PARAMS[s.mechanism]) {
    if (!(name in s.params)) continue; // an optional parameter left out (None)
    const v = s.params[name];
    if (type === FS && v !== null) params[name] = v.map((x) => new PyFloat(x));
    else params[name] = type === F && v !== null ? new PyFloat(v) : v;
  }
  return { mechanism: s.mechanism, params };
}

async function sha16(text) {
  const digest = await cryptoObj.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('').slice(0, 16);
}

/** Mechanism.fingerprint of a spec dict {mechanism, params} (async: Web Crypto). */
export async function specFingerprint(spec) {
  return sha16(pyDumps(typedSpec(spec)));
}

// --- the encoder -----------------------------------------------------------------------------
export const OTHER = '<other>';
export const MISSING = '<missing>';

function isMissing(label) {
  return label === null || label === undefined || (typeof label === 'number' && Number.isNaN(label));
}

/** A key equal for labels Python finds equal (1 == 1.0 == True; '1' differs). */
function labelKey(label) {
  if (typeof label === 'string') return `s${label}`;
  if (typeof label === 'boolean') return label ? 'n1' : 'n0';
  if (typeof label === 'number') return `n${label === 0 ? 0 : label}`;
  return undefined; // objects, arrays: never a category
}

/** ldpkit.Encoder from its to_dict() / the collection info ({categories, unknown, missing}). */
export class Encoder {
  constructor({ categories, unknown = 'error', missing = 'error' }) {
    if (!Array.isArray(categories)) throw new TypeError(`categories must be an array of labels, got ${categories}`);
    if (!['error', 'other'].includes(unknown)) throw new RangeError(`unknown must be 'error' or 'other', got ${unknown}`);
    if (!['error', 'item'].includes(missing)) throw new RangeError(`missing must be 'error' or 'item', got ${missing}`);
    this.categories = categories;
    this.unknown = unknown;
    this.missing = missing;
    this.index = new Map();
    categories.forEach((c, i) => {
      const key = labelKey(c);
      if (key === undefined || isMissing(c)) throw new TypeError(`categories must be strings, numbers or booleans, got ${c}`);
      if (c === OTHER || c === MISSING) throw new RangeError(`categories must not contain the reserved label ${c}`);
      if (this.index.has(key)) throw new RangeError(`categories must be distinct, got ${c} twice`);
      this.index.set(key, i);
    });
    this.labels = [...categories, ...(unknown === 'other' ? [OTHER] : []), ...(missing === 'item' ? [MISSING] : [])];
    this.domainSize = this.labels.length;
  }
  /** The item of each label, as Encoder.encode (unknown -> "<other>", missing -> "<missing>"). */
  encode(labels) {
    return labels.map((label) => {
      if (isMissing(label)) {
        if (this.missing === 'item') return this.domainSize - 1;
        throw new RangeError(`labels must not be missing (null/NaN); the question's encoder has missing = 'error'`);
      }
      const i = this.index.get(labelKey(label));
      if (i !== undefined) return i;
      if (this.unknown === 'other') return this.categories.length;
      throw new RangeError(`label ${JSON.stringify(label)} is not among the encoder's ${this.categories.length} categories (unknown = 'error')`);
    });
  }
  toDict() {
    return { format: 1, categories: this.categories, unknown: this.unknown, missing: this.missing };
  }
}

// --- questions -------------------------------------------------------------------------------
function isNumerical(spec) {
  const names = PARAMS[spec.mechanism].map((f) => f[0]);
  return names.includes('low') && names.includes('high');
}

/**
 * The client's view of a Question file entry (Question.to_dict(), JSON): a collection info
 * that buildBody/send accept, plus the question's own fingerprint. Async (Web Crypto).
 * Caveat: JSON does not tell 2 from 2.0, so a float category with an integer value
 * (rare) gives another question fingerprint than Python's (the items are the same).
 */
export async function questionInfo(doc) {
  if (doc === null || typeof doc !== 'object') throw new TypeError(`question must be an object, got ${doc}`);
  if ((doc.format ?? 1) !== 1) throw new RangeError(`format must be 1, got ${doc.format}`);
  const extra = Object.keys(doc).filter((k) => !['format', 'name', 'description', 'spec', 'encoder', 'clip'].includes(k));
  if (extra.length) throw new RangeError(`question must only have the keys format, name, description, spec, encoder, clip, got ${extra}`);
  const spec = normalizeSpec(doc.spec);
  const numerical = isNumerical(spec);
  const clip = doc.clip ?? 'error';
  if (!['error', 'clip'].includes(clip)) throw new RangeError(`clip must be 'error' or 'clip', got ${clip}`);
  let encoder = null;
  if (doc.encoder != null) {
    if (numerical) throw new RangeError('encoder must be None for a numerical question');
    encoder = new Encoder(doc.encoder);
    if (encoder.domainSize !== spec.params.domain_size) {
      throw new RangeError(`encoder must give spec.domain_size = ${spec.params.domain_size} items, got ${encoder.domainSize}`);
    }
  }
  const typed = { format: 1, name: doc.name, spec: typedSpec(spec) };
  if (encoder) typed.encoder = encoder.toDict();
  if (numerical) typed.clip = clip;
  return {
    name: doc.name,
    description: doc.description ?? '',
    mechanism: spec,
    fingerprint: await specFingerprint(spec),
    question_fingerprint: await sha16(pyDumps(typed)),
    encoder: encoder ? encoder.toDict() : null,
    clip: numerical ? clip : undefined,
  };
}

/** Every question of a questions file ({"question": [...]}, save_questions' JSON). */
export async function loadQuestions(doc) {
  const items = typeof doc === 'string' ? JSON.parse(doc).question : doc?.question;
  if (!Array.isArray(items) || items.length === 0) throw new RangeError('the file must hold a non-empty "question" list');
  return Promise.all(items.map(questionInfo));
}

/** Throws unless the collector's collection has the question's spec (same fingerprint). */
export function checkCollection(question, info) {
  if (question.fingerprint !== info.fingerprint) {
    throw new Error(
      `collection ${info.name} must have the question's spec (fingerprint ${question.fingerprint}), got ${info.fingerprint}`,
    );
  }
}

/**
 * Raw answers -> what the randomizer takes (Question.prepare): items, checked/clipped numbers,
 * or for DiscreteSquareWave the numbers' buckets.
 */
export function prepare(info, answers) {
  if (info.encoder) return new Encoder(info.encoder).encode(answers);
  if (info.clip === undefined || !isNumerical(info.mechanism)) return answers;
  const spec = normalizeSpec(info.mechanism);
  const { low, high } = spec.params;
  const values = answers.map((v) => {
    if (typeof v !== 'number' || Number.isNaN(v)) throw new RangeError(`answers must be numbers (not missing), got ${v}`);
    if (info.clip === 'clip') return Math.min(Math.max(v, low), high);
    if (!(v >= low && v <= high)) throw new RangeError(`answers must lie in [${low}, ${high}], got ${v}; use clip = 'clip'`);
    return v;
  });
  if (spec.mechanism !== 'DiscreteSquareWave') return values;
  // its inputs are the d buckets of [low, high]: DiscreteSquareWave.bucketize, the same
  // float64 operations in the same order (so the same bucket as Python)
  const d = spec.params.buckets;
  return values.map((v) => Math.min(Math.floor(((v - low) / (high - low)) * d), d - 1));
}
