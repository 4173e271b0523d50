"""Range-query error metrics of STR21 Appendix F: MAE, MSE, MMAE, MMSE over random ranges.

A query is a range ``[i, j)`` of released positions with two uniform endpoints (sorted,
``i < j``); STR21 uses ``|Q| = 200`` of them. Errors are measured against the
**unclipped** truth, so the clipping bias of a threshold counts. MMAE and MMSE divide both
answer and truth by ``j - i`` (errors of range *means*).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import MAX_ENTRIES, check_array, check_integer

__all__ = ["random_ranges", "range_errors", "evaluate_ranges", "METRICS"]

METRICS = ("mae", "mse", "mmae", "mmse")


def random_ranges(
    length: int, count: int = 200, *, rng: RNGLike = None
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` ranges ``[i, j)`` with ``0 <= i < j <= length``: two distinct uniform endpoints, sorted.

    Examples
    --------
    >>> starts, stops = random_ranges(10, 3, rng=0)
    >>> bool(np.all(starts < stops)) and bool(np.all(stops <= 10))
    True
    """
    n = check_integer(length, "length", low=1, high=2**62)
    q = check_integer(count, "count", low=1, high=MAX_ENTRIES)
    gen = as_generator(rng)
    # a uniform unordered pair of distinct points of {0, ..., n}: draw a, then b != a
    a = gen.integers(0, n + 1, size=q)
    b = gen.integers(0, n, size=q)
    b = b + (b >= a)
    return np.minimum(a, b), np.maximum(a, b)


def range_errors(estimates: Any, truths: Any, starts: Any, stops: Any) -> dict[str, float]:
    """MAE, MSE, MMAE and MMSE of range-sum ``estimates`` against ``truths`` (STR21 App. F)."""
    # bounded: squared errors of magnitudes up to MAX_MAGNITUDE cannot overflow
    est = check_array(estimates, "estimates", nonempty=True, bounded=True)
    size = est.size
    tru = check_array(truths, "truths", size=size, bounded=True)
    lo = check_array(starts, "starts", integer=True, low=0, size=size)
    hi = check_array(stops, "stops", integer=True, low=0, size=size)
    width = (hi - lo).astype(np.float64)
    if np.any(width <= 0):
        k = int(np.flatnonzero(width <= 0)[0])
        raise ValueError(
            f"stops must be > starts (non-empty ranges for MMAE and MMSE), got the range "
            f"[{int(lo[k])}, {int(hi[k])})"
        )
    err = est - tru
    merr = err / width
    return {
        "mae": float(np.mean(np.abs(err))),
        "mse": float(np.mean(err**2)),
        "mmae": float(np.mean(np.abs(merr))),
        "mmse": float(np.mean(merr**2)),
    }


def evaluate_ranges(
    release: Any,
    values: Any,
    *,
    count: int = 200,
    ranges: tuple[Any, Any] | None = None,
    rng: RNGLike = None,
) -> dict[str, float]:
    """Errors of a stream estimator's range sums against the unclipped released values.

    Parameters
    ----------
    release : StreamRelease
        Any estimator with ``n_released`` and ``range_sums(starts, stops, std_error=False)``.
    values : array_like
        The **unclipped** released values, i.e. the stream after its first
        ``threshold_size`` items (``values[t]`` is released position ``t``).
    count : int
        Number of random ranges when ``ranges`` is not given (STR21: 200).
    ranges : (starts, stops), optional
        Fixed queries (to compare several estimators on the same ranges).
    """
    v = check_array(values, "values", ndim=(0, 1, 2), bounded=True).reshape(-1)
    if not (hasattr(release, "n_released") and hasattr(release, "range_sums")):
        raise TypeError(
            f"release must be a stream estimator (n_released, range_sums), "
            f"got {type(release).__name__}"
        )
    n = int(release.n_released)
    if v.size != n:
        raise ValueError(f"values must hold the {n} released values, got {v.size}")
    if ranges is None:
        starts, stops = random_ranges(n, count, rng=rng)
    else:
        starts, stops = (np.asarray(r, dtype=np.int64) for r in ranges)
    prefix = np.concatenate([[0.0], np.cumsum(v)])
    truth = prefix[stops] - prefix[starts]
    est, _ = release.range_sums(starts, stops, std_error=False)
    return range_errors(est, truth, starts, stops)
