// The test page of tests/test_device_browser.py: what a web page does to report every day
// with a memoizing clients/js Device on its default store: IndexedDB, or localStorage where
// IndexedDB is absent (#store=localStorage hides window.indexedDB before the device opens).
// The plan comes in the fragment (#plan=JSON): a list of {spec, values}. Every load opens
// the device (Device.open(); a fresh secret on the very first load), reports the values with secure
// coins, and records the 64-bit words those coins gave, so that the Python side can replay
// the instantaneous round on its own derivation of the permanent answers. The outcome goes
// to document.body.dataset.done (JSON) or .error.
import { DEVICE_FORMAT, Device, indexedDBStore, secureCoins } from '../../clients/js/src/index.js';

const fragment = new URLSearchParams(window.location.hash.slice(1));
const plan = JSON.parse(fragment.get('plan'));
const storeKind = fragment.get('store') ?? 'indexedDB';
if (storeKind === 'localStorage') {
  // a browser without IndexedDB: the device must fall back to localStorage
  Object.defineProperty(window, 'indexedDB', { value: undefined, configurable: true });
}

/** What the store holds, read afresh (a new IndexedDB connection: what is committed). */
async function stored() {
  if (storeKind === 'localStorage') return window.localStorage.getItem(DEVICE_FORMAT);
  const store = await indexedDBStore({ migrate: null });
  store.close();
  return store.getItem(DEVICE_FORMAT);
}

function recording() {
  const words = [];
  return {
    words,
    uniform: () => {
      throw new Error('a longitudinal randomizer drew a float coin');
    },
    u64: () => {
      const w = secureCoins.u64();
      words.push(w.toString());
      return w;
    },
    u64Array: (n) => {
      const out = secureCoins.u64Array(n);
      for (const w of out) words.push(w.toString());
      return out;
    },
  };
}

try {
  const before = await stored();
  const device = await Device.open();
  const results = [];
  for (const { spec, values } of plan) {
    const coins = recording();
    const report = await device.report(spec, values, coins);
    results.push({ report, words: coins.words, spent: await device.privacySpent(spec) });
  }
  const secret = Array.from(device.secret, (b) => b.toString(16).padStart(2, '0')).join('');
  document.body.dataset.done = JSON.stringify({
    secret,
    results,
    store: device.store.kind,
    storeBefore: before,
    storeAfter: await stored(),
    localStorageItems: window.localStorage.length,
  });
} catch (e) {
  document.body.dataset.error = `${e.name}: ${e.message}`;
}
