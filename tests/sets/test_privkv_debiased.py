"""PrivKV(M)'s debiased means: closed forms, unbiasedness (+ failing companions), coverage.

The paper's mean ``m^`` estimates ``w m + (1 - w) m'`` (shrunk towards the fake mean m');
``debiased_means`` solve ``E[Y] = (2 p2 - 1)(f p1 m + (1 - f)(1 - p1) m')`` for m with the
estimated frequency, and ``mean_interval()`` is around them.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from ldpkit import Stats
from ldpkit.estimate import IntervalWarning
from ldpkit.sets import KeyValueEstimate, PrivKV, UserPairs, privkvm
from ldpkit.testing import variance_ratio_bounds

D = 3
SHARES = np.array([0.5, 0.3, 0.15])  # share of users holding each key
CENTRES = np.array([0.6, -0.5, 0.3])  # the centre of their values


def _users(n: int, seed: int) -> UserPairs:
    """Users holding key k w.p. SHARES[k], values spread +-0.2 around CENTRES[k]."""
    gen = np.random.default_rng(seed)
    held = gen.random((n, D)) < SHARES[None, :]
    _, keys = np.nonzero(held)
    values = CENTRES[keys] + gen.uniform(-0.2, 0.2, keys.size)
    return UserPairs(keys, values, np.r_[0, np.cumsum(held.sum(axis=1))])


def _stats(spec: PrivKV, sampled, positive, negative) -> Stats:
    sampled = np.asarray(sampled, dtype=np.int64)
    return Stats(
        spec,
        int(sampled.sum()),
        sampled=sampled,
        positive=np.asarray(positive, dtype=np.int64),
        negative=np.asarray(negative, dtype=np.int64),
    )


def test_closed_form_round_zero():
    """``(m^ - (1 - w^) m') / w^`` with ``w^ = f^ p1 / (f^ p1 + (1 - f^)(1 - p1))``, m' = 0."""
    spec = PrivKV(epsilon=2.0, domain_size=D)
    p1, r = spec.p1, 2 * spec.p2 - 1
    stats = _stats(spec, [1000, 800, 1200], [500, 300, 200], [100, 250, 260])
    est = spec.estimate(stats)
    ones = np.array([600.0, 550.0, 460.0])
    nk = np.array([1000.0, 800.0, 1200.0])
    f = (ones / nk - (1 - p1)) / (2 * p1 - 1)
    w = f * p1 / (f * p1 + (1 - f) * (1 - p1))
    m_hat = np.array([400.0, 50.0, -60.0]) / (ones * r)
    np.testing.assert_allclose(est.means, np.clip(m_hat, -1, 1), rtol=1e-12)
    np.testing.assert_allclose(est.debiased_means, np.clip(m_hat / w, -1, 1), rtol=1e-12)
    # a share p1 of <1, *> reports: f^ = 1 (within 1e-4), w^ = 1: no shrinkage to undo,
    # the debiased mean is m^ (all users hold the key, none sends a fake pair)
    n_k = 10_000
    ones_at_1 = round(p1 * n_k)
    up = round(0.7 * ones_at_1)
    full = spec.estimate(_stats(spec, [n_k] * 3, [up, ones_at_1 - up, 0], [ones_at_1 - up, up, 0]))
    f1 = full.frequencies[0]
    w1 = f1 * p1 / (f1 * p1 + (1 - f1) * (1 - p1))
    assert abs(w1 - 1) < 1e-3 and np.all(np.abs(full.means[:2]) < 1)
    np.testing.assert_allclose(full.debiased_means[:2], full.means[:2] / w1, rtol=1e-12)
    # a key no report supports: f^ <= 0, the debiased mean falls back to m^ (variance 1)
    assert full.frequencies[2] < 0 and full.debiased_means[2] == full.means[2]
    assert full.debiased_mean_variance[2] == 1.0


def test_closed_form_later_round():
    """Round t > 0 (a fair key bit): ``m~ = (Y / r - (1 - f^) m' / 2) / (f^ / 2)``."""
    spec = PrivKV(epsilon=3.0, domain_size=D, rounds=2, round=1, fake_means=(0.2, -0.4, 0.0))
    r = 2 * spec.p2 - 1
    stats = _stats(spec, [1000, 900, 1100], [320, 200, 300], [180, 250, 260])
    key = KeyValueEstimate(
        np.array([0.4, 0.3, 0.1]), np.full(D, 1e-4), np.zeros(D), np.ones(D), stats.n
    )
    est = spec.estimate(stats, key_estimate=key)
    y = np.array([140.0, -50.0, 40.0]) / np.array([1000.0, 900.0, 1100.0])
    f, fake = key.frequencies, np.array(spec.fake_means)
    want = (y / r - (1 - f) * fake / 2) / (f / 2)
    np.testing.assert_allclose(est.debiased_means, np.clip(want, -1, 1), rtol=1e-12)
    assert spec.estimate(stats).debiased_means is None  # no frequencies: nothing to undo
    with pytest.raises(TypeError, match="key_estimate must be"):
        spec.estimate(stats, key_estimate="x")  # type: ignore[arg-type]


def _z_debiased(spec: PrivKV, stats: Stats, m: np.ndarray) -> np.ndarray:
    est = spec.estimate(stats)
    return (est.debiased_means - m) / np.sqrt(est.debiased_mean_variance)


def test_debiased_mean_unbiased_and_the_check_fails_for_a_wrong_epsilon_or_swapped_signs():
    """|z| <= 5 on every key; a 1.3 eps spec or swapped value probabilities fail it."""
    users = _users(1_000_000, seed=1)
    _, m = users.truth(D)
    spec = PrivKV(epsilon=2.0, domain_size=D)
    stats = spec.aggregate(spec.randomize(users, rng=2))
    z = _z_debiased(spec, stats, m)
    assert np.max(np.abs(z)) <= 5, z
    # the paper's m^ on the same reports is shrunk: |z| of its distance to m is large
    est = spec.estimate(stats)
    assert np.min(np.abs(est.means - m) / np.sqrt(est.mean_variance)) > 5
    wrong = spec.replace(epsilon=2.0 * 1.3)
    forged = _stats(wrong, stats.sampled, stats.positive, stats.negative)
    assert np.max(np.abs(_z_debiased(wrong, forged, m))) > 5
    # value kept w.p. 1 - p2 instead of p2: the +1 and -1 pairs trade places
    swapped = _stats(spec, stats.sampled, stats.negative, stats.positive)
    assert np.max(np.abs(_z_debiased(spec, swapped, m))) > 5


def _privkvm_rounds(users: UserPairs, epsilon: float, rounds: int, seed: int):
    """The rounds of ``privkvm`` by hand (the same generator): specs, stats, round 0's estimate."""
    spec = PrivKV(epsilon=epsilon, domain_size=D, rounds=rounds)
    gen = np.random.default_rng(seed)
    specs, stats = [spec], [spec.aggregate(spec.randomize(users, rng=gen))]
    first = last = spec.estimate(stats[0])
    for _ in range(1, rounds):
        specs.append(specs[-1].next_round(last))
        stats.append(specs[-1].aggregate(specs[-1].randomize(users, rng=gen)))
        last = specs[-1].estimate(stats[-1])
    return specs, stats, first


def test_privkvm_debiased_mean_unbiased_and_the_check_fails_for_a_wrong_epsilon():
    """Every round's debiased mean, combined: |z| <= 5; the rounds read at 1.3 eps fail."""
    from ldpkit.sets.keyvalue import _combine_rounds

    users = _users(600_000, seed=3)
    _, m = users.truth(D)
    est = privkvm(users, epsilon=3.0, domain_size=D, rounds=3, rng=4)
    z = (est.debiased_means - m) / np.sqrt(est.debiased_mean_variance)
    assert np.max(np.abs(z)) <= 5, z
    specs, stats, first = _privkvm_rounds(users, 3.0, 3, seed=4)
    usable, deb, var = _combine_rounds(specs, stats, first)
    assert usable.all()
    np.testing.assert_array_equal(deb, est.debiased_means)
    np.testing.assert_array_equal(var, est.debiased_mean_variance)
    # the combination is more precise than any one round's debiased mean
    last = specs[-1].estimate(stats[-1], key_estimate=first)
    assert np.all(var < first.debiased_mean_variance) and np.all(var < last.debiased_mean_variance)
    wrong = [s.replace(epsilon=3.0 * 1.3) for s in specs]
    forged = [_stats(w, st.sampled, st.positive, st.negative) for w, st in zip(wrong, stats)]
    first_w = wrong[0].estimate(forged[0])
    _, bad, bad_var = _combine_rounds(wrong, forged, first_w)
    assert np.max(np.abs((bad - m) / np.sqrt(bad_var))) > 5


@pytest.mark.slow
def test_privkvm_debiased_variance_within_ten_percent():
    """1000 PrivKVM runs of n = 20000 (3 rounds, eps 4): the combination's variance."""
    users = _users(20_000, seed=13)
    ests = [privkvm(users, epsilon=4.0, domain_size=D, rounds=3, rng=r) for r in range(1000)]
    means = np.array([e.debiased_means[:2] for e in ests])
    predicted = np.mean([e.debiased_mean_variance[:2] for e in ests], axis=0)
    ratio = means.var(axis=0, ddof=1) / predicted
    lo, hi = variance_ratio_bounds(len(ests) - 1, 1e-6)
    assert np.all((ratio > lo) & (ratio < hi)) and np.all(np.abs(ratio - 1) < 0.10), ratio


def _run_stats(spec: PrivKV, n: int, runs: int, seed: int) -> tuple[list[Stats], np.ndarray]:
    """``runs`` independent collections of the same n users at once (one randomize call)."""
    base = _users(n, seed=seed)
    many = UserPairs(
        np.tile(base.keys, runs),
        np.tile(base.values, runs),
        np.r_[0, np.cumsum(np.tile(base.lengths, runs))],
    )
    rep = spec.randomize(many, rng=seed + 1)
    run = np.repeat(np.arange(runs), n)
    keys, vals = rep.keys.astype(np.int64), rep.values

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(run[mask] * D + keys[mask], minlength=runs * D).reshape(runs, D)

    every = np.ones(keys.size, dtype=bool)
    stats = [
        _stats(spec, s, p, q) for s, p, q in zip(count(every), count(vals == 1), count(vals == -1))
    ]
    return stats, base.truth(D)[1]


@pytest.mark.slow
def test_debiased_variance_within_ten_percent():
    """2000 runs of n = 3000 users: the debiased mean's variance against its formula."""
    spec = PrivKV(epsilon=4.0, domain_size=D)
    stats, _ = _run_stats(spec, 3000, 2000, seed=5)
    ests = [spec.estimate(s) for s in stats]
    means = np.array([e.debiased_means[:2] for e in ests])
    predicted = np.mean([e.debiased_mean_variance[:2] for e in ests], axis=0)
    ratio = means.var(axis=0, ddof=1) / predicted
    lo, hi = variance_ratio_bounds(len(ests) - 1, 1e-6)
    assert np.all((ratio > lo) & (ratio < hi)) and np.all(np.abs(ratio - 1) < 0.10), ratio


def _coverage(ests: list[KeyValueEstimate], m: np.ndarray, scale: float = 1.0) -> tuple[int, int]:
    """(covered, given) over every key of every estimate; ``scale`` widens the interval."""
    covered = given = 0
    for est in ests:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IntervalWarning)
            lo, hi = est.mean_interval(0.05)
        ok = np.isfinite(lo)
        centre = est.best_means
        lo, hi = centre - scale * (centre - lo), centre + scale * (hi - centre)
        given += int(ok.sum())
        covered += int(((lo <= m) & (m <= hi))[ok].sum())
    return covered, given


@pytest.mark.slow
def test_mean_interval_coverage_one_round():
    """95% intervals cover 92-97.5% of 1200 (key, run) pairs; a 0.7x width does not."""
    spec = PrivKV(epsilon=2.0, domain_size=D)
    stats, m = _run_stats(spec, 5000, 400, seed=7)
    ests = [spec.estimate(s) for s in stats]
    covered, given = _coverage(ests, m)
    # 1200 pairs at most: binomial sd 0.0063 at 0.95, bounds ~ -4.7 / +4 sd
    assert given >= 1000 and 0.92 <= covered / given <= 0.975, (covered, given)
    narrow, _ = _coverage(ests, m, scale=0.7)  # z = 1.37: 83% coverage
    assert narrow / given < 0.92, narrow / given
    # the paper's shrunk mean with its own interval: an interval for another quantity
    shrunk = 0
    for est in ests:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IntervalWarning)
            lo, hi = est.mean_interval(0.05, target="means")
        shrunk += int(((lo <= m) & (m <= hi)).sum())
    assert shrunk / given < 0.5, shrunk / given


@pytest.mark.slow
def test_mean_interval_coverage_privkvm():
    """PrivKVM (3 rounds): the combined rounds' intervals cover 92-97.5% of 900 pairs."""
    users = _users(20_000, seed=9)
    _, m = users.truth(D)
    ests = [privkvm(users, epsilon=4.0, domain_size=D, rounds=3, rng=100 + r) for r in range(300)]
    covered, given = _coverage(ests, m)
    assert given >= 800 and 0.92 <= covered / given <= 0.975, (covered, given)
    narrow, _ = _coverage(ests, m, scale=0.7)
    assert narrow / given < 0.92, narrow / given


def test_mean_interval_target_and_frame():
    """``target`` picks the centre; bad targets are refused; the frame carries both means."""
    est = PrivKV(epsilon=3.0, domain_size=D).run(_users(20_000, seed=11), rng=12)
    lo, hi = est.mean_interval(0.1)
    assert np.all((lo <= est.debiased_means) & (est.debiased_means <= hi))
    lo_s, hi_s = est.mean_interval(0.1, target="means")
    assert np.all((lo_s <= est.means) & (est.means <= hi_s))
    with pytest.raises(ValueError, match="target must be one of"):
        est.mean_interval(target="true")
    frame = est.to_frame()
    np.testing.assert_array_equal(frame["debiased_mean"], est.debiased_means)
    np.testing.assert_array_equal(frame["mean_low"], est.mean_interval(0.05)[0])
    with pytest.raises(ValueError, match="given together"):
        est.replace(debiased_mean_variance=None)
