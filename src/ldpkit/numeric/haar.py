"""The Haar transform of the numeric family, in its two conventions (one home for both).

* On a binary tree of ``2^h`` leaves (counts or masses): :func:`haar_transform` and
  :func:`inverse_haar_transform`, the orthonormal transform whose detail coefficient of a
  node at depth t is ``(C_left - C_right) / 2^((h - t)/2)`` (SW20 section 4.2;
  :class:`~ldpkit.numeric.HaarHRR` estimates these coefficients).
* On the density of values in [0, 1]: ``f = 1 + sum_jk a_jk psi_jk`` with the Haar wavelets
  ``psi_jk`` of levels j = 0..J (WAV25 sections 4-5): :func:`haar_encode` (a value's level-j
  cell and sign), :func:`haar_coefficients` (the exact coefficients of a sample) and
  :func:`haar_reconstruct` (the density, clipped level by level;
  :class:`~ldpkit.numeric.HaarWavelet` estimates these coefficients).

They are the same transform: for bucket masses ``x`` of ``2^(J+1)`` leaves summing to 1,
the density coefficient of the node at depth j is ``a_jk = 2^((J+1)/2) c_jk``, with
``c_jk`` the tree's detail coefficient.

Examples
--------
>>> x = np.array([0.4, 0.2, 0.3, 0.1])  # masses of 4 = 2^(J+1) buckets, J = 1
>>> _, tree = haar_transform(x)
>>> density = haar_reconstruct([2.0 * c for c in tree], clip=False)  # 2^((J+1)/2) = 2
>>> np.round(density / 4, 12).tolist()  # the bucket masses again
[0.4, 0.2, 0.3, 0.1]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._validation import check_array, check_integer, check_numeric_values, check_real
from .distribution import check_bounds

__all__ = [
    "MAX_LEVEL",
    "haar_transform",
    "inverse_haar_transform",
    "default_max_level",
    "haar_encode",
    "haar_coefficients",
    "haar_reconstruct",
]

#: Largest Haar level J: a report at level J carries two bitmaps of 2^J bits (2 x 128 KiB).
MAX_LEVEL = 20


# --------------------------------------------------------------------------------------------
# On a binary tree of 2^h leaves (SW20 section 4.2)
# --------------------------------------------------------------------------------------------
def haar_transform(leaves: Any) -> tuple[float, list[np.ndarray]]:
    """Orthonormal Haar transform of a vector of ``2^h`` leaves, on the binary tree.

    Returns the scaling coefficient ``sum(x) / 2^(h/2)`` and the detail coefficients by
    depth, coarse first: ``details[t]`` (``2^t`` entries) holds, for each node a at depth t
    (height ``h - t``), ``c_a = (C_left - C_right) / 2^((h - t)/2)`` with ``C`` the sums of
    the leaves under a's two children (SW20 section 4.2). The transform is orthonormal:
    ``sum x^2 = scaling^2 + sum c^2``.

    Examples
    --------
    >>> s, d = haar_transform([4.0, 2.0, 1.0, 1.0])
    >>> s, [np.round(c, 4).tolist() for c in d]
    (4.0, [[2.0], [1.4142, 0.0]])
    """
    x = check_array(leaves, "leaves")
    size = x.size
    if x.ndim != 1 or size < 1 or size & (size - 1):
        raise ValueError(f"leaves must be a 1-D array of power-of-two length, got shape {x.shape}")
    h = size.bit_length() - 1
    details: list[np.ndarray] = [np.empty(0)] * h
    sums = x
    for t in range(h - 1, -1, -1):  # from the nodes just above the leaves to the root
        pairs = sums.reshape(-1, 2)
        details[t] = (pairs[:, 0] - pairs[:, 1]) / 2.0 ** ((h - t) / 2.0)
        sums = pairs.sum(axis=1)
    return float(sums[0]) / 2.0 ** (h / 2.0), details


def inverse_haar_transform(scaling: float, details: Sequence[Any]) -> np.ndarray:
    """Inverse of :func:`haar_transform`: the ``2^h`` leaves from the coefficients.

    Top-down: a node with total T and child difference ``D = c 2^((h - t)/2)`` has children
    ``(T + D) / 2`` and ``(T - D) / 2``.

    Examples
    --------
    >>> inverse_haar_transform(*haar_transform([4.0, 2.0, 1.0, 1.0])).tolist()
    [4.0, 2.0, 1.0, 1.0]
    """
    scaling = check_real(scaling, "scaling")
    if isinstance(details, (str, bytes)) or not isinstance(details, Sequence):
        raise TypeError(f"details must be a list of arrays (one per level), got {details!r:.60}")
    h = len(details)
    if h > 40:  # 2**h leaves
        raise ValueError(f"details must hold at most 40 levels, got {h}")
    totals = np.array([scaling * 2.0 ** (h / 2.0)])
    for t in range(h):
        c = check_array(details[t], f"details[{t}]")
        if c.shape != (1 << t,):
            raise ValueError(f"details[{t}] must have shape ({1 << t},), got {c.shape}")
        diff = c * 2.0 ** ((h - t) / 2.0)
        totals = np.stack(((totals + diff) / 2.0, (totals - diff) / 2.0), axis=1).ravel()
    if not np.all(np.isfinite(totals)):  # e.g. scaling 1e308: the leaves overflow
        raise ValueError("scaling and details must be small enough that the leaves are finite")
    return totals


# --------------------------------------------------------------------------------------------
# On the density of values in [0, 1] (WAV25 sections 4-5)
# --------------------------------------------------------------------------------------------
def default_max_level(n: int) -> int:
    """WAV25 section 5.4: ``J = ceil(log2(n) / 2)`` (at least 0, at most :data:`MAX_LEVEL`).

    Examples
    --------
    >>> default_max_level(100_000), default_max_level(1_000_000)
    (9, 10)
    """
    n = check_integer(n, "n", low=1)
    return min(MAX_LEVEL, max(0, math.ceil(math.log2(n) / 2.0)))


def haar_encode(u: Any, level: int) -> tuple[np.ndarray, np.ndarray]:
    """WAV25 eq. 39 for values u in [0, 1]: the level-j cell ``k = floor(2^j u)`` and the sign.

    Returns ``(k, negative)``: ``negative`` is True in the right half of the cell (where
    ``psi_jk = -2^(j/2)``). u = 1 belongs to the last cell's right half, as ``psi``
    (eq. 11) puts 1 there.
    """
    level = check_integer(level, "level", low=0, high=MAX_LEVEL)
    u = np.asarray(u, dtype=np.float64)
    half = np.minimum((u * 2.0 ** (level + 1)).astype(np.int64), 2 ** (level + 1) - 1)
    return half >> 1, (half & 1).astype(bool)


def haar_coefficients(
    values: Any, max_level: int, low: float = 0.0, high: float = 1.0
) -> list[np.ndarray]:
    """Return the exact (non-private) coefficients ``a*_jk = mean_i psi_jk(X_i)`` (eq. 37).

    Returns one array per level j = 0..max_level (length 2^j), for values mapped from
    [low, high] to [0, 1]. With them :func:`haar_reconstruct` returns the histogram of the
    values on 2^(J+1) equal buckets exactly (Lemma 1).
    """
    max_level = check_integer(max_level, "max_level", low=0, high=MAX_LEVEL)
    lo, hi = check_bounds(low, high)
    v = check_numeric_values(values, lo, hi, "values")
    if v.size == 0:
        raise ValueError("values must hold at least one value, got an empty array")
    u = (v - lo) / (hi - lo)
    out = []
    for j in range(max_level + 1):
        k, neg = haar_encode(u, j)
        sums = np.bincount(k, weights=np.where(neg, -1.0, 1.0), minlength=2**j)
        out.append(2.0 ** (j / 2.0) * sums / v.size)
    return out


def haar_reconstruct(coefficients: Any, *, clip: bool = True) -> np.ndarray:
    """Density ``f_J = 1 + sum_jk a_jk psi_jk`` on the 2^(J+1) cells of [0, 1] (eq. 67).

    Parameters
    ----------
    coefficients : sequence of arrays
        ``a_j`` of length 2^j for j = 0..J.
    clip : bool
        Clip level by level so that the density stays non-negative (WAV25 section 4.7 as
        METHODS.md reads it): at level j, ``|a_jk|`` is bounded by ``2^(-j/2)`` times the
        density that levels < j give psi_jk's own cell (a single value: that density is
        constant on level-j cells). Both halves of the cell then stay >= 0 and the cell's
        mass is unchanged. (Eq. 69 literally takes the minimum over this cell and the next,
        which wipes out spikes; a final projection onto the simplex ruins W1.)

    Returns
    -------
    ndarray, shape (2^(J+1),)
        Density values (mean exactly 1 up to rounding: every level keeps each cell's
        mass); multiply by 2^-(J+1) for bucket masses.
    """
    coefs = [np.asarray(a, dtype=np.float64) for a in coefficients]
    if not coefs:
        raise ValueError("coefficients must hold at least level 0")
    density = np.ones(1)
    for j, a in enumerate(coefs):
        if a.shape != (2**j,):
            raise ValueError(f"coefficients[{j}] must have shape ({2**j},), got {a.shape}")
        # a_jk psi_jk adds +-a_jk 2^(j/2) to the two halves of cell k.
        b = a * 2.0 ** (j / 2.0)
        if clip:
            b = np.clip(b, -density, density)
        nxt = np.empty(2 ** (j + 1))
        nxt[0::2] = density + b
        nxt[1::2] = density - b
        density = nxt
    return density
