// The test page of tests/test_device_browser.py: what a web page does to report every day
// with a memoizing clients/js Device persisted in localStorage. The plan comes in the
// fragment (#plan=JSON): a list of {spec, values}. Every load opens the device from
// localStorage (a fresh secret on the very first load), reports the values with secure
// coins, and records the 64-bit words those coins gave, so that the Python side can replay
// the instantaneous round on its own derivation of the permanent answers. The outcome goes
// to document.body.dataset.done (JSON) or .error.
import { Device, secureCoins } from '../../clients/js/src/index.js';

const plan = JSON.parse(new URLSearchParams(window.location.hash.slice(1)).get('plan'));

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
  const before = window.localStorage.getItem('ldpkit.device/1');
  const device = new Device({ store: window.localStorage });
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
    storeBefore: before,
    storeAfter: window.localStorage.getItem('ldpkit.device/1'),
  });
} catch (e) {
  document.body.dataset.error = `${e.name}: ${e.message}`;
}
