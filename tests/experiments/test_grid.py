"""The experiment grid: deterministic under a seed, parallel == serial, correct plumbing."""

from __future__ import annotations

import io
import multiprocessing

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from ldpkit import GRR
from ldpkit.datasets import zipf
from ldpkit.experiments import (
    Cell,
    Grid,
    MechanismMethod,
    cell_seed,
    frequency_mse,
    run_grid,
    summarize,
)

EPSILONS = [0.5, 1.0, 2.0, 4.0]


def noisy_identity(data, epsilon, rng):
    """A toy method: true frequencies plus N(0, 1/epsilon^2) noise."""
    return data.frequencies + rng.normal(0.0, 1.0 / epsilon, size=data.domain_size)


def max_abs(result, truth):
    return float(np.max(np.abs(np.asarray(getattr(result, "frequencies", result)) - truth)))


@pytest.fixture(scope="module")
def quick_grid() -> Grid:
    return Grid(
        methods={"GRR": MechanismMethod(GRR), "noise": noisy_identity},
        epsilons=EPSILONS,
        datasets={
            "zipf1.1": zipf(s=1.1, d=32, n=20_000, rng=1),
            "zipf1.5": zipf(s=1.5, d=32, n=20_000, rng=2),
        },
        metrics={"mse": frequency_mse, "max_abs": max_abs},
        repetitions=8,
    )


def test_quick_grid_records_and_summary(quick_grid):
    result = run_grid(quick_grid, seed=0, progress=False)
    rec = result.records
    assert list(rec.columns) == ["dataset", "method", "epsilon", "repetition", "metric", "value"]
    assert len(rec) == 2 * 2 * 4 * 8 * 2
    assert rec["epsilon"].dtype == np.float64 and rec["repetition"].dtype == np.int64
    assert np.isfinite(rec["value"]).all()
    first = rec.iloc[:4]
    assert first[["dataset", "method", "epsilon", "repetition"]].values.tolist() == [
        [
            "zipf1.1",
            "GRR",
            0.5,
            0,
        ],
        ["zipf1.1", "GRR", 0.5, 0],
        ["zipf1.1", "GRR", 0.5, 1],
        ["zipf1.1", "GRR", 0.5, 1],
    ]
    summary = result.summary
    assert len(summary) == 2 * 2 * 4 * 2 and (summary["count"] == 8).all()
    assert result.timings.shape == (2 * 2 * 4 * 8, 5) and (result.timings["seconds"] >= 0).all()
    assert result.estimated_seconds is not None and result.estimated_seconds > 0


def test_grr_mse_matches_analytic_variance():
    # E[MSE] = mean over items of Var[f~_v] (FO17 eq. 2): checks that every cell's result
    # is scored against its own data set's truth at its own epsilon.
    datasets = {
        "zipf1.1": zipf(s=1.1, d=256, n=20_000, rng=1),
        "zipf1.5": zipf(s=1.5, d=256, n=20_000, rng=2),
    }
    grid = Grid(
        methods={"GRR": MechanismMethod(GRR)},
        epsilons=EPSILONS,
        datasets=datasets,
        metrics={"mse": frequency_mse},
        repetitions=20,
    )
    summary = run_grid(grid, seed=11, progress=False).summary
    for row in summary.itertuples():
        data = datasets[row.dataset]

        def expected(eps: float, data=data) -> float:
            spec = GRR(epsilon=eps, domain_size=data.domain_size)
            return float(np.mean(spec.variance(data.n, data.frequencies)))

        z = (row.mean - expected(row.epsilon)) / row.sem
        assert abs(z) <= 6, f"{row.dataset} eps={row.epsilon}: z = {z:.2f}"
        # power: the variance at a wrong epsilon (x1.3) is rejected
        z_wrong = (row.mean - expected(1.3 * row.epsilon)) / row.sem
        assert abs(z_wrong) > 6, f"{row.dataset} eps={row.epsilon}: wrong-eps z = {z_wrong:.2f}"


def test_same_seed_identical_frame(quick_grid):
    a = run_grid(quick_grid, seed=5, progress=False).records
    b = run_grid(quick_grid, seed=5, progress=False, estimate=False).records
    c = run_grid(quick_grid, seed=6, progress=False).records
    pd.testing.assert_frame_equal(a, b)
    assert a.equals(b)
    assert not a["value"].equals(c["value"])


def test_parallel_equals_serial_fork(quick_grid):
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("fork not available")
    serial = run_grid(quick_grid, seed=3, progress=False).records
    parallel = run_grid(quick_grid, seed=3, n_jobs=2, progress=False, start_method="fork").records
    pd.testing.assert_frame_equal(serial, parallel)
    assert serial.equals(parallel)


@pytest.mark.slow  # starts spawn workers: ~20 s on 2 busy cores
def test_parallel_equals_serial_spawn():
    # spawn pickles the grid: only importable objects (ldpkit's adapters and metrics)
    grid = Grid(
        methods={"GRR": MechanismMethod(GRR), "GRR-k": MechanismMethod(GRR, {"domain_size": 40})},
        epsilons=[1.0, 3.0],
        datasets={"zipf": zipf(s=1.1, d=40, n=5000, rng=1)},
        metrics={"mse": frequency_mse},
        repetitions=6,
    )
    serial = run_grid(grid, seed=9, progress=False).records
    parallel = run_grid(grid, seed=9, n_jobs=2, progress=False, start_method="spawn").records
    assert serial.equals(parallel)


@pytest.mark.slow  # starts a spawn worker
def test_spawn_with_unimportable_method_fails_clearly(quick_grid):
    # test-module functions cannot be imported by a fresh interpreter: a clear error, no hang
    with pytest.raises(RuntimeError, match="picklable and importable"):
        run_grid(quick_grid, n_jobs=2, progress=False, start_method="spawn")


def test_cell_streams_do_not_depend_on_the_rest_of_the_grid(quick_grid):
    small = Grid(
        methods={"noise": noisy_identity},
        epsilons=[2.0],
        datasets={"zipf1.5": quick_grid.datasets["zipf1.5"]},
        metrics={"mse": frequency_mse},
        repetitions=3,
    )
    sub = run_grid(small, seed=4, progress=False).records
    full = run_grid(quick_grid, seed=4, progress=False).records
    same = full[
        (full.method == "noise")
        & (full.dataset == "zipf1.5")
        & (full.epsilon == 2.0)
        & (full.metric == "mse")
        & (full.repetition < 3)
    ]
    assert np.array_equal(sub["value"].to_numpy(), same["value"].to_numpy())


def test_cell_seeds_are_distinct_children_of_the_root():
    cells = [Cell(d, m, e, r) for d in "ab" for m in "xy" for e in (1.0, 2.0) for r in range(3)]
    states = {tuple(cell_seed(0, c).generate_state(4)) for c in cells}
    assert len(states) == len(cells)
    root = np.random.SeedSequence(0)
    child = cell_seed(root, cells[0])
    assert child.entropy == root.entropy and len(child.spawn_key) == 4
    assert cell_seed(1, cells[0]).generate_state(4).tolist() != child.generate_state(4).tolist()


def test_declared_cost_skips_pilots_and_progress_prints_estimate():
    calls = []

    class Counted:
        cost = 0.5

        def __call__(self, data, epsilon, rng):
            calls.append(epsilon)
            return data.frequencies

    grid = Grid(
        methods={"exact": Counted()},
        epsilons=[1.0, 2.0],
        datasets={"z": zipf(d=4, n=100, rng=0)},
        metrics={"mse": frequency_mse},
        repetitions=2,
    )
    out = io.StringIO()
    result = run_grid(grid, seed=0, console=Console(file=out, width=200))
    assert len(calls) == 4  # no pilot beyond the 4 cells
    assert result.estimated_seconds == pytest.approx(0.5 * 4)
    assert "4 cells" in out.getvalue() and "estimated 2.0 s" in out.getvalue()
    assert (result.records["value"] == 0).all()


def test_errors_name_the_cell():
    def broken(data, epsilon, rng):
        if epsilon > 1:
            raise RuntimeError("boom")
        return data.frequencies

    grid = Grid(
        methods={"broken": broken},
        epsilons=[1.0, 3.0],
        datasets={"z": zipf(d=4, n=10, rng=0)},
        metrics={"mse": frequency_mse},
        repetitions=1,
    )
    with pytest.raises(RuntimeError, match="boom") as info:
        run_grid(grid, progress=False)
    assert "epsilon=3.0" in "".join(getattr(info.value, "__notes__", []))


def test_grid_validation():
    base = {
        "methods": {"m": noisy_identity},
        "epsilons": [1.0],
        "datasets": {"d": zipf(d=4, n=10, rng=0)},
        "metrics": {"mse": frequency_mse},
    }
    with pytest.raises(ValueError, match="epsilons"):
        Grid(**{**base, "epsilons": [1.0, -1.0]})
    with pytest.raises(ValueError, match="distinct"):
        Grid(**{**base, "epsilons": [1.0, 1.0]})
    with pytest.raises(ValueError, match="methods must be a non-empty mapping"):
        Grid(**{**base, "methods": {}})
    with pytest.raises(TypeError, match="callable"):
        Grid(**{**base, "metrics": {"mse": 3}})
    with pytest.raises(ValueError, match="repetitions"):
        Grid(**base, repetitions=0)
    with pytest.raises(ValueError, match="n_jobs"):
        run_grid(Grid(**base), n_jobs=0, progress=False)
    with pytest.raises(TypeError, match="grid must be a Grid"):
        run_grid(base)  # type: ignore[arg-type]


def test_summarize_exact():
    records = pd.DataFrame(
        {
            "dataset": "d",
            "method": ["a", "a", "a", "b"],
            "epsilon": 1.0,
            "repetition": [0, 1, 2, 0],
            "metric": "mse",
            "value": [1.0, 2.0, 6.0, 4.0],
        }
    )
    s = summarize(records)
    row_a = s[s.method == "a"].iloc[0]
    assert row_a["mean"] == 3.0 and row_a["count"] == 3
    assert row_a["std"] == pytest.approx(np.sqrt(7.0))
    assert row_a["sem"] == pytest.approx(np.sqrt(7.0 / 3.0))
    assert np.isnan(s[s.method == "b"].iloc[0]["sem"])
    with pytest.raises(ValueError, match="missing"):
        summarize(records.drop(columns="metric"))
