"""Tokens scoped per collection, /metrics scope, per-token quotas."""

import os
import subprocess
import sys
import threading
import time

import pytest
from fastapi.testclient import TestClient

from _servers import free_port, serve_two_workers
from ldpkit import GRR
from ldpkit.io import reports_to_dict
from ldpkit.service import Quota, app_from_config, create_app, new_token
from ldpkit.service.auth import parse_tokens
from ldpkit.service.quotas import QuotaCounters, QuotaExceeded, parse_quota

SPEC = GRR(epsilon=1.0, domain_size=8)
ORIGIN = "https://example.org"


def _batch(n, seed=1):
    return reports_to_dict(SPEC.randomize([1] * n, rng=seed))


def _made(*entries):
    """parse_tokens config and Authorization headers for (name, scopes, extra) entries."""
    config, headers = [], {}
    for name, scopes, extra in entries:
        token, digest = new_token()
        config.append({"name": name, "scopes": scopes, "sha256": digest, **extra})
        headers[name] = {"Authorization": f"Bearer {token}"}
    return config, headers


class _Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


# -- scopes per collection -----------------------------------------------------------------


@pytest.mark.parametrize("origin", [None, ORIGIN])  # fast ASGI path / FastAPI route
def test_ingest_token_is_limited_to_its_collections(tmp_path, origin):
    config, h = _made(("web", ["ingest"], {"collections": ["a"]}), ("any", ["ingest"], {}))
    app = create_app(
        {"a": SPEC, "b": SPEC},
        f"sqlite:///{tmp_path / 'c.db'}",
        tokens=parse_tokens(config, ["a", "b"]),
        cors_origins=[ORIGIN],
    )
    extra = {"Origin": origin} if origin else {}
    with TestClient(app) as c:
        assert (
            c.post("/v1/reports/a", json=_batch(2), headers={**h["web"], **extra}).status_code
            == 201
        )
        refused = c.post("/v1/reports/b", json=_batch(2), headers={**h["web"], **extra})
        assert refused.status_code == 403
        assert "collection must be one of token 'web'" in refused.json()["detail"]
        # An unknown name is refused the same way: the answer does not list other collections.
        unknown = c.post("/v1/reports/zzz", json=_batch(2), headers={**h["web"], **extra})
        assert unknown.status_code == 403 and "'b'" not in unknown.json()["detail"]
        # A token without a list keeps today's meaning: every collection.
        assert (
            c.post("/v1/reports/b", json=_batch(3), headers={**h["any"], **extra}).status_code
            == 201
        )
    assert app.state.collector.store.summary("b")[0] == 3


def test_read_token_sees_only_its_collections_and_metrics_needs_its_scope(tmp_path):
    config, h = _made(
        ("dash", ["read"], {"collections": ["a"]}),
        ("legacy", ["read"], {}),
        ("prom", ["metrics"], {}),
        ("ops", ["admin"], {"collections": ["b"]}),
    )
    app = create_app(
        {"a": SPEC, "b": SPEC},
        f"sqlite:///{tmp_path / 'c.db'}",
        tokens=parse_tokens(config),
    )
    with TestClient(app) as c:
        listed = c.get("/v1/collections", headers=h["dash"]).json()["collections"]
        assert [x["name"] for x in listed] == ["a"]
        assert len(c.get("/v1/collections", headers=h["legacy"]).json()["collections"]) == 2
        for path in ("", "/estimate", "/stats", "/buckets"):
            assert c.get(f"/v1/collections/a{path}", headers=h["dash"]).status_code == 200
            assert c.get(f"/v1/collections/b{path}", headers=h["dash"]).status_code == 403
        # /metrics counts every collection: a token limited to some needs the metrics scope.
        assert c.get("/metrics", headers=h["dash"]).status_code == 403
        assert c.get("/metrics", headers=h["legacy"]).status_code == 200  # unscoped read: as before
        assert c.get("/metrics", headers=h["prom"]).status_code == 200
        assert c.get("/v1/collections", headers=h["prom"]).status_code == 403  # metrics only
        assert c.get("/metrics", headers=h["ops"]).status_code == 200  # admin implies metrics
        assert c.get("/v1/admin/collections/b/batches", headers=h["ops"]).status_code == 200
        assert c.get("/v1/admin/collections/a/batches", headers=h["ops"]).status_code == 403


def test_token_collections_and_quota_config_is_validated():
    (good,), _ = _made(("t", ["ingest"], {}))
    bad = [
        ({"collections": []}, r"auth.tokens\[0\].collections must be a non-empty list"),
        ({"collections": "a"}, r"auth.tokens\[0\].collections must be a non-empty list"),
        ({"collections": ["a", "a"]}, r"collections must be a non-empty list of distinct"),
        ({"collections": ["c"]}, r"auth.tokens\[0\].collections must name collections among"),
        ({"reports_per_minute": 0}, r"auth.tokens\[0\].reports_per_minute must be an integer"),
        ({"batches_per_second": 1.5}, r"auth.tokens\[0\].batches_per_second must be an integer"),
        ({"quota": 5}, r"auth.tokens\[0\] must be a table with keys"),
    ]
    for extra, message in bad:
        with pytest.raises(ValueError, match=message):
            parse_tokens([{**good, **extra}], ["a", "b"])
    token = parse_tokens([{**good, "collections": ["a"], "reports_per_minute": "unlimited"}])[0]
    assert token.collections == frozenset({"a"}) and token.quota == Quota(reports_per_minute=None)
    assert parse_tokens([good])[0].quota is None  # the server's default then
    with pytest.raises(ValueError, match="reports_per_minute must be an integer >= 1"):
        Quota(reports_per_minute=-1)
    with pytest.raises(ValueError, match=r"quotas.batches_per_second must be an integer"):
        parse_quota({"batches_per_second": True}, "quotas")
    base = {"collections": {"a": {"mechanism": "GRR", "params": {"epsilon": 1, "domain_size": 3}}}}
    with pytest.raises(ValueError, match="quotas must be a table with keys among"):
        app_from_config({**base, "quotas": {"reports_per_hour": 5}}, database_url="sqlite://")
    with pytest.raises(ValueError, match=r"collections must name collections among \['a'\]"):
        app_from_config(
            {**base, "auth": {"tokens": [{**good, "collections": ["b"]}]}}, database_url="sqlite://"
        )


# -- quotas ----------------------------------------------------------------------------------


@pytest.mark.parametrize("origin", [None, ORIGIN])
def test_reports_per_minute_gives_429_with_retry_after_and_stores_nothing(tmp_path, origin):
    config, h = _made(("dev", ["ingest"], {"reports_per_minute": 10}), ("other", ["ingest"], {}))
    app = create_app(
        {"a": SPEC},
        f"sqlite:///{tmp_path / 'c.db'}",
        tokens=parse_tokens(config),
        cors_origins=[ORIGIN],
    )
    clock = _Clock(6_000_000 * 60 + 45.5)  # 14.5 s before the minute ends
    app.state.collector.quotas.clock = clock
    extra = {"Origin": origin} if origin else {}
    post = lambda name, n: c.post("/v1/reports/a", json=_batch(n), headers={**h[name], **extra})  # noqa: E731
    with TestClient(app) as c:
        assert post("dev", 6).status_code == 201
        over = post("dev", 5)
        assert over.status_code == 429 and over.headers["retry-after"] == "15"
        assert "reports_per_minute" in over.json()["detail"]
        assert post("dev", 4).status_code == 201  # exactly the quota
        assert post("other", 50).status_code == 201  # another token: its own (default) budget
        too_big = post("dev", 11)
        assert too_big.status_code == 413 and "send smaller batches" in too_big.json()["detail"]
        clock.now += 15  # the next minute
        assert post("dev", 10).status_code == 201
        metrics = c.get("/metrics").text if app.state.collector.auth is None else ""
    assert app.state.collector.store.summary("a")[0] == 6 + 4 + 50 + 10
    assert metrics == ""


@pytest.mark.parametrize("origin", [None, ORIGIN])
def test_batches_per_second_gives_429_before_the_body_is_decoded(tmp_path, origin, monkeypatch):
    config, h = _made(("dev", ["ingest", "read"], {"batches_per_second": 3}))
    app = create_app(
        {"a": SPEC},
        f"sqlite:///{tmp_path / 'c.db'}",
        tokens=parse_tokens(config),
        cors_origins=[ORIGIN],
    )
    clock = _Clock(1_000_000.25)
    collector = app.state.collector
    collector.quotas.clock = clock
    extra = {"Origin": origin} if origin else {}
    with TestClient(app) as c:
        codes = [
            c.post("/v1/reports/a", json=_batch(1), headers={**h["dev"], **extra}).status_code
            for _ in range(3)
        ]
        decoded = []
        monkeypatch.setattr(collector.decoder, "prepare", lambda *a: decoded.append(a))
        over = c.post("/v1/reports/a", json=_batch(1), headers={**h["dev"], **extra})
        monkeypatch.undo()
        assert codes == [201] * 3 and over.status_code == 429 and not decoded
        assert over.headers["retry-after"] == "1"
        clock.now += 1
        assert (
            c.post("/v1/reports/a", json=_batch(1), headers={**h["dev"], **extra}).status_code
            == 201
        )
        metrics = c.get("/metrics", headers=h["dev"]).text
    assert 'reason="rate_limited",status="429"' in metrics


def test_default_quotas_apply_with_auth_and_config_quotas_without(tmp_path):
    config, _ = _made(("dev", ["ingest"], {}), ("own", ["ingest"], {"batches_per_second": 7}))
    app = create_app({"a": SPEC}, "sqlite://", tokens=parse_tokens(config))
    assert app.state.collector.quotas.quotas == {
        "dev": Quota(),
        "own": Quota(batches_per_second=7),
    }
    assert Quota() == Quota(reports_per_minute=1_000_000, batches_per_second=1_000)
    assert create_app({"a": SPEC}, "sqlite://").state.collector.quotas.quotas == {}
    base = {"collections": {"a": {"mechanism": "GRR", "params": {"epsilon": 1, "domain_size": 8}}}}
    app = app_from_config(
        {**base, "quotas": {"reports_per_minute": 3, "batches_per_second": "unlimited"}},
        database_url="sqlite://",
    )
    assert app.state.collector.quotas.quotas == {"": Quota(3, None)}
    with TestClient(app) as c:  # no auth: every client shares the one budget
        assert c.post("/v1/reports/a", json=_batch(3)).status_code == 201
        assert c.post("/v1/reports/a", json=_batch(1)).status_code == 429
    app = app_from_config(
        {**base, "quotas": {"batches_per_second": 9}, "auth": {"tokens": config}},
        database_url="sqlite://",
    )
    assert app.state.collector.quotas.quotas == {
        "dev": Quota(batches_per_second=9),
        "own": Quota(batches_per_second=7),
    }


def test_counters_in_one_directory_are_shared_exactly_between_instances(tmp_path):
    # Two instances = two open file descriptions, as two worker processes have.
    quotas = {"t": Quota(reports_per_minute=None, batches_per_second=1500)}
    counters = [QuotaCounters(quotas, tmp_path, clock=lambda: 100.5) for _ in range(2)]
    accepted = [0] * 4

    def hammer(i):
        for _ in range(500):
            try:
                counters[i % 2].admit_batch("t")
                accepted[i] += 1
            except QuotaExceeded as exc:
                assert exc.status == 429

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(accepted) == 1500  # no lost update, no over-admission
    alone = QuotaCounters(quotas, None, clock=lambda: 100.5)  # in memory: its own count
    alone.admit_batch("t")
    for c in counters:
        c.close()


_WORKER = """
import sys, time
from ldpkit.service.quotas import Quota, QuotaCounters, QuotaExceeded
counters = QuotaCounters({"t": Quota(1000, None)}, sys.argv[1], clock=lambda: 60.0 * 7)
while time.time() < float(sys.argv[2]):  # start together, so the updates interleave
    pass
ok = 0
for _ in range(300):
    try:
        counters.charge_reports("t", 3)
        ok += 1
    except QuotaExceeded:
        pass
print(ok)
"""


def test_counters_are_shared_by_worker_processes(tmp_path):
    start = time.time() + 8
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(tmp_path), str(start)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        for _ in range(2)
    ]
    got = [int(p.communicate(timeout=60)[0]) for p in procs]
    # 600 attempts of 3 reports against 1000 a minute: exactly 333 pass over both processes.
    assert sum(got) == 333 and min(got) > 0


def test_two_worker_processes_of_one_server_share_one_quota(tmp_path, fresh_postgres):
    """``main(..., workers=2)`` with a quota: 16 connections spread over both processes,
    and exactly the quota passes over both (a per-process count would let twice through)."""
    import http.client
    import json
    import signal

    from ldpkit.service.prometheus import _read_file
    from ldpkit.service.supervisor import reuse_port_supported

    if not reuse_port_supported():
        pytest.skip("SO_REUSEPORT (Linux) only")
    port, shared = free_port(), tmp_path / "metrics"
    shared.mkdir()
    quotas = {"reports_per_minute": 24, "batches_per_second": "unlimited"}
    proc = serve_two_workers(
        tmp_path, fresh_postgres, port, shared, SPEC.to_dict()["params"], {"quotas": quotas}
    )
    try:
        # The 48 requests must fall in one quota minute. Wait before connecting: the
        # server closes a connection that sends no request head within its header
        # timeout (5 s), so idle connections opened before a 20 s wait were refused.
        while time.time() % 60 > 40:
            time.sleep(0.5)
        conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(16)]
        for conn in conns:
            conn.connect()
        statuses = []
        for k in range(48):
            body = json.dumps(_batch(1, seed=k))
            conn = conns[k % 16]
            conn.request("POST", "/v1/reports/c", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            statuses.append(resp.status)
        per_process = [
            _read_file(f).get('["batches","c"]', 0) for f in shared.glob("ldpkit-metrics-*.bin")
        ]
        for conn in conns:
            conn.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    assert len(per_process) == 2 and min(per_process) > 0, per_process  # both served
    assert statuses.count(201) == 24 and statuses.count(429) == 24, statuses


def test_the_browser_pattern_needs_no_read_scope(tmp_path):
    """docs/collector.md: the page ships the collection's description (fetched once with a
    read token on the operator's side) and holds an ingest-only token for its collection."""
    from pathlib import Path

    config, h = _made(("web", ["ingest"], {"collections": ["a"]}), ("ops", ["read"], {}))
    app = create_app(
        {"a": SPEC, "b": SPEC},
        f"sqlite:///{tmp_path / 'c.db'}",
        tokens=parse_tokens(config),
        cors_origins=[ORIGIN],
    )
    page = {**h["web"], "Origin": ORIGIN}
    with TestClient(app) as c:
        info = c.get("/v1/collections/a", headers=h["ops"]).json()  # at deploy time
        assert info["fingerprint"] == SPEC.fingerprint
        for path in ("/v1/collections", "/v1/collections/a", "/v1/collections/a/estimate"):
            assert c.get(path, headers=page).status_code == 403
        assert c.get("/metrics", headers=page).status_code == 403
        body = {"fingerprint": info["fingerprint"], **reports_to_dict(SPEC.randomize([3], rng=1))}
        resp = c.post(f"/v1/reports/{info['name']}", json=body, headers=page)
        assert resp.status_code == 201
        assert resp.headers["access-control-allow-origin"] == ORIGIN
    doc = (Path(__file__).resolve().parents[2] / "docs" / "collector.md").read_text()
    assert "a token with the `ingest` and `read` scopes" not in doc
    assert "never `read`" in doc
