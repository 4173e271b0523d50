// The Device's stores: IndexedDB (on a small in-memory IDBFactory with IndexedDB's
// request/transaction interface: node has none), the localStorage fallback, memory in node.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEVICE_FORMAT, Device, defaultStore, indexedDBStore, memoryStore } from '../src/index.js';

const SPEC = { mechanism: 'LGRR', params: { epsilon: 0.5, domain_size: 16, epsilon_inf: 1.0 } };

/** A fake IDBFactory: databases of object stores (Maps) that outlive their connections. */
function fakeIndexedDB() {
  const databases = new Map();
  const later = (fn) => setTimeout(fn, 0);
  const req = (compute) => {
    const r = { onsuccess: null, onerror: null };
    later(() => {
      r.result = compute();
      r.onsuccess?.();
    });
    return r;
  };
  const factory = {
    writes: 0,
    open(name) {
      const r = { onsuccess: null, onerror: null, onupgradeneeded: null };
      later(() => {
        const fresh = !databases.has(name);
        if (fresh) databases.set(name, new Map());
        const stores = databases.get(name);
        r.result = {
          createObjectStore: (s) => stores.set(s, new Map()),
          close: () => {},
          transaction(s, mode) {
            const tx = { oncomplete: null, onerror: null, onabort: null };
            const items = stores.get(s);
            let open = 0;
            const done = () => --open === 0 && later(() => tx.oncomplete?.());
            const op = (fn) => {
              open++;
              const r2 = req(fn);
              later(() => later(done));
              return r2;
            };
            tx.objectStore = () => ({
              getAllKeys: () => op(() => [...items.keys()]),
              getAll: () => op(() => [...items.values()]),
              put: (v, k) => {
                assert.equal(mode, 'readwrite');
                factory.writes++;
                return op(() => items.set(k, v));
              },
              delete: (k) => op(() => items.delete(k)),
            });
            return tx;
          },
        };
        if (fresh) r.onupgradeneeded?.();
        r.onsuccess?.();
      });
      return r;
    },
  };
  return factory;
}

test('an IndexedDB device survives a reopen: same secret, memo and answers', async () => {
  const idb = fakeIndexedDB();
  const first = await Device.open({ store: await indexedDBStore({ indexedDB: idb, migrate: null }) });
  assert.equal(first.store.kind, 'indexedDB');
  const day1 = await first.report(SPEC, [3, 7]);
  const writes = idb.writes;
  const again = await Device.open({ store: await indexedDBStore({ indexedDB: idb, migrate: null }) });
  assert.deepEqual(again.secret, first.secret);
  assert.deepEqual(again.memo, first.memo);
  await again.report(SPEC, [3, 7, 3]);
  assert.equal(idb.writes, writes); // memoized answers only: nothing written
  assert.deepEqual(await again.permanent(SPEC, 7), await first.permanent(SPEC, 7));
  assert.equal(day1.values.data.length, 2);
  await again.report(SPEC, [9]);
  assert.equal(idb.writes, writes + 1); // a new value: written before the report returned
  const third = new Device({ store: await indexedDBStore({ indexedDB: idb, migrate: null }) });
  assert.ok('i9' in third.memo[Object.keys(third.memo)[0]]);
});

test('an empty IndexedDB takes over the device of localStorage (no new secret)', async () => {
  const local = memoryStore();
  const old = new Device({ store: local });
  await old.report(SPEC, [5]);
  const store = await indexedDBStore({ indexedDB: fakeIndexedDB(), migrate: local });
  const moved = new Device({ store });
  assert.deepEqual(moved.secret, old.secret);
  assert.deepEqual(moved.memo, old.memo);
  assert.equal(JSON.parse(store.getItem(DEVICE_FORMAT)).format, DEVICE_FORMAT);
});

test('the default store: IndexedDB, else localStorage, else memory', async () => {
  assert.equal((await defaultStore({ indexedDB: fakeIndexedDB() })).kind, 'indexedDB');
  assert.equal((await defaultStore({ indexedDB: null })).kind, globalThis.localStorage ? 'localStorage' : 'memory');
  const broken = { open: () => { throw new Error('private mode'); } };
  assert.notEqual((await defaultStore({ indexedDB: broken })).kind, 'indexedDB');
  await assert.rejects(indexedDBStore({ indexedDB: null }), /indexedDB must be an IDBFactory/);
  const device = await Device.open();
  assert.equal(typeof device.store.getItem, 'function');
});
