"""Heavy-hitter collections (PEM, TreeHist, SFP) in the collector.

Ingest through a live collector, roll-ups, time windows, and the estimate's discovered
top-k with intervals, equal to the offline ``spec.estimate(stats)``; the kinds module
(``service/kinds.py``) that serves them.
"""

import datetime as dt
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from ldpkit.discovery import PEM, SFP, TreeHist
from ldpkit.io import reports_to_bytes, reports_to_dict
from ldpkit.service import create_app
from ldpkit.service.kinds import KINDS, kind_of

WORDS = ["hello", "help", "world", "word", "zoo"]
COUNTS = [7000, 5000, 3000, 2000, 1600]
TAIL = 1400  # distinct random 5-letter strings: n = 20_000
SPECS = [
    PEM(epsilon=4.0, max_length=6, top_k=5),
    TreeHist(epsilon=4.0, max_length=6, top_k=5),
    SFP(epsilon=8.0, max_length=6, top_k=3, depth=8),
]


def _values(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    letters = list("abcdefghijklmnopqrstuvwxyz")
    tail = ["".join(rng.choice(letters, 5)) for _ in range(TAIL)]
    out = np.empty(sum(COUNTS) + TAIL, dtype=object)
    out[:] = [w for w, c in zip(WORDS, COUNTS) for _ in range(c)] + tail
    rng.shuffle(out)
    return out


def _batches(spec: Any, seed: int = 5) -> list[Any]:
    rng = np.random.default_rng(seed + 1)
    return [spec.randomize(part, rng=rng) for part in np.array_split(_values(seed), 3)]


def _merged(spec: Any, batches: list[Any]) -> Any:
    first, *rest = [spec.aggregate(b) for b in batches]
    return first.merge(*rest)


def _call(url: str, path: str, body: bytes | None = None, json_body: Any = None) -> Any:
    """One request to a live server; (status, parsed JSON)."""
    headers = {}
    if json_body is not None:
        body = json.dumps(json_body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(
        url + path, data=body, headers=headers, method="GET" if body is None else "POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _assert_same(body: dict[str, Any], found: Any) -> None:
    """Assert the served answer is the offline HeavyHitters.

    Items, frequencies and intervals (at the level of the spec that found them).
    """
    assert body["labels"] == list(found.items)
    assert [t["item"] for t in body["top"]] == list(found.items)
    np.testing.assert_allclose(body["frequencies"], found.frequencies, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(body["std_errors"], found.std_error, rtol=1e-12)
    low, high = found.confidence_interval()
    np.testing.assert_allclose(body["ci_low"], low, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(body["ci_high"], high, rtol=1e-12, atol=1e-15)
    assert body["tested"] == found.tested and body["control"] == found.control
    for t, f, lo, hi in zip(body["top"], found.frequencies, low, high):
        assert t["frequency"] == pytest.approx(f, rel=1e-12)
        assert (t["ci_low"], t["ci_high"]) == (pytest.approx(lo), pytest.approx(hi))


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_heavy_hitters_collection_answers_the_offline_search(
    tmp_path: Path, serve_app: Any, spec: Any
) -> None:
    """Serve the offline search's answer to reports sent to a live collector.

    Reports go to 127.0.0.1 as npz and JSON bodies: the served top-k is
    ``spec.estimate(stats)`` of the same reports, also with another top_k and control.
    """
    batches = _batches(spec)
    url = serve_app(create_app({"words": spec}, f"sqlite:///{tmp_path / 'c.db'}"))
    status, info = _call(url, "/v1/collections/words")
    assert (status, info["kind"]) == (200, "heavy_hitters")
    assert _call(url, "/v1/reports/words", reports_to_bytes(batches[0]))[0] == 201
    for b in batches[1:]:
        assert _call(url, "/v1/reports/words", json_body=reports_to_dict(b))[0] == 201
    status, body = _call(url, "/v1/collections/words/estimate")
    assert status == 200, body
    status, fwer = _call(url, "/v1/collections/words/estimate?top_k=2&control=fwer&alpha=0.01")
    assert status == 200, fwer
    status, empty = _call(url, "/v1/collections/words/estimate?until=1970-01-01T00:00:00Z")
    assert (status, empty["n"], empty["labels"]) == (200, 0, None)
    merged = _merged(spec, batches)
    assert body["kind"] == "heavy_hitters" and body["n"] == sum(COUNTS) + TAIL
    _assert_same(body, spec.estimate(merged))
    asked = spec.replace(top_k=2, control="fwer", alpha=0.01)
    _assert_same(fwer, asked.estimate(type(merged)._exact(asked, merged.n, dict(merged.arrays))))
    # the frequent words are found, most frequent first
    assert body["labels"][:3] == WORDS[:3]


def test_heavy_hitters_are_unbiased_through_the_collector(tmp_path: Path) -> None:
    """Serve unbiased frequencies of the found words (z-tests with the served errors).

    The same z-tests fail when the collector's spec decodes with 1.5x epsilon (the same
    reports).
    """
    spec = PEM(epsilon=4.0, max_length=6, top_k=5, hash_range=48, hash_functions=128)
    batches = _batches(spec, seed=11)
    truth = dict(zip(WORDS, np.array(COUNTS) / (sum(COUNTS) + TAIL)))

    def max_z(served: Any) -> float:
        app = create_app({"w": served}, f"sqlite:///{tmp_path / f'{served.epsilon}.db'}")
        with TestClient(app) as c:
            for b in batches:
                arrays = {k: np.asarray(v) for k, v in b.arrays.items()}
                body = reports_to_bytes(type(b)(served, **arrays))
                assert c.post("/v1/reports/w", content=body).status_code == 201
            est = c.get("/v1/collections/w/estimate").json()
        assert len(est["labels"]) == 5
        expected = np.array([truth.get(item, 0.0) for item in est["labels"]])
        z = (np.array(est["frequencies"]) - expected) / np.array(est["std_errors"])
        return float(np.max(np.abs(z)))

    assert max_z(spec) <= 5.0
    assert max_z(spec.replace(epsilon=spec.epsilon * 1.5)) > 6.0


def test_heavy_hitters_rollups_answer_per_window(tmp_path: Path) -> None:
    """Answer a window with the search over its batches only.

    Per-bucket roll-ups, before and after compaction folds the parts.
    """
    spec = SPECS[1]
    batches = _batches(spec, seed=21)
    app = create_app({"w": spec}, f"sqlite:///{tmp_path / 'c.db'}", bucket_seconds=60)
    times = iter(dt.datetime.fromtimestamp(t, dt.UTC) for t in (1_000_020, 1_000_030, 1_000_200))
    app.state.collector.decoder.clock = lambda: next(times)
    with TestClient(app) as c:
        for b in batches:
            assert c.post("/v1/reports/w", content=reports_to_bytes(b)).status_code == 201
        app.state.collector.store.compact()
        whole = c.get("/v1/collections/w/estimate").json()
        first = c.get("/v1/collections/w/estimate", params={"until": "1000080"}).json()
    _assert_same(whole, spec.estimate(_merged(spec, batches)))
    assert (first["n"], first["batches"]) == (len(batches[0]) + len(batches[1]), 2)
    _assert_same(first, spec.estimate(_merged(spec, batches[:2])))


def test_heavy_hitters_queries_are_checked(tmp_path: Path) -> None:
    """Refuse queries a discovery cannot answer (422 naming the parameter)."""
    spec = SPECS[0]
    assert "heavy_hitters" in KINDS
    sample = spec.aggregate(spec.randomize(["ab", "b"], rng=0))
    assert kind_of(spec, sample).name == "heavy_hitters"
    app = create_app({"w": spec}, f"sqlite:///{tmp_path / 'c.db'}")
    with TestClient(app) as c:
        assert c.post("/v1/reports/w", content=reports_to_bytes(_batches(spec)[0])).status_code
        bad = c.get("/v1/collections/w/estimate", params={"control": "bonferroni"})
        assert bad.status_code == 422 and "control must be one of" in bad.text
        big = c.get("/v1/collections/w/estimate", params={"top_k": 5000})
        assert big.status_code == 422 and "top_k must be" in big.text
        cand = c.get("/v1/collections/w/estimate", params={"candidates": "a"})
        assert cand.status_code == 422 and "candidates must be left out" in cand.text
        post = c.get("/v1/collections/w/estimate", params={"postprocessing": "norm_sub"})
        assert post.status_code == 422 and "postprocessing must be one of []" in post.text
        fdr = c.get("/v1/collections/w/estimate", params={"control": "fdr"}).json()
        none = c.get("/v1/collections/w/estimate", params={"control": "none"}).json()
    assert fdr["control"] == "fdr" and none["control"] is None
    assert none["labels"][:2] == ["hello", "help"]


def test_heavy_hitters_collection_from_a_config_file(tmp_path: Path) -> None:
    """Load a TOML config naming discovery specs (the docs' example).

    Each is a heavy_hitters collection whose spec is the one the config describes.
    """
    from ldpkit.service.config import config_options, load_config

    path = tmp_path / "collector.toml"
    path.write_text(
        'database_url = "sqlite:///unused.db"\n'
        "[collections.typed_words]\n"
        'mechanism = "PEM"\n'
        'params = { epsilon = 4.0, max_length = 12, top_k = 20, control = "fdr" }\n'
        "[collections.letters]\n"
        'mechanism = "SFP"\n'
        "params = { epsilon = 8.0, max_length = 6, top_k = 3, depth = 8 }\n",
        encoding="utf-8",
    )
    collections, _options = config_options(load_config(path))
    spec = collections["typed_words"].spec
    assert spec == PEM(epsilon=4.0, max_length=12, top_k=20, control="fdr")
    app = create_app(collections, f"sqlite:///{tmp_path / 'c.db'}")
    with TestClient(app) as c:
        kinds = {x["name"]: x["kind"] for x in c.get("/v1/collections").json()["collections"]}
    assert kinds == {"typed_words": "heavy_hitters", "letters": "heavy_hitters"}


def test_heavy_hitters_searches_are_cached_per_counts(tmp_path: Path, monkeypatch: Any) -> None:
    """Run one search per spec and counts.

    A poll of an unchanged window reuses it; new reports or another control search again.
    """
    import ldpkit.discovery._learned as learned  # PEM()'s default search

    calls = []
    real = learned.discover_learned

    def counted(spec: Any, stats: Any) -> Any:
        calls.append(spec.control)
        return real(spec, stats)

    monkeypatch.setattr(learned, "discover_learned", counted)
    spec = PEM(epsilon=4.0, max_length=6, top_k=5, hash_range=48, hash_functions=64)
    batches = _batches(spec, seed=31)
    app = create_app({"w": spec}, f"sqlite:///{tmp_path / 'c.db'}")
    with TestClient(app) as c:
        assert c.post("/v1/reports/w", content=reports_to_bytes(batches[0])).status_code == 201
        calls.clear()  # (the probe at start-up searched a sample)
        first = c.get("/v1/collections/w/estimate").json()
        again = c.get("/v1/collections/w/estimate").json()
        assert (first, len(calls)) == (again, 1)
        c.get("/v1/collections/w/estimate", params={"control": "fdr"})
        assert calls == [None, "fdr"]
        assert c.post("/v1/reports/w", content=reports_to_bytes(batches[1])).status_code == 201
        more = c.get("/v1/collections/w/estimate").json()
        assert len(calls) == 3 and more["n"] == first["n"] + len(batches[1])
    _assert_same(more, spec.estimate(_merged(spec, batches[:2])))
