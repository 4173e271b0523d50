"""Plots and saved results: PNG, Parquet and Markdown."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ldpkit import GRR
from ldpkit.datasets import zipf
from ldpkit.experiments import Grid, MechanismMethod, frequency_mse, run_grid, save_results
from ldpkit.experiments.plots import plot_error_vs_epsilon
from ldpkit.experiments.results import markdown_table

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def exact(data, epsilon, rng):
    return data.frequencies


def biased(data, epsilon, rng):
    return data.frequencies + 0.01 / epsilon + rng.normal(0, 1e-4, size=data.domain_size)


@pytest.fixture(scope="module")
def result():
    grid = Grid(
        methods={"GRR": MechanismMethod(GRR), "biased": biased},
        epsilons=[0.5, 1.0, 2.0, 4.0],
        datasets={
            "zipf": zipf(s=1.1, d=16, n=5000, rng=0),
            "flat": zipf(s=0.0, d=16, n=5000, rng=1),
        },
        metrics={"mse": frequency_mse},
        repetitions=4,
    )
    return run_grid(grid, seed=0, progress=False)


def test_plot_panels_and_png(result, tmp_path):
    path = tmp_path / "fig" / "mse.png"
    fig = plot_error_vs_epsilon(result, path=path, title="GRR on Zipf")
    axes = fig.get_axes()
    assert len(axes) == 2  # one panel per data set
    assert [ax.get_title() for ax in axes] == ["zipf", "flat"]
    assert axes[0].get_yscale() == "log" and axes[0].get_xscale() == "linear"
    # one legend for the figure, beside the panels (never on the data)
    assert axes[0].get_legend() is None and len(fig.legends) == 1
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["GRR", "biased"]
    right = max(ax.get_position().x1 for ax in axes)
    legend_box = fig.legends[0].get_window_extent(fig.canvas.get_renderer())
    assert legend_box.x0 >= right * fig.bbox.width
    # methods differ in colour, marker and line style; the axes say what they show
    lines = [c.lines[0] for c in axes[0].containers]
    assert len({(ln.get_color(), ln.get_marker(), ln.get_linestyle()) for ln in lines}) == 2
    assert (
        len({ln.get_marker() for ln in lines}) == 2
        and len({ln.get_linestyle() for ln in lines}) == 2
    )
    assert axes[0].get_xlabel() == "privacy budget ε"
    assert axes[0].get_ylabel() == "mean squared error (MSE)"
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000
    assert path.with_suffix(".pdf").read_bytes().startswith(b"%PDF")


def test_reference_values_are_overlaid(result):
    reference = pd.DataFrame(
        {
            "dataset": "zipf",
            "metric": "mse",
            "method": "GRR",
            "epsilon": [0.5, 1.0, 2.0, 4.0],
            "value": [1e-3, 5e-4, 2e-4, 1e-4],
            "source": "analytical",
        }
    )
    fig = plot_error_vs_epsilon(result, reference=reference)
    zipf, flat = fig.get_axes()
    dotted = [ln for ln in zipf.get_lines() if ln.get_linestyle() == ":"]
    assert len(dotted) == 1 and list(dotted[0].get_ydata()) == [1e-3, 5e-4, 2e-4, 1e-4]
    assert not [ln for ln in flat.get_lines() if ln.get_linestyle() == ":"]
    assert "analytical (dotted)" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_plot_falls_back_to_linear_axis_for_zero_errors(tmp_path):
    records = pd.DataFrame(
        {
            "dataset": "d",
            "method": "exact",
            "epsilon": [0.1, 0.1, 10.0, 10.0],
            "repetition": [0, 1, 0, 1],
            "metric": "mse",
            "value": 0.0,
        }
    )
    fig = plot_error_vs_epsilon(records)
    ax = fig.get_axes()[0]
    assert ax.get_yscale() == "linear" and ax.get_xscale() == "log"  # eps spans 100x
    # the epsilons run label the axis (no crowded log-scale minor labels)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.1", "10"]
    assert all(not t.get_text() for t in ax.get_xticklabels(minor=True))
    with pytest.raises(ValueError, match="metric must be one of"):
        plot_error_vs_epsilon(records, metric="kl")


def test_save_results_round_trip(result, tmp_path):
    paths = save_results(result, tmp_path / "out", "grr_zipf")
    assert set(paths) == {"parquet", "markdown", "png", "pdf"}
    back = pd.read_parquet(paths["parquet"])
    pd.testing.assert_frame_equal(back, result.records, check_dtype=False)
    text = paths["markdown"].read_text(encoding="utf-8")
    assert text.startswith("# grr_zipf")
    assert "### mse on zipf" in text and "| method | ε=0.5 | ε=1 | ε=2 | ε=4 |" in text
    assert paths["png"].read_bytes().startswith(PNG_MAGIC)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "grr_zipf.md",
        "grr_zipf.parquet",
        "grr_zipf.pdf",
        "grr_zipf.png",
    ]
    with pytest.raises(ValueError, match="file stem"):
        save_results(result, tmp_path, "a/b")


def test_markdown_values_are_the_summary(result):
    text = markdown_table(result.records)
    s = result.summary
    row = s[(s.dataset == "flat") & (s.method == "GRR") & (s.epsilon == 1.0)].iloc[0]
    assert f"{row['mean']:.3g} ± {row['sem']:.2g}" in text
    assert np.isfinite(s["sem"]).all()
