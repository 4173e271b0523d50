"""Utility metrics for estimated numerical distributions (SW20 section 3).

Every metric takes an estimate and the truth. Each may be a
:class:`~ldpkit.numeric.Distribution` or the raw true values (a 1-D array):

- Distances and queries on two Distributions are **exact** for the histogram densities:
  both CDFs are piecewise linear, so W1 integrates ``|F_a - F_b|`` exactly between the
  union of both grids' edges (the grids and even the intervals may differ) and KS is the
  largest gap at those edges.
- Raw values are first turned into a fine histogram,
  ``Distribution.from_values(values, low, high, resolution)``, on the ``[low, high]`` of the
  Distribution argument; ``resolution`` defaults to ``max(4096, its buckets)``. That
  histogram differs from the empirical CDF by at most one fine bucket's mass (KS) and one
  fine bucket's width (W1, quantiles). Pass ``resolution=d`` for SW20's convention of
  measuring the truth on the estimate's own d-bucket grid.
- :func:`mean_error` and :func:`variance_error` use the exact sample mean and population
  variance (ddof = 0) of raw values, no histogram.

For categorical frequency estimates, :func:`mse` (from :mod:`ldpkit.queries`) scores full-domain,
set, range and top-k queries as CON20 section V defines them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._rng import RNGLike, as_generator
from ._validation import check_array, check_integer, check_not_masked, check_real
from .numeric.distribution import Distribution
from .numeric.mean import MeanEstimate, VarianceEstimate
from .queries import mse

__all__ = [
    "DEFAULT_RESOLUTION",
    "wasserstein",
    "ks_distance",
    "range_query_error",
    "quantile_error",
    "mean_error",
    "variance_error",
    "mse",
]

#: Default number of buckets for the histogram of raw true values.
DEFAULT_RESOLUTION = 4096

_DEFAULT_QS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def _is_raw(x: Any) -> bool:
    return not isinstance(x, Distribution)


def _pair(
    a: Any, b: Any, resolution: int | None, names: tuple[str, str] = ("a", "b")
) -> tuple[Distribution, Distribution]:
    """Both arguments as Distributions (raw values binned on the other's interval)."""
    if _is_raw(a) and _is_raw(b):
        raise TypeError(
            f"{names[0]} or {names[1]} must be an ldpkit.numeric.Distribution (the other may be "
            f"raw values), got {type(a).__name__} and {type(b).__name__}"
        )
    ref = b if _is_raw(a) else a
    if resolution is None:
        res = max(DEFAULT_RESOLUTION, ref.buckets)
    else:
        res = check_integer(resolution, "resolution", low=1, high=1 << 24)

    def conv(x: Any, name: str) -> Distribution:
        if isinstance(x, Distribution):
            return x
        values = check_array(x, name, nonempty=True)
        if values.min() < ref.low or values.max() > ref.high:
            raise ValueError(
                f"{name} must be raw values in [{ref.low:g}, {ref.high:g}] (the other "
                f"Distribution's interval), got one outside"
            )
        return Distribution.from_values(values, ref.low, ref.high, res)

    return conv(a, names[0]), conv(b, names[1])


def _cdf_gaps(a: Distribution, b: Distribution) -> tuple[np.ndarray, np.ndarray]:
    """Breakpoints x (union of both grids) and F_a(x) - F_b(x) there."""
    x = np.union1d(a.edges, b.edges)
    return x, np.asarray(a.cdf(x)) - np.asarray(b.cdf(x))


def wasserstein(a: Any, b: Any, *, resolution: int | None = None) -> float:
    """Wasserstein-1 distance ``integral |F_a(x) - F_b(x)| dx`` (SW20 section 3.1).

    Exact for two histogram densities: between consecutive breakpoints (the union of both
    grids' edges) the CDF difference is linear, and ``|linear|`` integrates in closed form,
    including where it changes sign. In units of x (a distance on ``[0, 1]`` is at most 1).

    Examples
    --------
    >>> a = Distribution([1.0, 0.0])
    >>> b = Distribution([0.0, 1.0])
    >>> wasserstein(a, b)
    0.5
    """
    da, db = _pair(a, b, resolution)
    x, g = _cdf_gaps(da, db)
    h = np.diff(x)
    g0, g1 = g[:-1], g[1:]
    a0, a1 = np.abs(g0), np.abs(g1)
    same = g0 * g1 >= 0
    denom = a0 + a1
    # Sign change inside the interval: two triangles with total area h (g0^2 + g1^2) / (2 (|g0| + |g1|)).
    crossing = np.divide(g0 * g0 + g1 * g1, 2.0 * denom, out=np.zeros_like(denom), where=denom > 0)
    return float(np.sum(h * np.where(same, 0.5 * denom, crossing)))


def ks_distance(a: Any, b: Any, *, resolution: int | None = None) -> float:
    """Kolmogorov-Smirnov distance ``sup_x |F_a(x) - F_b(x)|`` (SW20 section 3.1).

    Exact for histogram densities: the gap is linear between breakpoints, so its maximum
    sits on one of them.
    """
    da, db = _pair(a, b, resolution)
    return float(np.max(np.abs(_cdf_gaps(da, db)[1])))


def range_query_error(
    estimate: Any,
    truth: Any,
    alpha: float = 0.1,
    *,
    n_queries: int = 1000,
    rng: RNGLike = None,
    resolution: int | None = None,
) -> float:
    """Mean absolute error of random range queries of fixed width (SW20 section 3.2).

    Draws ``n_queries`` starts ``a`` uniformly in ``[low, high - alpha (high - low)]`` (the
    estimate's interval, or the truth's when the estimate is raw) and averages
    ``|R(a, a + alpha (high - low)) - R^(a, a + alpha (high - low))|``. ``alpha`` is the
    width as a fraction of the domain (SW20 uses 0.1 and 0.4).
    """
    alpha = check_real(alpha, "alpha", low=0.0, high=1.0, low_inclusive=False)
    n_queries = check_integer(n_queries, "n_queries", low=1, high=1 << 26)
    de, dt = _pair(estimate, truth, resolution, ("estimate", "truth"))
    ref = de if not _is_raw(estimate) else dt
    span = alpha * (ref.high - ref.low)
    starts = ref.low + as_generator(rng).random(n_queries) * (ref.high - ref.low - span)
    ends = starts + span
    return float(np.mean(np.abs(de.range(starts, ends) - dt.range(starts, ends))))


def quantile_error(
    estimate: Any,
    truth: Any,
    qs: Any = _DEFAULT_QS,
    *,
    resolution: int | None = None,
) -> float:
    """Mean absolute quantile error over ``qs`` (default 10%, 20%, ..., 90%; SW20 section 3.2).

    Quantiles are :meth:`Distribution.quantile` (the generalized inverse CDF).
    """
    q = check_array(qs, "qs", ndim=(0, 1), low=0.0, high=1.0, nonempty=True)
    if q.ndim != 1 or q.size == 0:
        raise ValueError(f"qs must be a non-empty 1-D sequence of probabilities, got {qs!r}")
    de, dt = _pair(estimate, truth, resolution, ("estimate", "truth"))
    return float(np.mean(np.abs(np.asarray(de.quantile(q)) - np.asarray(dt.quantile(q)))))


def _moment(x: Any, which: str, name: str) -> float:
    if isinstance(x, Distribution):
        return x.mean() if which == "mean" else x.var()
    if isinstance(x, MeanEstimate):
        if which != "mean":
            raise TypeError(
                f"{name} must not be a MeanEstimate here (its variance is the "
                "estimator's, not the population's); use estimate_variance"
            )
        return x.mean
    if isinstance(x, VarianceEstimate):
        return x.mean if which == "mean" else x.variance
    if isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool):
        return check_real(x, name)
    check_not_masked(x, name)
    arr = np.asarray(x)
    if arr.dtype.kind not in "iuf" or arr.ndim != 1 or arr.size == 0:
        raise TypeError(
            f"{name} must be a Distribution, a number, an estimate or a 1-D array of values, "
            f"got {type(x).__name__}"
        )
    # bounded: the variance of larger magnitudes overflows to inf
    arr = check_array(arr, name, nonempty=True, bounded=True)
    return float(arr.mean()) if which == "mean" else float(arr.var())


def mean_error(estimate: Any, truth: Any) -> float:
    """``|mu - mu^|`` (SW20 section 3.2).

    Either argument may be a Distribution (its exact mean), a number, a
    :class:`~ldpkit.numeric.MeanEstimate` / ``VarianceEstimate``, or raw values (their
    sample mean).
    """
    return abs(_moment(estimate, "mean", "estimate") - _moment(truth, "mean", "truth"))


def variance_error(estimate: Any, truth: Any) -> float:
    """``|sigma^2 - sigma^2^|`` (SW20 section 3.2).

    Either argument may be a Distribution (its exact variance), a number, a
    :class:`~ldpkit.numeric.VarianceEstimate`, or raw values (population variance, ddof = 0).
    """
    return abs(_moment(estimate, "var", "estimate") - _moment(truth, "var", "truth"))
