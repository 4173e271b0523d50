"""ToPS's threshold optimizer: objective, exponential-mechanism law (factor 2), privacy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from ldpkit.stream import ToPS
from ldpkit.stream.threshold import (
    choose_threshold,
    exceed_counts,
    exponential_mechanism,
    exponential_mechanism_probabilities,
    threshold_candidates,
    tops_lambda,
    tops_threshold_scores,
)
from ldpkit.testing import chisquare_gof

ALPHA = 1e-6


def test_candidates_grid() -> None:
    np.testing.assert_array_equal(threshold_candidates(10, 1.0), np.arange(11.0))
    np.testing.assert_allclose(threshold_candidates(10.5, 1.0), [*range(11), 10.5])
    np.testing.assert_allclose(threshold_candidates(1.0, 0.3), [0, 0.3, 0.6, 0.9, 1.0])


def test_exceed_counts_brute_force_on_real_values() -> None:
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.uniform(0, 10.3, 500), [0.0, 0.7, 1.4, 10.3]])
    cand = threshold_candidates(10.3, 0.7)
    expect = [int(np.sum(v > t)) for t in cand]
    np.testing.assert_array_equal(exceed_counts(v, cand), expect)


def test_lambda_closed_form() -> None:
    # authors' constants: m = 65536, n = 2^20, c = 60, b = 16, h = 6, eps = 1
    expect = 3 * 65536 / (2**20 * 60) * math.sqrt(2 * 15 * 6**3) / 1.0
    assert tops_lambda(65536, 2**20, 16, 6, 1.0) == pytest.approx(expect, rel=1e-15)
    assert expect == pytest.approx(0.251557, rel=1e-5)
    assert tops_lambda(65536, 2**20, 16, 6, 0.5) == pytest.approx(2 * expect, rel=1e-15)


@pytest.mark.parametrize("method", ["gumbel", "noisy_max"])
def test_huge_epsilon_selects_the_brute_force_optimum(method: str) -> None:
    rng = np.random.default_rng(3)
    v = np.minimum(rng.geometric(0.08, 20_000), 300).astype(float)
    lam = tops_lambda(v.size, 2**18, 16, 4, 0.05)  # the objective's lambda (range epsilon 0.05)
    best, best_score = None, -np.inf
    for theta in range(301):  # brute force, one candidate at a time
        score = -float(np.sum(v > theta)) - lam * theta
        if score > best_score:
            best, best_score = theta, score
    assert 10 < best < 300  # a non-trivial optimum
    for seed in range(5):
        got = choose_threshold(
            v,
            1e9,
            300,
            length=2**18,
            branching=16,
            levels=4,
            range_epsilon=0.05,
            method=method,
            rng=seed,
        )
        assert got == best


def test_scores_match_definition() -> None:
    v = np.array([0.0, 1, 1, 2, 5, 9])
    cand = threshold_candidates(9, 1.0)
    q = tops_threshold_scores(v, cand, 0.25)
    np.testing.assert_allclose(q, [-(v > t).sum() - 0.25 * t for t in cand])


def _em_draws(scores: np.ndarray, eps: float, n: int, method: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    picks = [exponential_mechanism(scores, eps, method=method, rng=rng) for _ in range(n)]
    return np.bincount(picks, minlength=scores.size)


def test_exponential_mechanism_law_is_exp_eps_q_not_half() -> None:
    scores = np.array([0.0, -0.5, -1.0, -2.0, -3.0, -6.0])
    eps = 0.8
    counts = _em_draws(scores, eps, 30_000, "gumbel", seed=7)
    right = np.exp(eps * scores)
    assert chisquare_gof(counts, right / right.sum()) > ALPHA
    np.testing.assert_allclose(
        exponential_mechanism_probabilities(scores, eps), right / right.sum()
    )
    wrong = np.exp(eps * scores / 2.0)  # the general (non-monotone) factor
    assert chisquare_gof(counts, wrong / wrong.sum()) < ALPHA
    half = exponential_mechanism_probabilities(scores, eps, monotone=False)
    np.testing.assert_allclose(half, wrong / wrong.sum())


def _noisy_max_law(scores: np.ndarray, scale: float) -> np.ndarray:
    """P[argmax(q + Laplace(scale))] by numerical integration."""
    dist = [stats.laplace(loc=q, scale=scale) for q in scores]
    probs = []
    for i in range(scores.size):

        def f(x: float, i: int = i) -> float:
            out = dist[i].pdf(x)
            for j in range(scores.size):
                if j != i:
                    out *= dist[j].cdf(x)
            return out

        lo, hi = scores.min() - 40 * scale, scores.max() + 40 * scale
        points = sorted(set(scores.tolist()))
        probs.append(integrate.quad(f, lo, hi, points=points, limit=200)[0])
    p = np.array(probs)
    return p / p.sum()


@pytest.mark.slow
def test_report_noisy_max_law_uses_laplace_one_over_epsilon() -> None:
    scores = np.array([0.0, -1.0, -2.0, -4.0])
    eps = 1.0
    counts = _em_draws(scores, eps, 30_000, "noisy_max", seed=8)
    assert chisquare_gof(counts, _noisy_max_law(scores, 1.0 / eps)) > ALPHA
    assert chisquare_gof(counts, _noisy_max_law(scores, 2.0 / eps)) < ALPHA


def test_selection_is_epsilon_dp_on_every_neighbour() -> None:
    """Exact check: replacing any one value moves every selection probability by <= e^eps."""
    values = np.array([0.0, 1, 2, 2, 3, 5])
    cand = threshold_candidates(5, 1.0)
    lam, eps = 0.4, 0.7

    def law(v: np.ndarray, e: float) -> np.ndarray:
        return exponential_mechanism_probabilities(tops_threshold_scores(v, cand, lam), e)

    worst, worst_double = 0.0, 0.0
    for i in range(values.size):
        for new in cand:
            other = values.copy()
            other[i] = new
            worst = max(worst, float(np.max(np.abs(np.log(law(values, eps) / law(other, eps))))))
            worst_double = max(
                worst_double,
                float(np.max(np.abs(np.log(law(values, 2 * eps) / law(other, 2 * eps))))),
            )
    assert worst <= eps * (1 + 1e-12)
    assert worst > 0.5 * eps  # the bound is nearly reached...
    assert worst_double > eps  # ...so a doubled coefficient would break it


def test_tops_uses_the_chooser_with_its_own_hierarchy() -> None:
    values = np.minimum(np.random.default_rng(0).geometric(0.1, 3000), 200).astype(float)
    tops = ToPS(0.5, 200, threshold_size=3000, length=50_000, rng=123).update(values)
    expect = choose_threshold(
        values, 0.5, 200, length=50_000, branching=tops.branching, levels=tops.levels, rng=123
    )
    assert tops.threshold == expect
    assert tops.noise_scale == pytest.approx(expect * tops.levels / 0.5)


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="epsilon must be"):
        exponential_mechanism([0.0, 1.0], 0.0)
    with pytest.raises(ValueError, match="method must be"):
        exponential_mechanism([0.0, 1.0], 1.0, method="softmax")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite"):
        exponential_mechanism([0.0, np.nan], 1.0)
    with pytest.raises(ValueError, match="at least one value"):
        choose_threshold([], 1.0, 10, length=10, branching=2, levels=1)
    with pytest.raises(ValueError, match="step must be"):
        threshold_candidates(10, -1.0)
