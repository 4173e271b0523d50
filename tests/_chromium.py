"""Shared pieces of the tests that run JS pages in headless chromium (no driver).

A page served from the repository on 127.0.0.1 imports ``clients/js`` and writes its verdict
into ``<pre id="out">``; chromium's ``--dump-dom`` after a virtual time budget returns it.
"""

from __future__ import annotations

import functools
import html
import http.server
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
BROWSER = ROOT / "tests" / "browser"
NODE = shutil.which("node")
PLAYWRIGHT = BROWSER / "node_modules" / "playwright-core"

#: Skips without chromium except in CI (``CI`` set), where the test fails instead.
needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).is_file() and not os.environ.get("CI"),
    reason="chromium is not installed (apt-get install chromium); CI must have it",
)

PLAYWRIGHT_MISSING = [
    what
    for what, ok in (
        ("node", NODE is not None),
        ("chromium", Path(CHROMIUM).is_file()),
        ("tests/browser/node_modules/playwright-core (npm ci)", PLAYWRIGHT.is_dir()),
    )
    if not ok
]
#: For the tests that drive chromium with playwright-core from node (tests/browser/*.mjs).
needs_playwright = pytest.mark.skipif(
    bool(PLAYWRIGHT_MISSING) and not os.environ.get("CI"),
    reason=f"missing {', '.join(PLAYWRIGHT_MISSING)} (apt-get install chromium nodejs; "
    "npm ci --prefix tests/browser); CI must have them",
)


@contextmanager
def serve_repository(pages: Mapping[str, str]) -> Iterator[str]:
    """Serve the repository on 127.0.0.1 plus ``pages`` (path -> HTML); yield the base URL.

    A page's path is matched without its query string.
    """

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            page = pages.get(self.path.split("?")[0])
            if page is None:
                super().do_GET()
                return
            body = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

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


def page_verdict(url: str, tmp_path: Path, *, budget_ms: int = 20000) -> str:
    """Return what the page at ``url`` wrote into ``<pre id="out">`` (headless chromium)."""
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            f"--virtual-time-budget={budget_ms}",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = re.search(r'<pre id="out">([^<]*)</pre>', done.stdout)
    assert found is not None, done.stdout[-2000:] + done.stderr[-2000:]
    return html.unescape(found.group(1))
