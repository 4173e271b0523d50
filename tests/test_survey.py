"""Several questions, one budget: Survey, PrivacyAccountant and shuffle amplification."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpkit import (
    GRR,
    OUE,
    BudgetExceededError,
    Encoder,
    PrivacyAccountant,
    Question,
    Survey,
    shuffle_amplification,
)
from ldpkit.numeric import PiecewiseMechanism


def _survey(split: str, weights=None) -> Survey:
    color = Question(
        name="color",
        spec=OUE(epsilon=1.0, domain_size=4),
        encoder=Encoder(["red", "green", "blue", "grey"]),
    )
    minutes = Question(name="minutes", spec=PiecewiseMechanism(epsilon=1.0, low=0.0, high=60.0))
    return Survey([color, minutes], epsilon=2.0, split=split, weights=weights)  # type: ignore[arg-type]


def _population(n: int, seed: int = 1) -> tuple[dict[str, np.ndarray], np.ndarray, float]:
    gen = np.random.default_rng(seed)
    truth = np.array([0.5, 0.3, 0.15, 0.05])
    colors = np.array(["red", "green", "blue", "grey"])[gen.choice(4, size=n, p=truth)]
    minutes = gen.uniform(0, 60, size=n)
    return {"color": colors, "minutes": minutes}, truth, float(minutes.mean())


def test_budgets_per_question():
    users = _survey("users", weights=[3, 1])
    assert [q.spec.epsilon for q in users.questions] == [2.0, 2.0]
    assert users.weights.tolist() == [0.75, 0.25] and users.epsilon_per_user() == 2.0
    eps = _survey("epsilon", weights=[3, 1])
    assert [q.spec.epsilon for q in eps.questions] == [1.5, 0.5]
    assert eps.epsilon_per_user() == pytest.approx(2.0)


@pytest.mark.parametrize("split", ["users", "epsilon"])
def test_estimates_are_unbiased_for_the_population(split):
    """z-tests of every frequency and the mean against the population truth."""
    n = 200_000
    answers, _, mean = _population(n)
    survey = _survey(split)
    stats = survey.aggregate(survey.randomize(answers, rng=7))
    est = survey.estimate(stats)
    freq = est["color"]
    observed = np.bincount(survey["color"].prepare(answers["color"]), minlength=4) / n
    z = (freq.frequencies - observed) / freq.std_error
    assert np.all(np.abs(z) < 5), z
    assert list(freq.labels) == ["red", "green", "blue", "grey"]
    mean_est = est["minutes"]
    z_mean = (mean_est.mean - mean) / mean_est.std_error
    assert abs(z_mean) < 5, z_mean
    sizes = {name: s.n for name, s in stats.items()}
    if split == "users":
        assert sum(sizes.values()) == n  # each user answered exactly one question
        # the assignment is Binomial(n, 1/2): |z| < 5
        assert abs(sizes["color"] - n / 2) / math.sqrt(n / 4) < 5
        scale = survey.population_scale(stats)
        assert scale["color"] == pytest.approx(n / sizes["color"])
        counts = freq.counts * scale["color"]
        z_counts = (counts - observed * n) / (freq.std_error * freq.n * scale["color"])
        assert np.all(np.abs(z_counts) < 5)
    else:
        assert sizes == {"color": n, "minutes": n}


def test_survey_test_has_power():
    """The same z-test fails when the question's epsilon is misreported (x 1.3 the truth)."""
    n = 200_000
    answers, _, _ = _population(n)
    survey = _survey("users")
    reports = survey.randomize(answers, rng=7)
    wrong = survey["color"].spec.replace(epsilon=2.0 * 1.3)
    est = wrong.estimate(
        wrong.aggregate(reports["color"].__class__(wrong, **_fields(reports["color"])))
    )
    observed = np.bincount(survey["color"].prepare(answers["color"]), minlength=4) / n
    z = (est.frequencies - observed) / est.std_error
    assert np.max(np.abs(z)) > 6


def _fields(reports):
    return {name: getattr(reports, name) for name in reports.fields}


def test_survey_validation():
    q = _survey("users").questions[0]
    with pytest.raises(ValueError, match="distinct names"):
        Survey([q, q], epsilon=1.0)
    with pytest.raises(ValueError, match="split must be"):
        Survey([q], epsilon=1.0, split="time")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="epsilon must be a finite number >= 1e-06"):
        Survey([q], epsilon=0.0)
    with pytest.raises(ValueError, match="answers must have an entry per question"):
        _survey("users").randomize({"color": ["red"]}, rng=0)
    with pytest.raises(ValueError, match="one length"):
        _survey("users").randomize({"color": ["red"], "minutes": [1.0, 2.0]}, rng=0)
    with pytest.raises(KeyError, match="question must be one of"):
        _survey("users")["nope"]


def test_accountant_composition_memoization_and_periods():
    acc = PrivacyAccountant(budget=1.0)
    assert acc.charge("u", 0.25, question="q", value="a") == 0.75
    assert acc.charge("u", 0.25, question="q", value="a") == 0.75  # memoized: free
    assert acc.charge("u", 0.25, question="q", value="b") == 0.5  # changed value: fresh
    assert acc.charge("u", 0.25) == 0.25  # no value given: always fresh
    assert acc.charge("v", 1.0) == 0.0  # users are separate
    with pytest.raises(BudgetExceededError, match="epsilon must fit the remaining budget 0.25"):
        acc.charge("u", 0.5)
    assert acc.spent("u") == 0.75  # a refused report is not recorded
    # ten reports of budget / 10 fit exactly despite rounding
    tenth = PrivacyAccountant(budget=1.0)
    for _ in range(10):
        tenth.charge("u", 0.1)
    assert not tenth.can_charge("u", 1e-6)
    daily = PrivacyAccountant(budget=1.0, period=86_400)
    daily.charge("u", 1.0, at=10.0)
    assert not daily.can_charge("u", 0.1, at=86_399.0)
    assert daily.charge("u", 1.0, at=86_400.0) == 0.0  # a new day, a new budget
    with pytest.raises(ValueError, match="at must be given"):
        daily.charge("u", 0.1)
    with pytest.raises(ValueError, match="budget must be a finite number > 0"):
        PrivacyAccountant(budget=-1)


def test_thirty_daily_reports_cost_thirty_times_epsilon_unless_memoized():
    acc = PrivacyAccountant(budget=30.0)
    for day in range(30):
        acc.charge("u", 1.0, question="os", value="linux" if day < 20 else "mac")
    assert acc.spent("u") == 2.0  # two distinct values, each randomized once
    fresh = PrivacyAccountant(budget=30.0)
    for _ in range(30):
        fresh.charge("u", 1.0)
    assert fresh.spent("u") == 30.0


def test_shuffle_amplification_closed_form():
    """FMT21 Theorem 3.1, written out independently of the implementation."""
    for eps0, n, delta in [(1.0, 10**6, 1e-8), (0.1, 10**4, 1e-6), (4.0, 10**7, 1e-9)]:
        e = math.exp(eps0)
        want = math.log(
            1
            + (e - 1)
            / (e + 1)
            * (8 * math.sqrt(e * math.log(4 / delta)) / math.sqrt(n) + 8 * e / n)
        )
        assert shuffle_amplification(eps0, n, delta) == pytest.approx(want, rel=1e-12)
        assert shuffle_amplification(eps0, n, delta) < eps0
    # more users, more privacy; a larger local budget, less
    assert shuffle_amplification(1.0, 10**7, 1e-8) < shuffle_amplification(1.0, 10**6, 1e-8)
    assert shuffle_amplification(2.0, 10**6, 1e-8) > shuffle_amplification(1.0, 10**6, 1e-8)
    # tiny eps0: no cancellation, about eps0 * 4 sqrt(log(4/delta) / n) (first-order term)
    tiny = shuffle_amplification(1e-9, 10**6, 1e-8)
    assert tiny == pytest.approx(1e-9 * 4 * math.sqrt(math.log(4e8) / 1e6), rel=1e-3)


def test_shuffle_amplification_refuses_outside_its_range():
    limit = math.log(10**4 / (16 * math.log(2 / 1e-6)))
    shuffle_amplification(limit, 10**4, 1e-6)
    with pytest.raises(ValueError, match=r"epsilon0 must be <= log\(n / \(16 log\(2/delta\)\)\)"):
        shuffle_amplification(limit * 1.001, 10**4, 1e-6)
    with pytest.raises(ValueError, match="delta must be"):
        shuffle_amplification(1.0, 10**6, 0.0)
    with pytest.raises(ValueError, match="n must be"):
        shuffle_amplification(1.0, 0, 1e-6)


def test_grr_question_in_survey_gives_labels():
    q = Question(name="x", spec=GRR(epsilon=1.0, domain_size=3), encoder=Encoder(["a", "b", "c"]))
    survey = Survey([q], epsilon=3.0)
    est = survey.estimate(survey.aggregate(survey.randomize({"x": ["a", "b", "c"] * 100}, rng=0)))
    assert list(est["x"].labels) == ["a", "b", "c"] and est["x"].n == 300
