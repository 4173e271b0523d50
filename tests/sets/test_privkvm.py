"""PrivKVM's rounds and PCKV-GRR's budget allocation: laws, estimands, variances."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpkit import Stats
from ldpkit.sets import PCKV, PrivKV, UserPairs, privkvm
from ldpkit.testing import variance_ratio_bounds

D = 3
SHARES = np.array([0.5, 0.3, 0.0])  # share of users holding each key
VALUES = np.array([0.6, -0.5, 0.0])  # their (common) value


def _users(n: int, seed: int) -> UserPairs:
    """Users holding key 0 (value 0.6) w.p. 0.5 and key 1 (value -0.5) w.p. 0.3."""
    gen = np.random.default_rng(seed)
    held = gen.random((n, D)) < SHARES[None, :]
    _, keys = np.nonzero(held)
    lengths = held.sum(axis=1)
    return UserPairs(keys, VALUES[keys], np.r_[0, np.cumsum(lengths)])


def _z_signed(spec: PrivKV, stats: Stats, f: np.ndarray) -> np.ndarray:
    """Return the z of ``c+ - c-`` per key against its expectation given n_k reports of the key.

    A report of key k is ``<1, +-1>`` with mean ``(2 p2 - 1)(f p1 m + (1 - f)(1 - p1) m')``
    (holders: their value; non-holders: the fake mean m') and second moment ``f p1 + (1 -
    f)(1 - p1)`` (PrivKV section IV; the fake draw of PrivKVM's section V).
    """
    p1, p2 = spec.p1, spec.p2
    fake = np.zeros(D) if spec.fake_means is None else np.array(spec.fake_means)
    mu = (2 * p2 - 1) * (f * p1 * VALUES + (1 - f) * (1 - p1) * fake)
    second = f * p1 + (1 - f) * (1 - p1)
    nk = stats.sampled
    diff = stats.positive - stats.negative
    return (diff - nk * mu) / np.sqrt(nk * (second - mu**2))


@pytest.mark.parametrize("round_", [0, 1])
def test_round_law_and_the_check_fails_for_a_wrong_epsilon(round_):
    """Rounds 0 and 1: the signed counts match their law; a 1.3 eps spec fails it."""
    users = _users(300_000, seed=1)
    f = np.bincount(users.keys, minlength=D) / len(users)
    spec = PrivKV(epsilon=6.0, domain_size=D, rounds=2)
    if round_:
        spec = spec.replace(round=1, fake_means=(0.2, 0.1, -0.4))
    stats = spec.aggregate(spec.randomize(users, rng=2))
    z = _z_signed(spec, stats, f)
    assert np.max(np.abs(z)) <= 5, z
    wrong = spec.replace(epsilon=6.0 * 1.3)
    forged = Stats(wrong, stats.n, **{k: getattr(stats, k) for k in wrong.stats_schema()})
    assert np.max(np.abs(_z_signed(wrong, forged, f))) > 5
    if round_ == 0:  # the frequency: unbiased given the reports per key
        est = spec.estimate(stats)
        zf = (est.frequencies - f) / np.sqrt(est.frequency_variance)
        assert np.max(np.abs(zf)) <= 5, zf
    else:  # a fair key bit: no frequency, said by the uninformative variance
        est = spec.estimate(stats)
        assert np.all(est.frequencies == 0) and np.all(est.frequency_variance == 0.25)


def test_budget_split_and_privacy_loss():
    """Key eps/2 in round 0 only, value eps/(2c) per round; the realized losses."""
    spec = PrivKV(epsilon=3.0, domain_size=4, rounds=3)
    assert spec.key_epsilon == 1.5 and spec.value_epsilon == 0.5
    assert spec.p1 == pytest.approx(math.exp(1.5) / (1 + math.exp(1.5)), rel=1e-12)
    assert spec.p2 == pytest.approx(math.exp(0.5) / (1 + math.exp(0.5)), rel=1e-12)
    # round 0: the correlated outputs lose less than eps1 + eps2
    assert 0.5 < spec.privacy_loss() < 2.0 + 1e-12
    later = spec.replace(round=2, fake_means=(1.0, -1.0, 0.0, 0.5))
    assert later.key_epsilon == 0.0 and later.p1 == 0.5
    # a fair key bit: only the value's randomized response leaks, eps / (2 c)
    assert later.privacy_loss() == pytest.approx(0.5, rel=1e-9)
    # one round is the plain PrivKV
    one = PrivKV(epsilon=3.0, domain_size=4)
    assert one.key_epsilon == one.value_epsilon == 1.5
    with pytest.raises(ValueError, match="round must be"):
        PrivKV(epsilon=1.0, domain_size=4, rounds=2, round=2)
    with pytest.raises(ValueError, match="fake_means must"):
        PrivKV(epsilon=1.0, domain_size=4, rounds=2, round=1, fake_means=(0.0, 0.1))
    with pytest.raises(ValueError, match="fake_means"):
        PrivKV(epsilon=1.0, domain_size=2, rounds=2, round=1, fake_means=(0.0, 1.5))


def test_rounds_undo_the_shrinkage_towards_zero():
    """Move the mean's expectation closer to the truth by (1 - w) per round.

    ``w = f p1 / (f p1 + (1 - f)(1 - p1))`` in round 0, f later (PrivKV section V).
    """
    users = _users(400_000, seed=3)
    f = np.bincount(users.keys, minlength=D) / len(users)
    spec = PrivKV(epsilon=8.0, domain_size=D, rounds=3)
    gen = np.random.default_rng(4)
    est = spec.run(users, rng=gen)
    p1 = spec.p1
    w = f * p1 / (f * p1 + (1 - f) * (1 - p1))
    expect = w * VALUES
    for _ in range(2):
        z = (est.means[:2] - expect[:2]) / np.sqrt(est.mean_variance[:2])
        assert np.max(np.abs(z)) <= 5, (z, est.means, expect)
        previous = est.means
        spec = spec.next_round(est)
        est = spec.run(users, rng=gen)
        expect = f * VALUES + (1 - f) * previous
    # at eps = 4 the one-round bias (1 - w) m is 0.07 and 0.12; three rounds cut it to
    # (1 - w)(1 - f)^2 m = 0.02 and 0.06 (standard errors ~0.01)
    many = _users(1_000_000, seed=5)
    first = privkvm(many, epsilon=4.0, domain_size=D, rounds=1, rng=6).means[:2]
    third = privkvm(many, epsilon=4.0, domain_size=D, rounds=3, rng=6).means[:2]
    assert np.all(np.abs(first - VALUES[:2]) > 0.05), first
    assert np.all(np.abs(third - VALUES[:2]) < np.abs(first - VALUES[:2]) - 0.03), third


@pytest.mark.slow
def test_mean_variance_within_ten_percent():
    """2000 runs of n = 3000 users at once: the mean's variance against its formula."""
    n, runs = 3000, 2000
    base = _users(n, seed=6)
    many = UserPairs(
        np.tile(base.keys, runs),
        np.tile(base.values, runs),
        np.r_[0, np.cumsum(np.tile(base.lengths, runs))],
    )
    spec = PrivKV(epsilon=4.0, domain_size=D)
    rep = spec.randomize(many, rng=7)
    run = np.repeat(np.arange(runs), n)
    keys, vals = rep.keys.astype(np.int64), rep.values

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(run[mask] * D + keys[mask], minlength=runs * D).reshape(runs, D)

    every = np.ones(keys.size, dtype=bool)
    ests = [
        spec.estimate(Stats(spec, n, sampled=s, positive=p, negative=q))
        for s, p, q in zip(count(every), count(vals == 1), count(vals == -1))
    ]
    means = np.array([e.means[:2] for e in ests])
    predicted = np.mean([e.mean_variance[:2] for e in ests], axis=0)
    ratio = means.var(axis=0, ddof=1) / predicted
    lo, hi = variance_ratio_bounds(runs - 1, 1e-6)
    assert np.all((ratio > lo) & (ratio < hi)) and np.all(np.abs(ratio - 1) < 0.10), ratio


def test_pckv_grr_allocation_is_the_papers_and_spends_eps():
    """PCKV section 5.2 for GRR: e^eps2 = ell (e^eps - 1) + 1, e^eps1 = (e^eps2 + 1) / 2."""
    for eps, ell, d in [(1.0, 2, 6), (3.0, 4, 13), (0.5, 3, 200), (2.0, 1, 5)]:
        spec = PCKV(epsilon=eps, domain_size=d, padding=ell, method="grr")
        big = ell * (math.exp(eps) - 1)
        a = (big + 2) / (big + 2 * (d + ell))
        assert spec.a == pytest.approx(a, rel=1e-12)
        assert spec.b == pytest.approx((1 - a) / (d + ell - 1), rel=1e-12)
        assert spec.p == pytest.approx((big + 1) / (big + 2), rel=1e-12)
        assert spec.exact_epsilon
        assert eps - 1e-12 <= spec.privacy_loss() <= eps
    # a wrong allocation (the UE one, amplification not counted) fails the same check
    ue_like = PCKV(epsilon=1.0, domain_size=6, padding=2, method="grr").replace(epsilon=1.0)
    big = 2 * (math.exp(1.0) - 1)
    assert ue_like.p != pytest.approx(math.exp(1.0) / (1 + math.exp(1.0)), rel=1e-6)
    assert ue_like.p == pytest.approx((big + 1) / (big + 2), rel=1e-12)
