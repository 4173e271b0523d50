"""Open-domain collections (CMS, HCMS, FLH): ingest, roll-ups and the estimate of
named candidates (GET ``?candidates=``, POST a JSON list), with intervals and a top-k; the
kinds module (``service/kinds.py``) that serves them."""

import datetime as dt
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from _jshelpers import needs_node, send
from ldpkit.frequency import CMS, FLH, HCMS
from ldpkit.io import reports_to_bytes, reports_to_dict
from ldpkit.service import create_app
from ldpkit.service.kinds import KINDS, MAX_CANDIDATES, kind_of

ITEMS = ["the", "zoë", "日本語", 7, "", "a, b"]
COUNTS = np.array([3000, 1200, 500, 200, 80, 20])  # n = 5000
SPECS = [
    CMS(epsilon=2.0, width=64, depth=256),
    HCMS(epsilon=2.0, width=64, depth=256),
    FLH(epsilon=2.0, num_hashes=256),
]


def _merged(spec: Any, batches: list[Any]) -> Any:
    first, *rest = [spec.aggregate(b) for b in batches]
    return first.merge(*rest)


def _values() -> np.ndarray:
    out = np.empty(int(COUNTS.sum()), dtype=object)
    out[:] = [item for item, c in zip(ITEMS, COUNTS.tolist()) for _ in range(c)]
    return out


def _batches(spec: Any, seed: int = 5) -> list[Any]:
    values = _values()
    rng = np.random.default_rng(seed)
    rng.shuffle(values)
    return [spec.randomize(part, rng=rng) for part in np.array_split(values, 3)]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_open_domain_collection_answers_the_offline_estimate(tmp_path: Path, spec: Any) -> None:
    batches = _batches(spec)
    app = create_app({"words": spec}, f"sqlite:///{tmp_path / 'c.db'}")
    candidates = ["the", "zoë", "日本語", "", "nobody"]
    with TestClient(app) as c:
        info = c.get("/v1/collections/words").json()
        assert info["kind"] == "open_frequency"
        # both ingest paths: npz bytes and a JSON body
        assert c.post("/v1/reports/words", content=reports_to_bytes(batches[0])).status_code == 201
        for b in batches[1:]:
            assert c.post("/v1/reports/words", json=reports_to_dict(b)).status_code == 201
        # n = 0 of a window: no frequencies, no error
        empty = c.get(
            "/v1/collections/words/estimate",
            params={"candidates": "the", "until": "1970-01-01T00:00:00Z"},
        ).json()
        assert (empty["n"], empty["frequencies"]) == (0, None)
        got = c.get(
            "/v1/collections/words/estimate",
            params={"candidates": ",".join(candidates), "top_k": 2, "alpha": 0.01},
        )
        assert got.status_code == 200, got.text
        body = got.json()
        # POST a JSON list: integers stay integers, commas are part of an item
        posted = c.post(
            "/v1/collections/words/estimate", json={"candidates": [7, "7", "a, b"]}
        ).json()
    offline = spec.estimate(_merged(spec, batches), candidates=candidates)
    assert body["kind"] == "open_frequency" and body["n"] == COUNTS.sum()
    assert body["labels"] == candidates
    np.testing.assert_allclose(body["frequencies"], offline.frequencies, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(body["std_errors"], offline.std_error, rtol=1e-12)
    low, high = offline.confidence_interval(0.01)
    np.testing.assert_allclose(body["ci_low"], low, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(body["ci_high"], high, rtol=1e-12, atol=1e-15)
    # top-2 among the candidates: "the" (60%) then "zoë" (24%), about 8 and 3 standard
    # errors apart at this n (sd ~ 0.02)
    assert [t["item"] for t in body["top"]] == ["the", "zoë"]
    assert body["top"][0]["frequency"] == pytest.approx(body["frequencies"][0], rel=1e-12)
    assert body["top"][0]["ci_low"] == pytest.approx(body["ci_low"][0], rel=1e-12)
    other = spec.estimate(_merged(spec, batches), candidates=[7, "7", "a, b"])
    assert posted["labels"] == [7, "7", "a, b"]
    np.testing.assert_allclose(posted["frequencies"], other.frequencies, rtol=1e-12, atol=1e-15)


def test_open_domain_estimates_are_unbiased_through_the_collector(tmp_path: Path) -> None:
    """z-tests of the served frequencies with the served standard errors; they fail when the
    collector's spec decodes with a wrong epsilon (the same reports)."""
    spec = SPECS[0]
    batches = _batches(spec, seed=11)
    truth = np.append(COUNTS / COUNTS.sum(), 0.0)
    items = [*ITEMS, "nobody"]

    def max_z(served: Any) -> float:
        app = create_app({"w": served}, f"sqlite:///{tmp_path / f'{served.epsilon}.db'}")
        with TestClient(app) as c:
            for b in batches:
                arrays = {k: np.asarray(v) for k, v in b.arrays.items()}
                body = reports_to_bytes(type(b)(served, **arrays))
                assert c.post("/v1/reports/w", content=body).status_code == 201
            est = c.post("/v1/collections/w/estimate", json={"candidates": items}).json()
        z = (np.array(est["frequencies"]) - truth) / np.array(est["std_errors"])
        return float(np.max(np.abs(z)))

    assert max_z(spec) <= 5.0
    assert max_z(spec.replace(epsilon=spec.epsilon * 1.5)) > 6.0


def test_open_domain_queries_are_checked(tmp_path: Path) -> None:
    spec = SPECS[2]
    app = create_app(
        {"w": spec, "c": CMS(epsilon=1.0, domain_size=8, width=16, depth=8)},
        f"sqlite:///{tmp_path / 'c.db'}",
    )
    with TestClient(app) as c:
        for b in _batches(spec):
            assert c.post("/v1/reports/w", content=reports_to_bytes(b)).status_code == 201
        none = c.get("/v1/collections/w/estimate")
        assert none.status_code == 422 and "candidates must be given" in none.text
        dup = c.get("/v1/collections/w/estimate", params={"candidates": "a,a"})
        assert dup.status_code == 422 and "candidates must be distinct" in dup.text
        bad = c.post("/v1/collections/w/estimate", json={"candidates": [1.5]})
        assert bad.status_code == 422 and "candidates must be" in bad.text
        many = c.post(
            "/v1/collections/w/estimate", json={"candidates": list(range(MAX_CANDIDATES + 1))}
        )
        assert many.status_code == 422 and f"at most {MAX_CANDIDATES}" in many.text
        post = c.get(
            "/v1/collections/w/estimate", params={"candidates": "a", "postprocessing": "norm_sub"}
        )
        assert post.status_code == 422 and "postprocessing must be one of []" in post.text
        zero = c.get("/v1/collections/w/estimate", params={"candidates": "a", "top_k": 0})
        assert zero.status_code == 422
        # a closed domain is a plain frequency collection: no candidates, a top-k of items
        closed = c.get("/v1/collections/c").json()
        assert closed["kind"] == "frequency"
        assert c.get("/v1/collections/c/estimate", params={"candidates": "1"}).status_code == 422
        rng = np.random.default_rng(3)
        closed_spec = CMS(epsilon=1.0, domain_size=8, width=16, depth=8)
        reports = closed_spec.randomize(rng.integers(0, 8, 500), rng=rng)
        assert c.post("/v1/reports/c", content=reports_to_bytes(reports)).status_code == 201
        est = c.get("/v1/collections/c/estimate", params={"top_k": 3}).json()
    freqs = np.array(est["frequencies"])
    assert [t["item"] for t in est["top"]] == np.argsort(-freqs, kind="stable")[:3].tolist()
    assert all(t["ci_low"] <= t["frequency"] <= t["ci_high"] for t in est["top"])


def test_every_kind_is_named_and_the_mean_refuses_top_k(tmp_path: Path) -> None:
    from ldpkit import StochasticRounding

    assert sorted(KINDS) == [
        "distribution",
        "frequency",
        "heavy_hitters",
        "key_value",
        "mean",
        "multidim",
        "open_frequency",
    ]
    spec = StochasticRounding(epsilon=1.0)
    sample = spec.aggregate(spec.randomize(np.zeros(8), rng=0))
    assert kind_of(spec, sample).name == "mean"
    app = create_app({"m": spec}, f"sqlite:///{tmp_path / 'c.db'}")
    with TestClient(app) as c:
        got = c.get("/v1/collections/m/estimate", params={"top_k": 2})
        assert got.status_code == 422 and "top_k must be left out" in got.text
        got = c.get("/v1/collections/m/estimate", params={"candidates": "a"})
        assert got.status_code == 422 and "candidates must be left out" in got.text


@needs_node
@pytest.mark.slow
def test_js_client_strings_to_a_live_collector(tmp_path: Path, serve_app: Any) -> None:
    """clients/js (sketch.js) fetches the spec, randomizes strings, posts them; the
    collector's estimate of the candidates is unbiased (z-tests, the served errors)."""
    import urllib.request

    spec = CMS(epsilon=2.0, width=64, depth=256)
    url = serve_app(create_app({"words": spec}, f"sqlite:///{tmp_path / 'c.db'}"))
    words = ["the", "zoë", "🙂", "a, b"]
    counts = [1200, 500, 100, 50]  # zoë over 🙂 by 7 standard errors
    values = [w for w, c in zip(words, counts) for _ in range(c)]
    arg = {"url": url, "collection": "words", "values": values, "batch": 500}
    assert send(arg) == {"stored": sum(counts)}
    request = urllib.request.Request(
        f"{url}/v1/collections/words/estimate?top_k=2",
        data=json.dumps({"candidates": [*words, "nobody"]}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        est = json.loads(response.read())
    assert est["n"] == sum(counts) and est["batches"] == 4
    truth = np.append(np.array(counts) / sum(counts), 0.0)
    z = (np.array(est["frequencies"]) - truth) / np.array(est["std_errors"])
    assert float(np.max(np.abs(z))) <= 5.0
    assert [t["item"] for t in est["top"]] == ["the", "zoë"]


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_sketch_rollups_survive_compaction_and_windows(
    tmp_path: Path, request: pytest.FixtureRequest, database: str
) -> None:
    """The integer sketches roll up per bucket: the estimate is the offline one before and
    after compaction folds the parts, and a window holds only its buckets' batches."""
    spec = SPECS[1]  # HCMS
    url = (
        f"sqlite:///{tmp_path / 'c.db'}"
        if database == "sqlite"
        else request.getfixturevalue("fresh_postgres")
    )
    batches = _batches(spec, seed=21)
    app = create_app({"w": spec}, url, bucket_seconds=60)
    # buckets [1_000_020, 1_000_080) (two batches) and [1_000_200, 1_000_260)
    times = iter(dt.datetime.fromtimestamp(t, dt.UTC) for t in (1_000_020, 1_000_030, 1_000_200))
    app.state.collector.decoder.clock = lambda: next(times)
    items = ["the", "zoë", 7]
    with TestClient(app) as c:
        for b in batches:
            assert c.post("/v1/reports/w", content=reports_to_bytes(b)).status_code == 201
        before = c.post("/v1/collections/w/estimate", json={"candidates": items}).json()
        app.state.collector.store.compact()
        after = c.post("/v1/collections/w/estimate", json={"candidates": items}).json()
        first = c.post(
            "/v1/collections/w/estimate",
            params={"until": "1000080"},
            json={"candidates": items},
        ).json()
    whole = spec.estimate(_merged(spec, batches), candidates=items)
    part = spec.estimate(_merged(spec, batches[:2]), candidates=items)
    for got in (before, after):
        assert got["n"] == COUNTS.sum()
        np.testing.assert_allclose(got["frequencies"], whole.frequencies, rtol=1e-12, atol=1e-15)
    assert (first["n"], first["batches"]) == (len(batches[0]) + len(batches[1]), 2)
    np.testing.assert_allclose(first["frequencies"], part.frequencies, rtol=1e-12, atol=1e-15)


def test_candidates_body_is_limited_before_parsing(tmp_path: Path) -> None:
    """A POST of candidates over MAX_CANDIDATES_BODY bytes is a 413 naming the limit (read
    under the cap, never parsed), declared or streamed; malformed bodies are 422s."""
    from ldpkit.service.kinds import MAX_CANDIDATES_BODY

    spec = SPECS[0]
    app = create_app({"w": spec}, f"sqlite:///{tmp_path / 'c.db'}")
    huge = json.dumps({"candidates": ["x" * 1000] * (MAX_CANDIDATES_BODY // 1000)}).encode()
    assert len(huge) > MAX_CANDIDATES_BODY
    with TestClient(app) as c:
        b = _batches(spec)[0]
        assert c.post("/v1/reports/w", content=reports_to_bytes(b)).status_code == 201
        got = c.post(
            "/v1/collections/w/estimate",
            content=huge,
            headers={"Content-Type": "application/json"},
        )
        assert got.status_code == 413
        assert f"at most {MAX_CANDIDATES_BODY} bytes" in got.json()["detail"]

        def chunks() -> Any:  # no Content-Length: the cap holds while streaming
            yield huge[: len(huge) // 2]
            yield huge[len(huge) // 2 :]

        streamed = c.post("/v1/collections/w/estimate", content=chunks())
        assert streamed.status_code == 413
        not_json = c.post("/v1/collections/w/estimate", content=b"{candidates")
        assert not_json.status_code == 422 and "must be JSON" in not_json.text
        missing = c.post("/v1/collections/w/estimate", json={"items": ["a"]})
        assert missing.status_code == 422 and "candidates" in missing.text
        fine = c.post("/v1/collections/w/estimate", json={"candidates": ["the"]})
        assert fine.status_code == 200 and fine.json()["labels"] == ["the"]
        metrics = c.get("/metrics").text
    assert 'reason="too_large"' in metrics
