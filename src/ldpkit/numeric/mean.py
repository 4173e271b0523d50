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
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_integer, check_numeric_values, check_probability, check_real
from ..privacy import ratio_privacy_loss
from ..spec import Mechanism, Reports, Stats
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

#: Largest budget accepted (e^(eps/2) and friends stay finite with room to spare).
MAX_EPSILON = 700.0


# --- closed forms on the [-1, 1] scale -----------------------------------------------------------
def _c(epsilon: float) -> float:
    """SR's output magnitude (e^eps + 1)/(e^eps - 1) = 1/tanh(eps/2)."""
    return 1.0 / math.tanh(epsilon / 2.0)


def stochastic_rounding_variance(epsilon: float, t: Any = None) -> Any:
    """Per-user variance of SR's report on [-1, 1]: ``C^2 - t^2`` (worst case C^2 at t=None)."""
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_inclusive=False)
    c2 = _c(epsilon) ** 2
    if t is None:
        return c2
    return c2 - np.asarray(t, dtype=np.float64) ** 2


def piecewise_variance(epsilon: float, t: Any = None) -> Any:
    """Per-user variance of PM's report: ``t^2/(E-1) + (E+3)/(3(E-1)^2)``, E = e^(eps/2).

    ``t=None`` gives the worst case over [-1, 1] (|t| = 1): ``4E / (3 (E - 1)^2)``.
    """
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_inclusive=False)
    em1 = math.expm1(epsilon / 2.0)
    base = (em1 + 4.0) / (3.0 * em1 * em1)
    if t is None:
        return 1.0 / em1 + base
    return np.asarray(t, dtype=np.float64) ** 2 / em1 + base


def _hybrid_weight(epsilon: float) -> float:
    """Probability that HM uses PM: ``1 - e^(-eps/2)`` above 0.61, else 0."""
    return -math.expm1(-epsilon / 2.0) if epsilon > HYBRID_THRESHOLD else 0.0


def hybrid_variance(epsilon: float, t: Any = None) -> Any:
    """Per-user variance of HM's report at t (t=None: worst case over [-1, 1])."""
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_inclusive=False)
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
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_inclusive=False)
    c2 = _c(epsilon) ** 2
    if epsilon <= HYBRID_THRESHOLD:
        return c2
    em1 = math.expm1(epsilon / 2.0)
    return (c2 + (em1 + 4.0) / (3.0 * em1)) * math.exp(-epsilon / 2.0)


# --- samplers on the [-1, 1] scale ----------------------------------------------------------------
def _sr_probabilities(epsilon: float) -> tuple[float, float]:
    """(p, q) = (e^eps/(e^eps + 1), 1/(e^eps + 1)), written with e^-eps (no overflow, and q
    keeps its relative precision at large eps)."""
    x = math.exp(-epsilon)
    return 1.0 / (1.0 + x), x / (1.0 + x)


def _sr_sample(t: np.ndarray, epsilon: float, u: np.ndarray) -> np.ndarray:
    # P[+C] = q + (p - q)(1 + t)/2 = 1/2 + t/(2C), with p - q = tanh(eps/2) = 1/C
    _, q = _sr_probabilities(epsilon)
    c = _c(epsilon)
    return np.where(u < q + math.tanh(epsilon / 2.0) * (1.0 + t) / 2.0, c, -c)


def _pm_constants(epsilon: float) -> tuple[float, float, float, float]:
    """(em1 = E - 1, s, plateau mass E/(E+1), low density (E-1)/(2E(E+1)))."""
    em1 = math.expm1(epsilon / 2.0)
    x = math.exp(-epsilon / 2.0)
    return em1, 1.0 + 2.0 / em1, 1.0 / (1.0 + x), 0.5 * (1.0 - x) * x / (1.0 + x)


def _pm_sample(t: np.ndarray, epsilon: float, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF sampling of PM with one uniform per user."""
    em1, s, plateau, q = _pm_constants(epsilon)
    left = t + (t - 1.0) / em1  # l(t)
    width = 2.0 / em1  # r(t) - l(t)
    left_mass = q * (left + s)  # = (1 + t) x / (2 (1 + x))
    y = np.empty_like(t)
    lo = u < left_mass
    mid = ~lo & (u < left_mass + plateau)
    hi = ~(lo | mid)
    y[lo] = -s + u[lo] / q
    y[mid] = left[mid] + (u[mid] - left_mass[mid]) / plateau * width
    y[hi] = left[hi] + width + (u[hi] - left_mass[hi] - plateau) / q
    return np.clip(y, -s, s)


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
        values (also conservative). NaN when n < 2.
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
        return self.second.std_error


# --- mechanisms -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class _MeanMechanism(Mechanism):
    """Shared machinery: values in [low, high] mapped to t in [-1, 1]; unbiased reports."""

    low: float = -1.0
    high: float = 1.0

    def _validate(self) -> None:
        if self.epsilon > MAX_EPSILON:
            raise ValueError(
                f"epsilon must be a finite number > 0 and <= {MAX_EPSILON:g} for {self.name}, "
                f"got {self.epsilon!r}"
            )
        lo, hi = check_bounds(self.low, self.high)
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

    def _sample_unit(self, t: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """``reports.values``: float64, each an unbiased estimate of the user's value
        (in the original units; it lies outside [low, high] in general)."""
        t = self._to_unit(self.check_values(values))
        y = self._sample_unit(t, as_generator(rng))
        return Reports(self, values=self.low + (y + 1.0) * self.half_span)

    def _unit_reports(self, reports: Reports) -> np.ndarray:
        y = self.check_reports(reports).values
        if y.ndim != 1 or y.dtype.kind != "f":
            raise ValueError("reports.values must be a 1-D float array")
        t = (y - self.low) / self.half_span - 1.0
        bound = self.output_bound * (1.0 + 1e-9)
        if t.size and not np.all(np.abs(t) <= bound):  # NaN fails too
            lo = self.low + (1.0 - self.output_bound) * self.half_span
            hi = self.low + (1.0 + self.output_bound) * self.half_span
            raise ValueError(f"reports.values must be real numbers in [{lo:g}, {hi:g}]")
        return t

    def empty_stats(self) -> Stats:
        return Stats(self, 0, sum=np.float64(0.0), sum_squares=np.float64(0.0))

    def aggregate(self, reports: Reports) -> Stats:
        """n, the sum and the sum of squares of the reports on the [-1, 1] scale."""
        t = self._unit_reports(reports)
        return Stats(self, t.size, sum=np.float64(t.sum()), sum_squares=np.float64(t @ t))

    def estimate(self, stats: Stats) -> MeanEstimate:
        """Unbiased mean with worst-case and empirical variances."""
        stats = self.check_stats(stats)
        n = stats.n
        if n == 0:
            raise ValueError("stats must summarize at least one report, got n = 0")
        total, squares = float(stats.sum), float(stats.sum_squares)
        ybar = total / n
        if n > 1:
            s2 = max(squares - n * ybar * ybar, 0.0) / (n - 1)
            emp = self.half_span**2 * s2 / n
        else:
            emp = math.nan
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
        Privacy budget in (0, 700].
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
    def output_bound(self) -> float:
        return _c(self.epsilon)

    def unit_variance(self, t: Any = None) -> Any:
        return stochastic_rounding_variance(self.epsilon, t)

    def _sample_unit(self, t: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        return _sr_sample(t, self.epsilon, gen.random(t.size))

    def privacy_loss(self) -> float:
        # P[+C | t = 1] = p and P[+C | t = -1] = q; by symmetry the same ratio for -C
        p, q = _sr_probabilities(self.epsilon)
        return ratio_privacy_loss(p, q)


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
        Privacy budget in (0, 700].
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

    @property
    def output_bound(self) -> float:
        return _pm_constants(self.epsilon)[1]

    @property
    def density_high(self) -> float:
        """Density of the report on ``[l(t), r(t)]`` ([-1, 1] scale): ``E (E - 1)/(2 (E + 1))``."""
        em1, _, plateau, _ = _pm_constants(self.epsilon)
        return plateau / (2.0 / em1)

    @property
    def density_low(self) -> float:
        """Density of the report elsewhere on [-s, s]: ``(E - 1)/(2 E (E + 1))``."""
        return _pm_constants(self.epsilon)[3]

    def unit_variance(self, t: Any = None) -> Any:
        return piecewise_variance(self.epsilon, t)

    def _sample_unit(self, t: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        return _pm_sample(t, self.epsilon, gen.random(t.size))

    def privacy_loss(self) -> float:
        return ratio_privacy_loss(self.density_high, self.density_low)


@dataclasses.dataclass(frozen=True, kw_only=True)
class HybridMechanism(_MeanMechanism):
    """Hybrid Mechanism (HM): PM with probability ``1 - e^(-eps/2)`` when eps > 0.61, else SR.

    Both components report unbiased estimates on the [-1, 1] scale, so the mixture does
    too; the coin is independent of the value, so the mixture is eps-LDP (SR's outputs are
    atoms at ``+-C``, PM's a density: each part keeps its own ratio e^eps).

    Parameters
    ----------
    epsilon : float
        Privacy budget in (0, 700].
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

    @property
    def pm_probability(self) -> float:
        """Probability of using PM: ``1 - e^(-eps/2)`` when eps > 0.61, else 0."""
        return _hybrid_weight(self.epsilon)

    @property
    def output_bound(self) -> float:
        if self.pm_probability == 0.0:
            return _c(self.epsilon)
        return max(_pm_constants(self.epsilon)[1], _c(self.epsilon))

    def unit_variance(self, t: Any = None) -> Any:
        return hybrid_variance(self.epsilon, t)

    def _sample_unit(self, t: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        u = gen.random((2, t.size))
        use_pm = u[0] < self.pm_probability
        y = _sr_sample(t, self.epsilon, u[1])
        if use_pm.any():
            y[use_pm] = _pm_sample(t[use_pm], self.epsilon, u[1][use_pm])
        return y

    def privacy_loss(self) -> float:
        losses = [StochasticRounding(epsilon=self.epsilon).privacy_loss()]
        if self.pm_probability > 0.0:
            losses.append(PiecewiseMechanism(epsilon=self.epsilon).privacy_loss())
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
