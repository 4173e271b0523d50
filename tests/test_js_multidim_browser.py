"""The JS client's multi-attribute randomizers (clients/js/src/multidim.js) in a real browser.

A page served from the repository on 127.0.0.1 imports ``clients/js`` in headless chromium
(Debian's ``/usr/bin/chromium`` or ``$CHROMIUM``, no driver: ``--dump-dom`` after a virtual
time budget, as tests/test_js_sketch_browser.py) and checks that the SPL, SMP, RSFD, CALM,
FullDomain, HDG, TDG, UniformGrid and GroupMean bodies made from the fixed uniforms and
64-bit words of ``tests/vectors/multidim.json`` are the Python ones, and that
``crypto.getRandomValues`` coins give bodies of the same shapes. The page writes its verdict
into the DOM. Skips without chromium except in CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).is_file() and not os.environ.get("CI"),
    reason="chromium is not installed (apt-get install chromium); CI must have it",
)

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
    """Serve the repository over HTTP on 127.0.0.1, plus the test page."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/__multidim_page.html":
                body = PAGE.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            super().do_GET()

        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Handler, directory=str(ROOT))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_multidim_client_in_chromium(server: str, tmp_path: Path) -> None:
    """The multi-attribute randomizers reproduce the vectors in chromium."""
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path}",
            "--virtual-time-budget=20000",
            "--dump-dom",
            f"{server}/__multidim_page.html",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = re.search(r'<pre id="out">([^<]*)</pre>', done.stdout)
    assert found is not None, done.stdout[-2000:] + done.stderr[-2000:]
    cases = json.loads((ROOT / "tests" / "vectors" / "multidim.json").read_text())
    assert found.group(1) == f"PASS {len(cases)}", found.group(1)
