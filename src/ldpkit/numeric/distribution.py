"""Histogram densities on an interval: what numerical mechanisms estimate (SW20 section 3).

A :class:`Distribution` is a density that is constant inside each of B equal buckets of
``[low, high]``. Its CDF is therefore continuous and piecewise linear, which makes every
query below exact for the histogram: ``cdf``, ``quantile`` (its inverse), ``range``,
``mean`` and ``var``, and lets :mod:`ldpkit.metrics` compute Wasserstein and KS distances
exactly.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .._postprocess import leaves_to_probabilities
from .._rng import RNGLike, as_generator
from .._validation import (
    MAX_ENTRIES,
    MAX_MAGNITUDE,
    check_array,
    check_integer,
    check_not_masked,
    check_numeric_values,
    check_probability,
    check_real,
)

__all__ = ["Distribution"]

#: Probabilities may miss 1 by this much (they are then rescaled to sum to 1 exactly).
SUM_TOLERANCE = 1e-6

#: Bootstrap replicates an EM/EMS estimate draws for its intervals unless told otherwise.
DEFAULT_REPLICATES = 200

#: EM/EMS bootstrap intervals are labelled approximate above this ``sqrt(n) / buckets^2``:
#: the bias grows like bucket_width^2 against a standard error ~ 1/sqrt(n), and its plug-in
#: correction leaves part of it. The coverage grid (docs/intervals.md) reaches 0.015 (256
#: buckets, n = 1e6); EMS on Beta(5, 2) measured 90% at 0.035 and 68-83% at 0.14.
APPROXIMATE_ABOVE = 0.02


#: Smallest width ``high - low`` of a numerical domain: its square (in the estimators'
#: variances) stays far above float64's smallest normal number.
MIN_WIDTH = 1e-100

#: Smallest width relative to ``max(|low|, |high|)`` (2^-30): float64 rounding of values
#: near the bounds (about 2.2e-16 of their magnitude) then stays below 2.4e-7 of the width,
#: far inside any estimate's error bars.
RESOLUTION = 2.0**-30


def check_bounds(low: Any, high: Any) -> tuple[float, float]:
    """Validate an interval ``[low, high]`` of finite numbers with ``low < high``.

    ``low``, ``high`` and the width ``high - low`` are at most :data:`MAX_MAGNITUDE` (1e100)
    in magnitude: estimators square the (half-)width and the values (e.g. the mean
    estimators' variances, :meth:`Distribution.var`), which overflowed for bounds near 1e300.
    Every numerical spec validates its domain here.
    """
    lo = check_real(low, "low", low=-MAX_MAGNITUDE, high=MAX_MAGNITUDE)
    hi = check_real(high, "high", low=-MAX_MAGNITUDE, high=MAX_MAGNITUDE)
    if not hi > lo:
        raise ValueError(f"high must be a finite number > low ({lo:g}), got {hi!r}")
    if hi - lo > MAX_MAGNITUDE:  # e.g. [-1e100, 1e100]: each end is fine, the width is not
        raise ValueError(
            f"high - low must be a width <= {MAX_MAGNITUDE:g}, got [{lo:g}, {hi:g}] "
            f"(width {hi - lo:g})"
        )
    # Estimates are reported in the original units (low + width * t): a width below
    # MIN_WIDTH squares to underflow in the variances, and a width below RESOLUTION times
    # the bounds' magnitude is lost to float64 rounding of low + width * t ([1e15, 1e15 + 1]
    # would give means far outside their error bars). Shift the values instead.
    width, scale = hi - lo, max(abs(lo), abs(hi))
    if width < MIN_WIDTH or width < RESOLUTION * scale:
        raise ValueError(
            f"high - low must be a width >= {MIN_WIDTH:g} and >= {RESOLUTION:.3g} * "
            f"max(|low|, |high|) (float64 must resolve values in [low, high]; shift or "
            f"rescale the values), got [{lo!r}, {hi!r}] (width {width:g})"
        )
    return lo, hi


def bucket_index(values: np.ndarray, low: float, high: float, buckets: int) -> np.ndarray:
    """Index (0 .. buckets - 1) of the equal bucket of [low, high] holding each value.

    ``high`` itself falls in the last bucket (the convention of every numerical mechanism
    and of :meth:`Distribution.from_values`).
    """
    idx = ((values - low) * (buckets / (high - low))).astype(np.int64)
    np.clip(idx, 0, buckets - 1, out=idx)
    return idx


class Distribution:
    """A histogram density over ``[low, high]`` with B equal buckets.

    Bucket ``i`` is ``[low + i w, low + (i + 1) w)`` with ``w = (high - low) / B`` (the last
    one also holds ``high``); it carries probability ``probabilities[i]``, spread uniformly.
    Instances are immutable: the probability array is read-only and every transformation
    returns a new object.

    Parameters
    ----------
    probabilities : array_like, shape (B,)
        Non-negative finite bucket masses summing to 1 (within 1e-6; they are rescaled to
        sum to 1 exactly).
    low, high : float
        The interval, finite with ``low < high``.
    n : int, optional
        Number of reports behind it (set by every ``spec.estimate``).
    spec : Mechanism, optional
        The mechanism whose ``estimate`` produced it.
    postprocessing : tuple of str
        Post-processing steps applied to the plain estimate, in order (empty: none).
    stats : Stats, optional
        The aggregated reports behind a mechanism's estimate (set by ``spec.estimate``);
        with ``spec`` it gives the confidence intervals (:meth:`cdf_interval`, ...).
    signed : bool
        Allow negative masses (still summing to 1). A mechanism's plain linear estimate
        (unbiased bucket masses, e.g. a hierarchical histogram's consistent leaves) is
        signed; the linear queries ``cdf``, ``range``, ``mean`` stay unbiased on it, while
        ``quantile`` and ``sample`` need a proper distribution: apply
        :meth:`postprocess` first.
    fit : dict, optional
        How an EM/EMS estimate was computed (``method``, ``tol``, ``max_iter``; set by
        :func:`~ldpkit.numeric.em.em` / :func:`~ldpkit.numeric.em.ems` on a spec's Stats):
        with ``stats`` it gives bootstrap intervals (:meth:`bootstrap`).

    Raises
    ------
    ValueError
        On negative (unless ``signed``), non-finite or non-normalized probabilities, an
        empty array, or bad bounds.
    TypeError
        On non-numeric input.

    Notes
    -----
    The CDF is ``F(x) = P_{k} + (x - e_k) p_k / w`` on bucket k (``P_k`` the mass below its
    left edge ``e_k``). ``mean`` and ``var`` are the exact moments of this piecewise-uniform
    density: ``var`` includes the within-bucket term ``w^2 / 12``.

    References
    ----------
    Z. Li, T. Wang, M. Lopuhaä-Zwakenberg, N. Li, B. Škorić. Estimating Numerical
    Distributions under Local Differential Privacy. SIGMOD 2020, section 3 (metrics).

    Examples
    --------
    >>> dist = Distribution([0.25, 0.5, 0.25], low=0.0, high=3.0)
    >>> float(dist.cdf(1.5)), float(dist.quantile(0.5)), dist.mean()
    (0.5, 1.5, 1.5)
    >>> dist.range(1.0, 2.0)
    0.5
    """

    __slots__ = (
        "_boot",
        "_cum",
        "_fit",
        "_high",
        "_low",
        "_n",
        "_origin",
        "_post",
        "_prob",
        "_signed",
        "_spec",
        "_stats",
    )
    _prob: np.ndarray
    _cum: np.ndarray
    _low: float
    _high: float
    _n: int | None
    _spec: Any
    _post: tuple[str, ...]
    _signed: bool
    _stats: Any
    _fit: dict[str, Any] | None
    _boot: Any
    _origin: Any

    def __init__(
        self,
        probabilities: Any,
        low: float = 0.0,
        high: float = 1.0,
        *,
        n: int | None = None,
        spec: Any = None,
        postprocessing: tuple[str, ...] = (),
        signed: bool = False,
        stats: Any = None,
        fit: dict[str, Any] | None = None,
    ) -> None:
        lo, hi = check_bounds(low, high)
        check_not_masked(probabilities, "probabilities")
        arr = np.asarray(probabilities)
        if arr.dtype.kind not in "iuf":
            raise TypeError(
                f"probabilities must be a 1-D array of non-negative numbers, got dtype {arr.dtype}"
            )
        arr = np.array(arr, dtype=np.float64)  # private copy
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(f"probabilities must be a non-empty 1-D array, got shape {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError("probabilities must be finite and >= 0")
        signed = bool(signed) and bool(np.any(arr < 0))
        if np.any(arr < 0) and not signed:
            raise ValueError("probabilities must be finite and >= 0")
        total = float(arr.sum())
        if abs(total - 1.0) > SUM_TOLERANCE:
            raise ValueError(
                f"probabilities must sum to 1 (within {SUM_TOLERANCE:g}), got {total!r}"
            )
        arr /= total
        cum = np.empty(arr.size + 1)
        cum[0] = 0.0
        np.cumsum(arr, out=cum[1:])
        if not signed:
            np.minimum(cum, 1.0, out=cum)
        cum[-1] = 1.0  # exact: quantile(1) and cdf(high) must be 1, not 1 - 1e-16
        arr.flags.writeable = False
        cum.flags.writeable = False
        object.__setattr__(self, "_prob", arr)
        object.__setattr__(self, "_cum", cum)
        object.__setattr__(self, "_low", lo)
        object.__setattr__(self, "_high", hi)
        object.__setattr__(self, "_n", None if n is None else check_integer(n, "n", low=0))
        object.__setattr__(self, "_spec", spec)
        object.__setattr__(self, "_post", tuple(postprocessing))
        object.__setattr__(self, "_signed", signed)
        object.__setattr__(self, "_stats", stats)
        object.__setattr__(self, "_fit", None if fit is None else dict(fit))
        object.__setattr__(self, "_boot", None)  # bootstrap replicates, computed on demand
        object.__setattr__(self, "_origin", None)  # (estimate, rebin matrix) after rebin()

    # -- constructors ---------------------------------------------------------------------
    @classmethod
    def from_probabilities(
        cls, probabilities: Any, low: float = 0.0, high: float = 1.0
    ) -> Distribution:
        """Return the same as the constructor (named for symmetry with :meth:`from_values`)."""
        return cls(probabilities, low, high)

    @classmethod
    def from_estimate(
        cls,
        masses: Any,
        low: float = 0.0,
        high: float = 1.0,
        *,
        n: int | None = None,
        spec: Any = None,
        stats: Any = None,
    ) -> Distribution:
        """Return a mechanism's plain estimate: bucket masses that may be negative.

        Unbiased masses (a frequency oracle's, a tree's consistent leaves) sum to 1 only
        in expectation; the difference ``1 - sum`` (zero
        mean) is spread evenly over the buckets, which keeps every mass unbiased and makes
        the total exactly 1. The result is ``signed`` when some mass is negative.
        """
        m = np.asarray(masses, dtype=np.float64)
        if m.ndim != 1 or m.size == 0 or not np.all(np.isfinite(m)):
            raise ValueError(
                f"masses must be a non-empty 1-D array of finite numbers, got shape {m.shape}"
            )
        return cls(
            m + (1.0 - m.sum()) / m.size, low, high, n=n, spec=spec, signed=True, stats=stats
        )

    @classmethod
    def from_values(
        cls, values: Any, low: float = 0.0, high: float = 1.0, buckets: int = 1024
    ) -> Distribution:
        """Return the histogram of raw values: bucket masses are the fractions of values inside.

        Values must lie in ``[low, high]``; ``high`` itself counts in the last bucket.
        """
        lo, hi = check_bounds(low, high)
        buckets = check_integer(buckets, "buckets", low=1, high=MAX_ENTRIES)
        v = check_numeric_values(values, lo, hi, "values")
        if v.size == 0:
            raise ValueError("values must hold at least one value, got an empty array")
        counts = np.bincount(bucket_index(v, lo, hi, buckets), minlength=buckets)
        return cls(counts / v.size, lo, hi)

    @classmethod
    def from_cdf(
        cls,
        cdf: Callable[[np.ndarray], Any],
        low: float = 0.0,
        high: float = 1.0,
        buckets: int = 1024,
    ) -> Distribution:
        """Discretize a continuous law by its CDF: bucket mass ``F(e_{k+1}) - F(e_k)``.

        The law is conditioned on ``[low, high]`` (mass outside is dropped, then rescaled),
        e.g. ``Distribution.from_cdf(scipy.stats.beta(5, 2).cdf, 0, 1, 256)``.
        """
        lo, hi = check_bounds(low, high)
        buckets = check_integer(buckets, "buckets", low=1, high=MAX_ENTRIES)
        f = np.asarray(cdf(np.linspace(lo, hi, buckets + 1)), dtype=np.float64)
        mass = np.diff(f)
        total = f[-1] - f[0]
        if not (np.all(np.isfinite(mass)) and np.all(mass >= -1e-12) and total > 0):
            raise ValueError("cdf must be non-decreasing with positive mass on [low, high]")
        return cls(np.maximum(mass, 0.0) / total, lo, hi)

    @classmethod
    def uniform(cls, low: float = 0.0, high: float = 1.0, buckets: int = 1024) -> Distribution:
        """Return the uniform law on ``[low, high]`` as a B-bucket histogram."""
        buckets = check_integer(buckets, "buckets", low=1, high=MAX_ENTRIES)
        return cls(np.full(buckets, 1.0 / buckets), low, high)

    # -- attributes -----------------------------------------------------------------------
    @property
    def probabilities(self) -> np.ndarray:
        """Bucket masses (read-only, sum exactly 1 up to rounding)."""
        return self._prob

    @property
    def low(self) -> float:
        """Lower end of the domain."""
        return self._low

    @property
    def n(self) -> int | None:
        """Number of reports behind the estimate (None for a Distribution built by hand)."""
        return self._n

    @property
    def spec(self) -> Any:
        """The mechanism spec whose ``estimate`` produced it (None if built by hand)."""
        return self._spec

    @property
    def stats(self) -> Any:
        """The Stats behind the estimate (None if built by hand or loaded from a dict)."""
        return self._stats

    @property
    def postprocessing(self) -> tuple[str, ...]:
        """Post-processing steps applied to the plain estimate, in order."""
        return self._post

    @property
    def signed(self) -> bool:
        """True when some bucket mass is negative (a plain linear estimate)."""
        return self._signed

    def replace(self, **changes: Any) -> Distribution:
        """Return a copy with some fields changed.

        Fields: ``probabilities``, ``low``, ``high``, ``n``, ``spec``, ``postprocessing``,
        ``signed``, ``stats``, ``fit``. Bootstrap replicates and a rebinned estimate's link
        to its original are not carried over.
        """
        state = self.__getstate__()
        state.update(changes)
        return Distribution(
            state.pop("probabilities"), state.pop("low"), state.pop("high"), **state
        )

    def postprocess(self, method: str) -> Distribution:
        """Return a proper distribution from this one; ``method`` is appended to ``postprocessing``.

        Parameters
        ----------
        method : {"norm_sub", "norm_mul", "cdf"}
            * ``"norm_sub"``: the Euclidean projection of the masses onto the simplex
              (Norm-Sub, CON20 section IV).
            * ``"norm_mul"``: negative masses to 0, then rescale to sum 1.
            * ``"cdf"``: the monotone CDF fit: the cumulative masses replaced by their
              least-squares non-decreasing fit (isotonic regression), clipped to [0, 1];
              it pools neighbouring buckets only, which is far kinder to W1 and KS than
              the per-bucket projections (our choice for the tree mechanisms, see
              METHODS.md).

        Returns
        -------
        Distribution
            Non-negative, with the same ``n`` and ``spec``.
        """
        return self.replace(
            probabilities=leaves_to_probabilities(self._prob, method),
            postprocessing=(*self._post, method),
            signed=False,
        )

    def _check_proper(self, what: str) -> None:
        if self._signed:
            raise ValueError(
                f"{what} needs non-negative probabilities; this plain estimate has negative "
                "masses: use dist.postprocess('cdf' | 'norm_sub' | 'norm_mul') first"
            )

    @property
    def high(self) -> float:
        """Upper end of the domain."""
        return self._high

    @property
    def buckets(self) -> int:
        """Number of buckets B."""
        return int(self._prob.size)

    @property
    def width(self) -> float:
        """Bucket width ``(high - low) / B``."""
        return (self._high - self._low) / self._prob.size

    @property
    def edges(self) -> np.ndarray:
        """The B + 1 bucket edges, from ``low`` to ``high``."""
        e = np.linspace(self._low, self._high, self._prob.size + 1)
        return e

    @property
    def centers(self) -> np.ndarray:
        """Bucket midpoints."""
        return self._low + (np.arange(self._prob.size) + 0.5) * self.width

    @property
    def cumulative(self) -> np.ndarray:
        """CDF at the B + 1 edges (read-only; starts at 0, ends at 1)."""
        return self._cum

    def __setattr__(self, name: str, value: Any) -> None:
        """Refuse: a Distribution is immutable."""
        raise AttributeError("Distribution is immutable")

    def __getstate__(self) -> dict[str, Any]:
        """Return the state to pickle."""
        return {
            "probabilities": np.array(self._prob),
            "low": self._low,
            "high": self._high,
            "n": self._n,
            "spec": self._spec,
            "postprocessing": self._post,
            "signed": self._signed,
            "stats": self._stats,
            "fit": self._fit,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore from a pickled state (validated again)."""
        state = dict(state)
        Distribution.__init__(
            self, state.pop("probabilities"), state.pop("low"), state.pop("high"), **state
        )

    def __eq__(self, other: object) -> bool:
        """Compare domain and probabilities."""
        if not isinstance(other, Distribution):
            return NotImplemented
        return (
            self._low == other._low
            and self._high == other._high
            and np.array_equal(self._prob, other._prob)
        )

    def __hash__(self) -> int:
        """Hash consistently with ``__eq__``."""
        return hash((self._low, self._high, self._prob.tobytes()))

    def __repr__(self) -> str:
        """Return a one-line summary."""
        return (
            f"Distribution(buckets={self.buckets}, low={self._low:g}, high={self._high:g}, "
            f"mean={self.mean():.4g})"
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict (floats round-trip exactly through ``json``).

        The spec is stored as its ``to_dict()``.
        """
        out: dict[str, Any] = {
            "low": self._low,
            "high": self._high,
            "probabilities": self._prob.tolist(),
        }
        if self._n is not None:
            out["n"] = self._n
        if self._spec is not None and hasattr(self._spec, "to_dict"):
            out["spec"] = self._spec.to_dict()
        if self._post:
            out["postprocessing"] = list(self._post)
        if self._signed:
            out["signed"] = True
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Distribution:
        """Rebuild a Distribution from :meth:`to_dict`'s output."""
        spec = data.get("spec")
        if spec is not None:
            from ..spec import spec_from_dict

            spec = spec_from_dict(spec)
        return cls(
            data["probabilities"],
            data["low"],
            data["high"],
            n=data.get("n"),
            spec=spec,
            postprocessing=tuple(data.get("postprocessing", ())),
            signed=bool(data.get("signed", False)),
        )

    # -- queries --------------------------------------------------------------------------
    def _bucket_of(self, x: np.ndarray) -> np.ndarray:
        idx = np.floor((x - self._low) / self.width)
        return np.clip(np.nan_to_num(idx, nan=0.0), 0, self._prob.size - 1).astype(np.int64)

    def pdf(self, x: Any) -> Any:
        """Density at x: ``p_k / w`` inside bucket k, 0 outside ``[low, high]``.

        Returns a float for scalar input, else an array of x's shape.
        """
        xa = check_array(x, "x", ndim=(0, 1, 2))
        inside = (xa >= self._low) & (xa <= self._high)
        out = np.where(inside, self._prob[self._bucket_of(xa)] / self.width, 0.0)
        return float(out) if out.ndim == 0 else out

    def cdf(self, x: Any) -> Any:
        """P[X <= x]: 0 below ``low``, 1 above ``high``, linear inside each bucket."""
        xa = check_array(x, "x", ndim=(0, 1, 2))
        out = np.interp(xa, self.edges, self._cum, left=0.0, right=1.0)
        return float(out) if out.ndim == 0 else out

    def quantile(self, q: Any) -> Any:
        """Return the generalized inverse CDF ``inf{x in [low, high]: F(x) >= q}`` (vectorized).

        For q in (0, 1] this is the exact inverse of :meth:`cdf` wherever the density is
        positive; across empty buckets it takes the left end of the flat stretch.
        ``quantile(0) = low`` and ``quantile(1)`` is the right end of the last non-empty
        bucket.

        Raises
        ------
        ValueError
            If any q is outside [0, 1] or NaN.
        """
        self._check_proper("quantile")
        qa = check_array(q, "q", ndim=(0, 1, 2), low=0.0, high=1.0)
        k = np.searchsorted(self._cum, qa, side="left")  # first edge with F >= q
        k = np.maximum(k, 1)
        left = self._cum[k - 1]  # < q unless q == 0
        mass = self._prob[k - 1]
        frac = np.divide(qa - left, mass, out=np.zeros_like(qa), where=mass > 0)
        out = self._low + (k - 1 + np.clip(frac, 0.0, 1.0)) * self.width
        out = np.where(qa <= 0.0, self._low, np.minimum(out, self._high))
        return float(out) if out.ndim == 0 else out

    def range(self, a: Any, b: Any) -> Any:
        """Mass of ``[a, b]``: ``F(b) - F(a)`` (vectorized; needs a <= b)."""
        aa = check_array(a, "a", ndim=(0, 1, 2))
        ba = check_array(b, "b", ndim=(0, 1, 2))
        if np.any(~(aa <= ba)):
            raise ValueError(f"a must be <= b (and not NaN), got a={a!r}, b={b!r}")
        out = np.asarray(self.cdf(ba)) - np.asarray(self.cdf(aa))
        if not self._signed:  # rounding only; a signed estimate keeps its unbiased value
            out = np.maximum(out, 0.0)
        return float(out) if out.ndim == 0 else out

    def mean(self) -> float:
        """Exact mean of the histogram density: ``sum p_k c_k`` (c_k bucket centers)."""
        return float(self._prob @ self.centers)

    def var(self) -> float:
        """Exact variance of the histogram density (within-bucket ``w^2/12`` included)."""
        c = self.centers - self.mean()  # centered first: no cancellation
        return float(self._prob @ (c * c) + self.width**2 / 12.0)

    def std(self) -> float:
        """Return the standard deviation, the square root of :meth:`var`."""
        return math.sqrt(self.var())

    # -- confidence intervals -------------------------------------------------------------
    def interval_status(self) -> str | None:
        """None when this estimate has confidence intervals, else why not.

        Intervals exist for the plain (not post-processed) estimate of a mechanism whose
        estimate is linear in the reports (analytic): :class:`~ldpkit.numeric.CFOBinning`
        (GRR, OLH, BLH, OUE, SUE), :class:`~ldpkit.numeric.HierarchicalHistogram` (same
        oracles) and :class:`~ldpkit.numeric.HaarHRR`; and for EM/EMS estimates of the
        Square Wave family (parametric bootstrap, :meth:`bootstrap`). A :meth:`rebin` of
        such an estimate keeps them.
        """
        if self._origin is not None:
            return self._origin[0].interval_status()
        if self._post:
            return (
                f"post-processing {list(self._post)} biases the estimate; intervals of the "
                "plain estimate (postprocess=None) would not cover it"
            )
        if self._spec is None:
            return "it has no mechanism spec attached (built by hand)"
        if self._fit is not None and hasattr(self._spec, "_em_bootstrap"):
            return None if self._stats is not None else "it has no Stats attached"
        # The spec answers for its own estimator (a method, not a table of classes here).
        reason_of = getattr(self._spec, "_interval_unsupported_reason", None)
        reason = (
            reason_of()
            if reason_of is not None
            else (
                f"{type(self._spec).__name__}'s estimate is not linear in the reports "
                "(smoothing or regularization biases it)"
            )
        )
        if reason is None and self._stats is None:
            reason = "it has no Stats attached (loaded from a dict)"
        return reason

    @property
    def interval_method(self) -> str | None:
        """``"analytic"``, ``"bootstrap"`` or None (no interval, see :meth:`interval_status`)."""
        if self.interval_status() is not None:
            return None
        if self._origin is not None:
            return self._origin[0].interval_method
        return "bootstrap" if self._fit is not None else "analytic"

    def bootstrap(
        self, replicates: int = DEFAULT_REPLICATES, *, rng: RNGLike = None
    ) -> Distribution:
        """Return this EM/EMS estimate with a fresh parametric bootstrap for its intervals.

        The interval methods of an EM/EMS estimate (Square Wave and relatives) use a
        parametric bootstrap of the whole pipeline (:func:`ldpkit.numeric.em.bootstrap`):
        B output histograms drawn from the fitted law, the same estimator re-run on each,
        and a bias correction for the smoothing: a query ``g`` is reported as
        ``2 g(theta^) - g(EM(n M^T theta^))`` with the standard error of that corrected
        value over the replicates, and the interval is the normal one around it. Without
        a call to this method they compute one on first use with the defaults
        (B = 200, ``rng=0``: the same intervals on every call) and keep it.

        Parameters
        ----------
        replicates : int
            Number B of bootstrap histograms (cost: 2 B + 1 runs of the estimator).
        rng : Generator, int or None
            Randomness of the bootstrap draws.

        Returns
        -------
        Distribution
            A copy holding the replicates.

        Raises
        ------
        ValueError
            If this estimate has no bootstrap (not an EM/EMS estimate of a spec's Stats).
        """
        if self.interval_method != "bootstrap":
            raise ValueError(
                "bootstrap() needs an EM/EMS estimate of a spec's Stats (e.g. SquareWave); "
                f"this one has {self.interval_method or 'no'} intervals"
            )
        if self._origin is not None:
            parent, r = self._origin
            out = self.replace()
            object.__setattr__(out, "_origin", (parent.bootstrap(replicates, rng=rng), r))
            return out
        out = self.replace()
        object.__setattr__(out, "_boot", self._draw_bootstrap(replicates, rng))
        return out

    def interval_approximate(self) -> str | None:
        """Why this estimate's intervals are only approximate (None: measured coverage).

        Analytic intervals are never approximate. EM/EMS bootstrap intervals are, for a
        mechanism other than :class:`~ldpkit.numeric.SquareWave` (coverage not measured),
        for EMS (its smoothing bias on a peaked law is only partly corrected: measured
        coverage fell to 37-77% on flights' departure times at n = 1e6; docs/intervals.md)
        and when ``sqrt(n) / buckets^2`` exceeds :data:`APPROXIMATE_ABOVE` (coarse buckets
        for the number of reports: the bias is then large against the standard error).
        Their interval methods then warn with an :class:`~ldpkit.estimate.IntervalWarning`
        (the numbers are still given). Plain EM (``spec.estimate(stats, method="em")``)
        within that bound is not approximate.
        """
        if self._origin is not None:
            return self._origin[0].interval_approximate()
        if self.interval_method != "bootstrap":
            return None
        # Declared by the class itself (not inherited): coverage measured for that class only.
        if not vars(type(self._spec)).get("_bootstrap_coverage_measured", False):
            return (
                f"coverage of the EM/EMS bootstrap is measured for SquareWave, not "
                f"{type(self._spec).__name__}"
            )
        if (self._fit or {}).get("method") == "ems":
            return (
                "EMS's smoothing bias is only partly corrected (measured coverage of 95% "
                "intervals down to 37-77% on a peaked law, see docs/intervals.md); plain EM "
                "(method='em') has intervals with measured coverage"
            )
        ratio = math.sqrt(self._stats.n) / self.buckets**2
        if ratio > APPROXIMATE_ABOVE:
            return (
                f"sqrt(n) / buckets^2 = {ratio:.3g} > {APPROXIMATE_ABOVE:g}: the smoothing bias "
                "is large for these coarse buckets and only partly corrected (use more buckets)"
            )
        return None

    def _warn_approximate(self, stacklevel: int = 4) -> None:
        from ..estimate import IntervalWarning

        reason = self.interval_approximate()
        if reason is not None:
            warnings.warn(
                f"confidence intervals are approximate (coverage may be well under the "
                f"nominal level): {reason}",
                IntervalWarning,
                stacklevel=stacklevel,
            )

    def _draw_bootstrap(self, replicates: int, rng: RNGLike) -> Any:
        fit = self._fit or {}
        return self._spec._em_bootstrap(  # the spec's own EM pipeline, resolved lazily
            self._stats,
            self._prob,
            method=fit.get("method", "ems"),
            tol=fit.get("tol", 1e-3),
            max_iter=fit.get("max_iter", 10_000),
            replicates=replicates,
            rng=rng,
        )

    def _bootstrap_draws(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(theta^, EM(n M^T theta^), replicates, their EM(n M^T theta*)) on these buckets."""
        if self._origin is not None:
            parent, r = self._origin
            return tuple(a @ r.T for a in parent._bootstrap_draws())  # type: ignore[return-value]
        if self._boot is None:
            object.__setattr__(self, "_boot", self._draw_bootstrap(DEFAULT_REPLICATES, 0))
        b = self._boot
        return self._prob, b.fitted_mean, b.replicates, b.replicate_means

    def _bootstrap_functional(
        self, f: Callable[[np.ndarray], np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Bias-corrected value and standard error of ``f`` (rows of probabilities -> (rows, m)).

        ``2 f(theta^) - f(EM(n M^T theta^))``; the standard error is the spread of the
        same corrected value over the replicates.
        """
        est, fitted, reps, rep_means = self._bootstrap_draws()
        both = f(np.vstack([est, fitted]))
        center = 2.0 * both[0] - both[1]
        corrected = 2.0 * f(reps) - f(rep_means)
        return center, corrected.std(axis=0, ddof=1)

    def _moments(self, w: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
        """Centre and standard error of the linear queries ``w[:, i] . p`` (no checks).

        The centre is None for analytic intervals: the caller's own exact query value
        (``cdf``, ``range``, ...) is the centre, which keeps e.g. ``cdf(high) = 1`` exact.
        """
        if self._origin is not None:
            parent, r = self._origin
            return parent._moments(r.T @ w)
        if self._fit is not None:
            return self._bootstrap_functional(lambda rows: rows @ w)
        variances = self._spec._linear_query_variances(self._stats, self._prob, w)
        return None, np.sqrt(variances)

    def _query(self, w: np.ndarray, exact: Any) -> tuple[np.ndarray, np.ndarray]:
        """Return the centre and standard error of ``w[:, i] . p`` for every column.

        ``exact`` (the estimate's own value of the queries, analytic and no interval) or the
        bias-corrected value (bootstrap).
        """
        from ..estimate import IntervalWarning

        reason = self.interval_status()
        if reason is not None:
            if reason.startswith("it has no"):  # nothing to compute from: an error
                raise ValueError(f"no confidence interval for this Distribution: {reason}")
            warnings.warn(f"confidence intervals are NaN: {reason}", IntervalWarning, stacklevel=3)
            return np.asarray(exact, dtype=np.float64).reshape(-1), np.full(w.shape[1], np.nan)
        self._warn_approximate()
        center, std = self._moments(w)
        if center is None:
            center = np.asarray(exact, dtype=np.float64).reshape(-1)
        return center, std

    def _cdf_weights(self, x: np.ndarray) -> np.ndarray:
        """(B, m): the fraction of each bucket below each x (``cdf(x) = w . p``)."""
        frac = (x[None, :] - self.edges[:-1, None]) / self.width
        return np.clip(frac, 0.0, 1.0)

    def cdf_interval(self, x: Any, alpha: float = 0.05) -> tuple[Any, Any]:
        """Two-sided ``1 - alpha`` confidence interval of ``cdf(x)`` (vectorized).

        Normal approximation around the unbiased ``cdf(x)`` with the analytic standard
        error of the plain linear estimate, or for EM/EMS around the bias-corrected value
        with the bootstrap standard error (:meth:`bootstrap`); clipped to [0, 1]. NaN with
        an :class:`~ldpkit.estimate.IntervalWarning` after post-processing or for an
        estimator without intervals (see :meth:`interval_status`).

        Returns
        -------
        (low, high)
            Floats for scalar x, else arrays of x's shape.
        """
        from ._intervals import normal_quantile

        alpha = check_probability(alpha, "alpha")
        xa = check_array(x, "x", ndim=(0, 1, 2))
        if np.any(np.isnan(xa)):
            raise ValueError(f"x must be numbers (not NaN), got {x!r}")
        flat = xa.reshape(-1)
        mid, std = self._query(self._cdf_weights(flat), self.cdf(flat))
        half = normal_quantile(alpha) * std
        lo, hi = np.clip(mid - half, 0.0, 1.0), np.clip(mid + half, 0.0, 1.0)
        return _shape(lo, xa), _shape(hi, xa)

    def range_interval(self, a: Any, b: Any, alpha: float = 0.05) -> tuple[Any, Any]:
        """Two-sided ``1 - alpha`` confidence interval of ``range(a, b)`` (vectorized).

        As :meth:`cdf_interval`, for the weights ``w(b) - w(a)``; clipped to [0, 1].
        """
        from ._intervals import normal_quantile

        alpha = check_probability(alpha, "alpha")
        aa, ba = np.broadcast_arrays(
            check_array(a, "a", ndim=(0, 1, 2)), check_array(b, "b", ndim=(0, 1, 2))
        )
        if np.any(~(aa <= ba)):
            raise ValueError(f"a must be <= b (and not NaN), got a={a!r}, b={b!r}")
        w = self._cdf_weights(ba.reshape(-1)) - self._cdf_weights(aa.reshape(-1))
        mid, std = self._query(w, self.range(aa, ba))
        half = normal_quantile(alpha) * std
        lo, hi = np.clip(mid - half, 0.0, 1.0), np.clip(mid + half, 0.0, 1.0)
        return _shape(lo, aa), _shape(hi, aa)

    def mean_interval(self, alpha: float = 0.05) -> tuple[float, float]:
        """Two-sided ``1 - alpha`` confidence interval of :meth:`mean` (``w`` = centers)."""
        from ._intervals import normal_quantile

        alpha = check_probability(alpha, "alpha")
        mid, std = self._query(self.centers[:, None], self.mean())
        half = normal_quantile(alpha) * float(std[0])
        m = float(mid[0])
        return m - half, m + half

    def cdf_band(self, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return the pointwise ``1 - alpha`` band of the CDF.

        ``(x, low, high)`` at the bucket edges (at most 4097 evenly spaced edges for a finer
        histogram).
        """
        from ._intervals import normal_quantile

        alpha = check_probability(alpha, "alpha")
        step = max(1, -(-self.buckets // 4096))
        idx = np.unique(np.append(np.arange(0, self.buckets + 1, step), self.buckets))
        xs = self.edges[idx]
        mid, std = self._query(self._cdf_weights(xs), self._cum[idx])
        half = normal_quantile(alpha) * std
        return xs, np.clip(mid - half, 0.0, 1.0), np.clip(mid + half, 0.0, 1.0)

    def quantile_interval(self, q: Any, alpha: float = 0.05) -> tuple[Any, Any]:
        """Confidence interval of the q-quantile by inverting the pointwise CDF band.

        ``low = inf{x: F_high(x) >= q}`` and ``high = sup{x: F_low(x) <= q}``: whenever the
        band covers the true CDF at the true quantile, the interval covers the quantile,
        so its coverage is at least the band's pointwise ``1 - alpha``. Works on a signed
        (plain) estimate too.

        EM/EMS estimates (bootstrap, see :meth:`bootstrap`): the normal interval around the
        bias-corrected quantile ``2 Q(theta^) - Q(EM(n M^T theta^))`` with the spread of
        that value over the replicates, clipped to ``[low, high]``.
        """
        from ._intervals import normal_quantile

        qa = check_array(q, "q", ndim=(0, 1, 2), low=0.0, high=1.0)
        flat = qa.reshape(-1)
        if self.interval_method == "bootstrap":
            alpha = check_probability(alpha, "alpha")
            self._warn_approximate(stacklevel=3)
            mid, std = self._bootstrap_functional(
                lambda rows: _row_quantiles(rows, self._low, self._high, flat)
            )
            half = normal_quantile(alpha) * std
            lo = np.clip(mid - half, self._low, self._high)
            hi = np.clip(mid + half, self._low, self._high)
            return _shape(lo, qa), _shape(hi, qa)
        xs, band_lo, band_hi = self.cdf_band(alpha)
        if np.any(np.isnan(band_lo)):
            nan = np.full(flat.shape, np.nan)
            return _shape(nan, qa), _shape(nan, qa)
        lows, highs = np.empty(flat.size), np.empty(flat.size)
        for i, qi in enumerate(flat.tolist()):
            lows[i] = _first_crossing(xs, band_hi, qi)
            highs[i] = _last_below(xs, band_lo, qi)
        return _shape(lows, qa), _shape(highs, qa)

    def probability_interval(self, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
        """``1 - alpha`` confidence interval of every bucket mass (clipped to [0, 1])."""
        from ._intervals import normal_quantile

        alpha = check_probability(alpha, "alpha")
        mid, std = self._query(np.eye(self.buckets), self._prob)
        half = normal_quantile(alpha) * std
        return np.clip(mid - half, 0.0, 1.0), np.clip(mid + half, 0.0, 1.0)

    def _maybe(self, compute: Callable[[], Any], size: int) -> Any:
        """``compute()``, or NaN (quietly) when this Distribution has no spec or Stats."""
        status = self.interval_status()
        if status is not None and status.startswith("it has no"):
            return np.full(size, np.nan), np.full(size, np.nan)
        return compute()

    def to_frame(self, alpha: float = 0.05) -> Any:
        """Return a pandas DataFrame, one row per bucket, indexed by the bucket's interval.

        Columns ``probability``, ``prob_low``/``prob_high`` (:meth:`probability_interval`),
        ``cdf`` (at the bucket's right edge) and ``cdf_low``/``cdf_high`` (the pointwise
        band of :meth:`cdf_band`). Interval columns are NaN when this estimate has no
        interval (see :meth:`interval_status`; warned after post-processing).
        """
        import pandas as pd

        b = self.buckets
        p_lo, p_hi = self._maybe(lambda: self.probability_interval(alpha), b)
        if self.buckets <= 4096:
            c_lo, c_hi = self._maybe(lambda: self.cdf_interval(self.edges[1:], alpha), b)
        else:
            c_lo, c_hi = np.full(b, np.nan), np.full(b, np.nan)
        index = pd.IntervalIndex.from_breaks(self.edges, closed="left", name="bucket")
        frame = pd.DataFrame(
            {
                "probability": self._prob,
                "prob_low": p_lo,
                "prob_high": p_hi,
                "cdf": self._cum[1:],
                "cdf_low": c_lo,
                "cdf_high": c_hi,
            },
            index=index,
        )
        frame.attrs["alpha"] = alpha
        return frame

    def plot(self, ax: Any = None, *, alpha: float = 0.05, kind: str = "density") -> Any:
        """Plot with ``1 - alpha`` error bars (matplotlib); returns the Axes.

        ``kind="density"``: the histogram density with error bars on every bucket;
        ``kind="cdf"``: the CDF with its pointwise band shaded. Intervals are left out
        when unavailable (see :meth:`interval_status`).
        """
        import matplotlib.pyplot as plt

        if kind not in ("density", "cdf"):
            raise ValueError(f"kind must be 'density' or 'cdf', got {kind!r}")
        if ax is None:
            _, ax = plt.subplots()
        from ..estimate import IntervalWarning

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IntervalWarning)
            if kind == "density":
                lo, hi = self._maybe(lambda: self.probability_interval(alpha), self.buckets)
                dens = self._prob / self.width
                # clipped to [0, 1]: a negative mass draws only the upper bar
                err = np.maximum(np.vstack([self._prob - lo, hi - self._prob]), 0.0) / self.width
                ax.bar(
                    self.centers,
                    dens,
                    width=self.width,
                    yerr=None if np.all(np.isnan(err)) else err,
                    ecolor="gray",
                    capsize=0,
                )
                ax.set_ylabel("density")
            else:
                xs = self.edges
                lo, hi = self._maybe(lambda: self.cdf_interval(xs, alpha), xs.size)
                ax.plot(xs, self._cum)
                if not np.all(np.isnan(lo)):
                    ax.fill_between(xs, lo, hi, alpha=0.3, lw=0)
                ax.set_ylabel("CDF")
        n = "" if self._n is None else f"n = {self._n}, "
        ax.set_title(f"{n}{1 - alpha:.0%} intervals" if self.interval_status() is None else n)
        return ax

    def sample(self, n: int, rng: RNGLike = None) -> np.ndarray:
        """Draw n values by inverse-transform sampling (exact for the histogram density)."""
        n = check_integer(n, "n", low=0, high=MAX_ENTRIES)
        self._check_proper("sample")
        gen = as_generator(rng)
        return np.asarray(self.quantile(gen.random(n)), dtype=np.float64).reshape(n)

    def rebin(self, buckets: int) -> Distribution:
        """Return the same density on another number of equal buckets.

        New masses are CDF differences at the new edges, which is exact (mass-preserving and
        uniform within old buckets); coarsening by an integer factor simply sums buckets.

        The new masses are a linear map ``R p`` of the old ones, so the result keeps this
        estimate's confidence intervals: a query ``w`` on it is the query ``R^T w`` on this
        one (same standard errors, the same bootstrap for EM/EMS). ``stats`` is None on
        the result (the Stats belong to the mechanism's own buckets).
        """
        from scipy import sparse

        buckets = check_integer(buckets, "buckets", low=1, high=MAX_ENTRIES)
        if buckets == self.buckets:
            return self
        edges = np.linspace(self._low, self._high, buckets + 1)
        # R[k, i]: the fraction of old bucket i inside new bucket k. The merged edges cut
        # [low, high] into at most B + B' pieces, each inside one old and one new bucket.
        cuts = np.unique(np.concatenate([self.edges, edges]))
        mids = 0.5 * (cuts[:-1] + cuts[1:])
        old = bucket_index(mids, self._low, self._high, self.buckets)
        new = bucket_index(mids, self._low, self._high, buckets)
        r = sparse.csr_matrix(
            (np.diff(cuts) / self.width, (new, old)), shape=(buckets, self.buckets)
        )
        mass = np.asarray(r @ self._prob, dtype=np.float64)
        if not self._signed:
            mass = np.maximum(mass, 0.0)
        out = self.replace(probabilities=mass / mass.sum(), stats=None, fit=None)
        object.__setattr__(out, "_origin", (self, r))
        return out


def _row_quantiles(rows: np.ndarray, low: float, high: float, q: np.ndarray) -> np.ndarray:
    """``Distribution(row).quantile(q)`` for every row of masses (negatives clipped)."""
    out = np.empty((rows.shape[0], q.size))
    for i, row in enumerate(rows):  # B rows of one bootstrap, not users
        m = np.maximum(row, 0.0)
        out[i] = Distribution(m / m.sum(), low, high).quantile(q)
    return out


def _shape(values: np.ndarray, like: np.ndarray) -> Any:
    out = values.reshape(like.shape)
    return float(out) if out.ndim == 0 else out


def _first_crossing(xs: np.ndarray, ys: np.ndarray, level: float) -> float:
    """Smallest x with y(x) >= level, y linear between the points."""
    above = np.flatnonzero(ys >= level)
    if above.size == 0:
        return float(xs[-1])
    i = int(above[0])
    if i == 0:
        return float(xs[0])
    y0, y1 = ys[i - 1], ys[i]
    return float(xs[i - 1] + (level - y0) / (y1 - y0) * (xs[i] - xs[i - 1]))


def _last_below(xs: np.ndarray, ys: np.ndarray, level: float) -> float:
    """Largest x with y(x) <= level, y linear between the points."""
    below = np.flatnonzero(ys <= level)
    if below.size == 0:
        return float(xs[0])
    i = int(below[-1])
    if i == xs.size - 1:
        return float(xs[-1])
    y0, y1 = ys[i], ys[i + 1]
    return float(xs[i] + (level - y0) / (y1 - y0) * (xs[i + 1] - xs[i]))
