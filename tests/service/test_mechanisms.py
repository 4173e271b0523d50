"""Every mechanism family is served: the HTTP estimate equals the offline one."""

import numpy as np
import pytest
from fastapi.testclient import TestClient

from ldpkit import OLH, Encoder
from ldpkit.estimate import IntervalWarning
from ldpkit.io import reports_to_bytes, reports_to_dict
from ldpkit.numeric.distribution import Distribution
from ldpkit.service import Collection, create_app
from ldpkit.spec import mechanism_registry, spec_from_dict


def _spec(name, **params):
    return mechanism_registry()[name](**params)


NUMERIC = [
    ("SquareWave", {"epsilon": 1.0, "buckets": 64}, "distribution"),
    ("GeneralWave", {"epsilon": 1.0, "buckets": 64, "ratio": 0.5}, "distribution"),
    ("HierarchicalHistogram", {"epsilon": 1.0, "buckets": 64}, "distribution"),
    ("HHADMM", {"epsilon": 1.0, "buckets": 64}, "distribution"),
    ("HaarHRR", {"epsilon": 1.0, "buckets": 64}, "distribution"),
    ("CFOBinning", {"epsilon": 1.0, "buckets": 16}, "distribution"),
    ("HaarWavelet", {"epsilon": 1.0, "max_level": 4}, "distribution"),
    ("WienerDeconvolution", {"epsilon": 1.0, "buckets": 16}, "distribution"),
    ("DiscreteSquareWave", {"epsilon": 1.0, "buckets": 16}, "distribution"),
    ("PiecewiseMechanism", {"epsilon": 1.0}, "mean"),
    ("HybridMechanism", {"epsilon": 1.0}, "mean"),
    ("StochasticRounding", {"epsilon": 1.0}, "mean"),
    ("SignedSubsetSelection", {"epsilon": 1.0, "domain_size": 16}, "frequency"),
    ("HadamardResponse", {"epsilon": 1.0, "domain_size": 16}, "frequency"),
]


def _values(spec, rng, n):
    if type(spec).__name__ == "DiscreteSquareWave":  # items of [0, buckets)
        return rng.integers(0, spec.buckets, size=n)
    if getattr(spec, "domain_size", None) and not hasattr(spec, "low"):
        return rng.integers(0, spec.domain_size, size=n)
    low, high = spec.low, spec.high
    return low + (high - low) * rng.beta(5, 2, size=n)


@pytest.mark.parametrize(("name", "params", "kind"), NUMERIC, ids=[n for n, _, _ in NUMERIC])
def test_every_family_answers_the_offline_estimate(tmp_path, name, params, kind):
    spec = _spec(name, **params)
    rng = np.random.default_rng(7)
    batches = [spec.randomize(_values(spec, rng, 400), rng=rng) for _ in range(3)]
    app = create_app({"c": spec}, f"sqlite:///{tmp_path / 'c.db'}")
    with TestClient(app) as c:
        info = c.get("/v1/collections/c").json()
        assert info["kind"] == kind
        for i, b in enumerate(batches):
            body = reports_to_bytes(b, format="parquet" if i else "npz")
            assert c.post("/v1/reports/c", content=body).status_code == 201
        # a few one-report JSON batches go through the grouped aggregation
        singles = [spec.randomize(_values(spec, rng, 1), rng=rng) for _ in range(3)]
        for s in singles:
            assert c.post("/v1/reports/c", json=reports_to_dict(s)).status_code == 201
        body = c.get("/v1/collections/c/estimate", params={"alpha": 0.1}).json()
    everything = batches[0].concat(*batches[1:], *singles)
    offline = spec.estimate(spec.aggregate(everything))
    assert body["n"] == len(everything) and body["kind"] == kind
    if kind == "distribution":
        assert isinstance(offline, Distribution)
        got = body["distribution"]
        np.testing.assert_allclose(
            got["probabilities"], offline.probabilities, rtol=1e-9, atol=1e-12
        )
        assert got["mean"] == pytest.approx(offline.mean(), rel=1e-9, abs=1e-12)
        assert got["low"] == offline.low and got["high"] == offline.high
        if got["signed"]:  # unbiased masses, some negative: no quantiles until post-processed
            assert got["quantiles"] is None and np.min(offline.probabilities) < 0
        else:
            assert got["quantiles"]["0.5"] == pytest.approx(
                offline.quantile(0.5), rel=1e-9, abs=1e-12
            )
        method = offline.interval_method
        if method == "analytic":  # intervals of the linear estimators, as offline
            assert got["interval_method"] == "analytic" and got["interval_note"] is None
            assert got["mean_ci"] == pytest.approx(offline.mean_interval(0.1), rel=1e-9)
            q_lo, q_hi = offline.quantile_interval(0.5, 0.1)
            assert got["quantile_ci"]["0.5"] == pytest.approx([q_lo, q_hi], rel=1e-9)
            c_lo, _ = offline.cdf_interval(offline.edges[1:], 0.1)
            np.testing.assert_allclose(got["cdf_low"], c_lo, rtol=1e-9, atol=1e-12)
        else:  # bootstrap only on request (bootstrap=B), none for the others: a note
            assert got["interval_method"] is None and got["mean_ci"] is None
            assert got["quantile_ci"] is None and got["cdf_low"] is None
            assert got["interval_note"]
    elif kind == "mean":
        low, high = offline.confidence_interval(0.1)
        assert body["mean"] == pytest.approx(offline.mean, rel=1e-12)
        assert body["std_error"] == pytest.approx(offline.std_error, rel=1e-12)
        assert body["ci_low"][0] == pytest.approx(low, rel=1e-12)
        assert body["ci_high"][0] == pytest.approx(high, rel=1e-12)
    else:
        np.testing.assert_array_equal(body["frequencies"], offline.frequencies)


def test_signed_distribution_gets_quantiles_after_postprocessing(tmp_path):
    spec = _spec("HaarHRR", epsilon=0.5, buckets=32)
    reports = spec.randomize(np.random.default_rng(1).beta(5, 2, size=300), rng=2)
    with TestClient(create_app(spec, f"sqlite:///{tmp_path / 'c.db'}")) as c:
        assert c.post("/v1/reports/default", content=reports_to_bytes(reports)).status_code == 201
        plain = c.get("/v1/collections/default/estimate").json()["distribution"]
        body = c.get("/v1/collections/default/estimate", params={"postprocessing": "norm_sub"})
    got = body.json()
    offline = spec.estimate(spec.aggregate(reports))
    assert plain["signed"] == bool(np.min(offline.probabilities) < 0)
    fixed = offline.postprocess("norm_sub")
    assert got["postprocessing"] == list(fixed.postprocessing)
    assert got["distribution"]["signed"] is False
    np.testing.assert_allclose(got["distribution"]["probabilities"], fixed.probabilities)
    assert got["distribution"]["quantiles"]["0.5"] == pytest.approx(fixed.quantile(0.5))


def test_em_distribution_gets_bootstrap_intervals_on_request(tmp_path):
    spec = _spec("SquareWave", epsilon=1.0, buckets=32)
    reports = spec.randomize(np.random.default_rng(1).beta(5, 2, size=2000), rng=2)
    with TestClient(create_app(spec, f"sqlite:///{tmp_path / 'c.db'}")) as c:
        assert c.post("/v1/reports/default", content=reports_to_bytes(reports)).status_code == 201
        plain = c.get("/v1/collections/default/estimate").json()["distribution"]
        got = c.get(
            "/v1/collections/default/estimate", params={"bootstrap": 20, "alpha": 0.1}
        ).json()["distribution"]
        bad = c.get("/v1/collections/default/estimate", params={"bootstrap": -1})
    assert plain["mean_ci"] is None and "bootstrap=B" in plain["interval_note"]
    offline = spec.estimate(spec.aggregate(reports)).bootstrap(20, rng=0)
    assert got["interval_method"] == "bootstrap"
    assert got["interval_note"].startswith("approximate: EMS")  # the default estimator
    with pytest.warns(IntervalWarning, match="approximate"):
        assert got["mean_ci"] == pytest.approx(offline.mean_interval(0.1), rel=1e-9)
    with pytest.warns(IntervalWarning, match="approximate"):
        q_lo, q_hi = offline.quantile_interval(0.9, 0.1)
    assert got["quantile_ci"]["0.9"] == pytest.approx([q_lo, q_hi], rel=1e-9)
    assert len(got["cdf_low"]) == len(got["cdf_high"]) == 32
    assert bad.status_code == 422


def test_postprocessing_is_refused_for_numerical_collections(tmp_path):
    spec = _spec("SquareWave", epsilon=1.0, buckets=32)
    with TestClient(create_app(spec, f"sqlite:///{tmp_path / 'c.db'}")) as c:
        resp = c.get("/v1/collections/default/estimate", params={"postprocessing": "magic"})
        assert resp.status_code == 422 and "for a distribution collection" in resp.text


def test_unservable_spec_is_refused_when_the_config_loads(tmp_path):
    # The leading underscore keeps this test double out of the public mechanism registry.
    class _NoEstimate(OLH):
        def estimate(self, stats):
            return {"nothing": True}

    with pytest.raises(ValueError, match="must estimate frequencies, a distribution, a mean"):
        create_app({"c": _NoEstimate(epsilon=1.0, domain_size=8)}, "sqlite://")


def test_collection_info_rebuilds_spec_and_encoder(tmp_path):
    spec = OLH(epsilon=1.0, domain_size=4)
    enc = Encoder(["chrome", "firefox", "safari"], unknown="other")
    app = create_app({"b": Collection(spec, encoder=enc)}, f"sqlite:///{tmp_path / 'c.db'}")
    with TestClient(app) as c:
        info = c.get("/v1/collections/b").json()
        # What a client does: rebuild both from the collection info, encode unseen labels.
        client_spec = spec_from_dict(info["mechanism"])
        client_enc = Encoder.from_dict(info["encoder"])
        assert client_enc == enc
        assert client_spec.fingerprint == info["fingerprint"] == spec.fingerprint
        items = client_enc.encode(["safari", "opera", "chrome"])
        assert items.tolist() == [2, 3, 0]
        reports = client_spec.randomize(items, rng=0)
        assert c.post("/v1/reports/b", json=reports_to_dict(reports)).status_code == 201
        assert info["labels"] == ["chrome", "firefox", "safari", "<other>"]
        assert info["encoder"] == {
            "categories": ["chrome", "firefox", "safari"],
            "unknown": "other",
            "missing": "error",
        }
