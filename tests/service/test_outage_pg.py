"""During a PostgreSQL outage every POST is 503 (was: the first 503,
the next ones 500 from an UnboundLocalError on ``raw`` in store.py)."""

import os
import signal
import time

import numpy as np
import pytest
from fastapi.testclient import TestClient

from ldpkit import GRR
from ldpkit.io import reports_to_bytes, reports_to_dict
from ldpkit.service import create_app

SPEC = GRR(epsilon=1.0, domain_size=8)


def _fast_shutdown(pg):
    """Stop the temporary server at once (SIGINT: fast shutdown, clients disconnected);
    the postmaster's pid from its pid file (under runuser, pg.proc is runuser's)."""
    pid = int((pg.root / "data" / "postmaster.pid").read_text().split()[0])
    os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise RuntimeError("postgres must stop within 30 s")


@pytest.mark.parametrize("origin", [None, "http://example.org"])
def test_every_post_during_a_postgres_outage_is_503(postgres_url, origin):
    from ldpkit.service.pgtemp import TemporaryPostgres

    pg = TemporaryPostgres().start()  # its own server: this test stops it
    try:
        headers = {"Origin": origin} if origin else {}
        with TestClient(create_app({"c": SPEC}, pg.url), raise_server_exceptions=False) as c:

            def bodies(i):
                r = SPEC.randomize(np.array([i % 8]), rng=i)
                yield "one report", {"json": reports_to_dict(r)}
                yield "keyed", {"json": reports_to_dict(r), "key": f"k{i}"}
                big = SPEC.randomize(np.arange(100) % 8, rng=i)
                yield "npz", {"content": reports_to_bytes(big), "type": "application/x-npz"}

            def post(kw):
                h = dict(headers)
                if "key" in kw:
                    h["Idempotency-Key"] = kw["key"]
                if "type" in kw:
                    h["Content-Type"] = kw["type"]
                body = {k: v for k, v in kw.items() if k in ("json", "content")}
                return c.post("/v1/reports/c", headers=h, **body)

            for _, kw in bodies(0):
                assert post(kw).status_code == 201
            _fast_shutdown(pg)
            seen = []
            for i in range(1, 4):
                for what, kw in bodies(i):
                    r = post(kw)
                    seen.append((what, r.status_code, r.headers.get("retry-after")))
            assert {s for _, s, _ in seen} == {503}, seen
            assert {a for _, _, a in seen} == {"5"}
    finally:
        pg.stop()
