"""Exact discrete laws for the numerical mechanisms: integer weights, integer sampling.

Why: a report computed in floating point (``v - b + U / p``) has a support that
depends on v at the level of the last bits, so an observer can rule inputs out with
certainty (Mironov 2012's attack on floating-point Laplace). The numerical mechanisms
therefore report a *cell* of a finite grid, drawn from a law whose probabilities are
ratios of integers:

* every cell has the base weight ``w_low``; a "bump" of extra weight, shaped by the
  mechanism and shifted by the user's grid input ``k``, is added on top;
* the total ``T = n_cells * w_low + sum(bump)`` is below 2^62, and one uniform integer
  ``U`` in ``[0, T)`` (numpy's ``Generator.integers``, which is exactly uniform: Lemire's
  rejection method) picks the cell: ``U < n_cells * w_low`` gives cell ``U // w_low``,
  otherwise the bump's cumulative weights locate it.

So ``P[cell | k] = (w_low + bump[cell - k]) / T`` exactly, every cell has probability at
least ``w_low / T`` under every input and at most ``w_high / T``, and the loss is exactly
``log(w_high / w_low)``, which :func:`ratio_weights` makes ``<= epsilon``.

Inputs reach the grid by unbiased randomized rounding (:func:`round_to_grid`). That step
may use floating point freely: for each grid input the output law is within the ratio
bound, and a mixture over grid inputs (with any weights) stays within it.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from . import _crmath

__all__ = [
    "TOTAL_LIMIT",
    "ratio_weights",
    "ratio_loss",
    "round_to_grid",
    "sample_bump",
    "sample_flat_bump",
    "bump_law",
    "rr_weights",
    "rr_probabilities",
    "coin",
    "RR_MAX_EPSILON",
]

#: Upper bound of the integer total T (so that every partial sum fits in int64).
TOTAL_LIMIT = 1 << 62


def ratio_weights(epsilon: float, n_low: int, n_high: float) -> tuple[int, int]:
    """Integers ``(w_low, w_high)`` with ``w_high / w_low <= e^epsilon``, as close as can be.

    ``w_low`` is as large as keeps ``n_low w_low + n_high w_high <= 2^62`` (``n_low``
    cells at the base weight, ``n_high`` cells' worth at the top weight), so that
    ``log(w_high / w_low)`` falls short of epsilon by at most ``1 / w_high`` relative.

    Raises
    ------
    ValueError
        When even ``w_low = 1`` overflows the total (epsilon too large for the grid).
    """
    growth = _crmath.exp(epsilon)  # correctly rounded: the same law on every platform
    w_low = math.floor(TOTAL_LIMIT / (n_low + n_high * growth) * (1.0 - 1e-12))
    if w_low < 1:
        limit = math.log(max(TOTAL_LIMIT - n_low, 1) / n_high) if n_high > 0 else math.inf
        raise ValueError(
            f"epsilon must be <= {limit:.4g} for this configuration (its integer law's "
            f"total must stay below 2^62), got {epsilon!r}"
        )
    w_high = math.floor(w_low * growth)
    # The float product may round up past e^eps w_low: step down until the exact ratio
    # (log1p of an exact rational, correctly rounded) is within epsilon.
    while w_high > w_low and _crmath.log1p((w_high - w_low) / w_low) > epsilon:
        w_high -= max(1, w_high >> 50)
    return w_low, w_high


def ratio_loss(w_low: int, w_high: int) -> float:
    """``log(w_high / w_low)`` from the exact integers (no cancellation at tiny epsilon)."""
    return _crmath.log1p((w_high - w_low) / w_low)


def round_to_grid(x: np.ndarray, steps: int, gen: np.random.Generator) -> np.ndarray:
    """Unbiased randomized rounding of ``x`` in [0, 1] to the grid ``k / steps``.

    Returns int64 ``k`` in ``[0, steps]`` with ``E[k] = x steps``.
    """
    scaled = np.clip(x, 0.0, 1.0) * steps
    low = np.floor(scaled)
    k = low.astype(np.int64)
    k += gen.random(x.shape[0]) < (scaled - low)
    np.minimum(k, steps, out=k)
    return k


def sample_bump(
    start: np.ndarray,
    n_cells: int,
    w_low: int,
    bump_cumulative: np.ndarray,
    gen: np.random.Generator,
) -> np.ndarray:
    """Draw one cell per user from ``P[c | k] = (w_low + bump[c - k]) / T``.

    Parameters
    ----------
    start : int64 array
        Each user's shift k: the bump covers cells ``k .. k + len(bump) - 1``, which must
        lie in ``[0, n_cells)``.
    n_cells : int
        Number of cells of the grid.
    w_low : int
        Base weight of every cell.
    bump_cumulative : int64 array
        ``[0, bump[0], bump[0] + bump[1], ...]`` (length ``len(bump) + 1``), non-decreasing.
    gen : Generator

    Returns
    -------
    int64 array of cells in ``[0, n_cells)``.
    """
    base = n_cells * w_low
    total = base + int(bump_cumulative[-1])
    if total > TOTAL_LIMIT:
        raise ValueError("the grid law's integer total must be <= 2^62")
    u = np.asarray(gen.integers(0, total, size=start.shape[0], dtype=np.int64))
    in_base = u < base
    cells: np.ndarray = u // w_low
    extra = ~in_base
    if extra.any():
        offset = np.searchsorted(bump_cumulative[1:], u[extra] - base, side="right")
        cells[extra] = start[extra] + offset
    return cells


def sample_flat_bump(
    start: np.ndarray,
    n_cells: int,
    w_low: int,
    extra: int,
    width: int,
    gen: np.random.Generator,
) -> np.ndarray:
    """:func:`sample_bump` for a flat bump of ``width`` cells of extra weight ``extra``."""
    base = n_cells * w_low
    total = base + width * extra
    if total > TOTAL_LIMIT:
        raise ValueError("the grid law's integer total must be <= 2^62")
    u = np.asarray(gen.integers(0, total, size=start.shape[0], dtype=np.int64))
    in_bump = u >= base
    cells: np.ndarray = u // w_low
    if extra > 0:
        cells[in_bump] = start[in_bump] + (u[in_bump] - base) // extra
    return cells


def bump_law(
    start: int, n_cells: int, w_low: int, bump: np.ndarray, total: int | None = None
) -> np.ndarray:
    """Return the exact law of :func:`sample_bump` for one shift, as float64 probabilities."""
    weights = np.full(n_cells, w_low, dtype=object)
    for i, extra in enumerate(bump.tolist()):
        weights[start + i] += int(extra)
    total = int(weights.sum()) if total is None else total
    return np.array([int(w) / total for w in weights], dtype=np.float64)


#: Largest epsilon of the randomized-response coins (:func:`rr_weights`): the favoured
#: output's weight ``~ e^eps`` plus up to 2^32 unit weights must stay below 2^62
#: (``e^40 = 2.4e17 < 2^62 - 2^32``); a ClassVar ``max_epsilon`` of the categorical oracles.
RR_MAX_EPSILON = 40.0


@functools.lru_cache(maxsize=1024)
def rr_weights(epsilon: float, n_others: int, n_favoured: int = 1) -> tuple[int, int]:
    """Integer weights ``(w_keep, w_other)`` of randomized response, ratio ``<= e^eps``.

    ``n_favoured`` outputs of weight ``w_keep`` (the true one(s)) and ``n_others`` of
    weight ``w_other``; the total ``n_favoured w_keep + n_others w_other`` is at most 2^62,
    so one exact uniform integer below it (:func:`coin`) realizes the law exactly, and
    ``log(w_keep / w_other)`` (:func:`ratio_loss`) is the exact privacy loss, short of
    epsilon by at most ``1 / w_keep`` relative (below 1e-15 inside ``RR_MAX_EPSILON``).
    """
    w_other, w_keep = ratio_weights(epsilon, int(n_others), float(n_favoured))
    return w_keep, w_other


def rr_probabilities(epsilon: float, n_others: int, n_favoured: int = 1) -> tuple[float, float]:
    """``(P[one favoured output], P[one other output])`` of :func:`rr_weights`' law."""
    w_keep, w_other = rr_weights(epsilon, n_others, n_favoured)
    total = n_favoured * w_keep + n_others * w_other
    return w_keep / total, w_other / total


def coin(gen: np.random.Generator, n: int, heads: int, total: int) -> np.ndarray:
    """``n`` independent booleans, each True with probability exactly ``heads / total``.

    One uniform integer in ``[0, total)`` per coin (numpy's bounded integers are exactly
    uniform: Lemire's rejection method), compared with ``heads``; ``total <= 2^62``.
    Unlike ``random() < p``, whose probability is a multiple of 2^-53 near p (so a coin
    of probability below 2^-53 never lands, and the realized p is not the one accounted).
    """
    if not 0 <= heads <= total <= TOTAL_LIMIT or total < 1:
        raise ValueError(
            f"heads and total must satisfy 0 <= heads <= total <= 2^62, got {heads}, {total}"
        )
    return np.asarray(gen.integers(0, total, size=n, dtype=np.int64)) < heads
