"""The Laplace baseline for a tuple of numerical attributes: the budget split over attributes.

Each of the d attributes gets ``epsilon / d`` (sequential composition) and is sent with the
Laplace mechanism in its exact discrete form (the two-sided geometric mechanism, Ghosh,
Roughgarden, Sundararajan STOC 2009): the value, scaled to ``[0, 1]``, is rounded without
bias to the grid ``{0, 1/G, ..., 1}`` (an integer ``k``), and the report is ``k + X1 - X2``
with ``X1, X2`` independent geometric counts, ``P[X >= m] = rho^m``. The report's law is
``P[y | k] = (1 - rho) / (1 + rho) rho^|y - k|``, so two inputs differ by at most
``rho^-G`` on every output: ``rho = w_low / w_high`` (integer weights of
:func:`ldpkit._exact.ratio_weights` at ``epsilon / (d G)``) makes the loss
``d G log(w_high / w_low) <= epsilon`` exactly, and every geometric step is one exact
integer coin (:func:`ldpkit._exact.coin`), never a float exponential.

Unbiased: ``E[y] = G t``. Per-user variance on the ``[0, 1]`` scale: ``(phi (1 - phi) + 2 rho
/ (1 - rho)^2) / G^2``, ``phi`` the fractional part of ``G t`` (the rounding), which tends to
the continuous Laplace mechanism's ``2 (d / epsilon)^2`` as G grows. ``G = max(1, ceil(2
epsilon / d))`` keeps ``rho >= e^-0.5`` (few coin rounds) and the rounding's share small.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np

from .._constraints import Alternatives
from .._exact import coin, ratio_loss, ratio_weights, round_to_grid
from .._rng import RNGLike, as_generator
from .._validation import check_integer
from ..spec import Mechanism, Reports, Stats, StatsField, with_report_count
from ._base import MAX_ATTRIBUTES, split_min_epsilon
from ._tuples import (
    ATTRIBUTE_BOUNDS,
    BoxMeanHooks,
    TupleMeans,
    check_mixed_values,
    check_numeric_bounds,
)

__all__ = ["LaplaceMean"]

#: Smallest budget per attribute: the geometric counts have mean ``~ d / epsilon``, and the
#: sampler spends one coin round per unit of noise (1e-3: about 14 000 rounds for 1e6 users).
MIN_ATTRIBUTE_EPSILON = 1e-3
#: Reports are clipped to ``[-MAX_NOISE, G + MAX_NOISE]`` (post-processing: the loss is
#: unchanged). At the smallest budget a geometric count reaches 2^16 with probability
#: ``e^(-65)``, so the clipping biases nothing measurable, and the integer Stats (sums and
#: sums of squares) stay exact in int64 for up to 2^31 reports.
MAX_NOISE = 1 << 16


@dataclasses.dataclass(frozen=True, kw_only=True)
class LaplaceMean(BoxMeanHooks, Mechanism):
    """Means of d numerical attributes, each by the discrete Laplace mechanism at ``eps/d``.

    Parameters
    ----------
    epsilon : float
        The whole tuple's budget (in ``[1e-6, 40]``), split evenly over the attributes.
    low, high : sequence of float
        Bounds of each attribute (1 to 64 attributes).

    Notes
    -----
    Reports: ``values``, an ``(n, d)`` array of integers (grid point plus two-sided
    geometric noise, clipped to ``+-2^16`` beyond the grid: see :data:`MAX_NOISE`). Stats:
    per attribute the integer sum and sum of squares of the reports.
    The mean of attribute j is ``low_j + (high_j - low_j) ybar_j / G``, unbiased, with
    exact variance :meth:`variance_at`, worst case :meth:`variance`; the estimate reports the
    empirical variance (which also counts the spread of the users' values).
    ``privacy_loss()``: ``d G log(w_high / w_low)``.

    References
    ----------
    C. Dwork, F. McSherry, K. Nissim, A. Smith. Calibrating noise to sensitivity. TCC 2006
    (the Laplace mechanism). A. Ghosh, T. Roughgarden, M. Sundararajan. Universally
    utility-maximizing privacy mechanisms. STOC 2009 (its geometric form). T. Wang et al.
    ICDE 2019, section IV (the budget-splitting baseline for several attributes).

    Examples
    --------
    >>> spec = LaplaceMean(epsilon=4.0, low=(0.0, 0.0), high=(1.0, 60.0))
    >>> est = spec.run(np.tile([0.25, 45.0], (40_000, 1)), rng=0)
    >>> bool(np.all(np.abs(est.means - [0.25, 45.0]) < 6 * est.std_error))
    True
    """

    low: tuple[float, ...] = (0.0, 0.0)
    high: tuple[float, ...] = (1.0, 1.0)

    exact_epsilon: ClassVar[bool] = True
    max_epsilon: ClassVar[float] = 40.0
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "low": [ATTRIBUTE_BOUNDS],
        "high": [ATTRIBUTE_BOUNDS],
    }

    def _validate(self) -> None:
        lo, hi = check_numeric_bounds(self.low, self.high, minimum=1, maximum=MAX_ATTRIBUTES)
        self._set("low", lo)
        self._set("high", hi)
        if self.epsilon / self.attributes < MIN_ATTRIBUTE_EPSILON:
            raise ValueError(
                f"epsilon must be >= {self.min_epsilon!r} for "
                f"{self.attributes} attributes (epsilon / d >= {MIN_ATTRIBUTE_EPSILON:g} per "
                f"attribute), got {self.epsilon!r}"
            )

    @property
    def min_epsilon(self) -> float:
        """The smallest budget: each of the d attributes needs ``epsilon / d >= 1e-3``."""
        return split_min_epsilon(MIN_ATTRIBUTE_EPSILON, self.attributes)

    @property
    def attributes(self) -> int:
        """The number of attributes d."""
        return len(self.low)

    @property
    def steps(self) -> int:
        """G, the rounding grid's steps: ``max(1, ceil(2 epsilon / d))``."""
        return max(1, math.ceil(2.0 * self.epsilon / self.attributes))

    def _weights(self) -> tuple[int, int]:
        """``(w_low, w_high)``: one geometric step continues with probability w_low/w_high."""
        return ratio_weights(self.epsilon / (self.attributes * self.steps), 1, 1.0)

    @property
    def rho(self) -> float:
        """The geometric ratio ``w_low / w_high`` (about ``e^(-epsilon / (d G))``)."""
        w_low, w_high = self._weights()
        return w_low / w_high

    @property
    def _spans(self) -> np.ndarray:
        return np.asarray(self.high) - np.asarray(self.low)

    def check_values(self, values: Any) -> np.ndarray:
        """``values`` as a float64 ``(n, d)`` array, column j in ``[low[j], high[j]]``."""
        return check_mixed_values(values, self.low, self.high)

    def _geometric(self, size: int, gen: np.random.Generator) -> np.ndarray:
        """``size`` geometric counts, ``P[X >= m] = rho^m``, one exact coin per step."""
        w_low, w_high = self._weights()
        out = np.zeros(size, dtype=np.int64)
        active = np.arange(size)
        while active.size:  # rounds over the still-running users, not a loop per user
            go = coin(gen, active.size, w_low, w_high)
            active = active[go]
            out[active] += 1
        return out

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Round every attribute to the grid and add two-sided geometric noise."""
        x = self.check_values(values)
        gen = as_generator(rng)
        unit = np.clip((x - np.asarray(self.low)) / self._spans, 0.0, 1.0)
        g = self.steps
        k = round_to_grid(unit.ravel(), g, gen)
        noise = self._geometric(k.size, gen) - self._geometric(k.size, gen)
        y = np.clip(k + noise, -MAX_NOISE, g + MAX_NOISE)
        return Reports(self, values=y.reshape(x.shape))

    def stats_schema(self) -> dict[str, StatsField]:
        """Declare the integer sums and sums of squares per attribute (and the count)."""
        b = MAX_NOISE + self.steps
        d = self.attributes
        return with_report_count(
            {
                "sums": StatsField((d,), low=-MAX_NOISE, high=b),
                "squares": StatsField((d,), low=0, high=b * b),
            }
        )

    def empty_stats(self) -> Stats:
        """Return the Stats of no report."""
        zeros = np.zeros(self.attributes, dtype=np.int64)
        return Stats(self, 0, sums=zeros, squares=zeros.copy(), count=np.int64(0))

    def aggregate(self, reports: Reports) -> Stats:
        """Sum the reports and their squares per attribute."""
        y = self.check_reports(reports).values
        d = self.attributes
        if y.ndim != 2 or y.shape[1] != d:
            raise ValueError(f"reports.values must have shape (n, {d}), got {y.shape}")
        v = y.astype(np.int64)
        if v.size and (int(v.min()) < -MAX_NOISE or int(v.max()) > self.steps + MAX_NOISE):
            raise ValueError(
                f"reports.values must be integers in [{-MAX_NOISE}, {self.steps + MAX_NOISE}]"
            )
        return Stats(
            self,
            y.shape[0],
            sums=v.sum(axis=0, dtype=np.int64),
            squares=(v * v).sum(axis=0, dtype=np.int64),
            count=np.int64(y.shape[0]),
        )

    def estimate(self, stats: Stats) -> TupleMeans:
        """Unbiased mean of every attribute, with the empirical variance."""
        stats = self.check_stats(stats, nonempty=True)
        n = stats.n
        g = self.steps
        ybar = stats.sums / n
        if n > 1:
            squares = stats.squares.astype(np.float64)
            var_y = np.maximum(squares - n * ybar * ybar, 0.0) / ((n - 1) * n)
        else:
            var_y = np.full(self.attributes, self._unit_worst() * g * g)
        spans = self._spans
        means = np.asarray(self.low) + spans * ybar / g
        return TupleMeans(means, spans**2 * var_y / g**2, (), n, spec=self)

    def _unit_worst(self) -> float:
        """Largest per-user variance on the ``[0, 1]`` scale (rounding at phi = 1/2)."""
        rho, g = self.rho, self.steps
        return (0.25 + 2.0 * rho / (1.0 - rho) ** 2) / g**2

    def variance(self, n: int) -> np.ndarray:
        """Worst-case variance of every attribute's mean from n reports."""
        n = check_integer(n, "n", low=1)
        return self._spans**2 * self._unit_worst() / n

    def variance_at(self, n: int, values: Any) -> np.ndarray:
        """Return the exact variance of every mean when the users hold ``values``.

        ``sum_i (phi_i (1 - phi_i) + 2 rho / (1 - rho)^2) / (G n)^2`` in the attributes'
        units squared, ``phi_i`` the fractional part of ``G t_i``.
        """
        x = self.check_values(values)
        n = check_integer(n, "n", low=1)
        if x.shape[0] != n:
            raise ValueError(f"values must hold n = {n} rows, got {x.shape[0]}")
        g, rho = self.steps, self.rho
        scaled = np.clip((x - np.asarray(self.low)) / self._spans, 0.0, 1.0) * g
        phi = scaled - np.floor(scaled)
        per_user = phi * (1.0 - phi) + 2.0 * rho / (1.0 - rho) ** 2
        return self._spans**2 * per_user.sum(axis=0) / (g * n) ** 2

    def privacy_loss(self) -> float:
        """``d G log(w_high / w_low)``: each attribute's inputs differ by at most G steps."""
        w_low, w_high = self._weights()
        return self.attributes * self.steps * ratio_loss(w_low, w_high)
