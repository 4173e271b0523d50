"""Grid pieces for numerical distributions: the bench, its truth, the CDF-grid metrics."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

from ldpkit.experiments.numeric import (
    Bench,
    BenchConfig,
    DistributionMethod,
    GridMetric,
    bench_truth,
    cdf_grid,
    empirical_cdf,
    grid_errors,
)
from ldpkit.numeric import CFOBinning, Distribution, SquareWave


def test_bench_validates_and_freezes_its_values():
    bench = Bench([0.0, 0.5, 1.0], 4)
    assert bench.n == 3 and bench.smooth and not bench.values.flags.writeable
    with pytest.raises(
        ValueError, match=r"values must be a non-empty 1-D array of numbers in \[0, 1\]"
    ):
        Bench([0.5, 1.5], 4)
    with pytest.raises(ValueError, match="buckets must be an integer >= 2"):
        Bench([0.5], 1)


def test_truth_holds_both_conventions():
    truth = bench_truth(Bench([0.05, 0.3, 0.3, 0.9], 4))
    np.testing.assert_allclose(truth.histogram.probabilities, [0.25, 0.5, 0.0, 0.25])
    assert truth.mean == pytest.approx(0.3875)
    assert truth.variance == pytest.approx(np.var([0.05, 0.3, 0.3, 0.9]))
    assert truth.grid_cdf[63] == 0.25  # P[X < 0.25]
    assert truth.range_fraction(np.array([0.3]), np.array([0.9])).tolist() == [0.75]


def test_distribution_method_passes_buckets_and_the_oracle_rule():
    def rule(epsilon, params):
        return "GRR" if epsilon > 2 else "OUE"

    bench = Bench(np.linspace(0, 1, 500), 32)
    assert DistributionMethod(SquareWave).spec(bench, 1.0).buckets == 32  # the bench's d
    method = DistributionMethod(CFOBinning, {"buckets": 8}, oracle_rule=rule)
    assert method.spec(bench, 1.0).oracle == "OUE" and method.spec(bench, 3.0).oracle == "GRR"
    assert method.spec(bench, 1.0).buckets == 8  # the method's own resolution wins
    a = method(bench, 1.0, np.random.default_rng(0))
    b = method(bench, 1.0, np.random.default_rng(0))
    np.testing.assert_array_equal(a.probabilities, b.probabilities)


def test_bench_config_checks_names():
    class Paper(BenchConfig):
        DATASETS: ClassVar[dict[str, str]] = {"a": "", "b": ""}
        METHODS: ClassVar[dict[str, str]] = {"m": ""}

    assert Paper(epsilons=(1.0,), repetitions=1).datasets == ("a", "b")
    with pytest.raises(ValueError, match=r"datasets must be a subset of \['a', 'b'\], got \['c'\]"):
        Paper(epsilons=(1.0,), repetitions=1, datasets=("a", "c"))


# ---- WAV25 CDF-grid metrics ---------------------------------------------------------------------------------
def test_cdf_convention_on_a_point_mass_on_a_grid_point():
    # all mass at 0.5, a grid point: the histogram bucket [0.5, 0.5 + w) holds it, so its
    # CDF is 0 at 0.5 and 1 from the next grid point on; P[X < x] agrees exactly
    values = np.full(100, 0.5)
    mass = np.zeros(1024)
    mass[512] = 1.0
    assert grid_errors(Distribution(mass), values) == (0.0, 0.0)
    # under P[X <= x] the same exact histogram would be off by the whole mass at x = 0.5
    grid = cdf_grid()
    le = np.searchsorted(values, grid, side="right") / values.size
    assert np.max(np.abs(Distribution(mass).cdf(grid) - le)) == 1.0
    # and the top of the domain counts as 1: mass exactly at 1 is no error
    assert empirical_cdf(np.array([0.2, 1.0]), [0.5, 1.0]).tolist() == [0.5, 1.0]


def test_grid_w1_and_ks_closed_form():
    # truth: half the values at 0.25, half at 0.75 (grid points); estimate: uniform on [0, 1]
    values = np.sort(np.repeat([0.25, 0.75], 50))
    w1, ks = grid_errors(Distribution.uniform(buckets=4), values)
    grid = cdf_grid()
    truth = np.where(grid <= 0.25, 0.0, np.where(grid <= 0.75, 0.5, 1.0))
    truth[-1] = 1.0
    gap = np.abs(grid - truth)
    assert w1 == pytest.approx(gap.mean(), abs=1e-15)
    assert ks == 0.25  # at the spikes themselves: F^(0.25) = 0.25 against P[X < 0.25] = 0
    # W1 on the grid approximates the exact integral (1/8) to within the grid step
    assert abs(w1 - 0.125) < 1 / 256


def test_range_metric_is_exact_and_uses_the_same_queries():
    rng = np.random.default_rng(3)
    values = np.round(rng.beta(2, 5, size=5000) * 20) / 20  # spiky
    bench = Bench(values, 64, False)
    truth = bench_truth(bench)
    metric = GridMetric("range", alpha=0.2, n_queries=200, seed=5)
    a, b = metric.queries()
    a2, _ = GridMetric("range", alpha=0.2, n_queries=200, seed=5).queries()
    np.testing.assert_array_equal(a, a2)
    assert np.all(a >= 0) and np.all(b <= 1) and np.allclose(b - a, 0.2)
    assert not np.array_equal(a, GridMetric("range", alpha=0.4, n_queries=200, seed=5).queries()[0])
    est = Distribution.uniform(buckets=64)
    exact = np.array(
        [np.mean((values >= lo) & (values <= hi)) for lo, hi in zip(a, b, strict=True)]
    )
    assert metric(est, truth) == pytest.approx(np.mean(np.abs(0.2 - exact)), abs=1e-12)
    # a perfect histogram of the empirical law (spikes inside buckets) scores ~0 on W1
    fine = Distribution.from_values(values, 0.0, 1.0, 2**16)
    assert GridMetric("w1")(fine, truth) < 1e-4
    with pytest.raises(ValueError, match="kind must be one of"):
        GridMetric("nope")
    with pytest.raises(TypeError, match="Distribution"):
        GridMetric("w1")(values, truth)
