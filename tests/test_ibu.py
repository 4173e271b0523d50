"""IBU (Agrawal & Aggarwal PODS 2001): the closed-form fixed point on GRR, accuracy, contract."""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit import GRR, OLH, OUE, FrequencyEstimate
from ldpkit import consistency as C


def grr_mle(counts: np.ndarray, p: float, q: float) -> np.ndarray:
    """The constrained MLE of GRR in closed form (water-filling on the KKT conditions).

    Maximizing ``sum_u c_u log(q + (p - q) f_u)`` over the simplex: active items have
    ``f_u = c_u / lam - q / (p - q)``, the others ``c_u (p - q) / q <= lam``; ``lam`` makes
    the total 1 (a decreasing function of lam: bisection to the last bit).
    """
    w = counts / counts.sum()
    r = q / (p - q)

    def total(lam: float) -> float:
        return float(np.maximum(w / lam - r, 0.0).sum())

    lo, hi = 1e-300, float(w.max()) / r  # total(hi) = 0 < 1 <= total(lo)
    for _ in range(2000):
        mid = 0.5 * (lo + hi)
        if total(mid) > 1.0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-17 * hi:
            break
    return np.maximum(w / (0.5 * (lo + hi)) - r, 0.0)


def grr_estimate(counts_true, epsilon, seed):
    d = len(counts_true)
    grr = GRR(epsilon=epsilon, domain_size=d)
    values = np.repeat(np.arange(d), counts_true)
    stats = grr.aggregate(grr.randomize(values, rng=seed))
    return grr, stats


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ibu_is_the_grr_mle_when_the_simplex_binds(seed):
    # Small counts on several items: the plain estimate has negative entries.
    grr, stats = grr_estimate([300, 120, 30, 5] + [0] * 8, epsilon=1.0, seed=seed)
    plain = grr.estimate(stats)
    assert plain.frequencies.min() < 0
    out = C.ibu(plain, tol=1e-15, max_iter=2_000_000)
    mle = grr_mle(stats.counts.astype(float), grr.p, grr.q)
    np.testing.assert_allclose(out.frequencies, mle, rtol=0, atol=2e-6)
    assert out.frequencies.min() >= 0 and abs(out.frequencies.sum() - 1) < 1e-12
    assert out.postprocessing == ("ibu",)


def test_ibu_is_the_plain_estimate_inside_the_simplex():
    # Every plain frequency positive: the unconstrained MLE (= the plain GRR estimate,
    # which sums to 1) is feasible, so IBU's fixed point is exactly it.
    grr, stats = grr_estimate([4000, 3000, 2000, 1000], epsilon=2.0, seed=0)
    plain = grr.estimate(stats)
    assert plain.frequencies.min() > 0.05
    out = C.ibu(plain, tol=1e-15, max_iter=100_000)
    np.testing.assert_allclose(out.frequencies, plain.frequencies, rtol=0, atol=1e-9)


def test_ibu_fixed_point_check_fails_for_a_wrong_spec():
    # The same counts read with another epsilon's p and q: not the MLE of these reports.
    grr, stats = grr_estimate([300, 120, 30, 5] + [0] * 8, epsilon=1.0, seed=0)
    other = GRR(epsilon=2.0, domain_size=12)
    mle = grr_mle(stats.counts.astype(float), grr.p, grr.q)
    wrong = C.ibu(other.estimate(other.aggregate(other.randomize([0] * 10, rng=0))))
    assert np.abs(wrong.frequencies - mle).max() > 1e-2
    plain_wrong = FrequencyEstimate(
        (stats.counts / stats.n - other.q) / (other.p - other.q), 0.0, n=stats.n, spec=other
    )
    out = C.ibu(plain_wrong, tol=1e-15, max_iter=2_000_000)
    assert np.abs(out.frequencies - mle).max() > 1e-2


@pytest.mark.parametrize("spec_cls", [GRR, OUE, OLH])
def test_ibu_beats_the_plain_estimate_on_skewed_data(spec_cls):
    d, n = 32, 20_000
    w = 1.0 / np.arange(1, d + 1) ** 2.0
    counts = np.floor(w / w.sum() * n).astype(int)
    counts[0] += n - counts.sum()
    truth = counts / n
    spec = spec_cls(epsilon=1.0, domain_size=d)
    values = np.repeat(np.arange(d), counts)
    err_plain = err_ibu = 0.0
    for seed in range(5):
        est = spec.estimate(spec.aggregate(spec.randomize(values, rng=seed)))
        err_plain += float(((est.frequencies - truth) ** 2).sum())
        err_ibu += float(((C.ibu(est).frequencies - truth) ** 2).sum())
    assert err_ibu < 0.5 * err_plain, (err_ibu, err_plain)


def test_estimate_postprocess_ibu_and_validation():
    grr, stats = grr_estimate([50, 30, 20], epsilon=1.0, seed=0)
    via = grr.estimate(stats, postprocess="ibu")
    np.testing.assert_array_equal(via.frequencies, C.ibu(grr.estimate(stats)).frequencies)
    assert via.postprocessing == ("ibu",)
    with pytest.raises(ValueError, match="postprocess must be None or one of"):
        grr.estimate(stats, postprocess="nope")
    est = grr.estimate(stats)
    with pytest.raises(ValueError, match="tol must be"):
        C.ibu(est, tol=0.0)
    with pytest.raises(ValueError, match="max_iter must be"):
        C.ibu(est, max_iter=0)
    with pytest.raises(TypeError, match="max_iter must be"):
        C.ibu(est, max_iter=2.5)
    with pytest.raises(ValueError, match="ibu needs an estimate from a pure frequency oracle"):
        C.ibu(FrequencyEstimate([0.5, 0.5], 0.01, n=10))
    # max_iter caps the work: one iteration from uniform is not yet the fixed point
    one = C.ibu(est, max_iter=1).frequencies
    assert abs(one.sum() - 1) < 1e-12 and not np.allclose(one, C.ibu(est).frequencies)
