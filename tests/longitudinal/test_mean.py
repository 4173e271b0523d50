"""OneBitMean: 1BitMean with alpha-point rounding and memoization."""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit import Device
from ldpkit.longitudinal import OneBitMean
from ldpkit.testing import chisquare_gof


def test_law_at_each_grid_point():
    """A value on the s-grid is reported with SR's exact law at that grid input (the row of
    ``grid_matrix``), and the check rejects the sampler of epsilon x 1.3."""
    spec = OneBitMean(epsilon=1.0, low=0.0, high=1.0, points=8)
    rows = spec.grid_matrix()
    for k in (0, 3, 8):
        law = rows[k * (1 << 16) // 8]
        for mech, seed, ok in ((spec, k, True), (spec.replace(epsilon=1.3), 50 + k, False)):
            reports = mech.randomize(np.full(40_000, k / 8), rng=seed)
            plus = int((reports.values > 0.5).sum())
            p = chisquare_gof(np.array([40_000 - plus, plus]), law)
            assert (p > 1e-6) if ok else (p < 1e-6)


def test_unbiased_and_fails_for_a_wrong_epsilon():
    spec = OneBitMean(epsilon=1.0, low=0.0, high=100.0, points=16)
    values = np.random.default_rng(0).uniform(60.0, 100.0, 200_000)
    est = spec.estimate(spec.aggregate(spec.randomize(values, rng=1)))
    sd = np.sqrt(spec.variance_at(values.size, values))
    assert abs(est.mean - values.mean()) < 5 * sd
    # the same reports read as epsilon = 1.3's: their scale C' is wrong, the mean too
    wrong = OneBitMean(epsilon=1.3, low=0.0, high=100.0, points=16)
    ybar = (spec._unit_reports(spec.randomize(values, rng=1))).mean()
    scale = wrong._grid.magnitude / spec._grid.magnitude
    assert abs(50.0 * (ybar * scale + 1.0) - values.mean()) > 6 * sd


def test_memoized_per_rounded_point(tmp_path):
    spec = OneBitMean(epsilon=1.0, low=0.0, high=1.0, points=4)
    device = Device(secret=bytes(range(32)), path=tmp_path / "d.json")
    values = np.linspace(0.0, 1.0, 101)  # the value drifts over the whole range
    first = device.report(spec, values, rng=0)
    assert device.distinct_values(spec) == 5  # points + 1 grid points at most
    assert device.privacy_spent(spec) == pytest.approx(5 * spec.privacy_loss())
    assert device.report(spec, values, rng=1).equals(first)  # the memoized bits
    # alpha-point rounding is unbiased over devices (alpha uniform)
    keys = []
    for i in range(400):
        dev = Device(secret=i.to_bytes(16, "big"), path=tmp_path / f"{i}.json")
        keys.append(int(spec._memo_keys(np.array([0.3]), dev._state(spec))[0]))
    # 0.3 * 4 = 1.2: rounds to 2 with probability 0.2
    share = np.mean(np.array(keys) == 2)
    assert set(keys) <= {1, 2} and abs(share - 0.2) < 5 * np.sqrt(0.2 * 0.8 / 400)
    with pytest.raises(ValueError, match="points must be a power of two"):
        OneBitMean(epsilon=1.0, points=6)
