"""``ldpkit reproduce sw20``: a tiny grid end to end, determinism, files, and the verdict."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from ldpkit import reproduce
from ldpkit.experiments.numeric import Bench, Moments, bench_truth
from ldpkit.numeric import Distribution
from ldpkit.reproduce import sw20
from ldpkit.reproduce.sw20 import DistributionMetric

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

TINY = sw20.Config(
    epsilons=(1.0, 4.0),
    repetitions=2,
    datasets=("Beta(5,2)",),
    methods=("SW-EMS", "CFO-16", "SR"),
    beta_n=2000,
    buckets=64,
    n_queries=50,
)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    # never touch ~/.cache/ldpkit
    monkeypatch.setenv("LDPKIT_CACHE", str(tmp_path_factory.mktemp("cache")))


def _run(out: Path, seed: int = 0) -> str:
    buffer = io.StringIO()
    out.mkdir(parents=True, exist_ok=True)
    path = sw20.run(TINY, out=out, seed=seed, jobs=1, console=Console(file=buffer, width=120))
    assert path == out
    return buffer.getvalue()


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LDPKIT_CACHE", str(tmp_path_factory.mktemp("cache-module")))
        out = tmp_path_factory.mktemp("sw20-a")
        text = _run(out)
    return out, text


@pytest.mark.slow  # end-to-end run with figures
def test_run_writes_tables_figures_and_records(first_run):
    out, text = first_run
    names = {p.name for p in out.iterdir()}
    figures = {
        f"sw20-{slug}.png"
        for slug in ("w1", "ks", "range-0.1", "range-0.4", "mean", "variance", "quantiles")
    }
    pdfs = {name.replace(".png", ".pdf") for name in figures}
    assert names == {"sw20.parquet", "sw20.md", "sw20-verdict.csv", *figures, *pdfs}
    for fig in figures:
        data = (out / fig).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000
        assert (out / fig.replace(".png", ".pdf")).read_bytes().startswith(b"%PDF")

    records = pd.read_parquet(out / "sw20.parquet")
    # (2 distribution methods x 7 metrics + SR's mean and variance) x 2 epsilons x 2 repetitions
    assert len(records) == (2 * 7 + 2) * 2 * 2
    # canonical order: method, then epsilon ascending, then repetition, then metric
    first = records[records["method"] == "SW-EMS"]
    assert list(first["epsilon"]) == [1.0] * 14 + [4.0] * 14
    assert list(first["metric"][:7]) == list(sw20.METRICS)
    assert records["value"].notna().all() and (records["value"] >= 0).all()
    assert set(records.loc[records["method"] == "SR", "metric"]) == {"mean", "variance"}

    md = (out / "sw20.md").read_text(encoding="utf-8")
    for heading in (
        "## Data",
        "## What SW20 reports",
        "## Verdict",
        "### W1 on Beta(5,2)",
        "### variance on Beta(5,2)",
        "## Time per run",
    ):
        assert heading in md
    assert "| Beta(5,2) | 2,000 | 64 |" in md
    # the console gets the W1 / KS tables and the computed verdict
    assert "W1 on Beta(5,2)" in text and "KS on Beta(5,2)" in text and "SW-EMS: wins" in text


@pytest.mark.slow  # two more runs of the tiny grid
def test_same_seed_same_records_other_seed_other_records(first_run, tmp_path):
    out, _ = first_run
    _run(tmp_path / "b")
    a = pd.read_parquet(out / "sw20.parquet")
    pd.testing.assert_frame_equal(a, pd.read_parquet(tmp_path / "b" / "sw20.parquet"))
    _run(tmp_path / "c", seed=1)
    c = pd.read_parquet(tmp_path / "c" / "sw20.parquet")
    assert not np.array_equal(a["value"].to_numpy(), c["value"].to_numpy())


def test_dispatch_finds_the_module():
    assert reproduce.load("sw20") is sw20
    assert set(sw20.QUICK.methods) == set(sw20.METHODS)
    assert sw20.FULL.epsilons[0] == 0.5 and sw20.FULL.epsilons[-1] == 4.0


def test_pilot_epsilon_is_a_middle_one():
    cfg = sw20.Config(epsilons=(4.0, 0.5, 1.0, 2.0), repetitions=1, beta_n=100)
    grid = sw20.build_grid(cfg, {"Beta(5,2)": sw20.load_bench("Beta(5,2)", cfg, 0)}, 0)
    assert grid.epsilons == (2.0, 0.5, 1.0, 4.0)


def test_config_rejects_unknown_names_and_defaults_to_all():
    with pytest.raises(ValueError, match=r"methods must be a subset of .*got \['Laplace'\]"):
        sw20.Config(epsilons=(1.0,), repetitions=1, methods=("SW-EMS", "Laplace"))
    with pytest.raises(ValueError, match="datasets must be a subset"):
        sw20.Config(epsilons=(1.0,), repetitions=1, datasets=("nope",))
    everything = sw20.Config(epsilons=(1.0,), repetitions=1)
    assert everything.datasets == tuple(sw20.DATASETS)
    assert everything.methods == tuple(sw20.METHODS)


def test_beta_bench_is_seeded_and_uses_sw20_buckets():
    cfg = sw20.Config(epsilons=(1.0,), repetitions=1, beta_n=500)
    a, b = sw20.load_bench("Beta(5,2)", cfg, 3), sw20.load_bench("Beta(5,2)", cfg, 3)
    assert a.buckets == 256 and a.n == 500
    np.testing.assert_array_equal(a.values, b.values)
    assert not np.array_equal(a.values, sw20.load_bench("Beta(5,2)", cfg, 4).values)


# ---- metrics -----------------------------------------------------------------------------------
def _bench(values, buckets=8):
    return Bench(np.asarray(values, dtype=float), buckets)


def test_metrics_are_zero_for_the_true_histogram_and_exact_otherwise():
    bench = _bench([0.05, 0.3, 0.3, 0.9], buckets=4)  # masses 1/4, 1/2, 0, 1/4
    truth = bench_truth(bench)
    assert truth.mean == pytest.approx(0.3875) and truth.variance == pytest.approx(
        np.var([0.05, 0.3, 0.3, 0.9])
    )
    metrics = sw20.make_metrics(seed=0, n_queries=200)
    for name in ("W1", "KS", "range 0.1", "range 0.4", "quantiles"):
        assert metrics[name](truth.histogram, truth) == 0.0
    # all mass moved from bucket 1 to bucket 2: the CDFs differ by 1/2 over one bucket
    shifted = Distribution([0.25, 0.0, 0.5, 0.25])
    assert metrics["W1"](shifted, truth) == pytest.approx(0.5 * 0.25)
    assert metrics["KS"](shifted, truth) == pytest.approx(0.5)
    # mean/variance against the raw values, exactly
    assert metrics["mean"](shifted, truth) == pytest.approx(abs(shifted.mean() - truth.mean))
    assert metrics["variance"](shifted, truth) == pytest.approx(abs(shifted.var() - truth.variance))


def test_moment_results_answer_only_mean_and_variance():
    truth = bench_truth(_bench([0.2, 0.4, 0.6]))
    metrics = sw20.make_metrics(seed=0)
    result = Moments(mean=0.5, variance=0.1)
    assert metrics["mean"](result, truth) == pytest.approx(0.1)
    assert metrics["variance"](result, truth) == pytest.approx(abs(0.1 - np.var([0.2, 0.4, 0.6])))
    assert math.isnan(metrics["W1"](result, truth)) and math.isnan(
        metrics["quantiles"](result, truth)
    )
    with pytest.raises(ValueError, match="kind must be one of"):
        DistributionMetric("kl")
    with pytest.raises(TypeError, match="result must be a Distribution or Moments"):
        metrics["W1"](np.zeros(3), truth)


def test_range_queries_are_the_same_in_every_cell():
    truth = bench_truth(_bench(np.linspace(0, 1, 101), buckets=16))
    est = Distribution(np.r_[np.full(8, 0.1), np.full(8, 0.025)])
    metric = sw20.make_metrics(seed=5, n_queries=100)["range 0.1"]
    assert metric(est, truth) == metric(est, truth)
    assert metric(est, truth) != sw20.make_metrics(seed=6, n_queries=100)["range 0.1"](est, truth)


@pytest.mark.slow  # an end-to-end run through the command's dispatcher
def test_quick_flag_dispatches_to_the_quick_configuration(monkeypatch, tmp_path):
    tiny = sw20.Config(
        epsilons=(2.0,),
        repetitions=2,
        datasets=("Beta(5,2)",),
        methods=("SW-EMS", "SR"),
        beta_n=500,
    )
    monkeypatch.setattr(sw20, "QUICK", tiny)
    buffer = io.StringIO()
    out = reproduce.run("sw20", quick=True, out=tmp_path / "q", console=Console(file=buffer))
    records = pd.read_parquet(out / "sw20.parquet")
    assert set(records["method"]) == {"SW-EMS", "SR"} and set(records["epsilon"]) == {2.0}
    assert "Grid: quick" in (out / "sw20.md").read_text(encoding="utf-8")
