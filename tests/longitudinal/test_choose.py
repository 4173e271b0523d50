"""choose_longitudinal: the lowest closed-form variance per window within the period's budget."""

import math

import numpy as np
import pytest

from ldpkit.longitudinal import (
    LGRR,
    LOLOHA,
    LOSUE,
    LongitudinalChoice,
    choose_longitudinal,
)


@pytest.mark.parametrize("d", [2, 4, 8, 32, 200])
@pytest.mark.parametrize(("eps_inf", "eps_1"), [(1.0, 0.5), (2.0, 1.0), (4.0, 2.0), (6.0, 1.0)])
def test_the_pick_is_the_smallest_closed_form_variance(d, eps_inf, eps_1):
    """Check that the pick is the argmin of the candidates' own variances, ties to the first."""
    choice = choose_longitudinal(d, eps_inf, eps_1, explain=True)
    assert isinstance(choice, LongitudinalChoice)
    names = [c.name for c in choice.candidates]
    assert names == ["L-GRR", "L-OUE", "L-OSUE", "L-SUE", "L-SOUE", "LOLOHA"]
    for c in choice.candidates:
        assert c.feasible and c.memo_keys == 1 and c.key_epsilon == eps_inf
        assert c.scaled_variance == float(c.spec.variance(1))
        assert c.spec.epsilon_inf == eps_inf and c.spec.epsilon == eps_1
    best = min(c.scaled_variance for c in choice.candidates)
    first = next(c for c in choice.candidates if c.scaled_variance == best)
    assert choice.spec is first.spec
    assert choose_longitudinal(d, eps_inf, eps_1) == choice.spec
    assert "chosen:" in str(choice)


def test_closed_forms_at_epsilon_1_alone():
    """Check L-GRR's and L-OSUE's n Var* against GRR's and OUE's at epsilon_1 (FO17 eq. 3)."""
    d, e = 32, 0.5
    choice = choose_longitudinal(d, 2.0, e, explain=True)
    by = {c.name: c.scaled_variance for c in choice.candidates}
    x = math.exp(e)
    assert by["L-GRR"] == pytest.approx((x + d - 2) / (x - 1) ** 2, rel=1e-9)
    assert by["L-OSUE"] == pytest.approx(4 * x / (x - 1) ** 2, rel=1e-9)
    # the same at another epsilon_inf: their one-report laws ignore it
    other = choose_longitudinal(d, 5.0, e, explain=True)
    assert other.candidates[0].scaled_variance == pytest.approx(by["L-GRR"], rel=1e-12)
    assert other.candidates[2].scaled_variance == pytest.approx(by["L-OSUE"], rel=1e-12)


def test_the_benchmark_budgets_pick_the_measured_best():
    """Check the picks at benchmarks/longitudinal.py's budgets (d = 32).

    Its full run (docs/results/longitudinal.md) measured the lowest MSE per window among
    the L-protocols for L-OSUE at (1, 0.5), (2, 1) and (4, 2) on both data sets (OLOLOHA
    within noise of it: 1-5% either way, its closed form within 1%), and L-GRR beats
    every unary protocol only for small d.
    """
    for eps_inf, eps_1 in ((1.0, 0.5), (2.0, 1.0), (4.0, 2.0)):
        assert isinstance(choose_longitudinal(32, eps_inf, eps_1), LOSUE)
    assert isinstance(choose_longitudinal(4, 2.0, 1.0), LGRR)


def test_the_closed_form_ranking_holds_in_measurement():
    """Check at d = 4 that the pick (L-GRR) measures a lower MSE than L-OSUE, as predicted."""
    d, n, reps = 4, 5000, 40
    choice = choose_longitudinal(d, 2.0, 1.0, explain=True)
    assert choice.spec.name == "LGRR"
    rng = np.random.default_rng(7)
    values = rng.integers(0, d, size=n)
    truth = np.bincount(values, minlength=d) / n
    measured = {}
    for c in (choice.candidates[0], choice.candidates[2]):
        errors = [
            c.spec.estimate(c.spec.aggregate(c.spec.randomize(values, rng=100 + r))).frequencies
            - truth
            for r in range(reps)
        ]
        measured[c.name] = float(np.mean(np.square(errors)))
        predicted = float(np.mean(c.spec.variance(n, truth)))
        # 160 squared errors: relative standard error of the mean ~ sqrt(2 / 160) = 11%
        assert abs(measured[c.name] / predicted - 1) < 0.5, (c.name, measured, predicted)
    assert measured["L-GRR"] < measured["L-OSUE"]


def test_changes_split_the_budget_and_pick_loloha_when_frequent():
    """Check the period's loss of every pick, and LOLOHA once L-OSUE cannot split further."""
    d, eps_inf, eps_1 = 32, 4.0, 0.5
    picks = {}
    for changes in range(0, 25):
        choice = choose_longitudinal(d, eps_inf, eps_1, changes, explain=True)
        spent = choice.spec.longitudinal_privacy_loss(changes + 1)
        assert spent <= eps_inf * (1 + 1e-9), (changes, choice.spec)
        assert choice.spec.privacy_loss() <= eps_1 * (1 + 1e-9)
        for c in choice.candidates:
            if c.feasible:
                assert c.spec.longitudinal_privacy_loss(changes + 1) <= eps_inf * (1 + 1e-9)
            else:
                assert c.key_epsilon <= eps_1 or c.name in ("L-GRR", "L-OUE", "L-SOUE")
        picks[changes] = choice.spec
    assert all(isinstance(picks[c], LOSUE) for c in range(7))
    assert picks[6].epsilon_inf == pytest.approx(eps_inf / 7)
    assert all(isinstance(picks[c], LOLOHA) and picks[c].hash_range == 3 for c in range(7, 25))
    # the same L-OSUE at the whole epsilon_inf would have lost 25 epsilon_inf over 25 values
    plain = LOSUE(epsilon_inf=eps_inf, epsilon_1=eps_1, domain_size=d)
    assert plain.longitudinal_privacy_loss(25) == pytest.approx(25 * eps_inf)
    assert picks[24].longitudinal_privacy_loss(25) == pytest.approx(eps_inf)
    assert choose_longitudinal(d, eps_inf, eps_1, None) == picks[0]


def test_bad_budgets_are_refused_with_their_ranges():
    """Check the messages of bad parameters and of budgets no protocol can keep."""
    with pytest.raises(ValueError, match="epsilon_1 must be < epsilon_inf = 1.0, got 1.0"):
        choose_longitudinal(8, 1.0, 1.0)
    with pytest.raises(ValueError, match="changes_per_year must be"):
        choose_longitudinal(8, 2.0, 1.0, -1)
    with pytest.raises(TypeError, match="changes_per_year must be"):
        choose_longitudinal(8, 2.0, 1.0, 1.5)
    with pytest.raises(ValueError, match="domain_size must be"):
        choose_longitudinal(1, 2.0, 1.0)
    with pytest.raises(ValueError, match=r"epsilon_inf must leave each memoized answer"):
        choose_longitudinal(8, 1.0, 0.6, 5)  # 1.0 / 2 <= 0.6 even with g = 2
    with pytest.raises(ValueError, match=r"domain_size=2147483648 must keep the state"):
        choose_longitudinal(2**31, 4.0, 1.0)  # the specs' own refusal, not "infeasible"
