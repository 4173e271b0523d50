"""ldpkit.privacy.attack: the Bayes-optimal attacker against one device."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpkit import GRR, OUE
from ldpkit._attack import _bits_limit, _exact_matrix, _mc_bits, _mc_matrix
from ldpkit.longitudinal import LGRR, LOSUE
from ldpkit.privacy import attack


def test_one_report_is_exact():
    grr = GRR(epsilon=1.0, domain_size=16)
    r = attack(grr, rounds=1, memoized=False)
    assert r.method == "exact" and r.interval == (r.success, r.success)
    assert r.success == pytest.approx(grr.p, rel=1e-12)  # sum_y max_v M[v, y] / d = p
    assert r.baseline == pytest.approx(1 / 16)
    # a skewed prior: the attacker follows it where the report is not convincing
    prior = np.array([0.7] + [0.3 / 15] * 15)
    skewed = attack(grr, rounds=1, memoized=False, prior=prior)
    m = grr.transition_matrix()
    assert skewed.success == pytest.approx((prior[:, None] * m).max(axis=0).sum(), rel=1e-12)


def test_exact_and_monte_carlo_agree():
    spec = LGRR(epsilon_inf=2.0, epsilon_1=1.0, domain_size=3)
    p1, p2 = spec.permanent_matrix(), spec.instantaneous_matrix()
    prior = np.array([0.5, 0.3, 0.2])
    exact = _exact_matrix(p1, p2, 6, prior)
    n = 40_000
    hits = _mc_matrix(p1, p2, 6, prior, n, np.random.default_rng(1))
    assert abs(hits / n - exact) < 5 * math.sqrt(exact * (1 - exact) / n)
    # the bitwise path at T = 1 against the exact matrix of a small unary encoding
    oue = OUE(epsilon=1.0, domain_size=4)
    exact = _exact_matrix(np.eye(4), oue.transition_matrix(), 1, np.full(4, 0.25))
    hits = _mc_bits((1.0, 0.0, oue.p, oue.q), 1, np.full(4, 0.25), n, np.random.default_rng(2))
    assert abs(hits / n - exact) < 5 * math.sqrt(exact * (1 - exact) / n)
    # the permanent-bits limit in closed form against its Monte Carlo
    law = (0.5, 0.2, 0.7, 0.3)
    closed = _bits_limit(law, np.full(8, 1 / 8), n, np.random.default_rng(3))
    hits = _mc_bits(law, None, np.full(8, 1 / 8), n, np.random.default_rng(4))
    assert abs(hits / n - closed) < 5 * math.sqrt(closed * (1 - closed) / n)


def test_fresh_grr_is_identified_memoized_lgrr_is_not():
    """The demonstration case (d = 16, eps = 1; L-GRR at eps_inf = 1)."""
    grr = GRR(epsilon=1.0, domain_size=16)
    fresh = attack(grr, rounds=1000, memoized=False, rng=0, samples=4000)
    assert fresh.interval[0] > 0.99
    assert attack(grr, rounds=100, memoized=False, rng=0, samples=4000).interval[0] > 0.85
    lgrr = LGRR(epsilon_inf=1.0, epsilon_1=0.5, domain_size=16)
    bound = math.e / (math.e + 15)
    for rounds in (1, 10, 1000):
        r = attack(lgrr, rounds=rounds, memoized=True, rng=rounds, samples=4000)
        assert r.limit == pytest.approx(bound, rel=1e-9)
        assert r.interval[0] <= bound  # never above the bound (up to Monte Carlo error)
    assert r.interval[1] >= 0.9 * bound  # and it gets close at T = 1000
    # memoizing a plain GRR report: the attacker sees one report whatever T
    assert attack(grr, rounds=500, memoized=True).success == pytest.approx(grr.p, rel=1e-12)


def test_losue_memoized_stays_at_its_limit():
    spec = LOSUE(epsilon_inf=1.0, epsilon_1=0.5, domain_size=16)
    r = attack(spec, rounds=1000, memoized=True, rng=0, samples=4000)
    assert r.interval[0] <= r.limit <= r.interval[1] + 0.02
    assert attack(spec, rounds=1000, memoized=False, rng=0, samples=4000).interval[0] > 0.99


def test_bad_inputs():
    grr = GRR(epsilon=1.0, domain_size=4)
    with pytest.raises(TypeError, match="spec must be"):
        attack("GRR", rounds=1)
    with pytest.raises(ValueError, match="rounds must be"):
        attack(grr, rounds=0)
    with pytest.raises(TypeError, match="memoized must be"):
        attack(grr, rounds=1, memoized="yes")
    with pytest.raises(ValueError, match="prior must be 4 probabilities"):
        attack(grr, rounds=1, prior=[0.5, 0.5])
    with pytest.raises(ValueError, match="prior must be"):
        attack(grr, rounds=1, prior=[0.5, 0.5, 0.5, 0.5])


def test_loloha_memoized_stays_at_its_limit():
    """BiLOLOHA: the public seed splits the 16 values into two buckets; however many
    reports, the attacker at best learns the permanent answer's bucket: about p1 / 8."""
    from ldpkit.longitudinal import LOLOHA

    spec = LOLOHA(epsilon_inf=1.0, epsilon_1=0.5, domain_size=16, hash_range=2)
    p1 = math.e / (math.e + 1)
    r = attack(spec, rounds=1000, rng=0, samples=4000)
    assert r.interval[0] <= r.limit + 0.02 and r.success < 0.13
    assert abs(r.limit - p1 / 8) < 0.02
    with pytest.raises(NotImplementedError, match="fresh LOLOHA"):
        attack(spec, rounds=3, memoized=False)
