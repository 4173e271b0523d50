// A device that memoizes its permanent answers (ldpkit.Device's derivation):
// K = HMAC-SHA256(secret, "ldpkit.device/1\0" | spec fingerprint | "\0" | "i" | value as 16
// bytes big-endian), then 64-bit words HMAC-SHA256(K, counter as 8 bytes big-endian), four
// big-endian words per digest, consumed by the longitudinal spec's permanentFromWords. A
// device that loses its store re-derives the same answers; every report re-randomizes the
// memoized answer with fresh secure coins (no stable identifier). The store is pluggable:
// anything with getItem/setItem, and optionally flush() (awaited before a report returns).
// Device.open() picks IndexedDB in a page (indexedDBStore()), localStorage where IndexedDB
// is absent, memory in node (memoryStore()).

import { longitudinalFromSpec } from './longitudinal.js';
import { specFingerprint } from './question.js';
import { cryptoObj, secureCoins } from './random.js';

export const DEVICE_FORMAT = 'ldpkit.device/1';
const STORE_KEY = 'ldpkit.device/1';
const enc = new TextEncoder();

/** A report that would take the device past its budget (nothing was derived, stored or sent). */
export class BudgetExceededError extends RangeError {
  constructor(message) {
    super(message);
    this.name = 'BudgetExceededError';
  }
}

/** A store in memory with the localStorage interface. */
export function memoryStore() {
  const items = new Map();
  return {
    getItem: (k) => (items.has(k) ? items.get(k) : null),
    setItem: (k, v) => void items.set(k, String(v)),
    removeItem: (k) => void items.delete(k),
  };
}

function request(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

function openDatabase(idb, name) {
  const req = idb.open(name, 1);
  req.onupgradeneeded = () => req.result.createObjectStore('items');
  return request(req);
}

/**
 * A store in IndexedDB (database `name`, object store "items") with the localStorage
 * interface: the items are read once when it opens and kept in memory, so getItem is
 * synchronous; every setItem is written in its own readwrite transaction, in order, and
 * flush() resolves when all of them have committed (Device.report awaits it, so a report is
 * returned only once its new answers are stored). When the database holds no device yet
 * and `migrate` (default: localStorage, when there is one) does, its device is copied in,
 * so a page that moves from localStorage to IndexedDB keeps its secret and memo instead
 * of deriving fresh answers from a new secret.
 *
 * @param {object} [options]
 * @param {string} [options.name] the database, default "ldpkit"
 * @param {object} [options.indexedDB] the IDBFactory, default globalThis.indexedDB
 * @param {object} [options.migrate] a getItem source to migrate from, default localStorage
 */
export async function indexedDBStore({ name = 'ldpkit', indexedDB = globalThis.indexedDB, migrate } = {}) {
  if (!indexedDB) throw new TypeError(`indexedDB must be an IDBFactory, got ${indexedDB}`);
  const db = await openDatabase(indexedDB, name);
  const items = new Map();
  const read = db.transaction('items', 'readonly').objectStore('items');
  const [keys, values] = await Promise.all([request(read.getAllKeys()), request(read.getAll())]);
  keys.forEach((k, i) => items.set(k, values[i]));
  let pending = Promise.resolve();
  const write = (k, v) => {
    pending = pending.then(
      () =>
        new Promise((resolve, reject) => {
          const tx = db.transaction('items', 'readwrite');
          if (v === null) tx.objectStore('items').delete(k);
          else tx.objectStore('items').put(v, k);
          tx.oncomplete = () => resolve();
          tx.onerror = () => reject(tx.error);
          tx.onabort = () => reject(tx.error ?? new Error('IndexedDB transaction aborted'));
        }),
    );
    return pending;
  };
  const source = migrate === undefined ? safeLocalStorage() : migrate;
  const old = items.has(STORE_KEY) ? null : source?.getItem(STORE_KEY) ?? null;
  if (old !== null) {
    items.set(STORE_KEY, old);
    await write(STORE_KEY, old);
  }
  return {
    kind: 'indexedDB',
    getItem: (k) => (items.has(k) ? items.get(k) : null),
    setItem: (k, v) => {
      items.set(k, String(v));
      write(k, String(v)).catch(() => {}); // the error surfaces in flush()
    },
    removeItem: (k) => {
      items.delete(k);
      write(k, null).catch(() => {});
    },
    flush: () => pending,
    close: () => db.close(),
  };
}

/** window.localStorage, or null where there is none (node, or storage disabled). */
function safeLocalStorage() {
  try {
    return globalThis.localStorage ?? null;
  } catch {
    return null; // a sandboxed frame throws on access
  }
}

/**
 * The default store: IndexedDB where there is one (indexedDBStore()), else localStorage,
 * else memory (node). An IndexedDB that fails to open (private mode in some browsers)
 * falls back to localStorage too.
 */
export async function defaultStore({ indexedDB = globalThis.indexedDB } = {}) {
  if (indexedDB) {
    try {
      return await indexedDBStore({ indexedDB });
    } catch {
      // fall through: localStorage keeps the guarantee, only less room
    }
  }
  const local = safeLocalStorage();
  if (local) {
    // a wrapper: a property set on a Storage object would become one of its items
    return {
      kind: 'localStorage',
      getItem: (k) => local.getItem(k),
      setItem: (k, v) => local.setItem(k, v),
      removeItem: (k) => local.removeItem(k),
    };
  }
  return Object.assign(memoryStore(), { kind: 'memory' });
}

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

function fromHex(text) {
  if (typeof text !== 'string' || text.length % 2 || /[^0-9a-f]/i.test(text)) {
    throw new TypeError(`secret must be a hex string, got ${text}`);
  }
  return Uint8Array.from(text.match(/../g) ?? [], (h) => parseInt(h, 16));
}

async function hmac(key, message) {
  const k = await cryptoObj.subtle.importKey('raw', key, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return new Uint8Array(await cryptoObj.subtle.sign('HMAC', k, message));
}

/** The value's key bytes: "i" and the integer as 16 bytes big-endian (two's complement). */
export function valueKey(v) {
  if (!Number.isInteger(v)) throw new TypeError(`value must be an integer, got ${v}`);
  let x = BigInt.asUintN(128, BigInt(v));
  const out = new Uint8Array(17);
  out[0] = 0x69; // "i"
  for (let i = 16; i >= 1; i--) {
    out[i] = Number(x & 0xffn);
    x >>= 8n;
  }
  return out;
}

/** K = HMAC-SHA256(secret, domain | fingerprint | 0 | value key) (Device._key). */
export async function permanentKey(secret, fingerprint, value) {
  const message = concat(enc.encode(`${DEVICE_FORMAT}\0`), enc.encode(fingerprint), new Uint8Array([0]), valueKey(value));
  return hmac(secret, message);
}

/**
 * The first n words HMAC-SHA256(K, counter) (DerivedWords), as a word source {u64()}
 * (precomputed: WebCrypto is async, the samplers are not). `n` must cover what the
 * sampler consumes; a sampler that runs past it throws (never a silently different answer).
 */
export async function derivedWords(key, n) {
  const blocks = [];
  for (let c = 0; c < Math.ceil(n / 4); c++) {
    const counter = new Uint8Array(8);
    new DataView(counter.buffer).setBigUint64(0, BigInt(c));
    blocks.push(hmac(key, counter));
  }
  const words = [];
  for (const digest of await Promise.all(blocks)) {
    const view = new DataView(digest.buffer);
    for (let i = 0; i < 4; i++) words.push(view.getBigUint64(8 * i));
  }
  let next = 0;
  return {
    u64() {
      if (next >= words.length) throw new RangeError('derived words exhausted');
      return words[next++];
    },
  };
}

/**
 * Words the permanent round of `mech` may consume: a unary encoding one per bit; a GRR
 * coin one uniform below T <= 2^62 by rejection, each word rejected with probability
 * (2^64 mod T) / 2^64 < 1/4, so 64 words run out with probability < 4^-64 = 2^-128.
 */
function wordsNeeded(mech) {
  return mech.permanentWords ?? ('tp1' in mech ? mech.domainSize : 64);
}

/** The device: a secret and a persistent memo of permanent answers per (question, value). */
export class Device {
  /**
   * @param {object} [options]
   * @param {Uint8Array} [options.secret] at least 16 bytes; default the stored one, or 32
   *   fresh bytes (crypto.getRandomValues)
   * @param {object} [options.store] getItem/setItem (default: globalThis.localStorage, else memory)
   * @param {number} [options.budget] the most each question may cost (longitudinalPrivacyLoss
   *   of the distinct values); a report needing a new answer past it throws, memoized ones are free
   */
  constructor({ secret = null, store = null, budget = null } = {}) {
    this.store = store ?? safeLocalStorage() ?? memoryStore();
    if (budget !== null && !(typeof budget === 'number' && budget >= 0 && Number.isFinite(budget))) {
      throw new RangeError(`budget must be a finite number >= 0, got ${budget}`);
    }
    this.budget = budget;
    const raw = this.store.getItem(STORE_KEY);
    let stored = null;
    if (raw !== null) {
      stored = JSON.parse(raw);
      if (stored?.format !== DEVICE_FORMAT || typeof stored.secret !== 'string' || typeof stored.memo !== 'object') {
        throw new Error(`store must hold an ${DEVICE_FORMAT} device, got ${raw.slice(0, 40)}`);
      }
    }
    if (secret !== null) {
      if (!(secret instanceof Uint8Array) || secret.length < 16) {
        throw new TypeError(`secret must be a Uint8Array of >= 16 bytes, got ${secret}`);
      }
      if (stored !== null && stored.secret !== hex(secret)) {
        throw new Error('secret must be the one stored (its memo was derived from it), got another');
      }
    }
    this.secret = secret ?? (stored ? fromHex(stored.secret) : cryptoObj.getRandomValues(new Uint8Array(32)));
    this.memo = stored ? stored.memo : {};
    this.states = stored?.states ?? {};
    if (stored === null) this.save();
  }
  /**
   * A device on the default store (defaultStore(): IndexedDB, else localStorage, else
   * memory) or on `options.store`; the other options as the constructor's. Its first
   * write (a fresh secret) has committed when the promise resolves.
   */
  static async open(options = {}) {
    const device = new Device({ ...options, store: options.store ?? (await defaultStore()) });
    await device.store.flush?.();
    return device;
  }
  /** The randomizer and fingerprint of a spec dict (built once per spec: the unary
   * thresholds' bisection and the fingerprint's SHA-256 are not per-report work). */
  async #question(spec) {
    this.questions ??= new Map();
    const text = JSON.stringify(spec);
    let q = this.questions.get(text);
    if (q === undefined) {
      q = { mech: longitudinalFromSpec(spec), fp: await specFingerprint(spec) };
      this.questions.set(text, q);
    }
    return q;
  }
  save() {
    this.store.setItem(STORE_KEY, JSON.stringify({ format: DEVICE_FORMAT, secret: hex(this.secret), memo: this.memo, states: this.states }));
  }
  /** The memoized permanent answer of `value` (an item, or packed bits) under `spec`. */
  async permanent(spec, value) {
    const { mech, fp } = await this.#question(spec);
    return this.#permanent(mech, fp, value);
  }
  /**
   * The spec's per-device state, derived once; else null: LOLOHA's hash seed (a BigInt,
   * stored as its decimal string), dBitFlipPM's sampled buckets, 1BitMean's alpha.
   */
  async #state(mech, fp) {
    if (!('stateFromWords' in mech)) return null;
    if (!(fp in this.states)) {
      const key = await hmac(this.secret, concat(enc.encode(`${DEVICE_FORMAT}\0`), enc.encode(fp), new Uint8Array([0]), enc.encode('state')));
      const state = mech.stateFromWords(await derivedWords(key, mech.stateWords ?? 1));
      this.states[fp] = typeof state === 'bigint' ? state.toString() : state;
    }
    const entry = this.states[fp];
    return typeof entry === 'string' ? BigInt(entry) : entry;
  }
  /**
   * The memo key of a value: itself, or what its permanent answer depends on under the
   * device's state (LOLOHA: its hashed value; dBitFlipPM: its sampled bucket; 1BitMean: its
   * alpha-rounded grid point). The spec validates the value.
   */
  async #memoKey(mech, fp, value) {
    if (!('memoKey' in mech) && (!Number.isInteger(value) || value < 0 || value >= mech.domainSize)) {
      throw new RangeError(`value must be an integer in [0, ${mech.domainSize}), got ${value}`);
    }
    const state = await this.#state(mech, fp);
    return state === null ? value : mech.memoKey(value, state);
  }
  async #permanent(mech, fp, value) {
    const table = (this.memo[fp] ??= {});
    const key = await this.#memoKey(mech, fp, value);
    const text = `i${key}`;
    if (!(text in table)) {
      const words = await derivedWords(await permanentKey(this.secret, fp, key), wordsNeeded(mech));
      const state = await this.#state(mech, fp);
      table[text] = state === null ? mech.permanentFromWords(key, words) : mech.permanentFromWords(key, words, state);
    }
    return table[text];
  }
  /** Distinct values reported under the question with fingerprint `fp`. */
  distinctValues(fp) {
    return Object.keys(this.memo[fp] ?? {}).length;
  }
  /** What this device's reports of `spec` cost: longitudinalPrivacyLoss(distinct values). */
  async privacySpent(spec) {
    const { mech, fp } = await this.#question(spec);
    const k = this.distinctValues(fp);
    return k === 0 ? 0 : mech.longitudinalPrivacyLoss(k);
  }
  /**
   * Reports of `values` (the arrays of the wire format): each value's memoized permanent
   * answer, re-randomized with fresh `coins`. New answers are stored before returning.
   */
  async report(spec, values, coins = secureCoins) {
    const { mech, fp } = await this.#question(spec);
    const nStates = Object.keys(this.states).length;
    const known = new Set(Object.keys(this.memo[fp] ?? {}));
    const keys = [];
    for (const v of values) keys.push(`i${await this.#memoKey(mech, fp, v)}`);
    const fresh = new Set(keys.filter((t) => !known.has(t)));
    if (this.budget !== null && fresh.size) {
      const after = mech.longitudinalPrivacyLoss(known.size + fresh.size);
      if (after > this.budget * (1 + 1e-12)) {
        throw new BudgetExceededError(
          `budget must cover this report: ${fresh.size} new value(s) would take question ${fp} to ${after} > budget = ${this.budget}`,
        );
      }
    }
    const permanent = [];
    for (const v of values) permanent.push(await this.#permanent(mech, fp, v));
    if (fresh.size || Object.keys(this.states).length !== nStates) {
      this.save();
      await this.store.flush?.(); // stored before anything is returned (sent)
    }
    return mech.instantaneous(permanent, coins);
  }
}
