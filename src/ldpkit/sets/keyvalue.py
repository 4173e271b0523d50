"""Key-value data.

Each user holds (key, value) pairs, values in [-1, 1]; the server estimates every key's
frequency (share of users holding it) and mean value.

:class:`PCKV` (Gu, Li, Cheng, Xiong, Cao, USENIX Security 2020): padding-and-sampling of one
pair, then correlated perturbation of key and value (UE or GRR), with the tight budget
composition and its budget allocation. :class:`PrivKV` (Ye, Hu, Meng, Zheng, IEEE S&P 2019):
one key sampled uniformly from the domain, value and key perturbed by randomized response.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from .. import _crmath
from .._constraints import Alternatives, Check, Integer, Options, Ref, Size
from .._exact import RR_MAX_EPSILON, ratio_loss, rr_weights
from .._rng import RNGLike, as_generator
from .._validation import check_array, check_integer, check_memory, check_probability
from ..estimate import IntervalWarning
from ..spec import Mechanism, Reports, Stats, StatsField
from ._input import UserPairs, as_user_pairs, sample_padded

__all__ = ["KeyValueEstimate", "PCKV", "PrivKV", "privkvm"]

_METHODS = ("ue", "grr")
#: PCKV.estimate's corrections: the paper's cut counts (lower end 0, or 1 as in the authors'
#: published scripts), or none (the unbiased frequencies and the ratio D^ / S^).
_CORRECTIONS = ("paper", "authors", "none")
#: Denominator of PCKV-UE's non-key coin (P[nonzero] = B / M for a non-sampled key).
_UE_TOTAL = 1 << 52
#: KeyValueEstimate.mean_interval's targets: the key's mean among its holders (PrivKV(M):
#: around ``debiased_means``), or whatever ``.means`` estimates (PrivKV(M): the shrunk mean).
_MEAN_TARGETS = ("debiased", "means")


def _z(alpha: float) -> float:
    from scipy import special  # server side only

    return float(-special.ndtri(alpha / 2.0))


def _ratio_variance(var_u: Any, var_v: Any, cov_uv: Any, ratio: Any, v0: Any) -> np.ndarray:
    """Return the variance of ``U / V`` for near-normal (U, V), to second order.

    ``A / V^2 (1 + 3 Var V / V^2) + 5 (Cov - R Var V)^2 / V^4`` with ``A = Var U - 2 R Cov
    + R^2 Var V``, R the ratio and V its denominator's expectation: the first-order (delta)
    term alone is ~8% low when V varies by ~15% (a rare key at moderate n).
    """
    first = (var_u - 2 * ratio * cov_uv + ratio * ratio * var_v) / v0**2
    lead = cov_uv - ratio * var_v
    return np.maximum(first * (1.0 + 3.0 * var_v / v0**2) + 5.0 * lead * lead / v0**4, 0.0)


def _index_dtype(size: int) -> np.dtype:
    from ..frequency._base import index_dtype

    return index_dtype(size)


@dataclasses.dataclass(frozen=True, eq=False)
class KeyValueEstimate:
    """Per-key frequency and mean value, with their variances and intervals.

    Attributes
    ----------
    frequencies : ndarray, shape (d,)
        Share of users holding each key (PCKV: the padded share, unbiased with
        ``correction="none"``, cut into ``[1/n, 1]`` by default; see
        :class:`ldpkit.sets.SetFrequencyEstimate` for the padding's bias).
    frequency_variance : ndarray, shape (d,)
    means : ndarray, shape (d,)
        Mean value of each key among its holders (a ratio estimator: consistent, not
        unbiased), in [-1, 1] except for PCKV's ``correction="none"`` (0 there where the
        estimated count is not positive).
    mean_variance : ndarray, shape (d,)
        Delta-method variance of the mean (at the estimates).
    n : int
    spec : Mechanism
    sums : ndarray or None
        PCKV: unbiased estimate of ``(1/n) sum over holders of value * min(1, ell / L)``
        per key (the numerator of the mean).
    long_share : float or None
        PCKV: unbiased estimate of the share of users with at least ``padding`` pairs
        (bounds the padding's bias of every frequency), from the dummy keys.
    labels : sequence or None
    debiased_means : ndarray or None
        PrivKV(M): a consistent estimate of each key's mean among its holders, the paper's
        shrunk ``means`` with the shrinkage undone by the estimated frequency (see
        :meth:`PrivKV.estimate`), cut to [-1, 1]; None for PCKV, whose ``means`` already
        estimate the (padded) mean.
    debiased_mean_variance : ndarray or None
        Delta-method variance of ``debiased_means``, the frequency's noise included.
    """

    frequencies: np.ndarray
    frequency_variance: np.ndarray
    means: np.ndarray
    mean_variance: np.ndarray
    n: int
    spec: Any = None
    sums: np.ndarray | None = None
    long_share: float | None = None
    labels: Sequence[Any] | None = None
    debiased_means: np.ndarray | None = None
    debiased_mean_variance: np.ndarray | None = None

    def __post_init__(self) -> None:
        """Validate the arrays (finite float64, one value per key)."""
        d = np.asarray(self.frequencies).shape
        if (self.debiased_means is None) != (self.debiased_mean_variance is None):
            raise ValueError("debiased_means and debiased_mean_variance must be given together")
        names = ["frequencies", "frequency_variance", "means", "mean_variance"]
        if self.debiased_means is not None:
            names += ["debiased_means", "debiased_mean_variance"]
        for name in names:
            arr = np.array(getattr(self, name), dtype=np.float64)
            if arr.shape != d or arr.ndim != 1 or not np.all(np.isfinite(arr)):
                raise ValueError(f"{name} must be a 1-D array of {d} finite numbers")
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)
        if self.labels is not None and len(self.labels) != d[0]:
            raise ValueError(f"labels must have one entry per key ({d[0]}), got {len(self.labels)}")

    @property
    def domain_size(self) -> int:
        """Number of keys d."""
        return int(self.frequencies.size)

    def frequency_interval(self, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
        """Return the normal two-sided ``1 - alpha`` interval of each frequency."""
        half = _z(check_probability(alpha, "alpha")) * np.sqrt(self.frequency_variance)
        return self.frequencies - half, self.frequencies + half

    #: Largest relative standard error of a key's frequency for which :meth:`mean_interval`
    #: gives an interval: the mean is a ratio over that count, and its normal
    #: approximation fails when the count is this uncertain (coverage fell to 0.5-0.8 in
    #: benchmarks/sets.py for keys above it).
    MAX_RELATIVE_ERROR: ClassVar[float] = 0.2

    @property
    def best_means(self) -> np.ndarray:
        """Each key's estimated mean among its holders: ``debiased_means`` if any, else ``means``."""
        return self.means if self.debiased_means is None else self.debiased_means

    def mean_interval(
        self, alpha: float = 0.05, *, target: str = "debiased"
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return the normal two-sided ``1 - alpha`` interval of each mean, cut to [-1, 1].

        Second-order delta method; NaN (with an IntervalWarning) where the key's estimated
        frequency is not positive or its relative standard error exceeds
        ``MAX_RELATIVE_ERROR`` (both estimators are ratios over that frequency).

        Parameters
        ----------
        alpha : float
            One minus the coverage.
        target : {"debiased", "means"}
            ``"debiased"`` (the default): an interval for each key's mean among its holders,
            around ``debiased_means`` where the estimator has them (PrivKV(M)), else around
            ``means`` (PCKV: the padded mean). ``"means"``: around ``means``, an interval
            for what they estimate (PrivKV(M): the mean shrunk towards the fake mean, not
            the holders' mean).
        """
        if target not in _MEAN_TARGETS:
            raise ValueError(f"target must be one of {_MEAN_TARGETS}, got {target!r}")
        centre, var = self.means, self.mean_variance
        if target == "debiased" and self.debiased_means is not None:
            assert self.debiased_mean_variance is not None
            centre, var = self.debiased_means, self.debiased_mean_variance
        half = _z(check_probability(alpha, "alpha")) * np.sqrt(var)
        lo = np.clip(centre - half, -1.0, 1.0)
        hi = np.clip(centre + half, -1.0, 1.0)
        se = np.sqrt(self.frequency_variance)
        none = ~(self.frequencies > 0) | (se > self.MAX_RELATIVE_ERROR * self.frequencies)
        if none.any():
            warnings.warn(
                f"mean intervals are NaN for {int(none.sum())} key(s) whose estimated "
                f"frequency is not positive or has a relative standard error above "
                f"{self.MAX_RELATIVE_ERROR:g} (the ratio's normal approximation fails there)",
                IntervalWarning,
                stacklevel=2,
            )
            lo[none] = hi[none] = np.nan
        return lo, hi

    def top(self, k: int) -> Any:
        """Return the k most frequent keys (labels when attached, else indices), largest first."""
        k = check_integer(k, "k", low=1, high=self.domain_size)
        idx = np.argsort(-self.frequencies, kind="stable")[:k]
        return [self.labels[i] for i in idx.tolist()] if self.labels is not None else idx

    def replace(self, **changes: Any) -> KeyValueEstimate:
        """Return a copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_frame(self, alpha: float = 0.05) -> Any:
        """Return a pandas DataFrame, one row per key.

        Frequency, its std error and interval, mean, its std error and the interval of
        :meth:`mean_interval` (PrivKV(M): around the ``debiased_mean`` column).
        """
        import pandas as pd

        flo, fhi = self.frequency_interval(alpha)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IntervalWarning)
            mlo, mhi = self.mean_interval(alpha)
        data = {
            "frequency": self.frequencies,
            "frequency_se": np.sqrt(self.frequency_variance),
            "frequency_low": flo,
            "frequency_high": fhi,
            "mean": self.means,
            "mean_se": np.sqrt(self.mean_variance),
            "mean_low": mlo,
            "mean_high": mhi,
        }
        if self.debiased_means is not None:  # the interval is around these
            assert self.debiased_mean_variance is not None
            data["debiased_mean"] = self.debiased_means
            data["debiased_mean_se"] = np.sqrt(self.debiased_mean_variance)
        index = (
            pd.Index(list(self.labels), name="label")
            if self.labels is not None
            else pd.RangeIndex(self.domain_size, name="key")
        )
        frame = pd.DataFrame(data, index=index)
        frame.attrs["alpha"] = alpha
        return frame

    def plot(self, ax: Any = None, *, alpha: float = 0.05, top: int | None = None) -> Any:
        """Plot two panels (frequency, mean) with ``1 - alpha`` error bars; return the axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(1, 2, figsize=(10, 4))
        idx = np.arange(self.domain_size) if top is None else np.asarray(self._top_idx(top))
        flo, fhi = self.frequency_interval(alpha)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IntervalWarning)
            mlo, mhi = self.mean_interval(alpha)
        pos = np.arange(idx.size)
        names = [str(self.labels[i]) if self.labels is not None else str(i) for i in idx.tolist()]
        f, m = self.frequencies[idx], self.best_means[idx]  # the means the intervals are of
        ax[0].bar(pos, f, yerr=np.vstack([f - flo[idx], fhi[idx] - f]), capsize=2)
        ax[0].set_ylabel("estimated frequency")
        merr = np.nan_to_num(np.vstack([m - mlo[idx], mhi[idx] - m]))
        ax[1].bar(pos, m, yerr=merr, capsize=2, color="tab:orange")
        ax[1].set_ylabel("estimated mean value")
        for a in ax[:2]:
            a.set_xticks(pos, names)
            a.axhline(0.0, color="black", lw=0.5)
        ax[0].set_title(f"n = {self.n}, {1 - alpha:.0%} intervals")
        return ax

    def _top_idx(self, k: int) -> np.ndarray:
        k = check_integer(k, "top", low=1, high=self.domain_size)
        return np.argsort(-self.frequencies, kind="stable")[:k]

    def __repr__(self) -> str:
        """Return a one-line summary."""
        return f"KeyValueEstimate(d={self.domain_size}, n={self.n}, spec={self.spec!r})"


class _KeyValueMechanism(Mechanism):
    """Shared input handling and contract hooks of the key-value mechanisms."""

    domain_size: int

    def check_values(self, values: Any) -> UserPairs:
        """``values`` as :class:`UserPairs` over keys ``[0, domain_size)``."""
        return as_user_pairs(values, self.domain_size)

    def _contract_values(self, n: int, gen: np.random.Generator) -> np.ndarray:
        out = np.empty(n, dtype=object)
        d = self.domain_size
        top = min(d, int(getattr(self, "padding", 2) or 2) + 2)
        for i in range(n):
            keys = gen.choice(d, size=int(gen.integers(0, top + 1)), replace=False)
            out[i] = [(int(k), float(v)) for k, v in zip(keys, gen.uniform(-1, 1, keys.size))]
        out[0], out[1] = [(0, 1.0), (d - 1, -1.0)], []
        return out

    def _contract_bad_values(self) -> tuple[list[Any], list[Any]]:
        d = self.domain_size
        outside = [[[(d, 0.5)]], [[(0, 1.5)]], [[(0, math.nan)]], [[(1, 0.1), (1, 0.2)]]]
        wrong_type = [[[0.5]], [[("a", 0.1)]], [1, 2], "ab", [[(0, "x")]]]
        return outside, wrong_type

    def _contract_check_estimate(self, est: Any, stats: Stats) -> None:
        d = self.domain_size
        assert isinstance(est, KeyValueEstimate), f"estimate is {type(est).__name__}"
        for name in ("frequencies", "frequency_variance", "means", "mean_variance"):
            arr = getattr(est, name)
            assert arr.shape == (d,) and arr.dtype == np.float64, f"{name} {arr.shape}"
            assert np.all(np.isfinite(arr)), f"{name} not finite"
        assert np.all(est.frequency_variance >= 0) and np.all(est.mean_variance >= 0)
        assert np.all(np.abs(est.means) <= 1.0), "means outside [-1, 1]"
        if est.debiased_means is not None:
            assert est.debiased_mean_variance is not None
            assert np.all(np.abs(est.debiased_means) <= 1.0), "debiased means outside [-1, 1]"
            assert np.all(est.debiased_mean_variance >= 0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PCKV(_KeyValueMechanism):
    """PCKV: padding-and-sampling, then correlated key-value perturbation (UE or GRR).

    A user pads her pairs with dummy keys ``d + L, ..., d + ell - 1`` (value 0) to ``ell``
    slots and samples one slot uniformly (``max(L, ell)`` slots); the value is discretized to
    ``v* = +1`` with probability ``(1 + v) / 2``, else -1; then:

    - ``method="ue"`` (PCKV-UE): a vector over the ``d' = d + ell`` keys with entries in
      {-1, 0, 1}: the sampled key's entry is ``v*`` w.p. ``a p``, ``-v*`` w.p. ``a (1 - p)``,
      0 w.p. ``1 - a`` (``a = 1/2``, ``p = e^eps2 / (1 + e^eps2)``); every other entry is
      +1 or -1 w.p. ``b / 2`` each, 0 otherwise (``b = 1 / (e^eps1 + 1)``). Sent as two
      packed bit rows: ``bits`` (entry non-zero) and ``signs`` (entry +1).
    - ``method="grr"`` (PCKV-GRR): one pair ``(key, sign)`` out of ``2 d'``: the sampled
      pair w.p. ``w_keep / T``, each other w.p. ``w_other / T``; in the paper's terms the key
      is kept w.p. ``a`` with its value kept w.p. ``p``, and each other key appears w.p.
      ``b`` with a uniform sign. Sent as ``values = 2 key + (sign > 0)``.

    Budget: the correlated perturbation composes to ``max(eps2, eps1 + log(2 e^eps2 /
    (1 + e^eps2)))`` (PCKV Theorem 2), not ``eps1 + eps2``; the allocation used is the
    paper's for UE, ``eps1 = log((e^eps + 1) / 2)``, ``eps2 = eps`` (section 5.2), which
    spends the budget exactly. For GRR the paper's allocation also counts the sampling (a
    pair is reported with probability at most ``1 / ell``): ``e^eps2 = ell (e^eps - 1) +
    1``, ``e^eps1 = (e^eps2 + 1) / 2``, which makes the law randomized response at ``eps2``
    over the ``2 d'`` pairs with a realized loss of exactly eps. Both are sampled exactly
    with integer weights (:mod:`ldpkit._exact`); ``privacy_loss()`` is computed from them.

    Parameters
    ----------
    epsilon : float
        Privacy budget, in ``[1e-6, 40]``.
    domain_size : int
        Number of keys d (>= 2).
    padding : int
        The padding length ell (>= 1); sets with more pairs are sampled down (their keys'
        frequencies are then biased low, by at most the share of such users, which the
        estimate reports as ``long_share``).
    method : {"ue", "grr"}
        The perturbation. UE sends ``2 d'`` bits per user and is the more accurate for
        large domains; GRR sends ``log2(2 d')`` bits.

    Notes
    -----
    Estimation (PCKV section 4.3): with ``n1``, ``n2`` the reports supporting ``(k, +1)``,
    ``(k, -1)``: ``S^ = (n1 + n2 - n b) / (a - b)`` users sampled k, ``D^ = (n1 - n2) / (a
    (2p - 1))`` is the sum of their discretized values; ``f^_k = ell S^ / n`` (unbiased for
    the padded frequency) and ``m^_k = D^ / S^``; by default the paper's correction (the
    frequency cut into ``[1/n, 1]``, the counts of +1 and -1 into ``[0, n f^ / ell]``: the
    ratio cut to [-1, 1]), ``estimate(stats, correction="none")`` for the uncut unbiased
    frequencies and ratio (:meth:`estimate`). Variances: ``Var f^ = ell^2
    (N p_h (1 - p_h) + (n - N) b (1 - b)) / (n^2 (a - b)^2)`` with ``N = n f``, ``p_h = b +
    (a - b) / ell``; the mean's by the delta method (:meth:`mean_variance`).

    References
    ----------
    X. Gu, M. Li, Y. Cheng, L. Xiong, Y. Cao. PCKV: Locally Differentially Private
    Correlated Key-Value Data Collection with Optimized Utility. USENIX Security 2020,
    sections 4 (Algorithms 1-3) and 5 (Theorem 2, budget allocation).

    Examples
    --------
    >>> pckv = PCKV(epsilon=2.0, domain_size=4, padding=2, method="grr")
    >>> users = [[(0, 0.5), (2, -1.0)], [(1, 1.0)], []]
    >>> est = pckv.run(users, rng=0)
    >>> est.frequencies.shape, est.means.shape
    ((4,), (4,))
    """

    domain_size: int
    padding: int
    method: str = "ue"

    max_epsilon: ClassVar[float] = RR_MAX_EPSILON
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "domain_size": [Size(2, small=6)],
        "padding": [Size(1, 1 << 20, small=2)],
        "method": [Options(*_METHODS)],
    }

    def _validate(self) -> None:
        if self.domain_size + self.padding > 1 << 31:
            raise ValueError(
                f"domain_size + padding must be <= 2^31, got {self.domain_size + self.padding}"
            )

    @property
    def slots(self) -> int:
        """``d' = d + ell``: real and dummy keys."""
        return self.domain_size + self.padding

    @property
    def key_epsilon(self) -> float:
        """eps1 = log((e^eps + 1) / 2) (PCKV section 5.2)."""
        return math.log((math.exp(self.epsilon) + 1.0) / 2.0)

    # -- the realized law ------------------------------------------------------------------
    def _grr_weights(self) -> tuple[int, int]:
        return _grr_law(self.epsilon, self.padding, 2 * self.slots - 1)

    def _ue_weights(self) -> tuple[int, int, int]:
        """Return the integer weights ``(w_keep, w_other, B)``.

        The sampled key's entry is v* w.p. ``w_keep / 2T``, -v* w.p. ``w_other / 2T``
        (``T = w_keep + w_other``), 0 w.p. 1/2; every other entry is +1 and -1 w.p.
        ``B / 2M`` each (``M = 2^52``), with ``log(2 p (1 - b) / b) <= eps`` checked on the
        exact integers.
        """
        return _ue_law(self.epsilon)

    @property
    def a(self) -> float:
        """P[the sampled key's entry is non-zero]."""
        if self.method == "ue":
            return 0.5
        w_keep, w_other = self._grr_weights()
        return (w_keep + w_other) / (w_keep + (2 * self.slots - 1) * w_other)

    @property
    def p(self) -> float:
        """P[the sampled value is kept | the key's entry is non-zero]."""
        if self.method == "ue":
            w_keep, w_other, _ = self._ue_weights()
        else:
            w_keep, w_other = self._grr_weights()
        return w_keep / (w_keep + w_other)

    @property
    def b(self) -> float:
        """P[a non-sampled key's entry is non-zero] (either sign, equally likely)."""
        if self.method == "ue":
            return self._ue_weights()[2] / _UE_TOTAL
        w_keep, w_other = self._grr_weights()
        return 2 * w_other / (w_keep + (2 * self.slots - 1) * w_other)

    @property
    def exact_epsilon(self) -> bool:
        """True for ell = 1 and for GRR (its allocation spends the sampling's amplification).

        With UE and ell > 1 the loss is lower than eps (the sampling is not accounted).
        """
        if self.method == "grr" and self.padding > 1:
            amplified = _crmath.log1p(self.padding * _crmath.expm1(self.epsilon))
            return amplified <= RR_MAX_EPSILON
        return self.padding == 1

    def privacy_loss(self) -> float:
        """Return the loss of the perturbation of one sampled pair, from the integer weights.

        GRR: the exact loss of the whole report, ``log(1 + (e^eps' - 1) / ell)`` with eps' the
        realized ratio (an item is sampled w.p. at most 1 / ell, as in
        :class:`PaddingSampling`), equal to eps by the allocation. UE: ``max(log(p / (1 - p)), log(2 p (1 - b) / b))``, the
        loss of the perturbation (PCKV Theorem 2), an upper bound for ell > 1.
        """
        if self.method == "grr":
            w_keep, w_other = self._grr_weights()
            return _crmath.log1p((w_keep - w_other) / (self.padding * w_other))
        w_keep, w_other, big = self._ue_weights()
        return max(ratio_loss(w_other, w_keep), _ue_cross_loss(w_keep, w_other, big))

    # -- the flow ------------------------------------------------------------------------
    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Pad, sample one pair, discretize its value, perturb (vectorized over users).

        ``values``: one list of ``(key, value)`` pairs per user, or :class:`UserPairs`.
        """
        pairs = self.check_values(values)
        n = len(pairs)
        if self.method == "ue":  # n x 2 ceil(d'/8) bytes of reports
            check_memory(
                2.0 * n * ((self.slots + 7) // 8),
                f"len(values)={n} at domain_size={self.domain_size}",
                f"{self.name}.randomize",
            )
        gen = as_generator(rng)
        key, positive = _sample_pairs(pairs, self.domain_size, self.padding, gen)
        if self.method == "grr":
            from ..frequency.grr import grr_sample

            index = 2 * key + positive
            out = grr_sample(index, 2 * self.slots, self._grr_weights(), gen)
            return Reports(self, values=out.astype(_index_dtype(2 * self.slots)))
        bits, signs = _ue_sample(key, positive, self.slots, self._ue_weights(), gen)
        return Reports(self, bits=bits, signs=signs)

    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields: ``positive`` and ``negative``.

        Reports supporting ``(k, +1)`` and ``(k, -1)`` for every real and dummy key (GRR:
        one pair per report, so they sum to n together).
        """
        shape = (self.slots,)
        return {"positive": StatsField(shape), "negative": StatsField(shape)}

    def empty_stats(self) -> Stats:
        """Return the Stats of no report (zero arrays): the neutral element of merge."""
        zero = np.zeros(self.slots, dtype=np.int64)
        return Stats(self, 0, positive=zero, negative=zero.copy())

    def aggregate(self, reports: Reports) -> Stats:
        """Reduce the reports to their mergeable Stats: positive and negative per slot."""
        reports = self.check_reports(reports)
        n, m = len(reports), self.slots
        if self.method == "grr":
            y = reports.arrays.get("values")
            if y is None or y.ndim != 1 or (y.size and int(y.max()) >= 2 * m):
                raise ValueError(f"reports.values must be pair indices in [0, {2 * m})")
            counts = np.bincount(y, minlength=2 * m)
            return Stats(self, n, positive=counts[1::2], negative=counts[0::2])
        bits, signs = reports.arrays.get("bits"), reports.arrays.get("signs")
        width = (m + 7) // 8
        for name, arr in (("bits", bits), ("signs", signs)):
            if arr is None or arr.shape != (n, width) or arr.dtype != np.uint8:
                raise ValueError(f"reports.{name} must be uint8 of shape ({n}, {width})")
        assert bits is not None and signs is not None
        if np.any(signs & ~bits):
            raise ValueError("reports.signs must be set only where reports.bits is")
        pos = np.zeros(m, dtype=np.int64)
        neg = np.zeros(m, dtype=np.int64)
        for start in range(0, n, 1 << 14):  # bounded temporaries (rows x d' bytes)
            nz = np.unpackbits(bits[start : start + (1 << 14)], axis=1)
            sg = np.unpackbits(signs[start : start + (1 << 14)], axis=1)
            if np.any(nz[:, m:]):
                raise ValueError(f"reports.bits must be zero past the {m} keys")
            p_rows = nz[:, :m] & sg[:, :m]
            pos += p_rows.sum(axis=0, dtype=np.int64)
            neg += (nz[:, :m] - p_rows).sum(axis=0, dtype=np.int64)
        return Stats(self, n, positive=pos, negative=neg)

    def frequency_variance(self, n: int, f: Any = None) -> Any:
        """Variance of ``f^_k`` from n reports at (padded) frequency f (None: 0)."""
        n = check_integer(n, "n", low=1)
        a, b, ell = self.a, self.b, self.padding
        f = 0.0 if f is None else check_array(f, "f", ndim=(0, 1), low=0.0, high=1.0)
        held = n * f
        p_h = b + (a - b) / ell
        var_y = held * p_h * (1 - p_h) + (n - held) * b * (1 - b)
        return ell**2 * var_y / (n**2 * (a - b) ** 2)

    def variance(self, n: int) -> Any:
        """:meth:`frequency_variance` at f = 0 (the data-independent part)."""
        return self.frequency_variance(n)

    def mean_variance(self, n: int, f: Any, mean: Any, mean_square: Any = None) -> Any:
        """Return the variance of ``m^_k = D^ / S^`` from n reports.

        For a key held by a share f of the users (sets no longer than ell) with mean value
        ``mean`` and mean squared value ``mean_square`` (default ``mean^2``, its lower
        bound): the delta method ``A / S^2`` (``A = Var D - 2 m Cov + m^2 Var S``) to second
        order for near-normal (D, S),
        ``A / S^2 (1 + 3 Var S / S^2) + 5 (Cov - m Var S)^2 / S^4``.
        """
        n = check_integer(n, "n", low=1)
        a, b, p, ell = self.a, self.b, self.p, self.padding
        f = check_array(f, "f", ndim=(0, 1), low=0.0, high=1.0)
        m = check_array(mean, "mean", ndim=(0, 1), low=-1.0, high=1.0)
        m2 = (
            m * m
            if mean_square is None
            else check_array(mean_square, "mean_square", ndim=(0, 1), low=0.0, high=1.0)
        )
        held = n * f
        c = a * (2 * p - 1)
        p_h = b + (a - b) / ell
        var_y = held * p_h * (1 - p_h) + (n - held) * b * (1 - b)
        var_x = held * p_h - (c / ell) ** 2 * held * m2 + (n - held) * b
        cov_xy = (c / ell) * held * m * (1 - p_h)
        var_s, var_d = var_y / (a - b) ** 2, var_x / c**2
        cov_ds = cov_xy / ((a - b) * c)
        s0 = np.maximum(held / ell, 1e-300)
        return _ratio_variance(var_d, var_s, cov_ds, m, s0)

    def estimate(self, stats: Stats, *, correction: str = "paper") -> KeyValueEstimate:
        """Return every key's frequency and mean value, with their variances.

        Parameters
        ----------
        stats : Stats
            The aggregated reports.
        correction : {"paper", "authors", "none"}
            ``"paper"`` (the default; PCKV section 4.3, its aggregation algorithm): the
            frequency is cut into ``[1/n, 1]``; the counts ``n1^``, ``n2^`` of users who
            sampled the key with ``v* = +1`` and ``-1`` (the solution of the 2 x 2 linear
            system, ``(S^ + D^) / 2`` and ``(S^ - D^) / 2``) are cut into ``[0, N]``, ``N =
            n f^ / ell``, and ``m^ = (n1^ - n2^) / N``. Where ``f^ >= 1/n`` this is ``D^ /
            S^`` cut to ``[-1, 1]``; below, ``N = 1 / ell`` and the mean is mostly -1, 0 or
            +1. Bias: a frequency below ``1/n`` is raised (a rare key's frequency is biased
            up); the mean is pulled towards 0 (``E[m^]`` between 0 and m, measured in
            tests/sets/test_keyvalue.py), the cut being what keeps its error bounded where
            ``S^`` is noise. ``"authors"``: the same with the counts cut into ``[1, N]``, as
            in the authors' published MATLAB scripts (the mean is then 0 where ``N <= 1``
            and within ``1 - 1/N`` of 0 elsewhere). ``"none"``: the unbiased frequencies and the ratio ``D^ / S^``
            uncut (0 where ``S^ <= 0``), consistent with a bias of second order (``(m Var
            S - Cov(D, S)) / S^2``); the numerator ``sums`` is unbiased in both.

        Returns
        -------
        KeyValueEstimate
            Frequencies, means, their variances (the same formulas for both corrections),
            ``sums`` and ``long_share`` (from the uncut dummy frequency).
        """
        if correction not in _CORRECTIONS:
            raise ValueError(f"correction must be one of {_CORRECTIONS}, got {correction!r}")
        stats = self.check_stats(stats, nonempty=True)
        n, d, ell = stats.n, self.domain_size, self.padding
        a, b, p = self.a, self.b, self.p
        n1, n2 = stats.positive.astype(np.float64), stats.negative.astype(np.float64)
        s = (n1 + n2 - n * b) / (a - b)
        dsum = (n1 - n2) / (a * (2 * p - 1))
        raw = ell * s / n
        if correction != "none":
            freq = np.clip(raw, 1.0 / n, 1.0)
            count = n * freq / ell  # N: users who sampled the key, at the cut frequency
            low = 0.0 if correction == "paper" else 1.0  # [1, N] with N < 1 gives N, N
            plus = np.minimum(np.maximum((s + dsum) / 2.0, low), count)
            minus = np.minimum(np.maximum((s - dsum) / 2.0, low), count)
            means = (plus - minus) / count
        else:
            freq = raw
            means = np.divide(dsum, s, out=np.zeros_like(s), where=s > 0)
        fvar = self.frequency_variance(n, np.clip(raw, 0.0, 1.0))
        with np.errstate(over="ignore"):
            mvar = self.mean_variance(n, np.clip(raw, 1.0 / n, 1.0), np.clip(means, -1.0, 1.0))
        mvar = np.where(s > 0, np.minimum(mvar, 1e300), 1.0)  # no holder seen: the range's
        return KeyValueEstimate(
            freq[:d],
            fvar[:d],
            means[:d],
            mvar[:d],
            n,
            spec=self,
            sums=ell * dsum[:d] / n,
            long_share=float(1.0 - raw[-1]),
        )


def _grr_law(epsilon: float, ell: int, n_others: int) -> tuple[int, int]:
    """PCKV-GRR's weights at the amplified budget ``eps' = log(1 + ell (e^eps - 1))``.

    An item is sampled with probability at most ``1 / ell``, so randomized response at
    ``eps'`` over the ``2 d'`` pairs has loss ``log(1 + (e^eps' - 1) / ell) = eps``: the
    paper's allocation for GRR, ``e^eps2 = ell (e^eps - 1) + 1``, ``e^eps1 = (e^eps2 + 1) /
    2`` (PCKV section 5.2; the ``a``, ``b``, ``p`` of its PCKV-GRR). ``eps'`` is lowered by a
    few ulps until the loss on the exact integer weights is within eps (capped at
    ``RR_MAX_EPSILON``).
    """
    if ell == 1:
        return rr_weights(epsilon, n_others)
    target = min(_crmath.log1p(ell * _crmath.expm1(epsilon)), RR_MAX_EPSILON)
    while True:
        w_keep, w_other = rr_weights(target, n_others)
        if _crmath.log1p((w_keep - w_other) / (ell * w_other)) <= epsilon:
            return w_keep, w_other
        target -= target * 2.0**-50


def _ue_cross_loss(w_keep: int, w_other: int, big: int) -> float:
    """``log(2 p (1 - b) / b)`` on the exact integers (p = w_keep / T, b = big / M)."""
    num = 2 * w_keep * (_UE_TOTAL - big)
    den = (w_keep + w_other) * big
    return _crmath.log1p((num - den) / den) if num > den else 0.0


def _ue_law(epsilon: float) -> tuple[int, int, int]:
    w_keep, w_other = rr_weights(epsilon, 1)
    target = 2.0 / (_crmath.exp(epsilon) + 3.0)  # b of the paper's allocation
    big = max(1, math.ceil(target * _UE_TOTAL))
    while _ue_cross_loss(w_keep, w_other, big) > epsilon:  # raise b until exactly within
        big += max(1, big >> 50)
    return w_keep, w_other, min(big, _UE_TOTAL)


def _sample_pairs(
    pairs: UserPairs, d: int, ell: int, gen: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Padding-and-sampling of one pair and the value's discretization: (key, v* > 0)."""
    slot, real = sample_padded(pairs.offsets, ell, gen)
    key = d + slot
    value = np.zeros(slot.shape[0])
    pos = pairs.offsets[:-1][real] + slot[real]
    key[real] = pairs.keys[pos]
    value[real] = pairs.values[pos]
    # v* = +1 w.p. (1 + v) / 2: a float coin is fine here (a mixture of the exact laws of
    # v* = +1 and v* = -1 stays within their ratio bound, as _exact.round_to_grid argues)
    positive = (gen.random(slot.shape[0]) < (1.0 + value) / 2.0).astype(np.int64)
    return key, positive


def _ue_sample(
    key: np.ndarray,
    positive: np.ndarray,
    slots: int,
    weights: tuple[int, int, int],
    gen: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    w_keep, w_other, big = weights
    n = key.shape[0]
    width = (slots + 7) // 8
    bits = np.zeros((n, width), dtype=np.uint8)
    signs = np.zeros((n, width), dtype=np.uint8)
    rows = max(1, (1 << 22) // max(slots, 1))
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        u = gen.integers(0, 2 * _UE_TOTAL, size=(stop - start, slots), dtype=np.int64)
        nz = u < 2 * big
        sg = u < big
        r = np.arange(stop - start)
        k = key[start:stop]
        own = np.asarray(gen.integers(0, 2 * (w_keep + w_other), size=stop - start))
        keep, flip = own < w_keep, (own >= w_keep) & (own < w_keep + w_other)
        v_pos = positive[start:stop].astype(bool)
        nz[r, k] = keep | flip
        sg[r, k] = (keep & v_pos) | (flip & ~v_pos)
        bits[start:stop] = np.packbits(nz, axis=1)
        signs[start:stop] = np.packbits(sg & nz, axis=1)
    return bits, signs


def _means_tuple(value: Any, name: str) -> tuple[float, ...]:
    """Return ``value`` as a tuple of floats in [-1, 1] (PrivKVM's fake-value means)."""
    return tuple(float(x) for x in check_array(value, name, ndim=1, low=-1.0, high=1.0))


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivKV(_KeyValueMechanism):
    """PrivKV: one key sampled uniformly, randomized response on its value, then its key.

    Each user draws a key j uniformly from ``[0, d)`` (sent in the clear). If she holds j
    with value v, v is discretized to ``v* = +-1`` (``P[+1] = (1 + v) / 2``), kept w.p.
    ``p2 = e^eps2 / (1 + e^eps2)`` (VPM), and the pair ``<1, v*'>`` is sent w.p. ``p1 =
    e^eps1 / (1 + e^eps1)``, else ``<0, 0>`` (LPM). If she does not hold j, she sends
    ``<0, 0>`` w.p. p1, else ``<1, s>`` with a fake sign s. Reports: ``keys`` (j),
    ``values`` in {-1, 0, +1} (0 is ``<0, 0>``).

    With ``rounds = c > 1`` the spec is one round of PrivKVM: the key budget ``eps1 = eps /
    2`` is spent in round 0 only (later rounds send a fair key bit, ``p1 = 1/2``), the value
    budget ``eps / 2`` is split into c rounds of ``eps2 = eps / (2 c)``, and in round t > 0
    a non-holder's fake value is drawn from the previous round's estimated mean of key j
    (``fake_means``; round 0: a uniform sign). The rounds compose sequentially to eps.
    :func:`privkvm` runs them all; :meth:`next_round` makes the spec of the next round
    from an estimate.

    Parameters
    ----------
    epsilon : float
        Privacy budget of the whole protocol (all rounds), in ``[1e-6, 40]``.
    domain_size : int
        Number of keys d (>= 2).
    rounds : int
        Number c of PrivKVM rounds (1: the one-round PrivKV, ``eps1 = eps2 = eps / 2``).
    round : int
        Which round this spec is, in ``[0, rounds)``.
    fake_means : tuple of float or None
        Round t > 0: the previous round's mean of every key (d values in [-1, 1]), from
        which non-holders draw their fake value; None: uniform fake signs (round 0).

    Notes
    -----
    Estimation (Ye et al. 2019, section IV): for key k with ``n_k`` reports, ``c+``, ``c-``
    pairs ``<1, +1>``, ``<1, -1>``: ``f^ = ((c+ + c-) / n_k - (1 - p1)) / (2 p1 - 1)``
    (unbiased given n_k; round 0 only: later rounds carry no key information, their
    frequencies are 0 with the uninformative variance 1/4) and ``m^ = (c+ - c-) / ((c+ +
    c-)(2 p2 - 1))`` cut to [-1, 1]. The fake pairs of non-holders count in the
    denominator, so m^ estimates ``w m + (1 - w) m'`` with ``w = f p1 / (f p1 + (1 - f)(1 -
    p1))`` and m' the fake mean (0 in round 0): the shrinkage towards 0 that PrivKVM's
    rounds correct, each round moving the estimate by the factor ``1 - w`` closer to m.
    ``debiased_means`` undo it with the estimated frequency instead (``(m^ - (1 - w^) m')
    / w^``, consistent for m; :meth:`estimate`), and ``mean_interval()`` is around them:
    an interval for the holders' mean, where the paper's ``means`` have none.
    ``privacy_loss()`` is the exact loss of the round's realized law (below eps: the
    correlated outputs compose to less than eps1 + eps2).

    References
    ----------
    Q. Ye, H. Hu, X. Meng, H. Zheng. PrivKV: Key-Value Data Collection with Local
    Differential Privacy. IEEE S&P 2019, section IV (PrivKV, VPM and LPM) and section V
    (PrivKVM, the iterations; the budget split as in the PCKV authors' PrivKVM baseline).

    Examples
    --------
    >>> pk = PrivKV(epsilon=2.0, domain_size=4)
    >>> est = pk.run([[(0, 0.5), (2, -1.0)], [(1, 1.0)], []], rng=0)
    >>> est.means.shape
    (4,)
    """

    domain_size: int
    rounds: int = 1
    round: int = 0
    fake_means: tuple[float, ...] | None = None

    max_epsilon: ClassVar[float] = RR_MAX_EPSILON
    exact_epsilon: ClassVar[bool] = False
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "domain_size": [Size(2, small=6)],
        "rounds": [Integer(1, 100)],
        "round": [Integer(0, Ref("rounds", -1))],
        "fake_means": [
            Check(
                _means_tuple,
                "a sequence of means in [-1, 1], one per key",
                hostile_values=[(2.0,), (float("nan"),)],
            ),
            None,
        ],
    }

    def _validate(self) -> None:
        if self.fake_means is not None and len(self.fake_means) != self.domain_size:
            raise ValueError(
                f"fake_means must hold domain_size = {self.domain_size} means, "
                f"got {len(self.fake_means)}"
            )

    @property
    def key_epsilon(self) -> float:
        """Key budget eps1: ``eps / 2`` in round 0, 0 in later rounds (a fair key bit)."""
        return self.epsilon / 2.0 if self.round == 0 else 0.0

    @property
    def value_epsilon(self) -> float:
        """Value budget eps2 = ``eps / (2 rounds)`` per round."""
        return self.epsilon / (2.0 * self.rounds)

    def _weights(self) -> tuple[tuple[int, int], tuple[int, int]]:
        key = rr_weights(self.key_epsilon, 1) if self.round == 0 else (1, 1)
        return key, rr_weights(self.value_epsilon, 1)

    @property
    def p1(self) -> float:
        """P[the key bit is kept]."""
        (k1, o1), _ = self._weights()
        return k1 / (k1 + o1)

    @property
    def p2(self) -> float:
        """P[the discretized value is kept]."""
        _, (k2, o2) = self._weights()
        return k2 / (k2 + o2)

    def pair_matrix(self, fake_mean: float = 0.0) -> np.ndarray:
        """Return P[output | input] for the sampled key.

        Inputs (holds it with v* = +1, with v* = -1, does not hold it, the fake value's
        mean ``fake_mean``) x outputs (<0, 0>, <1, +1>, <1, -1>). (Not a
        ``transition_matrix``: its rows are these three cases, not the domain's keys.)
        """
        p1, p2 = self.p1, self.p2
        up = (1 + fake_mean) / 2 * p2 + (1 - fake_mean) / 2 * (1 - p2)
        return np.array(
            [
                [1 - p1, p1 * p2, p1 * (1 - p2)],
                [1 - p1, p1 * (1 - p2), p1 * p2],
                [p1, (1 - p1) * up, (1 - p1) * (1 - up)],
            ]
        )

    def privacy_loss(self) -> float:
        """Return the exact loss of the round's realized law.

        The sampled key is independent of the data; the non-holder's row is linear in the
        fake mean, so the extreme fake means bound it.
        """
        from ..privacy import privacy_loss

        extremes = (
            (0.0,) if self.fake_means is None else (min(self.fake_means), max(self.fake_means))
        )
        return max(float(privacy_loss(self.pair_matrix(m))) for m in extremes)

    def next_round(self, estimate: KeyValueEstimate) -> PrivKV:
        """Make the spec of the next PrivKVM round: fake values from this round's means."""
        if not isinstance(estimate, KeyValueEstimate) or estimate.domain_size != self.domain_size:
            raise TypeError(f"estimate must be a KeyValueEstimate over {self.domain_size} keys")
        if self.round + 1 >= self.rounds:
            raise ValueError(f"round must be < rounds = {self.rounds}, got {self.round + 1}")
        means = tuple(float(m) for m in estimate.means)
        return dataclasses.replace(self, round=self.round + 1, fake_means=means)

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Sample a key, perturb its pair (vectorized over users)."""
        pairs = self.check_values(values)
        n, d = len(pairs), self.domain_size
        gen = as_generator(rng)
        j = np.asarray(gen.integers(0, d, size=n, dtype=np.int64))
        # does user i hold j, and with which value: search j among her (unsorted) keys
        lengths = pairs.lengths
        rows = np.repeat(np.arange(n), lengths)
        hit = pairs.keys == j[rows]
        held = np.zeros(n, dtype=bool)
        held[rows[hit]] = True
        value = np.zeros(n)
        if self.fake_means is not None:  # PrivKVM: non-holders draw from the previous mean
            value = np.asarray(self.fake_means)[j]
        value[rows[hit]] = pairs.values[hit]
        v_pos = gen.random(n) < (1.0 + value) / 2.0  # float coin: see PCKV's _sample_pairs
        (k1, o1), (k2, o2) = self._weights()
        key_kept = np.asarray(gen.integers(0, k1 + o1, size=n)) < k1
        value_kept = np.asarray(gen.integers(0, k2 + o2, size=n)) < k2
        fair = np.asarray(gen.integers(0, 2, size=n)) == 1
        sign_holder = np.where(value_kept == v_pos, 1, -1)
        sign_fake = np.where(fair, 1, -1) if self.fake_means is None else sign_holder
        out = np.where(
            held, np.where(key_kept, sign_holder, 0), np.where(key_kept, 0, sign_fake)
        ).astype(np.int8)
        return Reports(self, keys=j.astype(_index_dtype(d)), values=out)

    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields: ``sampled``, ``positive`` and ``negative`` per key.

        ``sampled``: reports per key, summing to n; ``positive`` / ``negative``: pairs
        ``<1, +1>`` / ``<1, -1>`` per key.
        """
        shape = (self.domain_size,)
        return {
            "sampled": StatsField(shape, total=1),
            "positive": StatsField(shape),
            "negative": StatsField(shape),
        }

    def empty_stats(self) -> Stats:
        """Return the Stats of no report (zero arrays): the neutral element of merge."""
        z = np.zeros(self.domain_size, dtype=np.int64)
        return Stats(self, 0, sampled=z, positive=z.copy(), negative=z.copy())

    def aggregate(self, reports: Reports) -> Stats:
        """Reduce the reports to their mergeable Stats: sampled, positive, negative per key."""
        reports = self.check_reports(reports)
        d = self.domain_size
        keys, vals = reports.arrays.get("keys"), reports.arrays.get("values")
        if keys is None or vals is None or keys.ndim != 1 or vals.ndim != 1:
            raise ValueError(f"reports must have fields ('keys', 'values'), got {reports.fields}")
        if keys.size and int(keys.max()) >= d:
            raise ValueError(f"reports.keys must be keys in [0, {d})")
        if vals.size and (int(vals.min()) < -1 or int(vals.max()) > 1):
            raise ValueError("reports.values must be in {-1, 0, 1}")
        return Stats(
            self,
            len(reports),
            sampled=np.bincount(keys, minlength=d),
            positive=np.bincount(keys[vals == 1], minlength=d),
            negative=np.bincount(keys[vals == -1], minlength=d),
        )

    def variance(self, n: int) -> Any:
        """Variance of ``f^`` at f = 0 with ``n / d`` reports per key (round 0: 1/4 later)."""
        n = check_integer(n, "n", low=1)
        if self.round > 0:
            return 0.25
        p1 = self.p1
        return p1 * (1 - p1) * self.domain_size / (n * (2 * p1 - 1) ** 2)

    def estimate(
        self, stats: Stats, *, key_estimate: KeyValueEstimate | None = None
    ) -> KeyValueEstimate:
        """Return PrivKV's frequency (unbiased given the reports per key) and mean estimates.

        Parameters
        ----------
        stats : Stats
            The round's aggregated reports.
        key_estimate : KeyValueEstimate or None
            Rounds t > 0 of PrivKVM: round 0's estimate, whose frequencies undo this
            round's shrinkage in ``debiased_means`` (a later round's reports carry no key
            information). Ignored in round 0, which uses its own frequencies.

        Returns
        -------
        KeyValueEstimate
            ``means``: the paper's estimator ``m^ = (c+ - c-) / ((c+ + c-)(2 p2 - 1))``,
            cut to [-1, 1], which estimates the shrunk ``w m + (1 - w) m'`` (class
            docstring). ``debiased_means``: with ``Y = (c+ - c-) / n_k`` and f^ the
            frequency, ``E[Y] = (2 p2 - 1)(f p1 m + (1 - f)(1 - p1) m')`` (PrivKV section
            IV, section V for the fake mean m'), solved for m: ``m~ = (Y / (2 p2 - 1) - (1
            - f^)(1 - p1) m') / (f^ p1)``, equal to ``(m^ - (1 - w^) m') / w^`` in round 0;
            cut to [-1, 1]; ``means`` where ``f^ <= 0``. Its variance: the second-order
            delta method of the ratio, with Var f^ and (round 0, where f^ and Y come from
            the same reports) their covariance ``Y (1 - X) / (n_k (2 p1 - 1))``, X the
            share of ``<1, *>`` reports. None in rounds t > 0 without ``key_estimate``.
        """
        stats = self.check_stats(stats, nonempty=True)
        p1, p2 = self.p1, self.p2
        nk = stats.sampled.astype(np.float64)
        ones = (stats.positive + stats.negative).astype(np.float64)
        if self.round == 0:
            share = np.divide(ones, nk, out=np.full_like(nk, 1 - p1), where=nk > 0)
            freq = (share - (1 - p1)) / (2 * p1 - 1)
            r = np.clip(share, 0.0, 1.0)
            fvar = r * (1 - r) / (np.maximum(nk, 1) * (2 * p1 - 1) ** 2)
            fvar = np.where(nk > 0, fvar, 0.25 / (2 * p1 - 1) ** 2)  # no report: the worst
        else:  # a fair key bit: no frequency information in this round
            freq, fvar = np.zeros_like(nk), np.full_like(nk, 0.25)
        diff = (stats.positive - stats.negative).astype(np.float64)
        # no <1, *> pair for a key: keep the previous round's mean (0 in round 0)
        prior = np.zeros_like(ones) if self.fake_means is None else np.array(self.fake_means)
        raw = np.divide(diff, ones * (2 * p2 - 1), out=prior.copy(), where=ones > 0)
        means = np.clip(raw, -1.0, 1.0)
        mu = np.clip(raw * (2 * p2 - 1), -1.0, 1.0)
        mvar = np.divide(
            1.0 - mu**2,
            ones * (2 * p2 - 1) ** 2,
            out=np.full_like(ones, 1.0),
            where=ones > 0,
        )
        debiased: tuple[np.ndarray, np.ndarray] | tuple[None, None] = (None, None)
        if self.round == 0:
            debiased = self._debias_terms(stats, freq, fvar, means, same_reports=True)[:2]
        elif key_estimate is not None:
            if (
                not isinstance(key_estimate, KeyValueEstimate)
                or key_estimate.domain_size != self.domain_size
            ):
                raise TypeError(
                    f"key_estimate must be a KeyValueEstimate over {self.domain_size} keys"
                )
            debiased = self._debias_terms(
                stats,
                key_estimate.frequencies,
                key_estimate.frequency_variance,
                means,
                same_reports=False,
            )[:2]
        return KeyValueEstimate(
            freq,
            fvar,
            means,
            mvar,
            stats.n,
            spec=self,
            debiased_means=debiased[0],
            debiased_mean_variance=debiased[1],
        )

    def _debias_terms(
        self,
        stats: Stats,
        freq: np.ndarray,
        fvar: np.ndarray,
        means: np.ndarray,
        *,
        same_reports: bool,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Return the debiased means (cut), variances, uncut means, d m~ / d f^ and Cov(m~, f^).

        ``m~ = U / V`` with ``U = Y / r - (1 - p1) m' (1 - f^)``, ``V = p1 f^`` (r = 2 p2 -
        1); ``Y`` has per-report variance ``X - Y^2`` (Y^2 = X: a report is 0 or +-1) and,
        when f^ comes from the same reports, covariance ``Y (1 - X) / q`` with f^ (q = 2
        p1 - 1, f^ = (X - (1 - p1)) / q).
        """
        p1, r = self.p1, 2 * self.p2 - 1
        nk = stats.sampled.astype(np.float64)
        each = np.maximum(nk, 1.0)
        share = (stats.positive + stats.negative) / each  # X
        y = (stats.positive - stats.negative) / each  # Y
        fake = np.zeros_like(nk) if self.fake_means is None else np.array(self.fake_means)
        c = (1 - p1) * fake  # U = y / r - c (1 - f^)
        usable = (nk > 0) & (freq > 0)
        v = np.where(usable, p1 * freq, 1.0)
        raw = (y / r - c * (1 - freq)) / v
        m = np.where(usable, np.clip(raw, -1.0, 1.0), means)
        var_y = np.maximum(share - y * y, 0.0) / each
        cov_yf = y * (1 - share) / (each * (2 * p1 - 1)) if same_reports else np.zeros_like(y)
        var_u = var_y / r**2 + c * c * fvar + 2 * c * cov_yf / r
        var_v = p1 * p1 * fvar
        cov_uv = p1 * cov_yf / r + c * p1 * fvar
        with np.errstate(over="ignore"):
            mvar = _ratio_variance(var_u, var_v, cov_uv, m, v)
        # first order: m~ ~ Y / (r V) + g f^, g = (c - p1 m) / V, for combining rounds
        grad_f = np.where(usable, (c - p1 * m) / v, 0.0)
        cov_mf = np.where(usable, cov_yf / (r * v) + grad_f * fvar, 0.0)
        raw = np.where(usable, raw, means)
        return m, np.where(usable, np.minimum(mvar, 1e300), 1.0), raw, grad_f, cov_mf


def _combine_rounds(
    specs: Sequence[PrivKV], stats: Sequence[Stats], first: KeyValueEstimate
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the keys PrivKVM can debias, their debiased means from every round, variances.

    Each round's ``m~_t`` (round 0's ``f^`` in all of them) weighted by the inverse of its
    variance; the combination's variance counts the rounds' covariances through the shared
    ``f^``: linearized, ``m~_t = Y_t / (r V) + g_t f^`` with ``Y_t`` independent across
    rounds, so ``Cov(m~_s, m~_t) = g_t Cov(m~_s, f^)`` for ``t > 0``. Combined uncut, then
    cut to [-1, 1].
    """
    terms = [
        spec._debias_terms(
            st,
            first.frequencies,
            first.frequency_variance,
            np.asarray(first.means),
            same_reports=spec.round == 0,
        )
        for spec, st in zip(specs, stats)
    ]
    var = np.maximum(np.array([t[1] for t in terms]), 1e-300)  # a zero variance: all weight
    raw = np.array([t[2] for t in terms])
    grad = np.array([t[3] for t in terms])
    cov_f = np.array([t[4] for t in terms])
    weight = 1.0 / var
    weight /= weight.sum(axis=0)
    combined = (weight * raw).sum(axis=0)
    total = (weight**2 * var).sum(axis=0)
    for s_ in range(len(terms)):
        for t_ in range(1, len(terms)):
            if s_ != t_:  # Cov(m~_s, m~_t) = g_t Cov(m~_s, f^)
                total += weight[s_] * weight[t_] * grad[t_] * cov_f[s_]
    usable = (first.frequencies > 0) & np.all(var < 1e300, axis=0)
    return usable, np.clip(combined, -1.0, 1.0), np.maximum(total, 0.0)


def privkvm(
    values: Any, *, epsilon: float, domain_size: int, rounds: int = 3, rng: RNGLike = None
) -> KeyValueEstimate:
    """PrivKVM: ``rounds`` rounds of :class:`PrivKV` over the same users, offline.

    Round 0 spends ``eps / 2`` on the key and ``eps / (2 c)`` on the value; every later
    round ``eps / (2 c)`` on the value, with non-holders' fake values drawn from the
    previous round's means, which undoes the shrinkage of the mean towards 0 by the
    factor ``1 - w`` per round (see :class:`PrivKV`). A deployment runs the rounds as
    separate collections, one spec per round (:meth:`PrivKV.next_round`).

    Parameters
    ----------
    values : sequence of lists of (key, value) pairs, or UserPairs
        One list per user, values in [-1, 1].
    epsilon : float
        The whole protocol's budget (the rounds compose sequentially to it).
    domain_size : int
        Number of keys d.
    rounds : int
        Number of rounds c (>= 1; 1 is the one-round PrivKV).
    rng : Generator, int or None
        Randomness of all rounds.

    Returns
    -------
    KeyValueEstimate
        Round 0's frequencies and their variances, the last round's means and their
        variances, and ``debiased_means``: every round's debiased mean (its shrinkage
        undone with round 0's frequencies; see :meth:`PrivKV.estimate`) weighted by the
        inverse of its variance, with the variance of the combination (the rounds share
        round 0's ``f^``: their covariances through it are counted); ``spec`` is round 0's.

    References
    ----------
    Q. Ye, H. Hu, X. Meng, H. Zheng. PrivKV: Key-Value Data Collection with Local
    Differential Privacy. IEEE S&P 2019, section V (PrivKVM).

    Examples
    --------
    >>> est = privkvm([[(0, 0.5)], [(1, -1.0)], [(0, 1.0)]], epsilon=2.0, domain_size=2,
    ...               rounds=2, rng=0)
    >>> est.means.shape
    (2,)
    """
    spec = PrivKV(epsilon=epsilon, domain_size=domain_size, rounds=rounds)
    pairs = spec.check_values(values)
    gen = as_generator(rng)
    reports = spec.randomize(pairs, rng=gen)
    if len(reports) == 0:  # as Mechanism.run says it
        raise ValueError("values must hold at least one value to estimate from, got none")
    stats = [spec.aggregate(reports)]
    first = last = spec.estimate(stats[0])
    specs = [spec]
    for _ in range(1, spec.rounds):
        specs.append(specs[-1].next_round(last))
        stats.append(specs[-1].aggregate(specs[-1].randomize(pairs, rng=gen)))
        last = specs[-1].estimate(stats[-1])
    if spec.rounds > 1:  # every round's debiased mean, round 0's frequencies in all
        usable, deb, deb_var = _combine_rounds(specs, stats, first)
        last = last.replace(  # a key no round can debias: the last round's mean
            debiased_means=np.where(usable, deb, last.means),
            debiased_mean_variance=np.where(usable, deb_var, 1.0),
        )
    return last.replace(
        frequencies=first.frequencies, frequency_variance=first.frequency_variance, spec=spec
    )
