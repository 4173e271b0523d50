"""Range-query metrics (STR21 App. F)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ldpkit.stream.errors import random_ranges, range_errors
from ldpkit.testing import chisquare_gof


def test_closed_forms() -> None:
    out = range_errors([10.0, 0.0], [8.0, 3.0], [0, 2], [4, 5])
    assert out == pytest.approx(
        {"mae": 2.5, "mse": 6.5, "mmae": (0.5 + 1.0) / 2, "mmse": (0.25 + 1.0) / 2}
    )
    with pytest.raises(ValueError, match="non-empty"):
        range_errors([1.0], [1.0], [3], [3])


def test_random_ranges_are_uniform_distinct_pairs() -> None:
    n = 5
    starts, stops = random_ranges(n, 60_000, rng=0)
    assert np.all(starts < stops) and starts.min() >= 0 and stops.max() <= n
    pairs = list(itertools.combinations(range(n + 1), 2))
    index = {p: k for k, p in enumerate(pairs)}
    counts = np.bincount(
        [index[p] for p in zip(starts.tolist(), stops.tolist())], minlength=len(pairs)
    )
    assert chisquare_gof(counts, np.full(len(pairs), 1 / len(pairs))) > 1e-6
    # and not the law of ranges with a fixed start
    skew = np.array([2.0 if p[0] == 0 else 1.0 for p in pairs])
    assert chisquare_gof(counts, skew / skew.sum()) < 1e-6
