// Open-vocabulary discovery on the device (ldpkit.discovery: prefix.py PEM and TreeHist,
// fragments.py SFP, _strings.py): a string becomes `max_length` symbols; for PEM and
// TreeHist a value-blind coin picks the group (prefix length) and one of its public hash
// functions, and the device sends GRR over [g] of that function's hash of its prefix; for SFP
// it sends a fragment (tied to a hash of the string) and the whole string through two
// sketches. Bit for bit the Python side's grids and hashes, with BigInt. Per user, the client
// draws from 64-bit words in this order (tests/vectors/make_vectors.py replays it):
//   PEM, TreeHist: the group U below max_length, the hash U below H, then GRR's U below
//                  wKeep + (g - 1) wOther;
//   SFP: the fragment position U below P, then the fragment sketch's draws, then the
//        whole-string sketch's (sketch.js: CMS or HCMS, one user at a time).
// (U below T: a word w < floor(2^64 / T) T gives w mod T, else the next word.)

import { mix64, optimalHashRange } from './hashing.js';
import { MECHANISMS, RR_MAX_EPSILON, grrFromUniform, indexDtype, rrWeights } from './mechanisms.js';
import { checkEpsilon, checkInteger, ratioLoss, uniformBelow } from './numeric.js';
import { exactRatio } from './exact.js';
import { secureCoins } from './random.js';
import { CMS, HCMS } from './sketch.js';

const MASK64 = (1n << 64n) - 1n;
const GAMMA = 0x9e3779b97f4a7c15n;
const KEY0 = 0x6c64706b69742d70n; // "ldpkit-p": the key of the empty prefix
const FAMILY = 0x6c64706b69742d68n; // "ldpkit-h": offset of the hash family's seeds

/** Largest default hash range (prefix.MAX_DEFAULT_RANGE) and default table width H g. */
export const MAX_DEFAULT_RANGE = 4096;
export const TABLE_WIDTH = 1 << 14;
const CONTROLS = [null, 'fwer', 'fdr'];

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Key of the prefix `key` extended by symbol s: mix64(key + (s + 1) gamma mod 2^64). */
export function extendKey(key, symbol) {
  return mix64((key + (BigInt(symbol) + 1n) * GAMMA) & MASK64);
}

/** The H public seeds of group `level` (0-based): mix64((level H + j) gamma + F). */
export function familySeeds(level, hashFunctions) {
  const out = new Array(hashFunctions);
  for (let j = 0; j < hashFunctions; j++) {
    out[j] = mix64((BigInt(level * hashFunctions + j) * GAMMA + FAMILY) & MASK64);
  }
  return out;
}

/** h(key) in [0, g): ((mix64(key ^ seed) >> 32) g) >> 32. */
export function hashKey(key, seed, hashRange) {
  return Number(((mix64(key ^ seed) >> 32n) * BigInt(hashRange)) >> 32n);
}

function checkAlphabet(alphabet) {
  if (alphabet == null) return null;
  if (typeof alphabet !== 'string') {
    throw new TypeError(`alphabet must be None or a string of distinct characters, got ${String(alphabet)}`);
  }
  const chars = Array.from(alphabet);
  if (chars.length < 1 || chars.length > 4095 || new Set(chars).size !== chars.length) {
    throw new RangeError(`alphabet must be None or a string of 1 to 4095 distinct characters, got ${JSON.stringify(alphabet.slice(0, 40))}`);
  }
  if (chars.includes('\0')) throw new RangeError("alphabet must not contain NUL (the padding), got '\\x00'");
  return chars;
}

/**
 * One string as `maxLength` symbols (_strings.encode_strings): UTF-8 bytes cut at the last
 * whole character that fits, or 1 + the index of each character of `alphabet` (cut at
 * `maxLength` characters); padded with 0, and a NUL ends the string.
 */
export function encodeString(value, maxLength, alphabet = null) {
  if (typeof value !== 'string') throw new TypeError(`values must be a sequence of strings, got an item ${String(value)}`);
  const out = new Array(maxLength).fill(0);
  if (alphabet === null) {
    if (LONE_SURROGATE.test(value)) throw new RangeError('values must be strings encodable as UTF-8 (no lone surrogates)');
    const bytes = new TextEncoder().encode(value);
    let end = Math.min(bytes.length, maxLength);
    if (bytes.length > maxLength && (bytes[maxLength] & 0xc0) === 0x80) {
      // the cut falls inside a character: drop it back to its lead byte
      while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--;
    }
    for (let i = 0; i < end; i++) out[i] = bytes[i];
  } else {
    const index = new Map(alphabet.map((c, i) => [c, i + 1]));
    const chars = Array.from(value).slice(0, maxLength);
    const bad = chars.filter((c) => c !== '\0' && !index.has(c));
    if (bad.length) {
      const shown = [...new Set(bad)].sort().slice(0, 5);
      throw new RangeError(`values must use only the spec's alphabet characters, got ${JSON.stringify(shown)}`);
    }
    chars.forEach((c, i) => {
      out[i] = c === '\0' ? 0 : index.get(c);
    });
  }
  const nul = out.indexOf(0);
  if (nul >= 0) out.fill(0, nul); // a NUL ends the string
  return out;
}

/** Key of the first `length` symbols of a grid row (length >= 1). */
export function prefixKey(symbols, length) {
  let key = KEY0;
  for (let i = 0; i < length; i++) key = extendKey(key, symbols[i]);
  return key;
}

/** Shared parts of PEM and TreeHist (prefix.PrefixDiscovery): one report (l, j, y) per user. */
class PrefixDiscovery {
  constructor(params) {
    const {
      epsilon,
      max_length = 12,
      top_k = 20,
      alphabet = null,
      hash_range = null,
      hash_functions = null,
      control = null,
      alpha = 0.05,
      pool_ended = true,
    } = params;
    this.epsilon = checkEpsilon(epsilon, RR_MAX_EPSILON);
    this.maxLength = checkInteger(max_length, 'max_length', 1, 64);
    checkInteger(top_k, 'top_k', 1, 4096);
    this.alphabet = checkAlphabet(alphabet);
    if (!CONTROLS.includes(control)) throw new RangeError(`control must be None, 'fwer' or 'fdr', got ${String(control)}`);
    if (typeof alpha !== 'number' || !(alpha > 0 && alpha < 1)) throw new RangeError(`alpha must be a number in (0, 1), got ${alpha}`);
    if (typeof pool_ended !== 'boolean') throw new TypeError(`pool_ended must be True or False, got ${String(pool_ended)}`);
    this.g = hash_range == null
      ? Math.min(optimalHashRange(this.epsilon), MAX_DEFAULT_RANGE)
      : checkInteger(hash_range, 'hash_range', 2, 1 << 16);
    this.h = hash_functions == null
      ? Math.min(256, Math.max(16, Math.floor(TABLE_WIDTH / this.g)))
      : checkInteger(hash_functions, 'hash_functions', 1, 4096);
    [this.wKeep, this.wOther] = rrWeights(this.epsilon, this.g - 1);
    this.total = this.wKeep + BigInt(this.g - 1) * this.wOther;
    this.limit = ((1n << 64n) / this.total) * this.total;
    this.p = exactRatio(this.wKeep, this.total); // realized P[y = h(v)]
    this.seeds = new Map(); // group -> its H seeds, computed when first used
  }
  privacyLoss() {
    return ratioLoss(this.wOther, this.wKeep);
  }
  seed(level, j) {
    let seeds = this.seeds.get(level);
    if (seeds === undefined) {
      seeds = familySeeds(level, this.h);
      this.seeds.set(level, seeds);
    }
    return seeds[j];
  }
  /** Reports {groups, hashes, values} for strings; every value checked before any coin. */
  randomize(values, coins = secureCoins) {
    const grids = values.map((v) => encodeString(v, this.maxLength, this.alphabet));
    const n = grids.length;
    const [groups, hashes, ys] = [new Array(n), new Array(n), new Array(n)];
    const [bigGroups, bigH] = [BigInt(this.maxLength), BigInt(this.h)];
    grids.forEach((row, i) => {
      const level = Number(uniformBelow(bigGroups, coins));
      const j = Number(uniformBelow(bigH, coins));
      const hashed = hashKey(prefixKey(row, level + 1), this.seed(level, j), this.g);
      const u = uniformBelow(this.total, coins, this.limit);
      groups[i] = level;
      hashes[i] = j;
      ys[i] = grrFromUniform(hashed, this.g, this.wKeep, this.wOther, u);
    });
    return {
      groups: { dtype: indexDtype(this.maxLength), shape: [n], data: groups },
      hashes: { dtype: indexDtype(this.h), shape: [n], data: hashes },
      values: { dtype: indexDtype(this.g), shape: [n], data: ys },
    };
  }
}

// the parameters PEM and TreeHist share (prefix.PrefixDiscovery's fields, in order)
const PREFIX_PARAMS = [
  'epsilon', 'max_length', 'top_k', 'alphabet', 'hash_range',
  'hash_functions', 'control', 'alpha', 'pool_ended',
];

/** PEM (prefix.PEM): the device side (the search is the server's). */
export class PEM extends PrefixDiscovery {
  static PARAMS = [...PREFIX_PARAMS, 'keep'];
  constructor(params) {
    super(params);
    if (params.keep != null) checkInteger(params.keep, 'keep', 1, 4096);
  }
}

/** TreeHist (prefix.TreeHist): the device side (the search is the server's). */
export class TreeHist extends PrefixDiscovery {
  static PARAMS = [...PREFIX_PARAMS, 'threshold', 'max_survivors'];
  constructor(params) {
    super(params);
    const { threshold = 3.0, max_survivors = 64 } = params;
    if (typeof threshold !== 'number' || !(threshold > 0 && threshold <= 40)) {
      throw new RangeError(`threshold must be a number in (0, 40], got ${threshold}`);
    }
    checkInteger(max_survivors, 'max_survivors', 1, 4096);
  }
}

/** Apple's SFP alphabet (fragments.LETTERS) and the server's enumeration cap. */
export const LETTERS = 'abcdefghijklmnopqrstuvwxyz';
export const MAX_FRAGMENT_ITEMS = 1 << 22;
const MIN_SHARE = 1e-3;

/** Apple's sequence fragment puzzle (fragments.SFP): the device side, two sketches. */
export class SFP {
  static PARAMS = [
    'epsilon',
    'max_length',
    'fragment_length',
    'top_k',
    'alphabet',
    'hash_bits',
    'sketch',
    'width',
    'depth',
    'fragment_share',
    'keep',
    'control',
    'alpha',
  ];
  constructor(params) {
    const {
      epsilon,
      max_length = 12,
      fragment_length = 2,
      top_k = 20,
      alphabet = LETTERS,
      hash_bits = 8,
      sketch = 'hcms',
      width = 1024,
      depth = 32,
      fragment_share = 0.5,
      keep = null,
      control = null,
      alpha = 0.05,
    } = params;
    this.epsilon = checkEpsilon(epsilon, 40.0);
    this.maxLength = checkInteger(max_length, 'max_length', 1, 64);
    this.fragmentLength = checkInteger(fragment_length, 'fragment_length', 1, 8);
    checkInteger(top_k, 'top_k', 1, 4096);
    this.alphabet = checkAlphabet(alphabet);
    this.hashBits = checkInteger(hash_bits, 'hash_bits', 1, 16);
    if (sketch !== 'hcms' && sketch !== 'cms') throw new RangeError(`sketch must be 'hcms' or 'cms', got ${String(sketch)}`);
    checkInteger(width, 'width', 2, 1 << 16);
    checkInteger(depth, 'depth', 1, 4096);
    if (typeof fragment_share !== 'number' || !(fragment_share >= MIN_SHARE && fragment_share <= 1 - MIN_SHARE)) {
      throw new RangeError(`fragment_share must be in [0.001, 0.999], got ${fragment_share}`);
    }
    if (keep != null) checkInteger(keep, 'keep', 1, 1 << 16);
    if (!CONTROLS.includes(control)) throw new RangeError(`control must be None, 'fwer' or 'fdr', got ${String(control)}`);
    if (typeof alpha !== 'number' || !(alpha > 0 && alpha < 1)) throw new RangeError(`alpha must be a number in (0, 1), got ${alpha}`);
    this.symbols = this.alphabet === null ? 256 : this.alphabet.length + 1;
    this.positions = Math.ceil(this.maxLength / this.fragmentLength);
    this.codes = this.symbols ** this.fragmentLength; // A^fl: fragment codes per hash
    const items = this.positions * 2 ** this.hashBits * this.codes;
    if (items > MAX_FRAGMENT_ITEMS) {
      throw new RangeError(
        `alphabet, max_length, fragment_length and hash_bits must keep positions * 2^hash_bits * symbols^fragment_length <= ${MAX_FRAGMENT_ITEMS} (the server enumerates them), got ${items}`,
      );
    }
    // the same float products as Python's (one IEEE multiply each): the same budgets
    const Sketch = sketch === 'hcms' ? HCMS : CMS;
    this.fragment = new Sketch({ epsilon: epsilon * fragment_share, width, depth });
    this.word = new Sketch({ epsilon: epsilon * (1.0 - fragment_share), width, depth });
  }
  /** The sum of the two sketches' realized losses (sequential composition). */
  privacyLoss() {
    return this.fragment.privacyLoss() + this.word.privacyLoss();
  }
  /** Fragment item (position, hash, code) and whole-string item of one string (BigInts). */
  items(value, position) {
    const row = encodeString(value, this.maxLength, this.alphabet);
    const key = prefixKey(row, this.maxLength);
    const hash = Number(key >> BigInt(64 - this.hashBits));
    let code = 0;
    for (let t = 0; t < this.fragmentLength; t++) {
      const at = position * this.fragmentLength + t;
      code = code * this.symbols + (at < this.maxLength ? row[at] : 0);
    }
    const fragment = (BigInt(position) * (1n << BigInt(this.hashBits)) + BigInt(hash)) * BigInt(this.codes) + BigInt(code);
    return [fragment, key >> 1n];
  }
  /** Reports fragment_* and word_* (the two sketches' fields); every value checked first. */
  randomize(values, coins = secureCoins) {
    values.forEach((v) => encodeString(v, this.maxLength, this.alphabet));
    const parts = { fragment: [], word: [] };
    const bigP = BigInt(this.positions);
    for (const v of values) {
      const position = Number(uniformBelow(bigP, coins));
      const [fragment, word] = this.items(v, position);
      parts.fragment.push(this.fragment.randomize([fragment], coins));
      parts.word.push(this.word.randomize([word], coins));
    }
    const template = { fragment: this.fragment.randomize([], coins), word: this.word.randomize([], coins) };
    const out = {};
    for (const part of ['fragment', 'word']) {
      for (const [k, empty] of Object.entries(template[part])) {
        const data = parts[part].flatMap((r) => r[k].data);
        out[`${part}_${k}`] = { dtype: empty.dtype, shape: [values.length, ...empty.shape.slice(1)], data };
      }
    }
    return out;
  }
}

// fromSpec (mechanisms.js) finds them by name
Object.assign(MECHANISMS, { PEM, TreeHist, SFP });
