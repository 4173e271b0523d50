"""Key-value and set-valued collections on the collector.

The ``key_value`` kind (PCKV, PrivKV) answers per-key frequencies and means with intervals,
equal to the offline estimate of the same reports, also served live on 127.0.0.1;
PaddingSampling and PrivSet are ``frequency`` collections.
"""

import itertools
import json
import socket
import threading
import time
import urllib.request
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from ldpkit.io import reports_to_dict
from ldpkit.service import create_app
from ldpkit.service.kinds import KINDS, kind_of
from ldpkit.sets import PCKV, PaddingSampling, PrivKV, PrivSet, UserPairs, UserSets

D = 6


def _pairs(n: int, seed: int) -> UserPairs:
    gen = np.random.default_rng(seed)
    lengths = gen.integers(0, 4, n)
    keys = np.concatenate([gen.choice(D, size=k, replace=False) for k in lengths])
    values = np.clip(np.linspace(-0.6, 0.6, D)[keys] + gen.uniform(-0.2, 0.2, keys.size), -1, 1)
    return UserPairs(keys, values, np.r_[0, np.cumsum(lengths)])


def _batches(spec: Any, users: Any, parts: int = 3) -> list[Any]:
    rng = np.random.default_rng(11)
    n = len(users)
    cuts = np.linspace(0, n, parts + 1).astype(int)
    out = []
    for a, b in itertools.pairwise(cuts):
        sub = (
            UserPairs(
                users.keys[users.offsets[a] : users.offsets[b]],
                users.values[users.offsets[a] : users.offsets[b]],
                users.offsets[a : b + 1] - users.offsets[a],
            )
            if isinstance(users, UserPairs)
            else UserSets(
                users.items[users.offsets[a] : users.offsets[b]],
                users.offsets[a : b + 1] - users.offsets[a],
            )
        )
        out.append(spec.randomize(sub, rng=rng))
    return out


def _offline(spec: Any, batches: list[Any]) -> Any:
    first, *rest = [spec.aggregate(b) for b in batches]
    return spec.estimate(first.merge(*rest))


KV_SPECS = [
    PCKV(epsilon=2.0, domain_size=D, padding=2, method="ue"),
    PCKV(epsilon=2.0, domain_size=D, padding=2, method="grr"),
    PrivKV(epsilon=2.0, domain_size=D),
]


def _check_body(body: dict[str, Any], est: Any, alpha: float) -> None:
    np.testing.assert_allclose(body["frequencies"], est.frequencies, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(body["means"], est.means, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(body["std_errors"], np.sqrt(est.frequency_variance), rtol=1e-12)
    np.testing.assert_allclose(body["mean_std_errors"], np.sqrt(est.mean_variance), rtol=1e-12)
    low, high = est.frequency_interval(alpha)
    np.testing.assert_allclose(body["ci_low"], low, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(body["ci_high"], high, rtol=1e-12, atol=1e-15)
    with warnings.catch_warnings():  # NaN (null on the wire) where there is no interval
        warnings.simplefilter("ignore")
        m_low, m_high = est.mean_interval(alpha)
    got_low = np.array([np.nan if x is None else x for x in body["mean_ci_low"]])
    got_high = np.array([np.nan if x is None else x for x in body["mean_ci_high"]])
    np.testing.assert_allclose(got_low, m_low, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got_high, m_high, rtol=1e-12, atol=1e-15)
    if est.debiased_means is None:  # PCKV: no debiased means, the interval is around means
        assert body["debiased_means"] is None and body["debiased_mean_std_errors"] is None
    else:  # PrivKV: the interval is around the debiased means, served with it
        np.testing.assert_allclose(body["debiased_means"], est.debiased_means, rtol=1e-12)
        np.testing.assert_allclose(
            body["debiased_mean_std_errors"], np.sqrt(est.debiased_mean_variance), rtol=1e-12
        )
        assert all(x is not None for x in body["mean_ci_low"])  # n = 6000 on 6 keys


@pytest.mark.parametrize("spec", KV_SPECS, ids=lambda s: f"{s.name}-{getattr(s, 'method', '')}")
def test_key_value_collection_answers_the_offline_estimate(tmp_path: Path, spec: Any) -> None:
    """Three JSON batches in, the estimate out: the offline estimate, field by field."""
    users = _pairs(6000, seed=1)
    batches = _batches(spec, users)
    app = create_app({"kv": spec}, f"sqlite:///{tmp_path / 'c.db'}")
    with TestClient(app) as c:
        assert c.get("/v1/collections/kv").json()["kind"] == "key_value"
        for b in batches:
            assert c.post("/v1/reports/kv", json=reports_to_dict(b)).status_code == 201
        got = c.get("/v1/collections/kv/estimate", params={"alpha": 0.1, "top_k": 2})
        assert got.status_code == 200, got.text
        body = got.json()
        refused = c.get("/v1/collections/kv/estimate", params={"postprocessing": "norm_sub"})
        assert refused.status_code == 422
    est = _offline(spec, batches)
    assert body["kind"] == "key_value" and body["n"] == len(users)
    _check_body(body, est, 0.1)
    assert [t["item"] for t in body["top"]] == np.argsort(-est.frequencies, kind="stable")[
        :2
    ].tolist()
    if isinstance(spec, PCKV):
        assert body["long_share"] == pytest.approx(est.long_share, rel=1e-12)


def test_set_valued_collections_are_frequency_collections(tmp_path: Path) -> None:
    """PaddingSampling and PrivSet are probed with their own sample of sets."""
    gen = np.random.default_rng(3)
    sets = UserSets.from_lists(
        [gen.choice(D, size=int(k), replace=False).tolist() for k in gen.integers(0, 4, 3000)]
    )
    for spec in (
        PaddingSampling(epsilon=2.0, domain_size=D, padding=2),
        PrivSet(epsilon=2.0, domain_size=D, padding=2),
    ):
        batches = _batches(spec, sets)
        stats = spec.aggregate(batches[0])
        assert kind_of(spec, stats) is KINDS["frequency"]
        app = create_app({"s": spec}, f"sqlite:///{tmp_path / f'{spec.name}.db'}")
        with TestClient(app) as c:
            for b in batches:
                assert c.post("/v1/reports/s", json=reports_to_dict(b)).status_code == 201
            body = c.get("/v1/collections/s/estimate").json()
        est = _offline(spec, batches)
        np.testing.assert_allclose(body["frequencies"], est.frequencies, rtol=1e-12, atol=1e-15)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_live_collector_on_localhost_answers_the_offline_estimate(tmp_path: Path) -> None:
    """A real server (uvicorn on 127.0.0.1), batches over HTTP: the offline estimate."""
    import uvicorn

    spec = PCKV(epsilon=3.0, domain_size=D, padding=2, method="grr")
    users = _pairs(4000, seed=2)
    batches = _batches(spec, users)
    app = create_app({"kv": spec}, f"sqlite:///{tmp_path / 'c.db'}")
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.started, "the collector did not start within 30 s"
        for b in batches:
            req = urllib.request.Request(
                f"{url}/v1/reports/kv",
                data=json.dumps(reports_to_dict(b)).encode(),
                headers={"Content-Type": "application/json"},
                method="POST",
            )
            with urllib.request.urlopen(req, timeout=30) as r:
                assert r.status == 201
        with urllib.request.urlopen(
            f"{url}/v1/collections/kv/estimate?alpha=0.05", timeout=30
        ) as r:
            body = json.loads(r.read())
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    _check_body(body, _offline(spec, batches), 0.05)
