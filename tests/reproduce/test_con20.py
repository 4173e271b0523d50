"""``ldpkit reproduce con20`` on a tiny grid; the verdict logic on constructed results."""

from __future__ import annotations

import io
import itertools

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from ldpkit.consistency import METHODS
from ldpkit.experiments import run_grid
from ldpkit.reproduce import con20, load

TINY = con20.Con20Config(
    epsilons=(1.0, 4.0),
    repetitions=2,
    zipf_n=5_000,
    domain=64,
    names_n=5_000,
    emoji=False,
    n_queries=20,
)


def quiet() -> Console:
    return Console(file=io.StringIO(), width=120)


@pytest.fixture(scope="module")
def data():
    return con20.datasets(TINY, seed=0)


def test_grid_records_cover_every_method_and_query(data):
    assert {k: (v.n, v.domain_size) for k, v in data.items()} == {
        "zipf": (5_000, 64),
        "babynames": (5_000, 64),
    }
    result = run_grid(con20.grid(TINY, data), seed=1, progress=False)
    frame = con20.tidy(result.records)
    assert set(frame["method"]) == {"base", *METHODS}
    assert set(frame["query"]) == set(con20.QUERIES)
    assert set(frame["oracle"]) == {"OLH", "GRR"}
    assert len(frame) == 2 * 2 * 2 * 2 * len(con20.LABELS) * len(con20.QUERIES)
    assert np.isfinite(frame["value"]).all() and (frame["value"] >= 0).all()
    key = ["dataset", "oracle", "epsilon", "repetition"]
    wide = frame.pivot_table(index=[*key, "query"], columns="method", values="value")
    # single values: Post-Pos clamps each answer at 0, i.e. exactly Base-Pos (CON20 IV-A)
    full = wide.xs("full", level="query")
    np.testing.assert_array_equal(full["post_pos"], full["base_pos"])
    # Norm and Norm-Sub are Euclidean projections onto convex sets holding the truth (the
    # hyperplane sum = 1, the simplex), so they never increase the full-domain error
    for method in ("norm", "norm_sub"):
        assert (full[method] <= full["base"] * (1 + 1e-12)).all(), method
    # same seed -> identical records; another seed -> different ones
    again = run_grid(con20.grid(TINY, data), seed=1, progress=False)
    pd.testing.assert_frame_equal(result.records, again.records)
    other = run_grid(con20.grid(TINY, data), seed=2, progress=False)
    assert not result.records["value"].equals(other.records["value"])


@pytest.mark.slow  # end-to-end run with figures
def test_run_writes_files_and_is_deterministic(tmp_path, monkeypatch):
    assert load("con20") is con20
    # one oracle keeps the figures (the slow part) few; the grid test covers both
    config = con20.Con20Config(**{**TINY.__dict__, "oracles": ("OLH",)})
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = con20.run(config, out=tmp_path / "a", seed=3, jobs=1, console=quiet())
    expected = {
        "con20_summary.md",
        "con20_OLH.parquet",
        "con20_OLH.md",
        *(f"con20_OLH_{panel}.{ext}" for panel in "ab" for ext in ("png", "pdf")),
    }
    assert {p.name for p in first.iterdir()} == expected
    # the second run skips the figures: same seed, same tables
    monkeypatch.setattr(con20, "plot_error_vs_epsilon", lambda *args, **kwargs: None)
    second = con20.run(config, out=tmp_path / "b", seed=3, jobs=1, console=quiet())
    a = pd.read_parquet(first / "con20_OLH.parquet")
    pd.testing.assert_frame_equal(a, pd.read_parquet(second / "con20_OLH.parquet"))
    assert set(a["method"]) == set(con20.LABELS.values())
    assert (first / "con20_OLH_a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = (first / "con20_summary.md").read_text()
    assert summary == (second / "con20_summary.md").read_text()
    for group in con20.GROUPS:
        assert f"| {group} |" in summary
    assert "Norm-Sub overall strong" in summary


def synthetic(best: dict[str, str], worst: dict[str, str], reps: int = 6) -> pd.DataFrame:
    """Results where ``best[query]`` wins every setting of ``query`` and ``worst`` loses."""
    rng = np.random.default_rng(0)
    rows = []
    for dataset, oracle, eps, query, rep in itertools.product(
        ("d1", "d2"), ("OLH",), (1.0, 2.0), con20.QUERIES, range(reps)
    ):
        for i, method in enumerate(con20.LABELS):
            value = 1.0 + 0.05 * i + 0.01 * rng.random()
            if method == best.get(query):
                value = 0.5 + 0.01 * rng.random()
            if method == worst.get(query):
                value = 10.0
            rows.append((dataset, oracle, method, query, eps, rep, value))
    return pd.DataFrame(
        rows, columns=["dataset", "oracle", "method", "query", "epsilon", "repetition", "value"]
    )


def test_verdicts_follow_the_data():
    agree = synthetic(
        best={
            "full": "base_cut",
            "set_10": "power_ns",
            "set_50": "power_ns",
            "set_90": "power_ns",
            "top_10": "norm",
            "top_32": "norm",
        },
        worst={},
    )
    found = con20.verdicts(agree)
    recs = found["recommendations"].set_index("query type")
    assert list(recs["verdict"]) == ["holds"] * 3
    assert recs.loc["single values", "winner"] == "base_cut"
    assert recs.loc["set values", "rec_wins"] == 2 * 2 * 3
    assert found["queries"].set_index("query").loc["top_32", "most_wins"] == "norm"

    # the opposite data: every recommended method is the worst everywhere, and Norm-Sub too
    disagree = synthetic(
        best={q: "norm_mul" for q in con20.QUERIES},
        worst={
            "full": "base_cut",
            "set_10": "power_ns",
            "set_50": "power_ns",
            "set_90": "power_ns",
            "top_10": "norm",
            "top_32": "norm",
        },
    )
    disagree.loc[disagree["method"] == "norm_sub", "value"] = 20.0
    found = con20.verdicts(disagree)
    assert list(found["recommendations"]["verdict"]) == ["does not hold"] * 3
    assert found["recommendations"]["rec_best_or_tied"].eq(0.0).all()
    assert found["norm_sub"]["verdict"] == "does not hold"
    assert found["norm_sub"]["rank"] == len(con20.LABELS)
    assert found["overall"].index[0] == "norm_mul"


def test_ties_are_paired_within_two_standard_errors():
    frame = synthetic(best={q: "norm" for q in con20.QUERIES}, worst={})
    # Base-Cut slightly worse on average than the winner, but by less than two standard
    # errors of the paired difference (mean 0.5e-3, standard error 0.67e-3) -> tied
    norm = frame["method"] == "norm"
    cut = frame["method"] == "base_cut"
    jitter = np.tile([2e-3, -1e-3], int(cut.sum()) // 2)
    frame.loc[cut, "value"] = frame.loc[norm, "value"].to_numpy() + jitter
    found = con20.verdicts(frame)
    single = found["recommendations"].set_index("query type").loc["single values"]
    assert single["winner"] == "norm"
    assert single["rec_best_or_tied"] == 1.0 and single["verdict"] == "holds"
    # a consistent gap, however small, is not a tie
    frame.loc[cut, "value"] = frame.loc[norm, "value"].to_numpy() + 1e-3
    single = con20.verdicts(frame)["recommendations"].set_index("query type").loc["single values"]
    assert single["rec_best_or_tied"] == 0.0 and single["verdict"] == "partly"
