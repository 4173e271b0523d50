"""The exact epsilon of a discrete mechanism from its transition matrix.

Below the mechanisms (it imports only numpy and ``_validation``): the frequency and numeric
specs compute ``privacy_loss()`` with it, while :mod:`ldpkit.privacy` (which re-exports it as
:func:`ldpkit.privacy.privacy_loss`) also holds the attack on longitudinal mechanisms, which
imports them; importing it from here keeps that out of an import circle.
"""

from __future__ import annotations

import math

import numpy as np

from ._validation import check_array

__all__ = ["privacy_loss"]


def privacy_loss(matrix: np.ndarray) -> float:
    """Return the exact epsilon of a discrete mechanism from its transition matrix.

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
    m = check_array(matrix, "matrix", ndim=2, low=0.0, high=1.0)
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
