"""Baselines for ToPL (STR21 §5-6): no threshold, the fixed public domain ``[0, B]``.

=================  ==================================================  =====================
name               every user reports                                  range sum
=================  ==================================================  =====================
``FixedDomainLDP`` ``v`` with PM, SR (or HM) on ``[0, B]``              sum of the per-user
                                                                       unbiased estimates
``SWOnly``         ``v`` with Square Wave on ``[0, B]``                 ``"unbiased"``: sum of
                                                                       per-user unbiased SW
                                                                       estimates;
                                                                       ``"distribution"``:
                                                                       ``(j - i)`` times the
                                                                       mean of the EMS
                                                                       distribution
=================  ==================================================  =====================

Neither spends users on a threshold, so every user is released and nothing is clipped:
the answers are unbiased for the raw values, at the price of noise on the scale of B.
They reuse ToPL's store (:mod:`ldpkit.stream._local`), ingest path and serialization.

Which SW-only? STR21 uses Square Wave only to learn the threshold; a stream baseline that
uses SW alone must turn reports into range sums. Two readings are offered:

* ``"unbiased"`` (default): a SW report u (unit scale) has ``E[u | v] = a + c v`` with
  ``a = q (1 + 2b) / 2`` and ``c = 1 - q (1 + 2b) = 2b (p - q)``, so ``(u - a) / c`` is an
  unbiased per-user estimate; range sums are exact sums of those, with standard errors.
  SW is built for distributions, not means: ``c`` is small and the per-user variance large.
* ``"distribution"``: ``(j - i)`` times the mean of the EMS estimate from every report
  received so far. It ignores *which* users are in the range (biased for any range whose
  mean differs from the stream's, e.g. a daily cycle) and has no analytic standard error
  (reported as NaN); on a shuffled stream it is hard to beat for long ranges.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from .._rng import RNGLike
from .._validation import check_integer
from ..numeric.distribution import Distribution
from ..numeric.mean import HybridMechanism, PiecewiseMechanism, StochasticRounding
from ..numeric.square_wave import SquareWave
from ..spec import Mechanism, Reports, Stats
from ._local import LocalStreamRelease

__all__ = ["FixedDomainLDP", "SWOnly", "square_wave_mean_constants", "square_wave_mean_variance"]

_MEAN_MECHANISMS: dict[str, type[PiecewiseMechanism | StochasticRounding | HybridMechanism]] = {
    "pm": PiecewiseMechanism,
    "sr": StochasticRounding,
    "hm": HybridMechanism,
}


class FixedDomainLDP(LocalStreamRelease):
    """Every user reports ``v`` in ``[0, B]`` with PM, SR or HM; no threshold, no clipping.

    Parameters
    ----------
    epsilon : float
        Every user's budget.
    bound : float
        The public domain ``[0, B]``.
    mechanism : {"pm", "sr", "hm"}
        Piecewise Mechanism, Stochastic Rounding or the Hybrid Mechanism.
    block_size : int
        As for :class:`~ldpkit.stream.ToPL` (default 1: exact prefix sums).
    rng : Generator, int, SeedSequence or None
        Randomness of the simulated clients.

    Notes
    -----
    Per-user variance: ``(B/2)^2`` times the mechanism's worst-case variance on [-1, 1]
    (PM: ``4E/(3(E-1)^2)``, SR: ``C^2``, HM: STR21 eq. 14); used for the standard errors.

    Examples
    --------
    >>> values = np.random.default_rng(1).poisson(5.0, 20_000).clip(0, 100).astype(float)
    >>> pm = FixedDomainLDP(epsilon=2.0, bound=100, mechanism="pm", rng=0).update(values)
    >>> est, se = pm.range_sum(0, 20_000)
    >>> bool(abs(est - values.sum()) < 6 * se), pm.threshold
    (True, 100.0)
    """

    def __init__(
        self,
        epsilon: float,
        bound: float,
        *,
        mechanism: Literal["pm", "sr", "hm"] = "pm",
        block_size: int = 1,
        rng: RNGLike = None,
    ) -> None:
        if mechanism not in _MEAN_MECHANISMS:
            raise ValueError(
                f"mechanism must be one of {tuple(_MEAN_MECHANISMS)}, got {mechanism!r}"
            )
        self.mechanism = mechanism
        super().__init__(epsilon, bound, threshold_size=0, block_size=block_size, rng=rng)
        self._set_threshold(self.bound)

    def _perturb_spec(self, threshold: float) -> Mechanism:
        return _MEAN_MECHANISMS[self.mechanism](epsilon=self.epsilon, low=0.0, high=threshold)

    @property
    def per_user_variance(self) -> float | None:
        """Worst-case variance of one user's estimate, in squared units."""
        spec = self._spec
        assert isinstance(spec, (PiecewiseMechanism, StochasticRounding, HybridMechanism))
        return spec.half_span**2 * float(spec.unit_variance())

    def _estimates(self, reports: Reports) -> np.ndarray:
        spec = self._spec
        assert isinstance(spec, (PiecewiseMechanism, StochasticRounding, HybridMechanism))
        spec._unit_reports(reports)  # validates the range of every report
        return np.asarray(reports.values, dtype=np.float64)


def square_wave_mean_constants(spec: SquareWave) -> tuple[float, float, float]:
    """Return ``(a, c, v*)`` of a Square Wave report u on the unit scale.

    ``E[u | v] = a + c v``, and ``v*`` is the worst-case per-user variance of the unbiased
    estimate ``(u - a) / c``.

    With density q on ``[-b, 1 + b]`` plus ``p - q`` on ``[v - b, v + b]``:
    ``E[u^2] = q ((1 + b)^3 + b^3) / 3 + (p - q)(2 b v^2 + 2 b^3 / 3)``, so
    ``Var(u | v) = E[u^2] - (a + c v)^2`` is a convex parabola in v, symmetric about 1/2:
    its maximum over [0, 1] is at v = 0 (and 1).

    Examples
    --------
    >>> a, c, worst = square_wave_mean_constants(SquareWave(epsilon=1.0))
    >>> round(a, 4), round(c, 4), round(worst, 2)
    (0.3161, 0.3679, 1.38)
    """
    if not isinstance(spec, SquareWave):
        raise TypeError(f"spec must be a SquareWave, got {type(spec).__name__}")
    b, q, p = spec.b, spec.density_low, spec.density_high
    a = q * (1.0 + 2.0 * b) / 2.0
    c = 1.0 - q * (1.0 + 2.0 * b)
    second = q * ((1.0 + b) ** 3 + b**3) / 3.0 + (p - q) * (2.0 * b**3 / 3.0)  # at v = 0
    var0 = second - a * a
    return a, c, var0 / (c * c)


def square_wave_mean_variance(spec: SquareWave, v: Any) -> np.ndarray:
    """Exact per-user variance of the unbiased SW estimate at unit-scale values v."""
    b, q, p = spec.b, spec.density_low, spec.density_high
    a, c, _ = square_wave_mean_constants(spec)
    v = np.asarray(v, dtype=np.float64)
    second = q * ((1.0 + b) ** 3 + b**3) / 3.0 + (p - q) * (2.0 * b * v * v + 2.0 * b**3 / 3.0)
    return (second - (a + c * v) ** 2) / (c * c)


class SWOnly(LocalStreamRelease):
    """Every user reports ``v`` in ``[0, B]`` with Square Wave; no threshold, no clipping.

    Parameters
    ----------
    epsilon : float
        Every user's budget.
    bound : float
        The public domain ``[0, B]``.
    buckets : int
        Square Wave's buckets (for the ``"distribution"`` answers; default 1024).
    estimator : {"unbiased", "distribution"}
        Per-user unbiased estimates (default) or the EMS distribution's mean times the
        range length (see the module notes).
    block_size : int
        As for :class:`~ldpkit.stream.ToPL` (default 1).
    rng : Generator, int, SeedSequence or None
        Randomness of the simulated clients.

    Examples
    --------
    >>> values = np.random.default_rng(1).poisson(5.0, 20_000).clip(0, 100).astype(float)
    >>> sw = SWOnly(epsilon=2.0, bound=100, buckets=128, rng=0).update(values)
    >>> est, se = sw.range_sum(0, 20_000)
    >>> bool(abs(est - values.sum()) < 6 * se)
    True
    """

    def __init__(
        self,
        epsilon: float,
        bound: float,
        *,
        buckets: int = 1024,
        estimator: Literal["unbiased", "distribution"] = "unbiased",
        block_size: int = 1,
        rng: RNGLike = None,
    ) -> None:
        if estimator not in ("unbiased", "distribution"):
            raise ValueError(
                f"estimator must be one of ('unbiased', 'distribution'), got {estimator!r}"
            )
        self.estimator = estimator
        self.buckets = check_integer(buckets, "buckets", low=1)
        super().__init__(epsilon, bound, threshold_size=0, block_size=block_size, rng=rng)
        self._counts = np.zeros(0, dtype=np.int64)
        self._set_threshold(self.bound)
        self._cache: tuple[int, Distribution] | None = None

    def _perturb_spec(self, threshold: float) -> Mechanism:
        spec = SquareWave(epsilon=self.epsilon, low=0.0, high=threshold, buckets=self.buckets)
        self._counts = np.zeros(spec.n_output_buckets, dtype=np.int64)
        return spec

    @property
    def _sw(self) -> SquareWave:
        spec = self._spec
        assert isinstance(spec, SquareWave)
        return spec

    @property
    def per_user_variance(self) -> float | None:
        """``B^2 v*`` (:func:`square_wave_mean_constants`), the worst case over values."""
        return self.bound**2 * square_wave_mean_constants(self._sw)[2]

    def _estimates(self, reports: Reports) -> np.ndarray:
        spec = self._sw
        idx = spec.bucket_index(reports)  # validates the range of every report
        self._counts += np.bincount(idx, minlength=self._counts.size)
        a, c, _ = square_wave_mean_constants(spec)
        y = np.asarray(reports.values, dtype=np.float64)
        return (y - spec.low - a * spec.span) / c + spec.low

    @property
    def report_counts(self) -> Stats:
        """Histogram of every report over Square Wave's output buckets (mergeable)."""
        return Stats(self._sw, int(self._counts.sum()), counts=self._counts.copy())

    def distribution(self) -> Distribution:
        """EMS estimate of the value distribution from every report so far (cached)."""
        n = self.n_released
        if n == 0:
            raise ValueError("no reports have been ingested yet")
        if self._cache is None or self._cache[0] != n:
            self._cache = (n, self._sw.estimate(self.report_counts))
        return self._cache[1]

    def _range_estimates(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        if self.estimator == "unbiased" or self.n_released == 0:
            return super()._range_estimates(starts, stops)
        return (stops - starts).astype(np.float64) * self.distribution().mean()

    def _range_variances(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        if self.estimator == "distribution":
            return np.full(np.shape(starts), math.nan)
        return super()._range_variances(starts, stops)

    def _state(self) -> dict[str, Any]:
        return {**self._store_state(), "counts": self._counts.copy()}

    def _load_state(self, state: dict[str, Any]) -> None:
        self._load_store(state)
        counts = np.asarray(state["counts"], dtype=np.int64).reshape(-1)
        if counts.shape != self._counts.shape:
            raise ValueError(
                f"state counts must have {self._counts.size} buckets, got {counts.size}"
            )
        self._counts = counts.copy()
        self._cache = None
