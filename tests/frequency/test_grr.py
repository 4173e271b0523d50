import math

import numpy as np
import pytest

from ldpkit import GRR
from ldpkit.frequency.significance import heavy_hitters, significance_cutoff
from ldpkit.privacy import privacy_loss


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 4.0])
@pytest.mark.parametrize("d", [2, 32, 1024])
def test_variance_closed_form(eps, d):
    """FO17 eq. 5; the rounded table values are in test_table2.py."""
    e = math.exp(eps)
    assert GRR(epsilon=eps, domain_size=d).variance(1) == pytest.approx(
        (d - 2 + e) / (e - 1) ** 2, rel=1e-12
    )


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("d", [2, 7, 100])
def test_privacy_loss_tight(eps, d):
    spec = GRR(epsilon=eps, domain_size=d)
    assert spec.p + (d - 1) * spec.q == pytest.approx(1.0, rel=1e-14)
    assert spec.privacy_loss() == pytest.approx(eps, rel=1e-12)
    assert privacy_loss(spec.transition_matrix()) == pytest.approx(eps, rel=1e-12)


def test_largest_epsilon_is_exact():
    """At max_epsilon the coin is still random (integer weights, q > 0) and the
    loss is tight; beyond it, refused (a float coin is deterministic above eps ~ 37 + ln d)."""
    spec = GRR(epsilon=40.0, domain_size=10)
    assert 0 < spec.q < 1e-17 and spec._weights()[1] >= 1  # p rounds to 1.0 as a float
    assert 40.0 - 1e-12 < spec.privacy_loss() <= 40.0
    with pytest.raises(ValueError, match="epsilon must be a finite number >= 1e-06 and <= 40"):
        GRR(epsilon=1e4, domain_size=10)


def test_heavy_hitters_find_the_planted_items():
    d, n = 200, 200_000
    rng = np.random.default_rng(0)
    values = np.concatenate(
        [np.full(n // 10, 3), np.full(n // 20, 77), rng.integers(100, 200, n - n // 10 - n // 20)]
    )
    spec = GRR(epsilon=3.0, domain_size=d)
    est = spec.run(values, rng=1)
    hh = heavy_hitters(est, 0.05)
    assert hh[:2].tolist() == [3, 77]
    # items 0..99 except 3 and 77 have frequency 0: at most a few false positives
    false = set(hh.tolist()) & (set(range(100)) - {3, 77})
    assert len(false) <= 2
    bh = heavy_hitters(est, 0.05, method="bh")
    assert set(hh.tolist()) <= set(bh.tolist())
    assert np.all(significance_cutoff(est, 0.05) > 0)
    with pytest.raises(ValueError, match="method must be"):
        heavy_hitters(est, method="holm")


def test_bonferroni_false_positive_rate_under_null():
    """Under a uniform-over-other-items null, the family-wise error stays near alpha."""
    d, n, runs = 50, 20_000, 200
    spec = GRR(epsilon=1.0, domain_size=d)
    values = np.full(n, 0)
    errors = sum(
        bool(set(heavy_hitters(spec.run(values, rng=g)).tolist()) - {0})
        for g in np.random.default_rng(3).spawn(runs)
    )
    # FWER <= alpha = 0.05: allow the binomial 1e-6 upper bound for 200 runs.
    assert errors <= 27
