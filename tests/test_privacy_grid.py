"""The numerical mechanisms' reports are an exact discrete law on a grid.

* the floating-point side channel: every report value made from v is producible from any
  v' (the attack finds unreachable reports in a float sampler, and none on the grid);
* the samplers' empirical laws match the exact laws (chi-square, alpha = 1e-6), and the
  same tests reject the law at epsilon x 1.3;
* ``privacy_loss()`` is the law's exact loss (tight), at both ends of the epsilon range;
* PM and HM stay unbiased at both ends of the range.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpkit.numeric import (
    DiscreteSquareWave,
    GeneralWave,
    HybridMechanism,
    PiecewiseMechanism,
    SquareWave,
    StochasticRounding,
)
from ldpkit.privacy import privacy_loss
from ldpkit.testing import chisquare_gof

ALPHA = 1e-6


# -- the floating-point side channel ----------------------------------------------------------
def _float_pm(t: np.ndarray, u: np.ndarray, eps: float) -> np.ndarray:
    """The float PM sampler as it was before the grid law (inverse CDF, one uniform)."""
    e2 = math.exp(eps / 2)
    em1 = e2 - 1
    s = (e2 + 1) / em1
    q = 0.5 * (1 - 1 / e2) / e2 / (1 + 1 / e2)
    plateau = 1 / (1 + 1 / e2)
    left = t + (t - 1) / em1
    width = 2 / em1
    left_mass = q * (left + s)
    return np.where(
        u < left_mass,
        -s + u / q,
        np.where(
            u < left_mass + plateau,
            left + (u - left_mass) / plateau * width,
            left + width + (u - left_mass - plateau) / q,
        ),
    )


def _float_reachable(y: np.ndarray, t2: float, eps: float) -> np.ndarray:
    """Whether some float uniform u' (a multiple of 2^-53) makes the float PM output y from
    t2: invert the branch arithmetic, then try the 2 x 64 neighbouring grid points of u'."""
    e2 = math.exp(eps / 2)
    em1 = e2 - 1
    s = (e2 + 1) / em1
    q = 0.5 * (1 - 1 / e2) / e2 / (1 + 1 / e2)
    plateau = 1 / (1 + 1 / e2)
    left = t2 + (t2 - 1) / em1
    width = 2 / em1
    left_mass = q * (left + s)
    guesses = np.stack(
        [
            (y + s) * q,
            (y - left) / width * plateau + left_mass,
            (y - left - width) * q + left_mass + plateau,
        ]
    )
    hit = np.zeros(y.shape, dtype=bool)
    ulp = 2.0**-53
    for g in guesses:
        base = np.floor(g / ulp)
        for step in range(-64, 65):
            u = np.clip((base + step) * ulp, 0.0, 1.0 - ulp)
            hit |= _float_pm(np.full(y.shape, t2), u, eps) == y
    return hit


def test_side_channel_attack_finds_the_float_sampler_and_not_the_grid():
    eps, t, n = 1.0, 0.3, 2000
    gen = np.random.default_rng(0)
    u = np.floor(gen.random(n) * 2.0**53) * 2.0**-53
    y = _float_pm(np.full(n, t), u, eps)
    assert _float_reachable(y, t, eps).all()  # the attack's own sanity check
    # The float sampler: a large share of the reports from t could not come from t + 1e-9.
    assert _float_reachable(y, t + 1e-9, eps).mean() < 0.9
    # The grid: a report from t is a grid value whose cell has positive probability under
    # every grid input, hence under every t' (any mixture of grid inputs).
    pm = PiecewiseMechanism(epsilon=eps, report_cells=256)
    reports = pm.randomize(np.full(n, t), rng=1)
    cells = pm.report_cells_of(reports)
    law = pm.grid_matrix()
    assert np.all(law[:, cells] > 0)
    assert np.all(law.min(axis=0) > 0)


@pytest.mark.parametrize(
    "spec",
    [
        PiecewiseMechanism(epsilon=1.0, low=0.0, high=10.0),
        HybridMechanism(epsilon=1.0, low=0.0, high=10.0),
        StochasticRounding(epsilon=1.0, low=0.0, high=10.0),
        SquareWave(epsilon=1.0, low=0.0, high=10.0, buckets=64),
        GeneralWave(epsilon=1.0, low=0.0, high=10.0, buckets=64, ratio=0.3),
    ],
    ids=lambda s: s.name,
)
def test_every_report_from_v_is_producible_from_nearby_inputs(spec):
    """The side-channel measurement, on the grid: reports from v land on the spec's fixed grid,
    and every grid value has positive probability from v' = v + 1e-9, v + 1e-3, v + b/4."""
    v = 3.7
    reports = spec.randomize(np.full(5000, v), rng=2)
    grid = spec.report_values()
    assert np.isin(reports.values, grid).all()
    cells = spec.report_cells_of(reports)  # raises for any value off the grid
    assert cells.min() >= 0
    b = getattr(spec, "b", 0.1) * 10.0
    for v2 in (v + 1e-9, v + 1e-3, v + b / 4):
        other = spec.randomize(np.full(5000, v2), rng=3)
        assert np.isin(other.values, grid).all()  # one support for every input
    if isinstance(spec, (SquareWave, GeneralWave)):
        # the exact law of every grid input gives every cell a positive probability
        for k in (0, spec.input_steps // 3, spec.input_steps):
            assert np.all(spec.cell_probabilities(k) > 0)


# -- samplers against their exact laws --------------------------------------------------------
def _pm_counts(spec: PiecewiseMechanism, k: int, n: int, seed: int) -> np.ndarray:
    g = spec._grid
    t = -1.0 + 2.0 * k / g.steps  # exactly a grid input: no rounding
    cells = spec.report_cells_of(spec.randomize(np.full(n, t), rng=seed))
    return np.bincount(cells, minlength=g.cells)


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_pm_sampler_matches_grid_matrix(eps):
    pm = PiecewiseMechanism(epsilon=eps, report_cells=64)
    m = pm.grid_matrix()
    np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-12)
    wrong = PiecewiseMechanism(epsilon=1.3 * eps, report_cells=64).grid_matrix()
    for k in (0, m.shape[0] // 2, m.shape[0] - 1):
        counts = _pm_counts(pm, k, 200_000, seed=k)
        assert chisquare_gof(counts, m[k]) > ALPHA
        row = wrong[min(k, wrong.shape[0] - 1)]
        assert chisquare_gof(counts, row) < ALPHA


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_sr_sampler_matches_grid_matrix(eps):
    sr = StochasticRounding(epsilon=eps)
    m = sr.grid_matrix()
    wrong = StochasticRounding(epsilon=1.3 * eps).grid_matrix()
    steps = m.shape[0] - 1
    for k in (0, steps // 4, steps):
        t = -1.0 + 2.0 * k / steps
        cells = sr.report_cells_of(sr.randomize(np.full(200_000, t), rng=k))
        counts = np.bincount(cells, minlength=2)
        assert chisquare_gof(counts, m[k]) > ALPHA
        if k != steps // 2:
            assert chisquare_gof(counts, wrong[k]) < ALPHA


def test_hm_sampler_matches_its_mixture_law():
    eps = 2.0
    hm = HybridMechanism(epsilon=eps, report_cells=64)
    pm_m = hm._pm.grid_matrix()
    sr_m = hm._sr.grid_matrix()
    a = hm.pm_probability
    k_pm = pm_m.shape[0] - 1  # t = 1: the last grid input of both grids
    law = np.concatenate([a * pm_m[k_pm], (1 - a) * sr_m[-1]])
    cells = hm.report_cells_of(hm.randomize(np.full(200_000, 1.0), rng=5))
    counts = np.bincount(cells, minlength=law.size)
    assert chisquare_gof(counts, law) > ALPHA
    wrong_hm = HybridMechanism(epsilon=1.3 * eps, report_cells=64)
    b = wrong_hm.pm_probability
    wrong = np.concatenate(
        [b * wrong_hm._pm.grid_matrix()[-1], (1 - b) * wrong_hm._sr.grid_matrix()[-1]]
    )
    assert chisquare_gof(counts, wrong) < ALPHA


@pytest.mark.parametrize(
    "cls, kw",
    [(SquareWave, {}), (GeneralWave, {"ratio": 0.0}), (GeneralWave, {"ratio": 0.5})],
)
def test_wave_sampler_matches_cell_law(cls, kw):
    eps, n = 1.0, 300_000
    spec = cls(epsilon=eps, buckets=1024, **kw)
    steps = spec.input_steps
    for k in (0, steps // 2 + 7, steps):
        v = k / steps  # exact: steps is a power of two, so no rounding happens
        cells = spec.report_cells_of(spec.randomize(np.full(n, v), rng=k))
        # pool cells into 128 contiguous groups so that every group expects >= 5 reports
        groups = np.arange(spec.n_cells) * 128 // spec.n_cells
        counts = np.bincount(groups[cells], minlength=128)
        law = np.bincount(groups, spec.cell_probabilities(k), minlength=128)
        assert chisquare_gof(counts, law) > ALPHA
        wrong = cls(epsilon=1.3 * eps, buckets=1024, bandwidth=spec.b, **kw)
        assert wrong.input_steps == steps and wrong.n_cells == spec.n_cells
        wrong_law = np.bincount(groups, wrong.cell_probabilities(k), minlength=128)
        assert chisquare_gof(counts, wrong_law) < ALPHA


def test_discrete_square_wave_sampler_at_large_epsilon():
    # DiscreteSquareWave(epsilon=800).privacy_loss() used to be inf; now the range stops
    # at 40 and the integer law keeps every output possible right up to it.
    dsw = DiscreteSquareWave(epsilon=40.0, buckets=8)
    assert dsw.privacy_loss() == pytest.approx(40.0, rel=1e-12)
    assert dsw.q > 0 and math.isfinite(dsw.privacy_loss())
    with pytest.raises(ValueError, match="epsilon must be a finite number >= 1e-06 and <= 40"):
        DiscreteSquareWave(epsilon=800.0, buckets=8)


# -- privacy_loss() is the law's -------------------------------------------------------------
@pytest.mark.parametrize("eps", [1e-6, 0.1, 1.0, 8.0, 30.0])
def test_privacy_loss_is_tight_and_within_epsilon(eps):
    pm = PiecewiseMechanism(epsilon=eps, report_cells=64)
    sr = StochasticRounding(epsilon=eps)
    for spec in (pm, sr):
        loss = spec.privacy_loss()
        assert loss <= eps and loss == pytest.approx(eps, rel=1e-7)
        # the matrix's own loss (inputs x outputs) equals it
        assert privacy_loss(spec.grid_matrix()) == pytest.approx(loss, rel=1e-6, abs=1e-15)
    sw = SquareWave(epsilon=eps, buckets=64)
    law = np.array([sw.cell_probabilities(k) for k in (0, sw.input_steps // 2, sw.input_steps)])
    assert privacy_loss(law) <= sw.privacy_loss() * (1 + 1e-9) + 1e-15
    assert sw.privacy_loss() <= eps and sw.privacy_loss() == pytest.approx(eps, rel=1e-7)
    if eps <= 1.0:
        # cells near the middle are inside one input's plateau and outside another's
        assert privacy_loss(law) == pytest.approx(sw.privacy_loss(), rel=1e-6, abs=1e-15)


# -- PM and HM unbiased at both ends of the range --------------------------------------------
@pytest.mark.parametrize(
    "cls, eps",
    [
        (PiecewiseMechanism, 1e-6),
        (PiecewiseMechanism, 40.0),
        (HybridMechanism, 1e-6),
        (HybridMechanism, 30.0),
        (StochasticRounding, 1e-6),
        (StochasticRounding, 30.0),
    ],
)
def test_mean_mechanisms_unbiased_at_both_ends(cls, eps):
    n = 200_000
    values = np.random.default_rng(9).beta(2, 5, n)
    spec = cls(epsilon=eps, low=0.0, high=1.0)
    est = spec.run(values, rng=10)
    assert math.isfinite(est.mean) and math.isfinite(est.variance) and est.variance > 0
    exact = spec.variance_at(n, values)
    z = (est.mean - values.mean()) / math.sqrt(exact)
    assert abs(z) < 5.5, z
    if eps > 1.0:
        # power: a shifted truth (by 6 sd) is rejected, so |z| < 5.5 is informative
        assert abs((est.mean - values.mean() - 11 * math.sqrt(exact)) / math.sqrt(exact)) > 5.5


# -- one accepted epsilon range for every mechanism --------------------------------------------
def _names() -> list[str]:
    from ldpkit.spec import mechanism_registry

    return sorted(mechanism_registry())


@pytest.mark.parametrize("name", _names())
def test_every_mechanism_works_at_both_ends_of_its_range(name):
    """Below 1e-6 every spec refuses epsilon with one message; at 1e-6 and at its
    max_epsilon (or 30 where it has none) estimates and variances are finite and the privacy
    loss is within epsilon (tight where exact_epsilon says so)."""
    from ldpkit._validation import MIN_EPSILON
    from ldpkit.testing import check_mechanism, small_spec

    cls = type(small_spec(name))
    with pytest.raises(ValueError, match=r"epsilon must be a finite number >= 1e-06"):
        small_spec(name, epsilon=MIN_EPSILON / 2)
    # a budget split over d parts needs d x 1e-6 (SPL: each attribute gets epsilon / d)
    lowest = getattr(small_spec(name), "min_epsilon", MIN_EPSILON)
    for eps in (lowest, min(cls.max_epsilon, 30.0)):
        check_mechanism(small_spec(name, epsilon=eps), checks=["estimate", "privacy"])
    if math.isfinite(cls.max_epsilon):
        with pytest.raises(ValueError, match=f"and <= {cls.max_epsilon:g}, got"):
            small_spec(name, epsilon=cls.max_epsilon * 1.01)


@pytest.mark.parametrize("fmt", ["npz", "parquet"])
@pytest.mark.parametrize(
    "spec",
    [
        PiecewiseMechanism(epsilon=1.0, low=0.0, high=10.0, report_cells=1 << 10),
        HybridMechanism(epsilon=2.0, low=0.0, high=10.0),
        SquareWave(epsilon=1.0, low=0.0, high=10.0, buckets=32),
    ],
    ids=lambda s: s.name,
)
def test_grid_reports_round_trip_on_the_wire(spec, fmt, tmp_path):
    """The wire carries grid values and the spec that names the grid (report_cells, buckets,
    epsilon, bandwidth): a saved and reloaded batch maps back to the same cells exactly, and
    a value nudged off the grid by one ulp is refused."""
    from ldpkit import Reports
    from ldpkit.io import load_reports, save_reports

    reports = spec.randomize(np.linspace(0.0, 10.0, 500), rng=7)
    back = load_reports(save_reports(reports, tmp_path / f"r.{fmt}"), expected=spec)
    assert back.spec == spec
    np.testing.assert_array_equal(spec.report_cells_of(back), spec.report_cells_of(reports))
    assert spec.aggregate(back) == spec.aggregate(reports)
    nudged = reports.values.copy()
    nudged[3] = np.nextafter(nudged[3], np.inf)
    with pytest.raises(ValueError, match="report grid"):
        spec.aggregate(Reports(spec, values=nudged))
