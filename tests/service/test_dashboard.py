"""The collector's dashboard pages (GET /, /docs, /static/*) without a browser, and
``ldpkit demo --serve``. The browser test is tests/test_dashboard_browser.py."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from ldpkit.frequency import GRR
from ldpkit.io import reports_to_bytes
from ldpkit.service import create_app
from ldpkit.service.auth import parse_tokens

STATIC = Path(__file__).resolve().parents[2] / "src" / "ldpkit" / "service" / "static"
TOKEN = "read-me"


def _app(tmp_path: Path, tokens: bool = False, url: str | None = None):
    return create_app(
        {"browsers": GRR(epsilon=1.0, domain_size=4)},
        url or f"sqlite:///{tmp_path / 'c.db'}",
        tokens=parse_tokens(
            [
                {
                    "name": "a",
                    "scopes": ["ingest", "read"],
                    "sha256": hashlib.sha256(TOKEN.encode()).hexdigest(),
                }
            ]
        )
        if tokens
        else None,
    )


def test_pages_are_served_from_the_package_with_a_strict_policy(tmp_path: Path) -> None:
    with TestClient(_app(tmp_path, tokens=True)) as c:
        # open like /healthz: the pages hold no data (the API still needs the token)
        page = c.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert "default-src 'self'" in csp
        head = c.head("/")
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-type"].startswith("text/html")
        assert 'src="static/dashboard.js"' in page.text and 'id="token"' in page.text
        for name in ("dashboard.js", "charts.js", "dashboard.css", "docs.js"):
            asset = c.get(f"/static/{name}")
            assert asset.status_code == 200, name
            assert asset.content == (STATIC / name).read_bytes()
        assert (
            c.get("/static/dashboard.js")
            .headers["content-type"]
            .startswith(("text/javascript", "application/javascript"))
        )
        docs = c.get("/docs")
        assert docs.status_code == 200 and 'src="static/docs.js"' in docs.text
        assert c.get("/redoc").status_code == 404  # ReDoc, like Swagger UI, needs a CDN
        assert c.get("/v1/collections").status_code == 401
        assert c.get("/static/../app.py").status_code == 404
        # the pages are not part of the API schema
        assert not {"/", "/docs"} & set(
            c.get("/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"}).json()["paths"]
        )


def test_assets_load_nothing_from_another_origin() -> None:
    # works offline: no absolute URL, protocol-relative URL or import from elsewhere
    for path in STATIC.iterdir():
        text = path.read_text()
        # (the SVG namespace is a name, never fetched)
        text = text.replace("'http://www.w3.org/2000/svg'", "")
        urls = re.findall(r"(?:https?:)?//[A-Za-z0-9.-]+\.[a-z]{2,}", text)
        assert urls == [], (path.name, urls)
        for spec in re.findall(r"""(?:import|from)\s*\(?\s*['"]([^'"]+)['"]""", text):
            assert spec.startswith("./"), (path.name, spec)


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_collection_info_has_the_last_report_time(
    tmp_path: Path, database: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("fresh_postgres") if database == "postgresql" else None
    app = _app(tmp_path, url=url)
    spec = GRR(epsilon=1.0, domain_size=4)
    times = iter(
        [
            dt.datetime(2026, 1, 1, 10, 0, 5, tzinfo=dt.UTC),
            dt.datetime(2026, 1, 1, 12, 30, 7, tzinfo=dt.UTC),
        ]
    )
    app.state.collector.decoder.clock = lambda: next(times)
    with TestClient(app) as c:
        assert c.get("/v1/collections/browsers").json()["last_report"] is None
        for _ in range(2):
            body = reports_to_bytes(spec.randomize(np.arange(10) % 4, rng=0), format="npz")
            assert c.post("/v1/reports/browsers", content=body).status_code == 201
        info = c.get("/v1/collections/browsers").json()
        assert info["last_report"] == "2026-01-01T12:30:07+00:00"
        assert info["last_bucket"] == "2026-01-01T12:00:00+00:00"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_demo_serve_starts_a_collector_that_fills_up(tmp_path: Path) -> None:
    port = _free_port()
    import ldpkit

    # the same ldpkit as this test (a source checkout on PYTHONPATH or the install)
    src = str(Path(ldpkit.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ldpkit.cli",
            "demo",
            "--serve",
            "--port",
            str(port),
            "--rate",
            "200",
            "--duration",
            "120",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        totals: dict[str, int] = {}
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"{url}/v1/collections", timeout=10) as r:
                    totals = {c["name"]: c["n"] for c in json.loads(r.read())["collections"]}
            except OSError:
                totals = {}
            if totals and all(n > 0 for n in totals.values()):
                break
            time.sleep(0.5)
        if proc.poll() is not None:
            pytest.fail(f"ldpkit demo --serve exited: {proc.communicate()[0]}")
        assert set(totals) == {"names", "departures"}
        assert all(n > 0 for n in totals.values()), totals
        with urllib.request.urlopen(f"{url}/", timeout=10) as r:
            assert b"ldpkit collector" in r.read()
        with urllib.request.urlopen(f"{url}/v1/collections/departures/estimate", timeout=30) as r:
            est = json.loads(r.read())
        assert est["kind"] == "distribution" and 0 <= est["distribution"]["mean"] <= 1440
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: uvicorn shuts down, the devices stop
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert proc.returncode == 0, out
    assert f"dashboard: {url}/" in out and "collector stopped" in out


def test_demo_serve_refuses_bad_options() -> None:
    from typer.testing import CliRunner

    from ldpkit.cli import app

    result = CliRunner().invoke(app, ["demo", "--serve", "--rate", "0"])
    assert result.exit_code == 2 and "--rate" in result.output
    result = CliRunner().invoke(app, ["demo", "--serve", "--duration", "-1"])
    assert result.exit_code == 2 and "--duration must be > 0" in result.output
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(app, ["demo", "--serve", "--port", str(port)])
    assert result.exit_code == 2 and f"port must be free on 127.0.0.1, got {port}" in result.output


@pytest.mark.skipif(
    shutil.which("node") is None and not os.environ.get("CI"),
    reason="node is not on PATH (Debian: apt-get install nodejs); CI must have it",
)
def test_chart_helpers_under_node() -> None:
    node = shutil.which("node")
    assert node is not None, "node must be on PATH in CI (.ci/run installs nodejs)"
    done = subprocess.run(
        [node, "--test", "charts.test.mjs"],
        cwd=Path(__file__).resolve().parents[1] / "browser",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
