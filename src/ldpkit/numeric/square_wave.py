"""Square Wave reporting (SW20 section 5): continuous, discrete, and general wave shapes.

A user with value v (mapped to [0, 1]) reports a real number in [-b, 1 + b] whose density
is high (``density_high``) within b of v and low (``density_low``) elsewhere, their ratio
``e^eps``. The server buckets the reports into ``output_buckets`` equal buckets of
[-b, 1 + b] (the mergeable ``Stats.counts``) and recovers a ``buckets``-bucket histogram of
the inputs by EMS or EM (:mod:`ldpkit.numeric.em`) using the exact bucket matrix built
here (``P[output bucket | input uniform in input bucket]``, inputs x outputs).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from abc import abstractmethod
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import (
    check_categorical_values,
    check_integer,
    check_numeric_values,
    check_real,
)
from ..frequency._base import index_dtype
from ..privacy import privacy_loss as _matrix_privacy_loss
from ..privacy import ratio_privacy_loss
from ..spec import Mechanism, Reports, Stats
from .distribution import Distribution, check_bounds

__all__ = [
    "MAX_EPSILON",
    "square_wave_bandwidth",
    "SquareWave",
    "GeneralWave",
    "DiscreteSquareWave",
    "wave_bucket_matrix",
]

#: Largest budget for the continuous waves: beyond it b = O(eps e^-eps) underflows.
MAX_EPSILON = 700.0


def _f(x: float) -> float:
    """``e^x - 1 - x`` without cancellation near 0 (series) or overflow for large -x."""
    if abs(x) < 0.1:
        term, total = x * x / 2.0, 0.0
        k = 2
        while abs(term) > 1e-18 * abs(total) or total == 0.0:
            total += term
            k += 1
            term *= x / k
        return total
    return math.expm1(x) - x


def _plateau_ratio(epsilon: float) -> float:
    """``t = 2 b e^eps`` for SW's b: ``(eps - 1 + e^-eps) / (1 - (1 + eps) e^-eps)``.

    Written as ``f(-eps) e^eps / f(eps)`` with ``f(x) = e^x - 1 - x``; finite for every eps
    (t ~ eps - 1 for large eps, t -> 1 as eps -> 0).
    """
    if epsilon > 30.0:
        r = math.exp(-epsilon)
        return (epsilon - 1.0 + r) / (1.0 - (1.0 + epsilon) * r)
    return _f(-epsilon) * math.exp(epsilon) / _f(epsilon)


def square_wave_bandwidth(epsilon: float) -> float:
    """SW20's b: ``(eps e^eps - e^eps + 1) / (2 e^eps (e^eps - 1 - eps))`` (section 5.3).

    Maximizes an upper bound of the mutual information between input and output on [0, 1].
    Decreases from 1/2 (eps -> 0) to 0 (eps -> inf); evaluated without cancellation.

    Examples
    --------
    >>> [round(square_wave_bandwidth(e), 4) for e in (0.5, 1, 2, 4)]
    [0.3582, 0.2561, 0.1293, 0.0304]
    """
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_inclusive=False)
    return 0.5 * _plateau_ratio(epsilon) * math.exp(-epsilon)


# --- exact transition matrices ---------------------------------------------------------------
def _smoothed_ramp(x: np.ndarray, h1: float, h2: float) -> np.ndarray:
    """``E[max(x + Z, 0)]`` for Z = U1 + U2, U1 ~ U[-h1, h1], U2 ~ U[-h2, h2] (h1 >= h2 >= 0).

    Equal to x for ``x >= h1 + h2`` and 0 for ``x <= -(h1 + h2)``; only the middle needs
    the closed form, where all terms are O(h), so tiny widths lose no precision.
    With ``h2 = 0``: ``(x + h1)^2 / (4 h1)`` (SW20's r/R integrals divided by 2b).
    """
    out = np.maximum(x, 0.0)
    h = h1 + h2
    mid = np.abs(x) < h
    # Work in units of h so that tiny waves (huge epsilon) neither underflow nor overflow.
    xm, a1, a2 = x[mid] / h, h1 / h, h2 / h
    if a2 <= 1e-9 * a1:
        out[mid] = h * (xm + a1) ** 2 / (4.0 * a1)
    else:

        def rho3(y: np.ndarray) -> np.ndarray:
            y = np.maximum(y, 0.0)
            return y * y * y / 6.0

        out[mid] = (
            h
            * (rho3(xm + a1 + a2) - rho3(xm + a1 - a2) - rho3(xm - a1 + a2) + rho3(xm - a1 - a2))
            / (4.0 * a1 * a2)
        )
    return out


def wave_bucket_matrix(
    b: float, ratio: float, density_low: float, buckets: int, output_buckets: int
) -> np.ndarray:
    """Exact ``M[i, j] = P[report in output bucket j | v uniform in input bucket i]``.

    Parameters
    ----------
    b : float
        Half-width of the wave on the unit scale (outputs in [-b, 1 + b]).
    ratio : float
        Top/bottom ratio r of the trapezoid (1: square wave, 0: triangle).
    density_low : float
        The low density (outside the wave), on the unit scale.
    buckets, output_buckets : int
        d input buckets of [0, 1] and d~ output buckets of [-b, 1 + b] (any sizes).

    Returns
    -------
    ndarray, shape (buckets, output_buckets)
        Rows (inputs) sum to 1 (up to ~1e-12), the orientation of every
        ``transition_matrix()`` in ldpkit.

    Notes
    -----
    The density is ``q = density_low`` everywhere on [-b, 1 + b] plus an excess of total mass
    ``1 - q (1 + 2b)`` shaped like the wave, i.e. the law of ``v + Z`` with ``Z`` uniform
    on [-b, b] (square) or a sum of two uniforms (trapezoid). For input bucket [s, t] and
    output bucket [a, c], ``P[v + Z in [a, c]] = (S(c - s) - S(c - t) - S(a - s) +
    S(a - t)) / (t - s)`` with ``S(x) = E max(x + Z, 0)``: the overlap of [s, t] with
    [a - Z, c - Z] written with ramps r(x) = max(x, 0) and averaged over Z. For the square
    wave S is SW20's ``R(x) = r(x)^2/2`` difference divided by 2b (METHODS.md section 3).
    This holds for any d and d~ (the authors' fill does not when d~ > d or when 2b spans
    at most two output buckets).
    """
    d, dt, q = int(buckets), int(output_buckets), float(density_low)
    inp = np.linspace(0.0, 1.0, d + 1)
    out = np.linspace(-b, 1.0 + b, dt + 1)
    h1, h2 = (1.0 + ratio) * b / 2.0, (1.0 - ratio) * b / 2.0
    excess = 1.0 - q * (1.0 + 2.0 * b)
    width_in = np.diff(inp)[None, :]
    result = np.empty((d, dt))
    # Blocks of output rows bound the temporaries (~10 arrays of block x d floats).
    step = max(1, (1 << 19) // (d + 1))
    for j0 in range(0, dt, step):
        j1 = min(dt, j0 + step)
        o = out[j0 : j1 + 1]
        x = o[:, None] - inp[None, :]  # x = o - v at every (output edge, input edge)
        # S(c - s) - S(c - t) - S(a - s) + S(a - t) for every (output cell, input cell).
        # S(x) = x + S(-x) and x has no mixed difference, so either form gives the same
        # cell value; take the one whose S values are small near the cell (S(x) near
        # x = -b, S(-x) near x = +b) so that no large terms cancel.
        lower = -np.diff(np.diff(_smoothed_ramp(x, h1, h2), axis=0), axis=1)
        upper = -np.diff(np.diff(_smoothed_ramp(-x, h1, h2), axis=0), axis=1)
        lo_x = o[:-1, None] - inp[None, 1:]  # a - t: smallest o - v over the cell
        hi_x = o[1:, None] - inp[None, :-1]  # c - s: largest
        wave = np.where(lo_x + hi_x >= 0.0, upper, lower)
        # Cells entirely beyond the wave or entirely under its flat top have exact values.
        area = np.diff(o)[:, None] * width_in
        top = ratio * b
        wave = np.where((lo_x >= h1 + h2) | (hi_x <= -(h1 + h2)), 0.0, wave)
        wave = np.where((lo_x >= -top) & (hi_x <= top), area / (2.0 * h1), wave)
        wave /= width_in
        np.maximum(wave, 0.0, out=wave)
        result[:, j0:j1] = (q * np.diff(o)[:, None] + excess * wave).T
    return result


@functools.lru_cache(maxsize=4)  # a 4096 x 4096 matrix is 134 MB
def _cached_matrix(spec: _Wave) -> np.ndarray:
    m = wave_bucket_matrix(
        spec.b, spec._ratio, spec.density_low, spec.buckets, spec.n_output_buckets
    )
    m.flags.writeable = False
    return m


# --- continuous waves ------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class _Wave(Mechanism):
    """Shared machinery of the continuous wave mechanisms (SW20 Definition 5.1)."""

    low: float = 0.0
    high: float = 1.0
    buckets: int = 1024
    output_buckets: int | None = None
    bandwidth: float | None = None

    def _validate(self) -> None:
        if self.epsilon > MAX_EPSILON:
            raise ValueError(
                f"epsilon must be a finite number > 0 and <= {MAX_EPSILON:g} for {self.name} "
                f"(b underflows beyond), got {self.epsilon!r}"
            )
        lo, hi = check_bounds(self.low, self.high)
        self._set("low", lo)
        self._set("high", hi)
        self._set("buckets", check_integer(self.buckets, "buckets", low=1))
        if self.output_buckets is not None:
            self._set("output_buckets", check_integer(self.output_buckets, "output_buckets", low=1))
        if self.bandwidth is not None:
            self._set(
                "bandwidth",
                check_real(self.bandwidth, "bandwidth", low=0.0, low_inclusive=False),
            )

    @property
    @abstractmethod
    def _ratio(self) -> float:
        """Top/bottom ratio r of the wave (1 = square)."""

    # -- constants (unit scale: inputs [0, 1], outputs [-b, 1 + b]) ---------------------
    @property
    def n_output_buckets(self) -> int:
        """d~: ``output_buckets``, or ``buckets`` when that is None (SW20 sets d~ = d)."""
        return self.buckets if self.output_buckets is None else self.output_buckets

    @property
    def b(self) -> float:
        """Half-width of the wave on the unit scale: ``bandwidth`` or SW20's optimum."""
        return square_wave_bandwidth(self.epsilon) if self.bandwidth is None else self.bandwidth

    @property
    def density_low(self) -> float:
        """Low density on [-b, 1 + b] (unit scale): ``1 / (1 + 2b + (e^eps - 1) b (1 + r))``.

        SW20 writes it q (section 5.2); it is a density, not a probability.
        """
        b = self.b
        # (e^eps - 1) b written as expm1(eps) b; huge eps stays finite because b ~ e^-eps.
        return 1.0 / (1.0 + 2.0 * b + math.expm1(self.epsilon) * b * (1.0 + self._ratio))

    @property
    def density_high(self) -> float:
        """High density (top of the wave, unit scale), ``e^eps density_low`` (SW20's p)."""
        return math.exp(self.epsilon) * self.density_low

    @property
    def span(self) -> float:
        return self.high - self.low

    @property
    def output_low(self) -> float:
        """Smallest possible report, ``low - b (high - low)``."""
        return self.low - self.b * self.span

    @property
    def output_high(self) -> float:
        """Largest possible report, ``high + b (high - low)``."""
        return self.high + self.b * self.span

    def output_edges(self) -> np.ndarray:
        """Edges of the d~ output buckets, in the original units."""
        return np.linspace(self.output_low, self.output_high, self.n_output_buckets + 1)

    # -- client ------------------------------------------------------------------------------
    def check_values(self, values: Any) -> np.ndarray:
        return check_numeric_values(values, self.low, self.high, "values")

    @abstractmethod
    def _sample_unit(self, v: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        """Reports on the unit scale for inputs v in [0, 1]."""

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Report one real number per user; ``reports.values`` is float64 in
        ``[output_low, output_high]``."""
        v = self.check_values(values)
        gen = as_generator(rng)
        y = self._sample_unit((v - self.low) / self.span, gen)
        np.clip(y, -self.b, 1.0 + self.b, out=y)
        y *= self.span
        y += self.low
        return Reports(self, values=y)

    # -- server -------------------------------------------------------------------------------
    def bucket_index(self, reports: Reports) -> np.ndarray:
        """Output bucket (0 .. d~ - 1) of every report."""
        y = self.check_reports(reports).values
        if y.ndim != 1 or y.dtype.kind != "f":
            raise ValueError("reports.values must be a 1-D float array")
        tol = 1e-9 * self.span
        if y.size and not (
            np.all(y >= self.output_low - tol) and np.all(y <= self.output_high + tol)
        ):  # NaN fails too
            raise ValueError(
                f"reports.values must be real numbers in [{self.output_low:g}, "
                f"{self.output_high:g}]"
            )
        dt = self.n_output_buckets
        scale = dt / (self.output_high - self.output_low)
        idx = ((y - self.output_low) * scale).astype(np.int64)
        np.clip(idx, 0, dt - 1, out=idx)
        return idx

    def empty_stats(self) -> Stats:
        return Stats(self, 0, counts=np.zeros(self.n_output_buckets, dtype=np.int64))

    def aggregate(self, reports: Reports) -> Stats:
        """Histogram of the reports over the d~ output buckets (``Stats.counts``)."""
        idx = self.bucket_index(reports)
        counts = np.bincount(idx, minlength=self.n_output_buckets).astype(np.int64)
        return Stats(self, idx.size, counts=counts)

    def bucket_matrix(self) -> np.ndarray:
        """Exact ``M[i, j] = P[output bucket j | input uniform in bucket i]``, shape (d, d~).

        Rows (inputs) sum to 1, as in every transition matrix of ldpkit. This is what EM
        deconvolves; it is not the mechanism's law (inputs are continuous), so it has no
        ``transition_matrix()`` and ``privacy_loss(bucket_matrix()) < epsilon``
        (:meth:`bucketized_privacy_loss`). Cached and read-only.
        """
        return _cached_matrix(self)

    def privacy_loss(self) -> float:
        """Epsilon of the continuous mechanism: ``log(density_high / density_low)``."""
        return ratio_privacy_loss(self.density_high, self.density_low)

    def bucketized_privacy_loss(self) -> float:
        """Epsilon of the bucketized channel (input bucket -> output bucket).

        Averaging over an input bucket and integrating over an output bucket both pull
        the probabilities of one output bucket together, so this is < eps for finite
        d, d~; it approaches eps as the buckets shrink. The continuous reports themselves
        are exactly eps-LDP (:meth:`privacy_loss`).
        """
        return _matrix_privacy_loss(self.bucket_matrix())

    def estimate(
        self,
        stats: Stats,
        method: str = "ems",
        *,
        tol: float | None = None,
        max_iter: int = 10_000,
    ) -> Distribution:
        """Histogram of the inputs on ``buckets`` buckets of [low, high].

        The plain estimate is SW20's: EMS, the estimator the paper proposes and evaluates
        with SW (section 5.5); ``method="em"`` gives plain EM (maximum likelihood, which
        over-fits the noise; section 6.1).

        Parameters
        ----------
        stats : Stats
            Aggregated (and possibly merged) reports of this spec.
        method : {"ems", "em"}
            EMS (default, SW20's estimator) or plain EM.
        tol : float, optional
            Log-likelihood tolerance; default 1e-3 for EMS and ``1e-3 e^eps`` for EM
            (SW20 section 6.1).
        max_iter : int
            Iteration cap.
        """
        return _deconvolve(self, stats, method, tol, max_iter)


def _deconvolve(
    spec: Mechanism, stats: Stats, method: str, tol: float | None, max_iter: int
) -> Distribution:
    """EMS or EM on the spec's bucket matrix (SW20 section 5.5), shared by all waves."""
    from .em import em, ems  # server-side code: imported only when estimating

    stats = spec.check_stats(stats, nonempty=True)
    if method == "ems":
        return ems(stats, tol=1e-3 if tol is None else tol, max_iter=max_iter)
    if method == "em":
        t = 1e-3 * math.exp(min(spec.epsilon, 700.0)) if tol is None else tol
        return em(stats, tol=t, max_iter=max_iter)
    raise ValueError(f"method must be one of 'ems', 'em', got {method!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SquareWave(_Wave):
    """Square Wave (SW) reporting for a numerical value in [low, high] (SW20 section 5.2).

    With v mapped to [0, 1], the report has density ``density_high = e^eps / (2 b e^eps +
    1)`` on ``[v - b, v + b]`` and ``density_low = 1 / (2 b e^eps + 1)`` elsewhere on
    [-b, 1 + b] (SW20's p and q), mapped
    back to the original units. The server histograms reports into ``output_buckets``
    buckets and estimates a ``buckets``-bucket input histogram with EMS (or EM).

    Parameters
    ----------
    epsilon : float
        Privacy budget, in (0, 700].
    low, high : float
        The value domain (default [0, 1]).
    buckets : int
        Number d of input buckets the estimate has (default 1024; SW20 used 256 for
        Beta(5, 2) and 1024 for real data).
    output_buckets : int, optional
        Number d~ of output buckets (default: d).
    bandwidth : float, optional
        b on the unit scale; default SW20's ``(eps e^eps - e^eps + 1) /
        (2 e^eps (e^eps - 1 - eps))`` (section 5.3).

    Notes
    -----
    eps-LDP: every output density is p = density_high or q = density_low, ``p / q = e^eps``.
    Sampling uses one uniform U
    per user: ``U < q v`` gives ``-b + U/q``; ``U < q v + 2 b p`` gives
    ``v - b + (U - q v)/p``; otherwise ``v + b + (U - q v - 2 b p)/q``.

    References
    ----------
    Z. Li, T. Wang, M. Lopuhaä-Zwakenberg, N. Li, B. Škorić. Estimating Numerical
    Distributions under Local Differential Privacy. SIGMOD 2020, sections 5.2-5.5.

    Examples
    --------
    >>> sw = SquareWave(epsilon=1.0, buckets=64)
    >>> round(sw.b, 4)
    0.2561
    >>> values = np.random.default_rng(0).beta(5, 2, size=20_000)
    >>> dist = sw.run(values, rng=0)
    >>> dist.buckets, bool(abs(dist.mean() - values.mean()) < 0.02)
    (64, True)
    """

    @property
    def _ratio(self) -> float:
        return 1.0

    def _sample_unit(self, v: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        b, q = self.b, self.density_low
        plateau = 1.0 - q  # 2 b p (since q + 2 b p = 1), without forming p
        u = gen.random(v.size)
        left = q * v
        y = np.empty_like(v)
        lo = u < left
        mid = ~lo & (u < left + plateau)
        hi = ~(lo | mid)
        y[lo] = u[lo] / q - b
        # (U - q v) / p = (U - q v) 2b / (2 b p)
        y[mid] = v[mid] - b + (u[mid] - left[mid]) * (2.0 * b / plateau)
        y[hi] = v[hi] + b + (u[hi] - left[hi] - plateau) / q
        return y


@dataclasses.dataclass(frozen=True, kw_only=True)
class GeneralWave(_Wave):
    """General Wave with a trapezoid shape of top/bottom ratio ``ratio`` (SW20 section 5.1).

    The output density on [-b, 1 + b] is q plus a symmetric trapezoid centred at v with
    bottom width 2b, top width ``2 ratio b`` and top height ``e^eps q``;
    ``q = density_low = 1 / (1 + 2b + (e^eps - 1) b (1 + ratio))``. ``ratio = 1`` is the Square Wave,
    ``ratio = 0`` the triangle.

    Parameters
    ----------
    epsilon, low, high, buckets, output_buckets, bandwidth
        As for :class:`SquareWave` (b defaults to the Square Wave's).
    ratio : float
        Trapezoid top/bottom ratio r in [0, 1].

    Notes
    -----
    eps-LDP: the density lies in ``[q, e^eps q]``. Sampler: with probability
    ``q (1 + 2b)`` a uniform on [-b, 1 + b]; otherwise ``v + U1 + U2`` with U1 uniform on
    ``[-(1+r)b/2, (1+r)b/2]`` and U2 on ``[-(1-r)b/2, (1-r)b/2]``, whose sum has exactly the
    trapezoid's shape.

    References
    ----------
    Z. Li et al., SIGMOD 2020, Definition 5.1 and section 6.4 (wave shapes).

    Examples
    --------
    >>> gw = GeneralWave(epsilon=1.0, ratio=0.0, buckets=32)
    >>> round(gw.density_high / gw.density_low, 6) == round(math.e, 6)
    True
    """

    ratio: float = 1.0

    def _validate(self) -> None:
        super()._validate()
        self._set("ratio", check_real(self.ratio, "ratio", low=0.0, high=1.0))

    @property
    def _ratio(self) -> float:
        return self.ratio

    def _sample_unit(self, v: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        b, q, r = self.b, self.density_low, self.ratio
        n = v.size
        u = gen.random((3, n))
        uniform = u[0] < q * (1.0 + 2.0 * b)
        h1, h2 = (1.0 + r) * b / 2.0, (1.0 - r) * b / 2.0
        wave = v + (2.0 * u[1] - 1.0) * h1 + (2.0 * u[2] - 1.0) * h2
        flat = -b + u[1] * (1.0 + 2.0 * b)
        return np.where(uniform, flat, wave)


# --- discrete square wave --------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class DiscreteSquareWave(Mechanism):
    """Square Wave on a discrete domain of d items ("bucketize before randomize", SW20 5.4).

    Bucket index v in {0..d-1} is reported as an item of {-b~ .. d - 1 + b~} (sent shifted, as
    ``v + b~`` in ``[0, d + 2 b~)``): the 2b~ + 1 items within b~ of v each with probability
    ``p = e^eps / ((2b~ + 1) e^eps + d - 1)``, every other one with ``q = p e^-eps``;
    ``b~ = floor(b d)`` with SW20's b. The d items index the equal buckets of [low, high]
    (the user bucketizes her value first); the estimate is a Distribution on them.

    Parameters
    ----------
    epsilon : float
        Privacy budget (> 0).
    buckets : int
        Number d of buckets of [low, high], i.e. of input items (>= 2).
    low, high : float
        Interval the d items partition (for the estimated Distribution); default [0, 1].

    Notes
    -----
    eps-LDP, tightly: every output column of the transition matrix (inputs x outputs)
    holds p and q.

    References
    ----------
    Z. Li et al., SIGMOD 2020, section 5.4 ("Bucketize before randomize").

    Examples
    --------
    >>> dsw = DiscreteSquareWave(epsilon=1.0, buckets=16)
    >>> dsw.half_width, dsw.n_outputs
    (4, 24)
    >>> round(dsw.privacy_loss(), 12)
    1.0
    """

    buckets: int
    low: float = 0.0
    high: float = 1.0

    def _validate(self) -> None:
        self._set("buckets", check_integer(self.buckets, "buckets", low=2))
        lo, hi = check_bounds(self.low, self.high)
        self._set("low", lo)
        self._set("high", hi)

    @property
    def half_width(self) -> int:
        """b~ = floor(b d)."""
        b = 0.5 * _plateau_ratio(self.epsilon) * math.exp(-self.epsilon)
        return math.floor(b * self.buckets)

    @property
    def n_outputs(self) -> int:
        return self.buckets + 2 * self.half_width

    @property
    def p(self) -> float:
        w = 2 * self.half_width + 1
        return 1.0 / (w + (self.buckets - 1) * math.exp(-self.epsilon))

    @property
    def q(self) -> float:
        return self.p * math.exp(-self.epsilon)

    def check_values(self, values: Any) -> np.ndarray:
        return check_categorical_values(values, self.buckets, "values")

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """``reports.values``: output items shifted by b~, in ``[0, d + 2 b~)``."""
        v = self.check_values(values)
        u = as_generator(rng).random(v.size)
        bt, p, q = self.half_width, self.p, self.q
        w = 2 * bt + 1
        near = u < w * p
        k_near = v + np.minimum((u / p).astype(np.int64), w - 1)
        other = np.minimum(np.maximum((u - w * p) / q, 0.0).astype(np.int64), self.buckets - 2)
        k_far = np.where(other < v, other, other + w)
        y = np.where(near, k_near, k_far)
        return Reports(self, values=y.astype(index_dtype(self.n_outputs)))

    def output_index(self, reports: Reports) -> np.ndarray:
        y = self.check_reports(reports).values
        if y.ndim != 1 or y.dtype.kind not in "iu" or (y.size and int(y.max()) >= self.n_outputs):
            raise ValueError(f"reports.values must be items in [0, {self.n_outputs})")
        return np.asarray(y, dtype=np.int64)

    def empty_stats(self) -> Stats:
        return Stats(self, 0, counts=np.zeros(self.n_outputs, dtype=np.int64))

    def aggregate(self, reports: Reports) -> Stats:
        idx = self.output_index(reports)
        return Stats(self, idx.size, counts=np.bincount(idx, minlength=self.n_outputs))

    def transition_matrix(self) -> np.ndarray:
        """``M[i, j] = P[output j | item i]``, shape (d, d + 2b~); rows sum to 1."""
        d, bt = self.buckets, self.half_width
        i = np.arange(d)[:, None]
        j = np.arange(self.n_outputs)[None, :]
        return np.where(np.abs(j - bt - i) <= bt, self.p, self.q)

    def bucket_matrix(self) -> np.ndarray:
        """What EM deconvolves: the transition matrix itself (inputs are the buckets)."""
        return self.transition_matrix()

    def privacy_loss(self) -> float:
        return _matrix_privacy_loss(self.transition_matrix())

    def estimate(
        self, stats: Stats, method: str = "ems", *, tol: float | None = None, max_iter: int = 10_000
    ) -> Distribution:
        """Distribution over the d buckets of [low, high] by EMS (default) or EM.

        Parameters as for :meth:`SquareWave.estimate`.
        """
        return _deconvolve(self, stats, method, tol, max_iter)
