"""AutoDistribution's HH node counts scored with their exact variance
(:func:`ldpkit.numeric.auto._node_terms`, ``_HH_EXACT_REFIT``): the end-bucket refit's
likelihood ratio at its true scale for nodes that hold most of the users."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ldpkit.numeric.auto as auto_module
from _autohelpers import node_counts, pareto_body, window_shapes
from ldpkit.numeric import AutoDistribution
from ldpkit.numeric.auto import _hh_loglik, _hybrid_model, _refit_end_windows


def test_exact_terms_are_the_normal_log_densities_of_the_support_counts() -> None:
    # Closed form: over the nodes holding buckets [0, 16) (one per level of the 5-level
    # tree at d = 1024: 256, 64, 16, 4 and 1 buckets wide), the sum of
    # -(C - N (q + (p - q) a))^2 / (2 V) - log(V) / 2 with V = N (a p (1 - p) + (1 - a) q (1 - q)).
    spec = AutoDistribution(epsilon=4.0, buckets=1024)
    md = _hybrid_model(spec)
    fit, truth = window_shapes(1024)
    counts = np.round(node_counts(spec, truth, 1000.0))
    level_n = np.array([900.0, 1000.0, 1100.0, 950.0, 1050.0])
    want = 0.0
    for k in range(md.sizes.size):
        rep, p, q, n_k = int(md.reps[k]), float(md.p[k]), float(md.q[k]), level_n[k]
        for node in range(0, 16 // rep if rep <= 16 else 1):
            a = float(fit[node * rep : node * rep + rep].sum())
            c = float(counts[md.offsets[k] + node])
            var = n_k * (a * p * (1 - p) + (1 - a) * q * (1 - q))
            want += -((c - n_k * (q + (p - q) * a)) ** 2) / (2 * var) - math.log(var) / 2
    got = _hh_loglik(fit, 0, 16, md, counts, level_n)
    assert got == pytest.approx(want, rel=1e-12)
    # without level_n: the Poisson composite terms, a different number
    assert _hh_loglik(fit, 0, 16, md, counts) != pytest.approx(want, rel=1e-3)


def test_exact_refit_fires_where_the_poisson_terms_ask_for_twice_the_evidence() -> None:
    # Noise-free counts of the truth (bucket 0 at 0.62, the fit's 0.66) from 1000 users per
    # level: the exact terms gain 6.3 nats (> 4.5) and recover the truth on the refit's grid;
    # the Poisson composite terms, whose variance is about twice the true one for a node
    # holding 60 % of the users (OLH at eps 4: p = 1/2), gain 3.5 and leave the fit alone.
    spec = AutoDistribution(epsilon=4.0, buckets=1024)
    md = _hybrid_model(spec)
    fit, truth = window_shapes(1024)
    counts = node_counts(spec, truth, 1000.0)
    level_n = np.full(md.sizes.size, 1000.0)
    out = _refit_end_windows(fit, md, counts, level_n)
    np.testing.assert_allclose(out, truth, rtol=1e-9, atol=1e-15)
    assert np.array_equal(_refit_end_windows(fit, md, counts), fit)
    # the fit's own counts: nothing to gain
    own = node_counts(spec, fit, 1000.0)
    assert np.array_equal(_refit_end_windows(fit, md, own, level_n), fit)
    # the same counts claimed from ten times as many users per level reject both shapes and
    # are no evidence for the truth: the check fails with the wrong user counts
    wrong = _refit_end_windows(fit, md, counts, 10 * level_n)
    assert not np.allclose(wrong, truth, rtol=1e-6)


def test_estimate_with_exact_terms_gets_bucket_zero_closer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # eps 4, n = 1e5, fixed seeds 0-7 of a Pareto body: bucket 0's error (the CDF at the
    # first grid point) with the exact terms is never larger than with the Poisson terms,
    # and less than half of it where the Poisson gain stayed below 4.5 nats (seeds 0, 2,
    # 7; measured 0.0069, 0.0022, 0.0046 against 0.0186, 0.0166, 0.0277). On Beta(5, 2) (no
    # mass at the ends) the estimate does not change.
    n = 100_000
    spec = AutoDistribution(epsilon=4.0, expected_n=n)
    first = 1 / 1024
    for seed in range(8):
        values = pareto_body(n, seed)
        truth = float(np.mean(values < first))
        stats = spec.aggregate(spec.randomize(values, rng=seed))
        exact = abs(float(spec.estimate(stats).cdf(first)) - truth)
        monkeypatch.setattr(auto_module, "_HH_EXACT_REFIT", False)
        poisson = abs(float(spec.estimate(stats).cdf(first)) - truth)
        monkeypatch.setattr(auto_module, "_HH_EXACT_REFIT", True)
        assert exact <= poisson + 1e-12, (seed, exact, poisson)
        if seed in (0, 2, 7):
            assert exact < 0.5 * poisson, (seed, exact, poisson)
    smooth = np.random.default_rng(5).beta(5.0, 2.0, n)
    st = spec.aggregate(spec.randomize(smooth, rng=5))
    with_exact = spec.estimate(st)
    monkeypatch.setattr(auto_module, "_HH_EXACT_REFIT", False)
    assert with_exact == spec.estimate(st)
