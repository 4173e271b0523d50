"""LOLOHA: memoization on the hashed value (EDBT'23), on a Device."""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit import Device
from ldpkit.longitudinal import LGRR, LOLOHA, loloha_hash_range


def _z(spec, items, seed, est_spec=None):
    n = items.size
    stats = spec.aggregate(spec.randomize(items, rng=seed))
    f = np.bincount(items, minlength=spec.domain_size) / n
    e = est_spec or spec
    freq = (stats.counts / n - e.q) / (e.p - e.q)
    return (freq - f) / np.sqrt(spec.variance(n, f))


def test_unbiased_and_fails_for_a_wrong_budget():
    items = np.random.default_rng(1).choice(20, size=200_000, p=np.linspace(1, 3, 20) / 40)
    spec = LOLOHA(epsilon_inf=2.0, epsilon_1=1.0, domain_size=20)
    assert np.max(np.abs(_z(spec, items, seed=2))) < 5
    wrong = LOLOHA(epsilon_inf=2.0, epsilon_1=0.7, domain_size=20, hash_range=spec.hash_range)
    assert np.max(np.abs(_z(spec, items, seed=2, est_spec=wrong))) > 6


def test_losses_and_hash_range():
    spec = LOLOHA(epsilon_inf=2.0, epsilon_1=1.0, domain_size=100, hash_range=2)
    lgrr = LGRR(epsilon_inf=2.0, epsilon_1=1.0, domain_size=2)  # L-GRR over [g]
    assert spec.p == pytest.approx(lgrr.p, rel=1e-15) and spec.q == 0.5
    assert spec.privacy_loss() == pytest.approx(1.0, abs=1e-12)
    assert spec.longitudinal_privacy_loss(1000) == pytest.approx(2 * 2.0, abs=1e-9)
    # OLOLOHA's g minimizes the variance over the integers
    g = loloha_hash_range(2.0, 1.0, 100)
    var = [
        LOLOHA(epsilon_inf=2.0, epsilon_1=1.0, domain_size=100, hash_range=h).variance(1000)
        for h in range(2, 12)
    ]
    assert g == 2 + int(np.argmin(var))
    assert LOLOHA(epsilon_inf=2.0, epsilon_1=1.0, domain_size=100).hash_range == g
    with pytest.raises(ValueError, match="hash_range must be"):
        LOLOHA(epsilon_inf=2.0, epsilon_1=1.0, domain_size=10, hash_range=1)
    with pytest.raises(ValueError, match="epsilon_1 must be < epsilon_inf"):
        loloha_hash_range(1.0, 1.0, 10)


def test_a_device_memoizes_per_hashed_value(tmp_path):
    spec = LOLOHA(epsilon_inf=1.0, epsilon_1=0.5, domain_size=50, hash_range=2)
    device = Device(secret=bytes(range(32)), path=tmp_path / "d.json")
    reports = device.report(spec, np.arange(50), rng=0)  # the value changes 49 times
    assert len(set(reports.seeds.tolist())) == 1  # one hash function per device
    assert device.distinct_values(spec) == 2  # two buckets, two permanent answers
    assert device.privacy_spent(spec) == pytest.approx(2 * spec.longitudinal_privacy_loss(1))
    # values hashing alike share the permanent answer
    again = Device(path=tmp_path / "d.json")
    assert again.distinct_values(spec) == 2
    buckets = spec._memo_keys(np.arange(50), again._state(spec))
    same = np.flatnonzero(buckets == buckets[0])
    assert again.permanent(spec, int(same[0])) == again.permanent(spec, int(same[-1]))
    assert spec.aggregate(reports).n == 50


@pytest.mark.parametrize("secure", [False, True])
def test_law_given_the_seed(secure):
    """``(y - H_seed(v)) mod g`` has the law ``(p*, q', ..., q')`` (L-GRR over [g]) whatever
    the seed: chi-square on it, which rejects the sampler of epsilon_1 x 1.3."""
    from ldpkit._rng import secure_generator
    from ldpkit.frequency.hashing import local_hash
    from ldpkit.testing import chisquare_gof

    spec = LOLOHA(epsilon_inf=2.0, epsilon_1=1.0, domain_size=50, hash_range=5)
    g, n, v = 5, 60_000, 7
    law = np.full(g, (1 - spec.p) / (g - 1))
    law[0] = spec.p

    def offsets(mech, seed):
        rng = secure_generator() if secure else seed
        reports = mech.randomize(np.full(n, v), rng=rng)
        hashed = local_hash(reports.seeds, np.full(n, v), g)
        return np.bincount((reports.values.astype(np.int64) - hashed) % g, minlength=g)

    assert chisquare_gof(offsets(spec, 3), law) > 1e-6
    assert chisquare_gof(offsets(spec.replace(epsilon=1.3), 4), law) < 1e-6
