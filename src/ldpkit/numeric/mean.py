"""Mean (and variance) of a numerical value under LDP: SR, PM and HM.

Each mechanism maps a value in [low, high] to t in [-1, 1] and reports an unbiased estimate
of t (Wang et al., ICDE 2019), sent back in the original units; the server's sufficient
statistic is the count, the sum and the sum of squares of the reports (``Stats``), so the
mean and its standard error come from merged statistics of any number of machines.

Per-user variance of the report on the [-1, 1] scale, with ``C = (e^eps + 1)/(e^eps - 1)``
and ``E = e^(eps/2)``:

- SR (Duchi et al.'s one-dimensional mechanism, "stochastic rounding"): ``C^2 - t^2``,
  worst case ``C^2`` at t = 0.
- PM: ``t^2 / (E - 1) + (E + 3) / (3 (E - 1)^2)``, worst case ``4 E / (3 (E - 1)^2)``
  at |t| = 1.
- HM (PM with probability ``a = 1 - e^(-eps/2)`` if eps > 0.61, else SR): the mixture of
  two unbiased reports has variance ``a Var_PM(t) + (1 - a) Var_SR(t)``; the t^2 terms
  cancel (``a / (E - 1) = 1 - a = 1/E``), so it is the constant
  ``[C^2 + (E + 3) / (3 (E - 1))] / E`` (STR21 eq. 14); for eps <= 0.61 it is SR's.

Derivations. SR outputs ``+-C`` with ``P[+C] = 1/2 + t / (2C)``: mean t, second moment
C^2. PM outputs uniform on ``[l, r] = [t - (1 - t)/(E - 1), t + (1 + t)/(E - 1)]`` with
probability ``E / (E + 1)``, else uniform on ``[-s, l) U (r, s]``, ``s = (E + 1)/(E - 1)``;
integrating y^2 against that density gives the formula above (Wang et al. 2019, Lemma 1).

Reports on a grid. The closed forms above are the papers'; the specs send a
value of a fixed grid drawn from an exact integer law (:mod:`ldpkit._exact`), so that no
float rounding reveals the input: SR rounds t (unbiasedly) to ``2^16`` steps and reports
``+-C'`` with integer odds; PM reports one of ``report_cells`` (2^18) cells, m of them (PM's
share ``1/(E + 1)``) with the high weight, decoded by an affine map that keeps the report
unbiased; HM mixes the two. ``unit_variance`` is the grid law's exact variance (within ~1e-5
of the closed forms for eps in [0.5, 8]); ``privacy_loss`` is the law's ``log(w_high/w_low)``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, ClassVar

import numpy as np

from .. import _crmath
from .._constraints import FINITE_BOUND, Alternatives, Integer
from .._exact import ratio_loss, ratio_weights, round_to_grid, sample_flat_bump
from .._rng import RNGLike, as_generator
from .._validation import (
    MAX_MAGNITUDE,
    check_array,
    check_epsilon,
    check_integer,
    check_numeric_values,
    check_probability,
)
from ..spec import Mechanism, Reports, Stats, StatsField, with_report_count
from .distribution import check_bounds

__all__ = [
    "HYBRID_THRESHOLD",
    "StochasticRounding",
    "PiecewiseMechanism",
    "HybridMechanism",
    "MeanEstimate",
    "VarianceEstimate",
    "estimate_variance",
    "stochastic_rounding_variance",
    "piecewise_variance",
    "hybrid_variance",
    "hybrid_worst_case_variance",
]

#: HM uses SR alone at or below this budget (Wang et al. 2019, eps* ~ 0.61).
HYBRID_THRESHOLD = 0.61

#: Largest budget of SR and HM: their integer law needs 2^16 (1 + e^eps) <= 2^62.
MAX_EPSILON = 30.0


# --- closed forms on the [-1, 1] scale -----------------------------------------------------------
def _c(epsilon: float) -> float:
    """SR's output magnitude (e^eps + 1)/(e^eps - 1) = 1/tanh(eps/2)."""
    return 1.0 / math.tanh(epsilon / 2.0)


#: The closed forms below hold at any budget; past 40 they only lose precision (e^-20 ~ 2e-9)
#: and far past it overflow, so they accept the largest budget of any mean mechanism.
_FORMULA_MAX_EPSILON = 40.0


def _check_t(t: Any) -> Any:
    """Check true values on the [-1, 1] scale (a number or an array); return them as float64."""
    arr = check_array(t, "t", ndim=(0, 1, 2), low=-1.0, high=1.0)
    return float(arr) if arr.ndim == 0 else arr


def stochastic_rounding_variance(epsilon: float, t: Any = None) -> Any:
    """Per-user variance of SR's report on [-1, 1]: ``C^2 - t^2`` (worst case C^2 at t=None)."""
    epsilon = check_epsilon(epsilon, high=_FORMULA_MAX_EPSILON)
    c2 = _c(epsilon) ** 2
    if t is None:
        return c2
    return c2 - _check_t(t) ** 2


def piecewise_variance(epsilon: float, t: Any = None) -> Any:
    """Per-user variance of PM's report: ``t^2/(E-1) + (E+3)/(3(E-1)^2)``, E = e^(eps/2).

    ``t=None`` gives the worst case over [-1, 1] (|t| = 1): ``4E / (3 (E - 1)^2)``.
    """
    epsilon = check_epsilon(epsilon, high=_FORMULA_MAX_EPSILON)
    em1 = math.expm1(epsilon / 2.0)
    base = (em1 + 4.0) / (3.0 * em1 * em1)
    if t is None:
        return 1.0 / em1 + base
    return _check_t(t) ** 2 / em1 + base


def _hybrid_weight(epsilon: float) -> float:
    """Probability that HM uses PM: ``1 - e^(-eps/2)`` above 0.61, else 0."""
    return -_crmath.expm1(-epsilon / 2.0) if epsilon > HYBRID_THRESHOLD else 0.0


def hybrid_variance(epsilon: float, t: Any = None) -> Any:
    """Per-user variance of HM's report at t (t=None: worst case over [-1, 1])."""
    epsilon = check_epsilon(epsilon, high=_FORMULA_MAX_EPSILON)
    a = _hybrid_weight(epsilon)
    if a == 0.0:
        return stochastic_rounding_variance(epsilon, t)
    if t is None:
        return hybrid_worst_case_variance(epsilon)
    return a * piecewise_variance(epsilon, t) + (1.0 - a) * stochastic_rounding_variance(epsilon, t)


def hybrid_worst_case_variance(epsilon: float) -> float:
    """HM's worst-case per-user variance on [-1, 1] (Wang et al. 2019; STR21 eq. 14).

    ``C^2`` for eps <= 0.61, else ``[C^2 + (E + 3) / (3 (E - 1))] / E`` with
    ``C = (e^eps + 1)/(e^eps - 1)``, ``E = e^(eps/2)``; above 0.61 HM's variance does not
    depend on t at all.

    Examples
    --------
    >>> round(hybrid_worst_case_variance(0.5), 4), round(hybrid_worst_case_variance(2.0), 4)
    (16.6708, 1.0423)
    """
    epsilon = check_epsilon(epsilon, high=_FORMULA_MAX_EPSILON)
    c2 = _c(epsilon) ** 2
    if epsilon <= HYBRID_THRESHOLD:
        return c2
    em1 = math.expm1(epsilon / 2.0)
    return (c2 + (em1 + 4.0) / (3.0 * em1)) * math.exp(-epsilon / 2.0)


# --- exact grid laws ---------------------------------------------------------------
#: Default number of cells of PM's report grid (``report_cells``).
DEFAULT_REPORT_CELLS = 1 << 18
#: Input grid of SR: t is rounded (unbiasedly) to ``-1 + 2 k / SR_INPUT_STEPS``.
SR_INPUT_STEPS = 1 << 16
#: Largest ``(input grid points) x (cells)`` for which ``grid_matrix()`` is built.
_MAX_MATRIX = 1 << 22


@dataclasses.dataclass(frozen=True)
class _PMGrid:
    """PM on a grid: N report cells, a plateau of m cells, K = N - m input steps.

    Grid input k (t_k = -1 + 2k/K) reports cell j with probability
    ``(w_low + [k <= j < k + m] (w_high - w_low)) / T``. ``E[j | k] = A k + B``, so the
    value ``y_j = -1 + (2/K)(j - B)/A`` is an unbiased estimate of t_k, hence of t.
    """

    cells: int
    plateau: int
    steps: int
    w_low: int
    w_high: int
    total: int
    slope: float
    intercept: float

    def values(self) -> np.ndarray:
        j = np.arange(self.cells, dtype=np.float64)
        return -1.0 + (2.0 / self.steps) * ((j - self.intercept) / self.slope)

    def second_moment(self, k: np.ndarray) -> np.ndarray:
        """E[y^2 | grid input k] from the exact law (float)."""
        n, m = self.cells, self.plateau
        k = np.asarray(k, dtype=np.float64)

        def s1(x: Any) -> Any:  # sum_{j < x} j
            return x * (x - 1.0) / 2.0

        def s2(x: Any) -> Any:  # sum_{j < x} j^2
            return (x - 1.0) * x * (2.0 * x - 1.0) / 6.0

        bump = self.w_high - self.w_low
        ej = (self.w_low * s1(n) + bump * (s1(k + m) - s1(k))) / self.total
        ej2 = (self.w_low * s2(n) + bump * (s2(k + m) - s2(k))) / self.total
        var_j = np.maximum(ej2 - ej * ej, 0.0)
        scale = 2.0 / (self.steps * self.slope)
        mean_y = -1.0 + 2.0 * k / self.steps
        return scale * scale * var_j + mean_y * mean_y


@functools.lru_cache(maxsize=64)
def _pm_grid(epsilon: float, cells: int) -> _PMGrid:
    # PM's plateau is 1/(E + 1) of its output range [-s, s] (E = e^(eps/2)); keep that share.
    e_half = _crmath.exp(min(epsilon / 2.0, 700.0))
    plateau = min(max(1, round(cells / (e_half + 1.0))), cells - 1)
    steps = cells - plateau
    w_low, w_high = ratio_weights(epsilon, cells - plateau, plateau)
    bump = w_high - w_low
    total = cells * w_low + plateau * bump
    slope = (bump * plateau) / total
    intercept = (w_low * (cells * (cells - 1) // 2) + bump * (plateau * (plateau - 1) // 2)) / total
    return _PMGrid(cells, plateau, steps, w_low, w_high, total, slope, intercept)


@dataclasses.dataclass(frozen=True)
class _SRGrid:
    """SR on a grid: input k of K steps reports +C' w.p. (w_low (K - k) + w_high k) / T."""

    steps: int
    w_low: int
    w_high: int

    @property
    def total(self) -> int:
        return self.steps * (self.w_low + self.w_high)

    @property
    def magnitude(self) -> float:
        """C' = (w_low + w_high) / (w_high - w_low): |report| (unbiased: E[y | t] = t)."""
        return (self.w_low + self.w_high) / (self.w_high - self.w_low)


@functools.lru_cache(maxsize=64)
def _sr_grid(epsilon: float) -> _SRGrid:
    w_low, w_high = ratio_weights(epsilon, SR_INPUT_STEPS, SR_INPUT_STEPS)
    return _SRGrid(SR_INPUT_STEPS, w_low, w_high)


def _sr_grid_sample(t: np.ndarray, grid: _SRGrid, gen: np.random.Generator) -> np.ndarray:
    """+-1 signs (int8) of SR reports, exact integer law."""
    k = round_to_grid((t + 1.0) / 2.0, grid.steps, gen)
    threshold = grid.w_low * (grid.steps - k) + grid.w_high * k  # < 2^62
    u = gen.integers(0, grid.total, size=t.shape[0], dtype=np.int64)
    return np.where(u < threshold, 1, -1).astype(np.int8)


def _pm_grid_sample(t: np.ndarray, grid: _PMGrid, gen: np.random.Generator) -> np.ndarray:
    """Report cells (int64) of PM on its grid, exact integer law."""
    k = round_to_grid((t + 1.0) / 2.0, grid.steps, gen)
    return sample_flat_bump(k, grid.cells, grid.w_low, grid.w_high - grid.w_low, grid.plateau, gen)


def _grid_variance(grid: _PMGrid, t: Any) -> Any:
    """Variance of PM's grid report at t: the two-point rounding mixture, exactly."""
    steps = grid.steps
    if t is None:
        k = np.array([0, steps])  # E[y^2|k] - t_k^2 is a convex quadratic in k
        tk = -1.0 + 2.0 * k / steps
        return float(np.max(grid.second_moment(k) - tk * tk) + (2.0 / steps) ** 2 / 4.0)
    t = np.asarray(_check_t(t), dtype=np.float64)
    x = np.clip((t + 1.0) / 2.0, 0.0, 1.0) * steps
    lo = np.minimum(np.floor(x), steps - 1)
    f = x - lo
    second = (1.0 - f) * grid.second_moment(lo) + f * grid.second_moment(lo + 1)
    return second - t * t


@functools.lru_cache(maxsize=16)
def _report_tables(spec: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values in cell order, values sorted, cell of each sorted value), original units."""
    values = spec.low + (spec.unit_report_values() + 1.0) * spec.half_span
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    if not np.all(np.diff(ordered) > 0):
        raise ValueError(f"{spec!r}'s report grid has coinciding values; change report_cells")
    for arr in (values, ordered, order):
        arr.flags.writeable = False
    return values, ordered, order


def _z(alpha: float) -> float:
    """``z_{1 - alpha/2}``."""
    from scipy import special

    return float(-special.ndtri(check_probability(alpha, "alpha") / 2.0))


# --- estimates ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class MeanEstimate:
    """An unbiased mean with its standard error.

    Attributes
    ----------
    mean : float
        ``low + (high - low) (1 + ybar) / 2`` with ybar the mean report on [-1, 1].
    variance : float
        Worst-case analytical variance of ``mean`` (data-independent, so a safe bound):
        ``((high - low)/2)^2 V* / n`` with V* the mechanism's worst-case per-user variance.
    variance_empirical : float
        ``((high - low)/2)^2 s^2 / n`` with s^2 the sample variance of the reports: a
        consistent estimate of the actual variance that exceeds it by the spread of the true
        values (also conservative). When n < 2 there is no sample variance: it is then the
        worst-case ``variance`` (finite, still a safe bound; never NaN).
    n : int
        Number of reports.
    spec : Mechanism
        The mechanism that produced it.
    """

    mean: float
    variance: float
    variance_empirical: float
    n: int
    spec: Any = None

    @property
    def std_error(self) -> float:
        """Standard error: the square root of the variance."""
        return math.sqrt(self.variance)

    def confidence_interval(
        self, alpha: float = 0.05, *, empirical: bool = False
    ) -> tuple[float, float]:
        """Normal-approximation two-sided ``1 - alpha`` interval for the mean."""
        from scipy import stats as _sps  # server side: not loaded on the client path

        alpha = check_probability(alpha, "alpha")
        var = self.variance_empirical if empirical else self.variance
        half = float(_sps.norm.isf(alpha / 2.0)) * math.sqrt(var)
        return self.mean - half, self.mean + half

    def mean_interval(self, alpha: float = 0.05, *, empirical: bool = True) -> tuple[float, float]:
        """Two-sided ``1 - alpha`` interval for the mean (the name every result shares).

        The estimate is linear in the reports (a mean of n independent bounded terms), so
        the normal approximation is accurate. By default it uses ``variance_empirical``
        (consistent for the actual variance, hence close to the nominal coverage); with
        ``empirical=False`` the worst-case ``variance`` (a safe bound, over-covering), which is
        also what ``variance_empirical`` holds when n < 2.
        """
        use_empirical = empirical and math.isfinite(self.variance_empirical)
        return self.confidence_interval(alpha, empirical=use_empirical)

    def to_frame(self, alpha: float = 0.05) -> Any:
        """Return a one-row DataFrame: mean, std_error, ci_low, ci_high and n.

        The interval comes from :meth:`mean_interval`.
        """
        import pandas as pd

        lo, hi = self.mean_interval(alpha)
        se = (hi - lo) / (2.0 * _z(alpha))
        frame = pd.DataFrame(
            {
                "mean": [self.mean],
                "std_error": [se],
                "ci_low": [lo],
                "ci_high": [hi],
                "n": [self.n],
            },
            index=pd.Index(["mean"], name="quantity"),
        )
        frame.attrs["alpha"] = alpha
        return frame

    def plot(self, ax: Any = None, *, alpha: float = 0.05, label: str = "mean") -> Any:
        """Plot the mean as a point with its ``1 - alpha`` error bar; return the Axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        lo, hi = self.mean_interval(alpha)
        ax.errorbar([0], [self.mean], yerr=[[self.mean - lo], [hi - self.mean]], fmt="o", capsize=4)
        ax.set_xticks([0], [label])
        ax.set_ylabel("estimate")
        ax.set_title(f"n = {self.n}, {1 - alpha:.0%} interval")
        return ax


@dataclasses.dataclass(frozen=True)
class VarianceEstimate:
    """Result of :func:`estimate_variance` (SW20 section 6.3).

    Attributes
    ----------
    variance : float
        The estimated population variance (clipped to [0, (high - low)^2 / 4] by default).
    mean : float
        The mean estimated from the first group (and broadcast to the second).
    first, second : MeanEstimate
        The first group's mean estimate; the second group's estimate of the mean of
        ``(v - mean)^2`` (its std_error is the variance estimate's, before clipping).
    """

    variance: float
    mean: float
    first: MeanEstimate
    second: MeanEstimate

    @property
    def std_error(self) -> float:
        """Standard error of the second moment's estimate."""
        return self.second.std_error


# --- mechanisms -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class _MeanMechanism(Mechanism):
    """Shared machinery: values in [low, high] mapped to t in [-1, 1]; unbiased reports."""

    low: float = -1.0
    high: float = 1.0
    #: SR's integer law needs ``2^16 (1 + e^eps) <= 2^62`` (see :mod:`ldpkit._exact`).
    max_epsilon: ClassVar[float] = MAX_EPSILON
    #: Report fields sent as real numbers (float64); every other field holds integers.
    float_report_fields: ClassVar[frozenset[str]] = frozenset({"values"})
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "low": [FINITE_BOUND],
        "high": [FINITE_BOUND],
    }

    def _validate(self) -> None:
        lo, hi = check_bounds(self.low, self.high)  # the pair: low < high, a usable width
        self._set("low", lo)
        self._set("high", hi)

    @property
    def half_span(self) -> float:
        return (self.high - self.low) / 2.0

    @property
    def output_bound(self) -> float:
        """Largest |report| on the [-1, 1] scale."""
        raise NotImplementedError

    def unit_variance(self, t: Any = None) -> Any:
        """Per-user variance of the report on the [-1, 1] scale at t (None: worst case)."""
        raise NotImplementedError

    def variance(self, n: int) -> float:
        """Worst-case variance of the mean estimate from n reports: ``(h/2)^2 V* / n``.

        In the original units squared; data-independent, like a frequency oracle's
        ``variance(n)`` (Var*). :meth:`variance_at` gives it at given true values.
        """
        n = check_integer(n, "n", low=1)
        return self.half_span**2 * float(self.unit_variance()) / n

    def variance_at(self, n: int, values: Any) -> float:
        """Exact variance of the mean estimate when the n users hold ``values``.

        ``(h/2)^2 sum_i V(t_i) / n^2`` with V the per-user variance on the [-1, 1] scale
        (:meth:`unit_variance`); at most :meth:`variance`.
        """
        n = check_integer(n, "n", low=1)
        t = self._to_unit(self.check_values(values))
        if t.size != n:
            raise ValueError(f"values must hold n = {n} values, got {t.size}")
        return self.half_span**2 * float(np.sum(self.unit_variance(t))) / n**2

    def check_values(self, values: Any) -> np.ndarray:
        return check_numeric_values(values, self.low, self.high, "values")

    def _to_unit(self, v: np.ndarray) -> np.ndarray:
        return np.clip((v - self.low) / self.half_span - 1.0, -1.0, 1.0)

    def _sample_cells(self, t: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        """Return the indices into :meth:`unit_report_values` drawn from the exact grid law."""
        raise NotImplementedError

    def unit_report_values(self) -> np.ndarray:
        """Every value a report can take, on the [-1, 1] scale, sorted (the grid)."""
        raise NotImplementedError

    def report_values(self) -> np.ndarray:
        """Every value a report can take, in the original units, sorted (read-only).

        Reports are the grid values of an exact discrete law: the wire carries
        one of these float64 numbers, the spec (``report_cells`` where it applies) says
        which grid, and :meth:`aggregate` rejects anything off it.
        """
        return _report_tables(self)[1]

    def report_cells_of(self, reports: Reports) -> np.ndarray:
        """Return the cell of each report: its index into :meth:`unit_report_values` (validated)."""
        y = self.check_reports(reports).values
        if y.ndim != 1 or y.dtype.kind != "f":
            raise ValueError("reports.values must be a 1-D float array")
        _, grid, order = _report_tables(self)
        idx = np.clip(np.searchsorted(grid, y), 0, grid.size - 1)
        if y.size and not np.array_equal(grid[idx], y):  # NaN fails too
            raise ValueError(
                f"reports.values must be real numbers in [{grid[0]:g}, {grid[-1]:g}] on "
                f"{self.name}'s report grid (the {grid.size} values of report_values())"
            )
        return order[idx]

    def _sample_unit(self, t: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        return self.unit_report_values()[self._sample_cells(t, gen)]

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Report one grid value per user, an unbiased estimate of her value.

        ``reports.values``: float64 in the original units (it lies outside [low, high] in
        general), one of :meth:`report_values` drawn with exact integer probabilities.
        """
        t = self._to_unit(self.check_values(values))
        cells = self._sample_cells(t, as_generator(rng))
        return Reports(self, values=_report_tables(self)[0][cells])

    def _unit_reports(self, reports: Reports) -> np.ndarray:
        return self.unit_report_values()[self.report_cells_of(reports)]

    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields: ``sum``, ``sum_squares`` and ``count`` (= n).

        Of the [-1, 1]-scale reports (|report| <= bound, report^2 >= :attr:`_min_square`).
        """
        b = self.output_bound
        return with_report_count(
            {
                "sum": StatsField((), low=-b, high=b, integer=False),
                "sum_squares": StatsField((), low=self._min_square, high=b * b, integer=False),
            }
        )

    @property
    def _min_square(self) -> float:
        """A lower bound of every report's square on the [-1, 1] scale (0: none known)."""
        return 0.0

    def empty_stats(self) -> Stats:
        return Stats(self, 0, sum=np.float64(0.0), sum_squares=np.float64(0.0), count=np.int64(0))

    def aggregate(self, reports: Reports) -> Stats:
        """n, the sum and the sum of squares of the reports on the [-1, 1] scale."""
        t = self._unit_reports(reports)
        return Stats(
            self,
            t.size,
            sum=np.float64(t.sum()),
            sum_squares=np.float64(t @ t),
            count=np.int64(t.size),
        )

    def estimate(self, stats: Stats) -> MeanEstimate:
        """Unbiased mean with worst-case and empirical variances."""
        stats = self.check_stats(stats)
        n = stats.n
        if n == 0:
            raise ValueError("stats must summarize at least one report, got n = 0")
        total, squares = float(stats.sum), float(stats.sum_squares)
        # Cauchy-Schwarz: n reports with this sum of squares cannot sum to more
        if total * total > n * squares * (1.0 + 1e-6) + 1e-300:
            raise ValueError(
                f"stats.sum must satisfy sum^2 <= n * sum_squares (as n = {n} reports do), "
                f"got sum {total:g} with sum_squares {squares:g}"
            )
        ybar = total / n
        if n > 1:
            s2 = max(squares - n * ybar * ybar, 0.0) / (n - 1)
            emp = self.half_span**2 * s2 / n
        else:  # one report has no sample variance: the worst-case bound stands in (not NaN)
            emp = self.variance(n)
        return MeanEstimate(
            mean=self.low + (ybar + 1.0) * self.half_span,
            variance=self.variance(n),
            variance_empirical=emp,
            n=n,
            spec=self,
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class StochasticRounding(_MeanMechanism):
    """Stochastic rounding (SR): report ``+-C`` on the [-1, 1] scale (Duchi et al.).

    With t in [-1, 1] and ``C = (e^eps + 1)/(e^eps - 1)``, report +C with probability
    ``1/2 + t / (2C)`` (equivalently ``q + (p - q)(1 + t)/2`` with ``p = e^eps/(e^eps + 1)``,
    the +-1 output rescaled by ``1/(p - q)``), else -C. Reports are mapped back to the
    original units.

    Parameters
    ----------
    epsilon : float
        Privacy budget in [1e-6, 30] (``max_epsilon``: the exact integer law).
    low, high : float
        Value domain (default [-1, 1]).

    Notes
    -----
    eps-LDP: ``P[+C | t=1] / P[+C | t=-1] = (C + 1)/(C - 1) = e^eps``. Per-user variance
    ``C^2 - t^2`` (worst ``C^2``), times ``((high - low)/2)^2`` in the original units.

    References
    ----------
    J. Duchi, M. Jordan, M. Wainwright. Minimax optimal procedures for locally private
    estimation. JASA 2018. T. Wang et al. Collecting and analyzing multidimensional data
    with local differential privacy. ICDE 2019, section III-A. SW20 section 2.2.

    Examples
    --------
    >>> sr = StochasticRounding(epsilon=1.0, low=0.0, high=10.0)
    >>> est = sr.run(np.full(10_000, 7.0), rng=0)
    >>> abs(est.mean - 7.0) < 6 * est.std_error
    True
    """

    @property
    def _grid(self) -> _SRGrid:
        return _sr_grid(self.epsilon)

    @property
    def output_bound(self) -> float:
        """C' = (w_low + w_high)/(w_high - w_low), the realized C (within ~1e-15 of C)."""
        return self._grid.magnitude

    @property
    def _min_square(self) -> float:
        # Every report is +-C': n reports have sum_squares n C'^2, up to float rounding of
        # the sums (1e-6 relative covers 2^53 additions of the same term).
        return self._grid.magnitude**2 * (1.0 - 1e-6)

    def unit_variance(self, t: Any = None) -> Any:
        """``C'^2 - t^2``: y^2 = C'^2 always, and E[y | t] = t (grid rounding included)."""
        c2 = self._grid.magnitude**2
        if t is None:
            return c2
        return c2 - _check_t(t) ** 2

    def unit_report_values(self) -> np.ndarray:
        """Return the two report values ``-C`` and ``C`` on the [-1, 1] scale."""
        c = self._grid.magnitude
        return np.array([-c, c])

    def _sample_cells(self, t: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        return (_sr_grid_sample(t, self._grid, gen) > 0).astype(np.int64)

    def grid_matrix(self) -> np.ndarray:
        """Exact ``P[report | grid input k]``, shape (2^16 + 1, 2): columns -C', +C'.

        Input t is first rounded (unbiasedly) to ``t_k = -1 + 2k / 2^16``. Not named
        ``transition_matrix``: the mechanism's inputs are real (ARCHITECTURE.md), this is its
        law on the input grid, what the sampler draws from and ``privacy_loss`` is computed on.
        """
        g = self._grid
        k = np.arange(g.steps + 1, dtype=np.float64)
        plus = (g.w_low * (g.steps - k) + g.w_high * k) / g.total
        return np.column_stack([1.0 - plus, plus])

    def privacy_loss(self) -> float:
        """``log(w_high / w_low)`` of the integer law (the two extreme inputs, either output)."""
        return ratio_loss(self._grid.w_low, self._grid.w_high)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PiecewiseMechanism(_MeanMechanism):
    """Piecewise Mechanism (PM) of Wang et al. (ICDE 2019) for a value in [low, high].

    On the [-1, 1] scale, with ``E = e^(eps/2)`` and ``s = (E + 1)/(E - 1)``, the report has
    density ``E (E - 1)/(2 (E + 1))`` on ``[l(t), r(t)]``, ``l(t) = (E t - 1)/(E - 1)``,
    ``r(t) = l(t) + s - 1``, and ``(E - 1)/(2 E (E + 1))`` elsewhere on [-s, s]; it is
    unbiased. Sampled by inverting its CDF with one uniform per user.

    Parameters
    ----------
    epsilon : float
        Privacy budget in [1e-6, 40] (``max_epsilon``: the exact integer law).
    low, high : float
        Value domain (default [-1, 1]).

    Notes
    -----
    eps-LDP: the two densities differ by the factor ``E^2 = e^eps``. Per-user variance
    ``t^2/(E - 1) + (E + 3)/(3 (E - 1)^2)`` (worst ``4E/(3(E - 1)^2)`` at |t| = 1).

    References
    ----------
    T. Wang, J. Zhao, X. Yang, X. Xiao et al. Collecting and analyzing multidimensional
    data with local differential privacy. ICDE 2019, section III-B (Algorithm 2, Lemma 1).

    Examples
    --------
    >>> pm = PiecewiseMechanism(epsilon=2.0)
    >>> round(pm.privacy_loss(), 12)
    2.0
    """

    report_cells: int = DEFAULT_REPORT_CELLS

    #: The integer law needs ``(N - m) + m e^eps <= 2^62`` with m >= 1 plateau cells.
    max_epsilon: ClassVar[float] = 40.0
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "report_cells": [Integer(4, 1 << 24)]
    }

    @property
    def _grid(self) -> _PMGrid:
        return _pm_grid(self.epsilon, self.report_cells)

    @property
    def output_bound(self) -> float:
        """Largest magnitude of a report on the [-1, 1] scale."""
        values = self.unit_report_values()
        return float(max(-values[0], values[-1]))

    @property
    def density_high(self) -> float:
        """Probability per unit of the [-1, 1] scale of a plateau cell of the grid law.

        Cells have width ``2 / (K A)``; tends to PM's ``E (E - 1)/(2 (E + 1))`` as the grid
        refines.
        """
        g = self._grid
        return g.w_high / g.total * (g.steps * g.slope) / 2.0

    @property
    def density_low(self) -> float:
        """The same for the other cells; tends to PM's ``(E - 1)/(2 E (E + 1))``."""
        g = self._grid
        return g.w_low / g.total * (g.steps * g.slope) / 2.0

    def unit_variance(self, t: Any = None) -> Any:
        """Return the exact per-user variance of the grid law at t.

        None: an upper bound of the worst case, exceeding it by at most ``(2/K)^2 / 4``.
        """
        return _grid_variance(self._grid, t)

    def unit_report_values(self) -> np.ndarray:
        """Return the grid's report values on the [-1, 1] scale."""
        return self._grid.values()

    def _sample_cells(self, t: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        return _pm_grid_sample(t, self._grid, gen)

    def grid_matrix(self) -> np.ndarray:
        """Exact ``P[cell | grid input k]``, shape (K + 1, report_cells), for small grids.

        Input t is first rounded (unbiasedly) to ``t_k = -1 + 2k / K``, ``K = report_cells
        - m`` with m the plateau cells. Raises NotImplementedError when the matrix would
        exceed 2^22 entries (the default grid: use ``report_cells=64`` or so in tests).
        ``privacy.privacy_loss(grid_matrix())`` equals ``privacy_loss()``.
        """
        g = self._grid
        if (g.steps + 1) * g.cells > _MAX_MATRIX:
            raise NotImplementedError(
                f"{self.name}'s transition matrix has (K + 1) x report_cells = "
                f"{(g.steps + 1) * g.cells} entries (> 2^22); use a smaller report_cells"
            )
        k = np.arange(g.steps + 1)[:, None]
        j = np.arange(g.cells)[None, :]
        plateau = (j >= k) & (j < k + g.plateau)
        return np.where(plateau, g.w_high, g.w_low) / g.total

    def privacy_loss(self) -> float:
        """Return ``log(w_high / w_low)`` of the integer law.

        Every cell is a plateau cell for some input and a base cell for another.
        """
        return ratio_loss(self._grid.w_low, self._grid.w_high)


@dataclasses.dataclass(frozen=True, kw_only=True)
class HybridMechanism(_MeanMechanism):
    """Hybrid Mechanism (HM): PM with probability ``1 - e^(-eps/2)`` when eps > 0.61, else SR.

    Both components report unbiased estimates on the [-1, 1] scale, so the mixture does
    too; the coin is independent of the value, so the mixture is eps-LDP (SR's outputs are
    atoms at ``+-C``, PM's a density: each part keeps its own ratio e^eps).

    Parameters
    ----------
    epsilon : float
        Privacy budget in [1e-6, 30] (``max_epsilon``, that of SR).
    low, high : float
        Value domain (default [-1, 1]).

    Notes
    -----
    Per-user variance (see :func:`hybrid_variance`) is the constant
    :func:`hybrid_worst_case_variance` for eps > 0.61.

    References
    ----------
    T. Wang et al. ICDE 2019, section III-C. STR21 (ToPL) uses it for streams.

    Examples
    --------
    >>> hm = HybridMechanism(epsilon=2.0)
    >>> round(hm.pm_probability, 4)
    0.6321
    """

    report_cells: int = DEFAULT_REPORT_CELLS
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "report_cells": [Integer(4, 1 << 24)]
    }

    @property
    def pm_probability(self) -> float:
        """Probability of using PM: ``1 - e^(-eps/2)`` when eps > 0.61, else 0."""
        return _hybrid_weight(self.epsilon)

    @property
    def _pm(self) -> PiecewiseMechanism:
        return PiecewiseMechanism(epsilon=self.epsilon, report_cells=self.report_cells)

    @property
    def _sr(self) -> StochasticRounding:
        return StochasticRounding(epsilon=self.epsilon)

    @property
    def output_bound(self) -> float:
        """Largest magnitude of a report of either branch on the [-1, 1] scale."""
        if self.pm_probability == 0.0:
            return self._sr.output_bound
        return max(self._pm.output_bound, self._sr.output_bound)

    def unit_variance(self, t: Any = None) -> Any:
        """Return ``a Var_PM(t) + (1 - a) Var_SR(t)`` of the two grid laws.

        None: an upper bound of the worst case within ``(2/K)^2 / 4``.
        """
        a = self.pm_probability
        if a == 0.0:
            return self._sr.unit_variance(t)
        if t is None:
            g = self._pm._grid
            k = np.arange(g.steps + 1)
            tk = -1.0 + 2.0 * k / g.steps
            pm = g.second_moment(k) - tk * tk
            sr = self._sr.unit_variance(tk)
            return float(np.max(a * pm + (1.0 - a) * sr) + (2.0 / g.steps) ** 2 / 4.0)
        return a * self._pm.unit_variance(t) + (1.0 - a) * self._sr.unit_variance(t)

    def unit_report_values(self) -> np.ndarray:
        """PM's grid values followed by SR's two values (sorted in :meth:`report_values`)."""
        if self.pm_probability == 0.0:
            return self._sr.unit_report_values()
        return np.concatenate([self._pm.unit_report_values(), self._sr.unit_report_values()])

    def _sample_cells(self, t: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        # The branch coin does not depend on the value, so a float coin is harmless: each
        # branch's law is within e^eps, and so is their mixture.
        cells = self._sr._sample_cells(t, gen)
        if self.pm_probability == 0.0:
            return cells
        use_pm = gen.random(t.size) < self.pm_probability
        if use_pm.any():
            cells[use_pm] = self._pm._sample_cells(t[use_pm], gen)
        cells[~use_pm] += self.report_cells
        return cells

    def privacy_loss(self) -> float:
        """Return the larger of the two branches' losses (the coin is independent of the value)."""
        losses = [self._sr.privacy_loss()]
        if self.pm_probability > 0.0:
            losses.append(self._pm.privacy_loss())
        return max(losses)


def estimate_variance(
    spec: _MeanMechanism,
    values: Any,
    *,
    rng: RNGLike = None,
    split: float = 0.5,
    clip: bool = True,
) -> VarianceEstimate:
    """Estimate the population variance with SR, PM or HM in two rounds (SW20 section 6.3).

    A random ``split`` fraction of the users (the first group, ``round(split n)``, at least
    one user in each group) report their value with ``spec``; the server estimates the
    mean ``mu^`` from them (clipped to [low, high]) and broadcasts it. Every user of the
    second group reports ``(v - mu^)^2`` with the same mechanism on
    ``[0, (high - low)^2]``; the mean of those is the variance estimate. Each user reports
    once with the full epsilon (the groups are disjoint).

    Parameters
    ----------
    spec : StochasticRounding, PiecewiseMechanism or HybridMechanism
        Mechanism and value domain.
    values : array_like
        All users' values (simulation).
    rng : Generator, int, SeedSequence or None
        Randomness for the split and both rounds.
    split : float
        Fraction of users in the first (mean) group, in (0, 1); SW20 uses 0.5.
    clip : bool
        Clip the result to ``[0, (high - low)^2 / 4]`` (the possible variances; a
        post-processing step that only reduces the error).

    Notes
    -----
    ``E[(v - mu^)^2 | mu^] = sigma_2^2 + (mu_2 - mu^)^2`` over the second group, so the
    estimate is biased upwards by about the first group's mean-squared error
    (``first.variance``); SW20 does not correct this and neither do we.
    """
    if not isinstance(spec, _MeanMechanism):
        raise TypeError(
            "spec must be a StochasticRounding, PiecewiseMechanism or HybridMechanism, "
            f"got {type(spec).__name__}"
        )
    split = check_probability(split, "split")
    width = spec.high - spec.low
    if width * width > MAX_MAGNITUDE:  # the second round's domain [0, width^2] is bounded too
        raise ValueError(
            f"spec.high - spec.low must be < {math.sqrt(MAX_MAGNITUDE):g} for "
            f"estimate_variance (squared deviations are reported), got {width:g}"
        )
    v = spec.check_values(values)
    n = v.size
    if n < 2:
        raise ValueError(f"values must hold at least 2 values, got {n}")
    gen = as_generator(rng)
    order = gen.permutation(n)
    n1 = min(max(round(split * n), 1), n - 1)
    g1, g2 = v[order[:n1]], v[order[n1:]]
    first = spec.run(g1, rng=gen)
    mu = min(max(first.mean, spec.low), spec.high)
    spec2 = dataclasses.replace(spec, low=0.0, high=(spec.high - spec.low) ** 2)
    sq = np.minimum((g2 - mu) ** 2, spec2.high)
    second = spec2.run(sq, rng=gen)
    var = second.mean
    if clip:
        var = min(max(var, 0.0), (spec.high - spec.low) ** 2 / 4.0)
    return VarianceEstimate(variance=var, mean=mu, first=first, second=second)
