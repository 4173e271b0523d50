"""``ldpkit reproduce fo17`` on a tiny grid: files, determinism, Table 2 within chi-square bounds."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from ldpkit.experiments import run_grid
from ldpkit.frequency.tables import FO17_TABLE2, TABLE2_COLUMNS
from ldpkit.reproduce import fo17, load

# n * Var* does not depend on n, so small runs measure Table 2 as well as the paper's sizes;
# 8,000 zero-frequency estimates per row give chi-square bounds of about +-10 %.
TABLE = fo17.Fo17Config(table_n=1_000, table_domain=256, table_cells=16, table_samples=8_000)
TINY = fo17.Fo17Config(
    table_n=1_000,
    table_domain=64,
    table_cells=8,
    table_samples=800,
    mse_epsilons=(1.0, 4.0),
    mse_repetitions=2,
    zipf_n=2_000,
    domain=64,
    names_n=2_000,
)


def quiet() -> Console:
    return Console(file=io.StringIO(), width=120)


@pytest.fixture(scope="module")
def table2_records() -> pd.DataFrame:
    return run_grid(fo17.table2_grid(TABLE), seed=11, progress=False).records


@pytest.fixture(scope="module")
def table2_report(table2_records) -> pd.DataFrame:
    return fo17.table2_report(table2_records, TABLE)


def test_table2_report_on_a_tiny_grid():
    # fast: two rows, one epsilon, a few hundred estimates; the report's columns, paper values
    # and bounds, and a formula 30 % off fails where the right one passes
    config = fo17.Fo17Config(table_epsilons=(1.0,), table_n=500, table_cells=8, table_samples=2000)
    grid = fo17.table2_grid(config, rows=["DE (d=2)", "OLH"])
    records = run_grid(grid, seed=5, progress=False).records
    report = fo17.table2_report(records, config, alpha=1e-3)
    assert list(report["oracle"]) == ["DE (d=2)", "OLH"]
    assert report.loc[0, "paper"] == FO17_TABLE2[1.0][0]
    assert report["passed"].all()
    assert (report["lower"] < 1).all() and (report["upper"] > 1).all()
    high = {(r.oracle, 1.0): 1.3 * r.analytical for r in report.itertuples()}
    assert not fo17.table2_report(records, config, analytical=high, alpha=1e-3)["passed"].any()


@pytest.mark.slow  # Table 2 measured: 14 rows x 4 epsilons x 8,000 estimates
def test_table2_rows_and_paper_values(table2_report):
    rows = [*fo17.TABLE2_ROWS, *fo17.EXTRA_ROWS]
    assert len(table2_report) == len(rows) * 4
    assert list(dict.fromkeys(table2_report["oracle"])) == rows
    for r in table2_report.itertuples(index=False):
        if r.oracle in TABLE2_COLUMNS:
            assert r.paper == FO17_TABLE2[r.epsilon][list(TABLE2_COLUMNS).index(r.oracle)]
            if r.oracle != "OLH":  # FO17 prints OLH at the real-valued g = e^eps + 1
                # the paper rounds to two decimals
                assert abs(r.analytical - r.paper) <= 0.005 + 1e-9, r
        else:
            assert math.isnan(r.paper)
    # samples: ceil(target / (cells (d - 1))) runs per cell
    de2 = table2_report[table2_report["oracle"] == "DE (d=2)"].iloc[0]
    assert de2["samples"] == 16 * 500


@pytest.mark.slow  # Table 2 measured: 14 rows x 4 epsilons x 8,000 estimates
def test_table2_measured_within_chi_square_bounds(table2_report):
    failed = table2_report[~table2_report["passed"]]
    assert failed.empty, failed.to_string()
    # the bounds are informative: about +-10 % here (wider where the cells' spread shows
    # correlated or heavy-tailed estimates), never +-30 %
    assert (table2_report["upper"] < 1.3).all() and (table2_report["lower"] > 0.7).all()
    assert (table2_report["dof"] <= table2_report["samples"]).all()


@pytest.mark.slow  # Table 2 measured: 14 rows x 4 epsilons x 8,000 estimates
def test_table2_check_fails_for_wrong_epsilon(table2_records, table2_report):
    # The same measurements tested against the formulas at epsilon * 1.3 must fail wherever
    # those differ from the right ones by clearly more than the bound's width.
    wrong = {}
    for r in table2_report.itertuples(index=False):
        spec = fo17.table2_spec(r.oracle, r.epsilon * 1.3, TABLE.table_domain)
        wrong[(r.oracle, r.epsilon)] = TABLE.table_n * float(spec.variance(TABLE.table_n))
    bad = fo17.table2_report(table2_records, TABLE, analytical=wrong)
    change = bad["analytical"].to_numpy() / table2_report["analytical"].to_numpy()
    lower, upper = table2_report["lower"].to_numpy(), table2_report["upper"].to_numpy()
    clear = (change < lower**2) | (change > upper**2)
    assert clear.sum() >= 40  # BLH, HR and HRR at large epsilon barely depend on epsilon
    assert not bad["passed"].to_numpy()[clear].any(), bad[clear & bad["passed"].to_numpy()]
    # and a formula 30 % too high fails every row
    high = {
        k: 1.3 * v
        for k, v in zip(
            zip(table2_report["oracle"], table2_report["epsilon"]), table2_report["analytical"]
        )
    }
    assert not fo17.table2_report(table2_records, TABLE, analytical=high)["passed"].any()


@pytest.mark.slow  # end-to-end run / statistical
def test_mse_grid_measures_the_analytical_mse():
    data = fo17.mse_datasets(TINY, seed=0)
    assert {k: (v.n, v.domain_size) for k, v in data.items()} == {
        "zipf": (2_000, 64),
        "babynames": (2_000, 64),
    }
    config = fo17.Fo17Config(mse_epsilons=(1.0, 4.0), mse_repetitions=4, domain=64)
    result = run_grid(fo17.mse_grid(config, data), seed=5, progress=False)
    report = fo17.mse_report(result.records, data)
    assert len(report) == 2 * len(fo17.ORACLES) * 2
    # each cell is a mean over 64 items x 4 runs (relative sd ~ 9 %); the median of 44
    # cells is within a few percent of 1 when the analytical variance is right
    median = float(np.median(report["ratio"]))
    assert 0.9 < median < 1.1, report[["dataset", "method", "epsilon", "ratio"]]
    # a factor-2 error in any oracle's formula would show
    assert report["ratio"].between(0.5, 2.0).all(), report[["method", "epsilon", "ratio"]]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fo17-a")
    return fo17.run(TINY, out=out, seed=7, jobs=1, console=quiet())


@pytest.mark.slow  # end-to-end run / statistical
def test_run_writes_files(tiny_run):
    assert load("fo17") is fo17
    names = {
        "fo17_table2.parquet",
        "fo17_table2.md",
        "fo17_table2.png",
        "fo17_table2.pdf",
        "fo17_table2_vs_paper.md",
        "fo17_mse.parquet",
        "fo17_mse.md",
        "fo17_mse.png",
        "fo17_mse.pdf",
        "fo17_mse_vs_analytical.md",
    }
    assert {p.name for p in tiny_run.iterdir()} == names
    assert (tiny_run / "fo17_table2.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (tiny_run / "fo17_table2_vs_paper.md").read_text()
    assert "| DE (d=2) | 0.5 |" in text and "(3.92)" in text


@pytest.mark.slow  # two more runs
def test_run_is_deterministic(tiny_run, tmp_path):
    for sub in "bc":
        (tmp_path / sub).mkdir()
    second = fo17.run(TINY, out=tmp_path / "b", seed=7, jobs=1, console=quiet())
    for name in ("fo17_table2.parquet", "fo17_mse.parquet"):
        a, b = pd.read_parquet(tiny_run / name), pd.read_parquet(second / name)
        pd.testing.assert_frame_equal(a, b)
    for name in ("fo17_table2_vs_paper.md", "fo17_mse_vs_analytical.md"):
        assert (tiny_run / name).read_text() == (second / name).read_text()
    other = pd.read_parquet(
        fo17.run(TINY, out=tmp_path / "c", seed=8, jobs=1, console=quiet()) / "fo17_mse.parquet"
    )
    assert not other["value"].equals(pd.read_parquet(tiny_run / "fo17_mse.parquet")["value"])
