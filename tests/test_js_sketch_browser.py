"""The JS client's open-domain oracles (clients/js/src/sketch.js) in a real browser.

A page served from the repository on 127.0.0.1 imports ``clients/js`` in headless chromium
(Debian's ``/usr/bin/chromium`` or ``$CHROMIUM``, no driver: ``--dump-dom`` after a virtual
time budget) and checks, against ``tests/vectors/sketch.json`` (written by the Python side):
BLAKE2b digests, item keys (``ldpkit.item/1``: non-ASCII, emoji, big integers as BigInts) and
the CMS/HCMS/FLH bodies made from the vectors' fixed 64-bit words; then that
``crypto.getRandomValues`` coins give well-formed bodies. The page writes its verdict into
the DOM. A second page checks the discovery randomizers (``clients/js/src/discovery.js``:
PEM, TreeHist, SFP) against ``tests/vectors/discovery.json`` the same way (symbol grids, prefix
keys, bodies from fixed words, well-formed bodies from secure coins). Skips without
chromium except in CI (``CI`` set), where it fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from _chromium import needs_chromium, page_verdict, serve_repository

pytestmark = needs_chromium

PAGE = """<!doctype html><html><body><pre id="out">pending</pre>
<script type="module">
import { blake2b, buildBody, itemKey } from '/clients/js/src/index.js';
const out = document.getElementById('out');
try {
  const v = await (await fetch('/tests/vectors/sketch.json')).json();
  const hex = (u) => Array.from(u, (b) => b.toString(16).padStart(2, '0')).join('');
  const bytes = (h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
  const bad = [];
  for (const c of v.blake2b) {
    if (hex(blake2b(bytes(c.data), c.digest_size, bytes(c.person))) !== c.digest) bad.push(c.digest);
  }
  for (const c of v.items) {
    if (itemKey(c.kind === 'str' ? c.item : BigInt(c.item)).toString() !== c.key) bad.push(c.item);
  }
  for (const c of v.bodies) {
    let i = 0;
    const coins = {
      uniform: () => { throw new Error('float coin'); },
      u64: () => BigInt(c.words[i++]),
      u64Array: (n) => BigUint64Array.from(c.words.slice(i, (i += n)).map(BigInt)),
    };
    const info = { mechanism: c.body.mechanism, fingerprint: c.body.fingerprint };
    if (JSON.stringify(buildBody(info, c.values, coins)) !== JSON.stringify(c.body)) {
      bad.push(c.body.mechanism.mechanism);
    }
    const secure = buildBody(info, c.values); // crypto.getRandomValues
    for (const [k, a] of Object.entries(c.body.arrays)) {
      if (JSON.stringify(secure.arrays[k].shape) !== JSON.stringify(a.shape)) bad.push(k);
    }
  }
  out.textContent = bad.length ? 'FAIL ' + JSON.stringify(bad) : `PASS ${v.items.length} ${v.bodies.length}`;
} catch (e) {
  out.textContent = 'ERROR ' + e;
}
</script></body></html>
"""


DISCOVERY_PAGE = """<!doctype html><html><body><pre id="out">pending</pre>
<script type="module">
import { buildBody, encodeString, prefixKey } from '/clients/js/src/index.js';
const out = document.getElementById('out');
try {
  const v = await (await fetch('/tests/vectors/discovery.json')).json();
  const bad = [];
  for (const c of v.grids) {
    const alphabet = c.alphabet === null ? null : Array.from(c.alphabet);
    c.strings.forEach((s, i) => {
      const row = encodeString(s, c.max_length, alphabet);
      if (JSON.stringify(row) !== JSON.stringify(c.symbols[i])) bad.push(s);
      const last = c.max_length - 1;
      if (prefixKey(row, last + 1).toString() !== c.keys[last][i]) bad.push('key ' + s);
    });
  }
  for (const c of v.bodies) {
    let i = 0;
    const coins = {
      uniform: () => { throw new Error('float coin'); },
      u64: () => BigInt(c.words[i++]),
      u64Array: (n) => BigUint64Array.from(c.words.slice(i, (i += n)).map(BigInt)),
    };
    const info = { mechanism: c.body.mechanism, fingerprint: c.body.fingerprint };
    if (JSON.stringify(buildBody(info, c.values, coins)) !== JSON.stringify(c.body)) {
      bad.push(c.body.mechanism.mechanism);
    }
    const secure = buildBody(info, c.values); // crypto.getRandomValues
    for (const [k, a] of Object.entries(c.body.arrays)) {
      if (JSON.stringify(secure.arrays[k].shape) !== JSON.stringify(a.shape)) bad.push(k);
    }
  }
  out.textContent = bad.length ? 'FAIL ' + JSON.stringify(bad) : `PASS ${v.grids.length} ${v.bodies.length}`;
} catch (e) {
  out.textContent = 'ERROR ' + e;
}
</script></body></html>
"""
PAGES = {"/__sketch_page.html": PAGE, "/__discovery_page.html": DISCOVERY_PAGE}


@pytest.fixture
def server() -> Iterator[str]:
    """Serve the repository over HTTP on 127.0.0.1, plus the test pages."""
    with serve_repository(PAGES) as url:
        yield url


def test_sketch_client_in_chromium(server: str, tmp_path: Path) -> None:
    """The CMS, HCMS and FLH randomizers reproduce the vectors in chromium."""
    verdict = page_verdict(f"{server}/__sketch_page.html", tmp_path)
    assert verdict == "PASS 20 7", verdict


def test_discovery_client_in_chromium(server: str, tmp_path: Path) -> None:
    """The PEM, TreeHist and SFP randomizers reproduce the vectors in chromium."""
    verdict = page_verdict(f"{server}/__discovery_page.html", tmp_path)
    assert verdict == "PASS 7 7", verdict
