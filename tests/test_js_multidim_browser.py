"""The JS client's multi-attribute randomizers (clients/js/src/multidim.js) in a real browser.

A page served from the repository on 127.0.0.1 imports ``clients/js`` in headless chromium
(Debian's ``/usr/bin/chromium`` or ``$CHROMIUM``, no driver: ``--dump-dom`` after a virtual
time budget, as tests/test_js_sketch_browser.py) and checks that the SPL, SMP, RSFD, CALM,
FullDomain, Fourier, HDG, TDG, UniformGrid, GroupMean, AttributeSampling, DuchiMean and
LaplaceMean bodies made from the fixed uniforms and 64-bit words of
``tests/vectors/multidim.json`` are the Python ones, and that ``crypto.getRandomValues``
coins give bodies of the same shapes. The page writes its verdict into the DOM. Skips without chromium except in CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from _chromium import needs_chromium, page_verdict, serve_repository

ROOT = Path(__file__).resolve().parents[1]
pytestmark = needs_chromium

PAGE = """<!doctype html><html><body><pre id="out">pending</pre>
<script type="module">
import { buildBody } from '/clients/js/src/index.js';
const out = document.getElementById('out');
try {
  const cases = await (await fetch('/tests/vectors/multidim.json')).json();
  const bad = [];
  for (const c of cases) {
    let iu = 0;
    let iw = 0;
    const coins = {
      uniform: () => c.uniforms[iu++],
      u64: () => BigInt(c.words[iw++]),
      u64Array: (n) => BigUint64Array.from(c.words.slice(iw, (iw += n)).map(BigInt)),
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
  out.textContent = bad.length ? 'FAIL ' + JSON.stringify(bad) : `PASS ${cases.length}`;
} catch (e) {
  out.textContent = 'ERROR ' + e;
}
</script></body></html>
"""


@pytest.fixture
def server() -> Iterator[str]:
    """Serve the repository over HTTP on 127.0.0.1, plus the test pages."""
    with serve_repository({"/__multidim_page.html": PAGE}) as url:
        yield url


def test_multidim_client_in_chromium(server: str, tmp_path: Path) -> None:
    """The multi-attribute randomizers reproduce the vectors in chromium."""
    verdict = page_verdict(f"{server}/__multidim_page.html", tmp_path)
    cases = json.loads((ROOT / "tests" / "vectors" / "multidim.json").read_text())
    assert verdict == f"PASS {len(cases)}", verdict
