"""AutoDistribution's empty-stretch step: the fit's mass over a nearly empty stretch is cut
to what the Square Wave reports hold there (:func:`ldpkit.numeric.auto._trim_empty`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ldpkit.numeric.auto as auto_module
from ldpkit.numeric import AutoDistribution
from ldpkit.numeric.auto import _trim_empty


def _body_and_tail(d: int) -> tuple[np.ndarray, np.ndarray]:
    """A fit with a body on the first quarter and 2 % spread over the rest, and the same
    body with the rest empty (the data the reports came from)."""
    fit = np.zeros(d)
    body = d // 4
    fit[:body] = np.linspace(2.0, 1.0, body)
    fit[:body] *= 0.98 / fit[:body].sum()
    fit[body:] = 0.02 / (d - body)
    truth = fit.copy()
    truth[body:] = 0.0
    return fit, truth / truth.sum()


@pytest.mark.parametrize("eps", [2.0, 4.0])
def test_exact_counts_of_an_empty_stretch_remove_its_mass(eps: float) -> None:
    # Closed form: with the counts the empty-tailed data expect (N M truth), the one-step
    # linear solve cuts exactly the fit's tail (truth is the fit with the tail scaled to 0).
    spec = AutoDistribution(epsilon=eps, buckets=256, hh_share=0.0)
    m = np.asarray(spec._outputs_by_inputs())
    fit, truth = _body_and_tail(m.shape[1])
    counts = 1e6 * (m @ truth)
    out = _trim_empty(fit, m, counts)
    np.testing.assert_allclose(out, truth, rtol=1e-9, atol=1e-15)
    # counts the fit itself expects leave it alone (no gap between prediction and count)
    np.testing.assert_allclose(_trim_empty(fit, m, 1e6 * (m @ fit)), fit, rtol=0, atol=0)


def test_a_tail_the_reports_hold_is_kept() -> None:
    # The fit's tail is the data's: the counts' Poisson noise (z = 1) may not remove it.
    spec = AutoDistribution(epsilon=4.0, buckets=256, hh_share=0.0)
    m = np.asarray(spec._outputs_by_inputs())
    fit, _ = _body_and_tail(m.shape[1])
    gen = np.random.default_rng(3)
    kept = []
    for _ in range(20):
        counts = gen.poisson(1e5 * (m @ fit)).astype(np.float64)
        kept.append(_trim_empty(fit, m, counts)[m.shape[1] // 4 :].sum())
    # a one-sided z > 1 cut fires in about 16 % of the draws and then removes only the
    # noise's excess: the mean tail stays within a fifth of 2 %
    assert abs(np.mean(kept) - 0.02) < 0.004
    # the same check fails when the counts come from the empty-tailed data
    _, truth = _body_and_tail(m.shape[1])
    gone = _trim_empty(fit, m, gen.poisson(1e5 * (m @ truth)).astype(np.float64))
    assert abs(gone[m.shape[1] // 4 :].sum() - 0.02) > 0.004


def test_estimate_on_an_empty_stretch_leaves_less_mass_there() -> None:
    # Data on the first fifth of the domain (a lognormal body), eps = 4: the fit without the
    # step leaves the constrained fit's positive bias over the empty 70 % above 0.3; with it
    # the mean mass there over the runs is within 5 standard errors of the data's (0), where
    # the fit without it is not.
    n, runs = 50_000, 10
    gen = np.random.default_rng(11)
    values = np.minimum(gen.lognormal(-3.0, 0.5, n), 0.25)
    spec = AutoDistribution(epsilon=4.0, expected_n=n)
    with_step, without = [], []
    saved = auto_module._EMPTY_Z
    try:
        for r in range(runs):
            st = spec.aggregate(spec.randomize(values, rng=r))
            auto_module._EMPTY_Z = 1.0
            with_step.append(1.0 - spec.estimate(st).cdf(0.3))
            auto_module._EMPTY_Z = None
            without.append(1.0 - spec.estimate(st).cdf(0.3))
    finally:
        auto_module._EMPTY_Z = saved
    with_step_a, without_a = np.asarray(with_step), np.asarray(without)
    assert np.all(with_step_a <= without_a + 1e-12)
    assert with_step_a.mean() < 0.7 * without_a.mean()
    # the spread of the runs bounds the mean's error (at least 1e-4 of the mass)
    se_with = max(with_step_a.std(ddof=1) / math.sqrt(runs), 1e-4)
    se_without = max(without_a.std(ddof=1) / math.sqrt(runs), 1e-4)
    assert with_step_a.mean() / se_with <= 5
    assert without_a.mean() / se_without > 5
