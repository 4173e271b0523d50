"""compare_methods: one comparison, one ratio convention (error / best competitor's)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ldpkit.experiments import compare_methods, comparison_markdown

COLUMNS = ["dataset", "method", "epsilon", "repetition", "metric", "value"]


def _records(rows):
    out = []
    for method, metric, eps, values in rows:
        for rep, v in enumerate(values):
            out.append(("d", method, eps, rep, metric, v))
    return pd.DataFrame(out, columns=COLUMNS)


def test_win_tie_loss_and_the_ratio_convention():
    records = _records(
        [
            ("W", "m", 1.0, [1.0, 1.1]),  # 1.05 vs 2.05: win
            ("A", "m", 1.0, [2.0, 2.1]),
            ("B", "m", 1.0, [3.0, 3.0]),
            ("W", "m", 2.0, [1.0, 1.4]),  # 1.2 +- 0.2 vs 1.3 +- 0.1: lower, but a tie
            ("A", "m", 2.0, [1.2, 1.4]),
            ("W", "m", 4.0, [5.0, 5.1]),  # loss
            ("A", "m", 4.0, [1.0, 1.1]),
            ("SR", "m", 4.0, [math.nan, math.nan]),  # a method without the metric is ignored
        ]
    )
    cells = compare_methods(records, "W", ["A", "B", "SR"])
    assert list(cells["outcome"]) == ["win", "tie", "loss"]
    assert list(cells["best"]) == ["A", "A", "A"]
    # one convention: the method's error / the best competitor's (< 1: the method is better)
    assert cells["ratio"].iloc[0] == pytest.approx(1.05 / 2.05)
    assert cells["ratio"].iloc[2] == pytest.approx(5.05 / 1.05)
    assert list(cells["lowest"]) == [True, True, False]
    assert cells["gap_se"].iloc[0] == pytest.approx(math.hypot(0.05, 0.05))
    # against everybody by default; a narrower tie band turns the tie into a win
    pd.testing.assert_frame_equal(cells, compare_methods(records, "W"))
    assert compare_methods(records, "W", z=0.01)["outcome"].iloc[1] == "win"
    text = comparison_markdown(cells, "W")
    assert "| d | m | 1 (×0.51) | 2 | 4 (A, ×4.81) |" in text
    assert "W: wins 1, ties 1, loses 1 of 3" in text and "lowest mean error in 2" in text


def test_paired_standard_error_uses_per_repetition_differences():
    # B is A plus a constant 0.1 in every repetition: unpaired the spread hides the gap,
    # paired it is exact
    a = [1.0, 3.0, 5.0, 7.0]
    records = _records([("A", "m", 1.0, a), ("B", "m", 1.0, [x + 0.1 for x in a])])
    unpaired = compare_methods(records, "A")
    paired = compare_methods(records, "A", paired=True)
    assert unpaired["outcome"].iloc[0] == "tie"
    assert paired["outcome"].iloc[0] == "win" and paired["gap_se"].iloc[0] == pytest.approx(0.0)


def test_settings_are_any_columns_and_missing_sides_are_skipped():
    frame = pd.DataFrame(
        {
            "dataset": "d",
            "oracle": ["OLH"] * 4 + ["GRR"] * 2,
            "query": "full",
            "epsilon": 1.0,
            "repetition": [0, 1, 0, 1, 0, 1],
            "method": ["x", "x", "y", "y", "x", "x"],
            "value": [1.0, 1.0, 2.0, 2.0, 1.0, 1.0],
        }
    )
    cells = compare_methods(frame, "x", by=["dataset", "oracle", "epsilon", "query"])
    assert list(cells["oracle"]) == ["OLH"]  # GRR has no competitor
    assert cells["outcome"].iloc[0] == "win" and np.isclose(cells["ratio"].iloc[0], 0.5)
