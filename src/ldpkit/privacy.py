"""Exact privacy accounting from output probabilities, and budget splitting."""

from __future__ import annotations

import math

import numpy as np

from ._validation import check_epsilon, check_integer

__all__ = ["privacy_loss", "ratio_privacy_loss", "split_budget"]


def privacy_loss(matrix: np.ndarray) -> float:
    """The exact epsilon of a discrete mechanism from its transition matrix.

    Parameters
    ----------
    matrix : array, shape (n_inputs, n_outputs)
        ``matrix[v, y] = P[output = y | input = v]``; rows must sum to 1.

    Returns
    -------
    float
        ``max_y log(max_v P[y|v] / min_v P[y|v])`` over outputs with positive probability
        under some input; ``inf`` when an output is possible under one input and impossible
        under another.
    """
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] < 2:
        raise ValueError(f"matrix must be 2-D with at least 2 rows, got shape {m.shape}")
    if np.any(m < 0) or not np.allclose(m.sum(axis=1), 1.0, atol=1e-9):
        raise ValueError("matrix must have non-negative rows that each sum to 1")
    hi = m.max(axis=0)
    lo = m.min(axis=0)
    used = hi > 0
    if np.any(lo[used] == 0):
        return math.inf
    return float(np.max(np.log(hi[used]) - np.log(lo[used])))


def ratio_privacy_loss(largest: float, smallest: float) -> float:
    """log(largest / smallest) for one output's extreme probabilities (inf if smallest = 0)."""
    if smallest <= 0:
        return math.inf
    return math.log(largest) - math.log(smallest)


def split_budget(epsilon: float, parts: int | list[float]) -> list[float]:
    """Split a budget for sequential composition: evenly into ``parts`` or by weights."""
    epsilon = check_epsilon(epsilon)
    if isinstance(parts, int):
        parts = check_integer(parts, "parts", low=1)
        return [epsilon / parts] * parts
    weights = np.asarray(parts, dtype=np.float64)
    if (
        weights.ndim != 1
        or weights.size == 0
        or np.any(~np.isfinite(weights))
        or np.any(weights <= 0)
    ):
        raise ValueError(f"parts must be a positive int or positive finite weights, got {parts!r}")
    return list(epsilon * weights / weights.sum())
