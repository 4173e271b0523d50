"""``ldpkit reproduce wav25``: a tiny grid end to end, determinism, files, metrics, verdict."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from ldpkit import reproduce
from ldpkit.experiments.numeric import Bench
from ldpkit.numeric import HaarWavelet
from ldpkit.reproduce import wav25
from ldpkit.reproduce.wav25 import (
    binning_oracle,
    j_sweep_table,
    theory_level,
    wasserstein_bound,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

TINY = wav25.Config(
    epsilons=(1.0, 4.0),
    repetitions=2,
    datasets=("Beta(5,2)", "salaries"),
    beta_n=3000,
    max_n=3000,
    n_queries=100,
    j_levels=(2, 3, 4),
    j_epsilons=(2.0,),
    j_repetitions=2,
    j_beta_ns=(2000,),
    j_real=True,
)

FIGURES = {f"wav25-{s}.png" for s in ("w1", "ks", "range-0.2", "range-0.4", "w1-vs-j")}


def _run(out: Path, seed: int = 0) -> str:
    buffer = io.StringIO()
    out.mkdir(parents=True, exist_ok=True)
    path = wav25.run(TINY, out=out, seed=seed, jobs=1, console=Console(file=buffer, width=140))
    assert path == out
    return buffer.getvalue()


def _runs(tmp_path_factory, seeds):
    """One run per (key, seed), each with a fresh private data cache."""
    outs = {}
    with pytest.MonkeyPatch.context() as mp:
        for key, seed in seeds:
            mp.setenv("LDPKIT_CACHE", str(tmp_path_factory.mktemp(f"cache-{key}")))
            out = tmp_path_factory.mktemp(f"wav25-{key}")
            outs[key] = (out, _run(out, seed))
    return outs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return _runs(tmp_path_factory, [("a", 0)])


@pytest.mark.slow  # end-to-end run with figures
def test_run_writes_tables_figures_and_records(runs):
    out, text = runs["a"]
    names = {p.name for p in out.iterdir()}
    assert names == {
        "wav25.parquet",
        "wav25.md",
        "wav25-verdict.csv",
        "wav25-jsweep.parquet",
        "wav25-jsweep.csv",
        *FIGURES,
        *(name.replace(".png", ".pdf") for name in FIGURES),
    }
    for fig in FIGURES:
        data = (out / fig).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000

    records = pd.read_parquet(out / "wav25.parquet")
    # 2 data sets x 10 methods x 2 epsilons x 2 repetitions x 4 metrics
    assert len(records) == 2 * len(wav25.METHODS) * 2 * 2 * 4
    assert set(records["metric"]) == set(wav25.METRICS)
    assert records["value"].notna().all() and (records["value"] >= 0).all()
    ks = records[records["metric"] == "KS"]["value"]
    assert (ks <= 1).all()

    sweep = pd.read_parquet(out / "wav25-jsweep.parquet")
    # Beta n=2000 and salaries n=3000, J in {2, 3, 4}, one epsilon, 2 repetitions
    assert len(sweep) == 2 * 3 * 1 * 2
    assert set(sweep["method"]) == {"J=2", "J=3", "J=4"}
    table = pd.read_csv(out / "wav25-jsweep.csv")
    assert list(table["dataset"]) == ["Beta(5,2) n=2,000", "salaries n=3,000"]

    md = (out / "wav25.md").read_text(encoding="utf-8")
    for heading in (
        "## Data",
        "## What WAV25 reports",
        "## Verdict",
        "### W1 on Beta(5,2)",
        "### range 0.4 on salaries",
        "## W1 vs J",
        "## Time per run",
        "CDF convention",
    ):
        assert heading in md
    assert "| Beta(5,2) | 3,000 | 256 | 6 | smooth |" in md
    # the console gets the tables and the computed verdict and J reading
    for snippet in ("Where the Wavelet wins and loses", "spiky data, KS", "W1 vs J", "estimated"):
        assert snippet in text


@pytest.mark.slow  # two more runs of the tiny grid
def test_run_is_deterministic_under_a_seed(runs, tmp_path_factory):
    runs = {**runs, **_runs(tmp_path_factory, [("b", 0), ("c", 1)])}
    a = pd.read_parquet(runs["a"][0] / "wav25.parquet")
    b = pd.read_parquet(runs["b"][0] / "wav25.parquet")
    c = pd.read_parquet(runs["c"][0] / "wav25.parquet")
    pd.testing.assert_frame_equal(a, b)
    assert not np.allclose(a["value"], c["value"])
    ja = pd.read_parquet(runs["a"][0] / "wav25-jsweep.parquet")
    jb = pd.read_parquet(runs["b"][0] / "wav25-jsweep.parquet")
    pd.testing.assert_frame_equal(ja, jb)


def test_dispatch_knows_wav25():
    assert reproduce.load("wav25") is wav25


def test_config_rejects_unknown_names():
    with pytest.raises(ValueError, match="datasets must be a subset"):
        wav25.Config(epsilons=(1.0,), repetitions=1, datasets=("nope",))
    with pytest.raises(ValueError, match="methods must be a subset"):
        wav25.Config(epsilons=(1.0,), repetitions=1, methods=("Wavelet", "nope"))
    with pytest.raises(ValueError, match="j_levels"):
        wav25.Config(epsilons=(1.0,), repetitions=1, j_levels=(21,))


def test_beta_bench_is_seeded_and_subsampling_keeps_the_cap():
    a = wav25.load_bench("Beta(5,2)", TINY, 0)
    b = wav25.load_bench("Beta(5,2)", TINY, 0)
    c = wav25.load_bench("Beta(5,2)", TINY, 1)
    np.testing.assert_array_equal(a.values, b.values)
    assert not np.array_equal(a.values, c.values)
    assert a.n == 3000 and a.buckets == 256 and a.smooth
    with pytest.raises(ValueError, match="dataset must be one of"):
        wav25.load_bench("nope", TINY, 0)


def test_binning_oracle_follows_the_wav25_rule():
    # kRR when d < 3 e^eps + 2: at eps = 1 the threshold is 10.15, at eps = 4 it is 165.8
    rule = [binning_oracle(1.0, {"buckets": d}) for d in (8, 10, 11, 64)]
    assert rule == ["GRR", "GRR", "OUE", "OUE"]
    assert [binning_oracle(4.0, {"buckets": d}) for d in (64, 165, 166)] == ["GRR", "GRR", "OUE"]


def test_wasserstein_bound_closed_form_at_level_zero():
    # J = 0: one group, d = 1, m = 1: p = 1/(1+t), q = 0, V_0 = (1+t)^2 / (1-t)^2 (t = e^-eps)
    for eps, n in ((0.5, 100), (1.0, 10_000), (4.0, 1_000_000)):
        t = math.exp(-eps)
        expected = 0.5 + (1 + t) / (2 * (1 - t) * math.sqrt(n))
        assert wasserstein_bound(eps, n, 0) == pytest.approx(expected, rel=1e-12)
    # the bound's J grows with n and epsilon
    assert theory_level(1.0, 10_000) < theory_level(1.0, 1_000_000)
    assert theory_level(0.5, 100_000) < theory_level(4.0, 100_000)


def test_j_sweep_table_finds_rule_best_and_minus_two():
    n = 100_000  # rule J = 9
    rows = []
    for j, err in ((5, 0.5), (7, 0.8), (8, 0.9), (9, 1.0)):
        for r in range(2):
            rows.append((f"x n={n}", f"J={j}", 1.0, r, "W1", err))
    records = pd.DataFrame(
        rows, columns=["dataset", "method", "epsilon", "repetition", "metric", "value"]
    )
    table = j_sweep_table(records, {f"x n={n}": n})
    row = table.iloc[0]
    assert (row["rule_J"], row["best_J"], row["theory_J"]) == (9, 5, theory_level(1.0, n))
    assert row["rule_over_best"] == pytest.approx(2.0)
    assert row["rule_over_minus2"] == pytest.approx(1.0 / 0.8)
    assert row["theory_error"] == pytest.approx(0.8)  # the bound's J is 7 here


def test_wavelet_method_levels():
    bench = Bench(np.linspace(0, 1, 1000), 64, True)
    assert wav25.make_method("Wavelet").level(1000) == 5
    assert wav25.make_method("Wavelet J-2").level(1000) == 3
    dist = wav25.make_method("Wavelet J-2")(bench, 1.0, np.random.default_rng(0))
    assert dist.buckets == 2 ** (3 + 1)
    assert HaarWavelet(epsilon=1.0, expected_n=1000).effective_max_level == 5


def test_step_values_follow_eq_92():
    # mass 0.75 on the odd steps (density 1.5), 0.25 on the even ones, for every h
    for h in (1 / 2, 1 / 16):
        v = wav25.step_values(h, 40_000, 0)
        odd = (np.floor(v / h) % 2 == 1).mean()
        # binomial sd sqrt(0.75 * 0.25 / 40000) = 0.0022: 5 sd
        assert abs(odd - 0.75) < 0.011
        assert v.min() >= 0.0 and v.max() <= 1.0
    assert np.array_equal(wav25.step_values(0.25, 100, 3), wav25.step_values(0.25, 100, 3))
    # a wrong density (equal steps) is caught by the same tolerance
    flat = np.random.default_rng(0).random(40_000)
    assert abs((np.floor(flat / 0.5) % 2 == 1).mean() - 0.75) > 0.011


def test_config_checks_the_added_parts():
    with pytest.raises(ValueError, match="fig5_methods"):
        wav25.Config(epsilons=(1.0,), repetitions=1, fig5_methods=("nope",))
    with pytest.raises(ValueError, match="large_datasets"):
        wav25.Config(epsilons=(1.0,), repetitions=1, large_datasets=("Beta(5,2)",))
    with pytest.raises(ValueError, match="fig5_hs"):
        wav25.Config(epsilons=(1.0,), repetitions=1, fig5_hs=(0.3,))
    assert wav25.FULL.fig5_hs == (1 / 2, 1 / 4, 1 / 8, 1 / 16)
    assert "SW-EM*" in wav25.FULL.large_methods and "Auto" in wav25.FULL.fig5_methods


@pytest.mark.slow  # three small grids end to end
def test_added_parts_write_records_figures_and_sections(tmp_path):
    cfg = wav25.Config(
        epsilons=(1.0,),
        repetitions=1,
        datasets=("salaries",),
        methods=("Wavelet", "SW-EM"),
        max_n=2000,
        n_queries=50,
        j_levels=(),
        fig5_hs=(1 / 2, 1 / 16),
        fig5_n=2000,
        fig5_epsilons=(1.0,),
        fig5_repetitions=2,
        fig5_methods=("Wavelet", "SW-EM", "SW-EM*", "Auto"),
        large_datasets=("weeks worked",),
        large_n=3000,
        large_epsilons=(1.0,),
        large_repetitions=1,
        large_methods=("Wavelet", "SW-EM", "HH"),
        stop_epsilons=(1.0,),
        stop_repetitions=2,
    )
    wav25.run(cfg, out=tmp_path, seed=0, jobs=1, console=Console(file=io.StringIO(), width=140))
    names = {p.name for p in tmp_path.iterdir()}
    for key in ("fig5", "large", "stop"):
        assert f"wav25-{key}.parquet" in names
        assert f"wav25-{key}-w1.png" in names and f"wav25-{key}-ks.png" in names
    fig5 = pd.read_parquet(tmp_path / "wav25-fig5.parquet")
    # 2 densities x 4 methods x 1 epsilon x 2 repetitions x 2 metrics
    assert len(fig5) == 2 * 4 * 1 * 2 * 2
    assert set(fig5["dataset"]) == {"eq. 92, h=1/2", "eq. 92, h=1/16"}
    large = pd.read_parquet(tmp_path / "wav25-large.parquet")
    assert set(large["dataset"]) == {"weeks worked n=3,000"}
    stop = pd.read_parquet(tmp_path / "wav25-stop.parquet")
    assert set(stop["method"]) == {"SW-EM", "SW-EM*"}
    md = (tmp_path / "wav25.md").read_text(encoding="utf-8")
    for heading in (
        "## Fig. 5: step densities",
        "## The large-n spiky regime",
        "## SW-EM under both stopping rules",
        "### W1 on eq. 92, h=1/16",
    ):
        assert heading in md
