"""Duchi et al.'s multi-dimensional mean: one vertex of a scaled hypercube per user.

Each user holds d reals; on the ``[-1, 1]`` scale she rounds every coordinate to a sign
(``P[+1] = (1 + t_j) / 2``, unbiased), then reports a vertex ``z`` of ``{-B, B}^d`` that
agrees with the sign vector on ``a`` coordinates, where vertices with ``2a > d`` (positive
inner product) carry the integer weight ``w_high`` and the others ``w_low``,
``w_high / w_low <= e^eps`` (:func:`ldpkit._exact.ratio_weights`). ``B`` makes
``E[z] = t``. This is the l_inf-ball mechanism of Duchi, Jordan and Wainwright (JASA 2018,
section 4.2.3), also Algorithm 3 of Wang et al. (ICDE 2019).

Weights, not the paper's coin. The paper draws a vertex uniformly from ``T+`` (positive
inner product) with probability ``e^eps / (e^eps + 1)``, else from the rest ``T-``; for
even d the two sets differ in size (the ties, inner product 0, sit in ``T-``), so the
per-vertex probabilities differ by ``e^eps |T-| / |T+| > e^eps``. Per-vertex weights make
the ratio exactly ``w_high / w_low`` for every d; for odd d the law is the paper's.

Unbiasing constant. With ``Z = |T+| w_high + |T-| w_low`` and ``S = binom(d - 1,
ceil((d - 1) / 2))`` (the sum of ``z_1`` over ``T+`` for the all-ones sign vector),
``E[z_j / B | signs] = S (w_high - w_low) / Z * sign_j``, so ``B = Z / (S (w_high -
w_low))``; for odd d and exact weights this is the paper's ``(e^eps + 1) / (e^eps - 1)
2^(d-1) / binom(d - 1, (d - 1) / 2)``. Each coordinate of the report is ``+-B``, so the
per-user variance of coordinate j is exactly ``B^2 - t_j^2``.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from typing import Any, ClassVar

import numpy as np

from .._constraints import Alternatives
from .._exact import ratio_loss, ratio_weights, round_to_grid
from .._rng import RNGLike, as_generator
from .._validation import check_integer
from ..spec import Mechanism, Reports, Stats, StatsField, with_report_count
from ._tuples import (
    ATTRIBUTE_BOUNDS,
    BoxMeanHooks,
    TupleMeans,
    check_mixed_values,
    check_numeric_bounds,
)

__all__ = ["DuchiMean"]

#: Most attributes: the law enumerates agreement counts 0..d, and its total ``~2^d e^eps``
#: must stay below 2^62 (so d = 32 leaves room for epsilon up to ~20).
MAX_DUCHI_ATTRIBUTES = 32
#: Largest d for which :meth:`DuchiMean.grid_matrix` enumerates the ``2^d x 2^d`` law.
MAX_MATRIX_ATTRIBUTES = 10


@functools.lru_cache(maxsize=256)
def _law(epsilon: float, d: int) -> tuple[int, int, np.ndarray, float]:
    """``(w_low, w_high, cumulative weights of a = 0..d, B)`` of the integer law."""
    n_high = sum(math.comb(d, a) for a in range(d + 1) if 2 * a > d)
    n_low = 2**d - n_high
    w_low, w_high = ratio_weights(epsilon, n_low, float(n_high))
    weights = [math.comb(d, a) * (w_high if 2 * a > d else w_low) for a in range(d + 1)]
    cumulative = np.array([0, *itertools.accumulate(weights)], dtype=np.int64)
    total = n_low * w_low + n_high * w_high
    s = math.comb(d - 1, math.ceil((d - 1) / 2))
    b = total / (s * (w_high - w_low)) if w_high > w_low else math.inf
    return w_low, w_high, cumulative, b


@dataclasses.dataclass(frozen=True, kw_only=True)
class DuchiMean(BoxMeanHooks, Mechanism):
    """Duchi et al.'s mean of d numerical attributes at once (a hypercube vertex per user).

    Parameters
    ----------
    epsilon : float
        The whole tuple's budget (in ``[1e-6, 30]``; large d lowers the ceiling, see
        :data:`MAX_DUCHI_ATTRIBUTES`).
    low, high : sequence of float
        Bounds of each attribute (2 to 32 attributes).

    Notes
    -----
    Reports: ``signs``, an ``(n, d)`` array of bits (1 for ``+B``). Stats: the count of
    ``+B`` per attribute (``positives``), so the unit-scale mean of attribute j is
    ``B (2 P_j - n) / n``, unbiased with variance ``sum_i (B^2 - t_ij^2) / n^2``
    (Duchi et al. 2018, section 4.2.3; Wang et al. 2019, section IV-A), in the attribute's units times ``((high - low) / 2)^2``. The estimate's
    variance is the empirical one, ``(B^2 - ybar^2) / (n - 1)`` on the unit scale (every
    report has ``z_j^2 = B^2``). ``privacy_loss()`` is ``log(w_high / w_low)``.

    References
    ----------
    J. Duchi, M. Jordan, M. Wainwright. Minimax optimal procedures for locally private
    estimation. JASA 2018, section 4.2.3. T. Wang et al. Collecting and analyzing
    multidimensional data with local differential privacy. ICDE 2019, section IV-A.

    Examples
    --------
    >>> spec = DuchiMean(epsilon=4.0, low=(0.0, 0.0, 0.0), high=(1.0, 10.0, 100.0))
    >>> x = np.tile([0.5, 2.0, 80.0], (20_000, 1))
    >>> est = spec.run(x, rng=0)
    >>> bool(np.all(np.abs(est.means - [0.5, 2.0, 80.0]) < 6 * est.std_error))
    True
    """

    low: tuple[float, ...] = (0.0, 0.0)
    high: tuple[float, ...] = (1.0, 1.0)

    exact_epsilon: ClassVar[bool] = True
    max_epsilon: ClassVar[float] = 30.0
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "low": [ATTRIBUTE_BOUNDS],
        "high": [ATTRIBUTE_BOUNDS],
    }

    def _validate(self) -> None:
        lo, hi = check_numeric_bounds(self.low, self.high, minimum=2, maximum=MAX_DUCHI_ATTRIBUTES)
        self._set("low", lo)
        self._set("high", hi)
        _law(self.epsilon, self.attributes)  # raises when the integer law cannot hold

    @property
    def attributes(self) -> int:
        """The number of attributes d."""
        return len(self.low)

    @property
    def magnitude(self) -> float:
        """``B``: every report coordinate is ``+-B`` on the ``[-1, 1]`` scale."""
        return _law(self.epsilon, self.attributes)[3]

    @property
    def _half_spans(self) -> np.ndarray:
        return (np.asarray(self.high) - np.asarray(self.low)) / 2.0

    def check_values(self, values: Any) -> np.ndarray:
        """``values`` as a float64 ``(n, d)`` array, column j in ``[low[j], high[j]]``."""
        return check_mixed_values(values, self.low, self.high)

    def _to_unit(self, x: np.ndarray) -> np.ndarray:
        lo = np.asarray(self.low)
        return np.clip((x - lo) / self._half_spans - 1.0, -1.0, 1.0)

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Round every coordinate to a sign, then draw the vertex from the integer law."""
        t = self._to_unit(self.check_values(values))
        gen = as_generator(rng)
        n, d = t.shape
        # unbiased rounding to a sign (a value-dependent float coin is harmless: for each
        # sign vector the vertex law is within the ratio bound, and so is the mixture)
        signs = round_to_grid(((t + 1.0) / 2.0).ravel(), 1, gen).reshape(n, d)
        _, _, cumulative, _ = _law(self.epsilon, d)
        u = np.asarray(gen.integers(0, int(cumulative[-1]), size=n, dtype=np.int64))
        agree = np.searchsorted(cumulative[1:], u, side="right")  # a in [0, d], exact law
        # which a coordinates agree: a uniform permutation per user, exactly (integer draws)
        perm = gen.permuted(np.broadcast_to(np.arange(d), (n, d)), axis=1)
        rank = np.empty_like(perm)
        np.put_along_axis(rank, perm, np.broadcast_to(np.arange(d), (n, d)), axis=1)
        keep = rank < agree[:, None]
        out = np.where(keep, signs, 1 - signs).astype(np.uint8)
        return Reports(self, signs=out)

    def stats_schema(self) -> dict[str, StatsField]:
        """``positives``: the count of ``+B`` reports per attribute (and the report count)."""
        return with_report_count({"positives": StatsField((self.attributes,))})

    def empty_stats(self) -> Stats:
        """Return the Stats of no report."""
        return Stats(
            self,
            0,
            positives=np.zeros(self.attributes, dtype=np.int64),
            count=np.int64(0),
        )

    def aggregate(self, reports: Reports) -> Stats:
        """Count the ``+B`` coordinates of every attribute."""
        z = self.check_reports(reports).signs
        d = self.attributes
        if z.ndim != 2 or z.shape[1] != d:
            raise ValueError(f"reports.signs must have shape (n, {d}), got {z.shape}")
        if z.size and int(z.max()) > 1:
            raise ValueError("reports.signs must be bits (0 for -B, 1 for +B)")
        positives = z.sum(axis=0, dtype=np.int64)
        return Stats(self, z.shape[0], positives=positives, count=np.int64(z.shape[0]))

    def estimate(self, stats: Stats) -> TupleMeans:
        """Unbiased mean of every attribute, with the empirical variance."""
        stats = self.check_stats(stats, nonempty=True)
        n = stats.n
        b = self.magnitude
        ybar = b * (2.0 * stats.positives - n) / n
        if n > 1:
            unit_var = np.maximum(b * b - ybar * ybar, 0.0) * n / (n - 1) / n
        else:  # one report has no sample variance: the worst case stands in
            unit_var = np.full(self.attributes, b * b)
        h = self._half_spans
        means = np.asarray(self.low) + (ybar + 1.0) * h
        return TupleMeans(means, h * h * unit_var, (), n, spec=self)

    def variance(self, n: int) -> np.ndarray:
        """Worst-case variance of every attribute's mean from n reports: ``(h/2)^2 B^2 / n``."""
        n = check_integer(n, "n", low=1)
        return self._half_spans**2 * self.magnitude**2 / n

    def variance_at(self, n: int, values: Any) -> np.ndarray:
        """Return the exact variance of every mean when the users hold ``values``.

        ``sum (B^2 - t^2)`` over users, over ``n^2``, in the attributes' units squared.
        """
        t = self._to_unit(self.check_values(values))
        n = check_integer(n, "n", low=1)
        if t.shape[0] != n:
            raise ValueError(f"values must hold n = {n} rows, got {t.shape[0]}")
        return self._half_spans**2 * np.sum(self.magnitude**2 - t * t, axis=0) / n**2

    def privacy_loss(self) -> float:
        """``log(w_high / w_low)`` of the integer law (both extreme sign vectors, any vertex)."""
        w_low, w_high, _, _ = _law(self.epsilon, self.attributes)
        return ratio_loss(w_low, w_high)

    def grid_matrix(self) -> np.ndarray:
        """Exact ``P[vertex | sign vector]``, shape ``(2^d, 2^d)``, for d <= 10.

        Rows and columns are bit vectors read as binary numbers (attribute 0 the most
        significant bit). Not named ``transition_matrix``: the inputs are reals; this is
        the law after the rounding to signs, what the sampler draws from and what
        ``privacy_loss`` is computed on.
        """
        d = self.attributes
        if d > MAX_MATRIX_ATTRIBUTES:
            raise NotImplementedError(
                f"{self.name} enumerates its 2^d vertices only up to d = "
                f"{MAX_MATRIX_ATTRIBUTES}, got d = {d}"
            )
        w_low, w_high, cumulative, _ = _law(self.epsilon, d)
        codes = np.arange(2**d)
        diff = codes[:, None] ^ codes[None, :]
        popcount = np.zeros(diff.shape, dtype=np.int64)
        for bit in range(d):
            popcount += (diff >> bit) & 1
        agree = d - popcount
        weight = np.where(2 * agree > d, w_high, w_low).astype(np.float64)
        return weight / float(int(cumulative[-1]))

    def output_index(self, reports: Reports) -> np.ndarray:
        """Each report's vertex as a column of :meth:`grid_matrix`."""
        z = self.check_reports(reports).signs.astype(np.int64)
        powers = 2 ** np.arange(self.attributes - 1, -1, -1, dtype=np.int64)
        return z @ powers
