"""dBitFlipPM: exact bits, unbiased estimate, memoization on a Device (issue 30)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpkit import Device
from ldpkit.longitudinal import DBitFlipPM


def _z(spec, items, seed, est_spec=None):
    n = items.size
    stats = spec.aggregate(spec.randomize(items, rng=seed))
    f = np.bincount(items, minlength=spec.domain_size) / n
    e = est_spec or spec
    scale = spec.domain_size / (n * spec.sampled_bits)
    freq = scale * (stats.ones - e.q * stats.sampled) / (e.p - e.q)
    return (freq - f) / np.sqrt(spec.variance(n, f))


@pytest.mark.parametrize("d", [1, 4])
def test_unbiased_and_fails_for_a_wrong_epsilon(d):
    items = np.random.default_rng(1).choice(16, size=200_000, p=np.linspace(1, 3, 16) / 32)
    spec = DBitFlipPM(epsilon=2.0, domain_size=16, sampled_bits=d)
    assert np.max(np.abs(_z(spec, items, seed=2))) < 5
    wrong = DBitFlipPM(epsilon=1.6, domain_size=16, sampled_bits=d)
    assert np.max(np.abs(_z(spec, items, seed=2, est_spec=wrong))) > 6


def test_empirical_variance_matches():
    spec = DBitFlipPM(epsilon=1.0, domain_size=6, sampled_bits=2)
    items = np.arange(1200) % 6
    gen = np.random.default_rng(5)
    est = np.array(
        [
            spec.estimate(spec.aggregate(spec.randomize(items, rng=gen))).frequencies
            for _ in range(300)
        ]
    )
    ratio = est.var(axis=0, ddof=1).mean() / spec.variance(1200, np.full(6, 1 / 6)).mean()
    assert 0.85 < ratio < 1.15


def test_losses():
    e = 1.3
    assert DBitFlipPM(epsilon=e, domain_size=8, sampled_bits=3).privacy_loss() == pytest.approx(e)
    one = DBitFlipPM(epsilon=e, domain_size=8)
    assert one.privacy_loss() == pytest.approx(e / 2)  # one bit: log(p/q) = eps/2
    assert one.longitudinal_privacy_loss(50) == pytest.approx(2 * one.privacy_loss())
    four = DBitFlipPM(epsilon=e, domain_size=8, sampled_bits=4)
    assert four.longitudinal_privacy_loss(3) == pytest.approx(3 * e)
    assert four.longitudinal_privacy_loss(8) == pytest.approx(5 * e)
    assert math.isclose(four.p, math.exp(e / 2) / (math.exp(e / 2) + 1), rel_tol=1e-12)
    with pytest.raises(ValueError, match="sampled_bits must be"):
        DBitFlipPM(epsilon=1.0, domain_size=4, sampled_bits=5)


def test_a_device_memoizes_per_sampled_bucket(tmp_path):
    spec = DBitFlipPM(epsilon=1.0, domain_size=40, sampled_bits=3)
    device = Device(secret=bytes(range(32)), path=tmp_path / "d.json")
    reports = device.report(spec, np.arange(40), rng=0)  # every value once
    assert len({tuple(b) for b in reports.buckets.tolist()}) == 1  # buckets kept for good
    assert device.distinct_values(spec) == 4  # 3 sampled buckets + "none of them"
    assert device.privacy_spent(spec) == pytest.approx(4 * spec.privacy_loss())
    again = device.report(spec, np.arange(40), rng=1)
    assert again.equals(reports)  # the whole report is memoized (a stable identifier)
    assert spec.aggregate(reports).n == 40


def test_estimate_postprocess_is_an_option_and_the_default_stays_unbiased():
    spec = DBitFlipPM(epsilon=1.0, domain_size=12, sampled_bits=3)
    values = np.random.default_rng(3).integers(0, 4, 400)  # 8 empty buckets: negatives
    stats = spec.aggregate(spec.randomize(values, rng=4))
    plain = spec.estimate(stats)
    assert plain.unbiased and plain.postprocessing == ()
    assert plain.frequencies.min() < 0
    mi = spec.estimate(stats, postprocess="norm_mul")
    # negatives to 0, then scaled to sum 1 (multi-freq-ldpy's "MI" output), exactly
    clipped = np.maximum(plain.frequencies, 0.0)
    np.testing.assert_array_equal(mi.frequencies, clipped / clipped.sum())
    assert mi.postprocessing == ("norm_mul",) and not mi.unbiased
    np.testing.assert_array_equal(mi.variance, plain.variance)
    ns = spec.estimate(stats, postprocess="norm_sub").frequencies
    assert ns.min() >= 0 and ns.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="postprocess must be None or one of"):
        spec.estimate(stats, postprocess="clip")
    with pytest.raises(ValueError, match="ibu needs an estimate from a pure frequency oracle"):
        spec.estimate(stats, postprocess="ibu")


@pytest.mark.parametrize(("k", "d"), [(32, 4), (5, 5), (300, 1), (1000, 7), (40, 32)])
def test_compiled_bookkeeping_matches_the_numpy_path(k, d, monkeypatch):
    from ldpkit import _parallel
    from ldpkit.longitudinal import dbitflip

    spec = DBitFlipPM(epsilon=1.5, domain_size=k, sampled_bits=d)
    values = np.random.default_rng(k).integers(0, k, 3000)
    monkeypatch.setattr(dbitflip, "_COMPILED_MIN", 0)
    monkeypatch.setattr(_parallel, "numba_available", lambda: True)
    compiled = spec.randomize(values, rng=9)
    monkeypatch.setattr(_parallel, "numba_available", lambda: False)
    plain = spec.randomize(values, rng=9)
    np.testing.assert_array_equal(compiled.buckets, plain.buckets)
    np.testing.assert_array_equal(compiled.bits, plain.bits)
    assert compiled.buckets.dtype == plain.buckets.dtype and compiled.bits.dtype == np.uint8
    assert np.all(np.diff(compiled.buckets.astype(np.int64), axis=1) > 0)
