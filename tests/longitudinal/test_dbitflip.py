"""dBitFlipPM: exact bits, unbiased estimate, memoization on a Device."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpkit import Device
from ldpkit.longitudinal import DBitFlipPM
from ldpkit.testing import chisquare_gof


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


@pytest.mark.parametrize(("k", "d", "n"), [(32, 4, 3001), (5, 5, 100), (64, 1, 130), (40, 32, 7)])
def test_streamed_kernel_matches_its_numpy_twin(k, d, n):
    from ldpkit.longitudinal import _dbitflip_sampler as sampler
    from ldpkit.longitudinal._kernels_dbitflip import dbitflip_streams

    spec = DBitFlipPM(epsilon=1.5, domain_size=k, sampled_bits=d)
    big, small = spec._thresholds()
    gen = np.random.default_rng(k + d)
    values = gen.integers(0, k, n)
    seeds = gen.integers(0, 2**64, sampler.stream_count(n, d), dtype=np.uint64)
    out = [(np.zeros((n, d), np.uint8), np.zeros((n, d), np.uint8)) for _ in range(2)]
    sampler.sample_dbitflip_numpy(values, seeds, k, big, small, *out[0])
    reject, other, flip = sampler._laws(k, d, big, small)
    dbitflip_streams(values, seeds, k, reject, other, flip, *out[1])
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])
    assert np.all(np.diff(out[0][0].astype(np.int64), axis=1) > 0)  # distinct, ascending
    assert out[0][0].max() < k


def test_devices_sharing_a_stream_are_independent():
    # 16 devices (d = 4) draw from one stream and share one word of bits: the joint law of
    # two neighbours' reports is the product of their laws (values 0 and 3)
    spec = DBitFlipPM(epsilon=2.0, domain_size=5, sampled_bits=4)
    m = spec.transition_matrix()
    reports = spec.randomize(np.tile([0, 3], 20_000), rng=12)
    index = spec.output_index(reports)
    joint = index[0::2] * m.shape[1] + index[1::2]
    observed = np.bincount(joint, minlength=m.shape[1] ** 2)
    assert chisquare_gof(observed, np.outer(m[0], m[3]).ravel()) > 1e-4
    assert chisquare_gof(observed, np.outer(m[3], m[0]).ravel()) < 1e-6  # it can fail
