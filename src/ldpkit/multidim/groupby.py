"""Group-by means: the mean of a numerical attribute per category of another, with intervals.

Each user holds a group ``c`` (one of ``domain_size`` categories) and a value ``v`` in
``[low, high]``. She rounds ``v`` to a bit ``b`` by unbiased randomized rounding
(``P[b = 1] = (v - low) / (high - low)``, Duchi, Jordan, Wainwright JASA 2018's binary
step, :func:`ldpkit._exact.round_to_grid`) and sends the item ``2 c + b`` of a domain of
``2 domain_size`` items through a frequency oracle (OLH or GRR) at the whole budget. The
joint frequencies ``f(c, 0)``, ``f(c, 1)`` are estimated without bias, and

    mean_c = low + (high - low) f(c, 1) / (f(c, 0) + f(c, 1)),

a ratio estimator (consistent, bias O(1/n)) with the delta-method variance
``(high - low)^2 [(f0^2 Var f1 + f1^2 Var f0 - 2 f0 f1 Cov) / B^4 + m (1 - m) / (n B)]``,
``B = f0 + f1``, ``m = f1 / B``: the oracle's noise, then the rounding (whose exact term
``sum_i t_i (1 - t_i) / (n B)^2`` is at most the last one). The group's share ``B`` comes with
it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal

import numpy as np

from .._constraints import FINITE_BOUND, Alternatives, Options, Size
from .._exact import RR_MAX_EPSILON, round_to_grid
from .._rng import RNGLike, as_generator
from .._validation import check_not_masked
from ..frequency.grr import GRR
from ..frequency.hashing import OLH
from ..numeric.distribution import check_bounds
from ..spec import Mechanism, Reports, Stats, StatsField
from ._base import inner_aggregate, inner_output_index
from ._tuples import NormalIntervals

__all__ = ["GroupMean", "GroupMeans"]


def _olh_pair_covariance(inner: OLH, frequencies: np.ndarray, n: int) -> np.ndarray:
    """Return ``Cov[f~(c, 0), f~(c, 1)]`` for every group c, OLH over plain items.

    A user holding x outside the pair puts both items in her report's support with
    probability ``p T + q' (1/g - T)``, ``T = P[h(2c) = h(2c+1) = h(x)]``, which the
    pairwise (not 3-wise) independent family puts above the ideal ``1/g^2`` (adjacent items:
    an arithmetic progression with x's neighbours); her two support bits then covary by
    ``(p - q') (T - 1/g^2)``, and a user holding one of the pair adds nothing. ``T`` comes
    from the family itself (:mod:`ldpkit.frequency._hash_moments`, docs/design/METHODS.md,
    "Sums of plain local-hashing estimates"); zero past its work bound (> 128 groups).
    """
    from ..frequency._hash_moments import excess_functions, plain_triple_excess  # server side

    d = inner.domain_size
    k = d // 2
    if inner.mix_items or excess_functions(d, k) == 0:  # (before the (d, k) weights exist)
        return np.zeros(k)
    u = np.zeros((d, k))
    u[np.arange(d), np.arange(d) // 2] = 1.0  # column c: the pair (2c, 2c + 1)
    excess = plain_triple_excess(u, inner.range_size)  # 2 (T - 1/g^2) per holder x
    if excess is None:
        return np.zeros(k)
    f = np.clip(frequencies, 0.0, None)
    total = f.sum()
    f = f / total if total > 0 else np.full(d, 1.0 / d)
    pq = float(inner.p) - float(inner.q)
    keep_gap = float(inner.p) - float(inner.other_probability)
    return keep_gap * (f @ excess) / (2.0 * n * pq**2)


@dataclasses.dataclass(frozen=True, eq=False)
class GroupMeans(NormalIntervals):
    """Estimated mean of the value in every group, and each group's share.

    Attributes
    ----------
    means, variance : ndarray, shape (k,)
        Ratio estimates and their delta-method variances (a group whose estimated share is
        not positive: the middle of ``[low, high]`` with variance ``((high - low) / 2)^2``,
        and ``estimable`` False).
    shares, share_variance : ndarray, shape (k,)
        Unbiased group frequencies and their variances.
    estimable : ndarray of bool
    n : int
    spec : GroupMean
    """

    means: np.ndarray
    variance: np.ndarray
    shares: np.ndarray
    share_variance: np.ndarray
    estimable: np.ndarray
    n: int
    spec: Any = None

    def to_frame(self, alpha: float = 0.05) -> Any:
        """One row per group: ``group``, ``share``, ``mean``, ``std_error``, ``low``, ``high``."""
        import pandas as pd

        lo, hi = self.confidence_interval(alpha)
        frame = pd.DataFrame(
            {
                "group": np.arange(self.means.size),
                "share": self.shares,
                "mean": self.means,
                "std_error": self.std_error,
                "low": lo,
                "high": hi,
            }
        )
        frame.attrs["alpha"] = alpha
        return frame


@dataclasses.dataclass(frozen=True, kw_only=True)
class GroupMean(Mechanism):
    """The mean of a value in ``[low, high]`` per group (one of ``domain_size`` categories).

    Parameters
    ----------
    epsilon : float
        The report's budget (in ``[1e-6, 40]``).
    domain_size : int
        Number of groups k (>= 2).
    low, high : float
        Bounds of the value.
    oracle : {"olh", "grr"}
        Frequency oracle of the ``2 k`` (group, rounded bit) items.

    Notes
    -----
    Users' data: an ``(n, 2)`` float array, column 0 the group (integer-valued), column 1
    the value. Reports are the oracle's. The estimate's means are ratio estimators (bias
    O(1/n)); the intervals use the delta method. ``privacy_loss()`` is the oracle's (the
    rounding happens before it, on the device).

    Examples
    --------
    >>> spec = GroupMean(epsilon=2.0, domain_size=3, low=0.0, high=60.0, oracle="grr")
    >>> gen = np.random.default_rng(0)
    >>> groups = gen.integers(0, 3, 20_000)
    >>> minutes = np.clip(10.0 * groups + gen.uniform(0, 20, 20_000), 0, 60)
    >>> est = spec.run(np.stack([groups, minutes], axis=1), rng=0)
    >>> est.means.round(0)
    array([10., 20., 30.])
    """

    domain_size: int
    low: float = 0.0
    high: float = 1.0
    oracle: Literal["olh", "grr"] = "olh"

    exact_epsilon: ClassVar[bool] = True
    max_epsilon: ClassVar[float] = RR_MAX_EPSILON
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "domain_size": [Size(2, small=6)],
        "low": [FINITE_BOUND],
        "high": [FINITE_BOUND],
        "oracle": [Options("olh", "grr")],
    }

    def _validate(self) -> None:
        lo, hi = check_bounds(self.low, self.high)  # the pair: low < high, a usable width
        self._set("low", lo)
        self._set("high", hi)

    def inner(self) -> GRR | OLH:
        """Return the oracle over the ``2 k`` (group, bit) items."""
        if self.oracle == "grr":
            return GRR(epsilon=self.epsilon, domain_size=2 * self.domain_size)
        # plain items: a stored GroupMean spec keeps the reports' meaning
        return OLH(epsilon=self.epsilon, domain_size=2 * self.domain_size, mix_items=False)

    def check_values(self, values: Any) -> np.ndarray:
        """Return the validated (group, value) rows; raise naming ``values``."""
        check_not_masked(values, "values")
        want = (
            f"an (n, 2) array of (group in [0, {self.domain_size}), value in "
            f"[{self.low:g}, {self.high:g}]) rows"
        )
        arr = np.asarray(values)
        if arr.dtype.kind not in "iuf" or arr.dtype.kind == "b":
            raise TypeError(f"values must be {want}, got dtype {arr.dtype}")
        if arr.ndim == 1 and arr.size == 0:
            return np.zeros((0, 2))
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise ValueError(f"values must be {want}, got shape {arr.shape}")
        x = arr.astype(np.float64)
        if not np.all(np.isfinite(x)):
            raise ValueError(f"values must be {want}, got NaN or infinity")
        g, v = x[:, 0], x[:, 1]
        if np.any(g != np.floor(g)) or np.any((g < 0) | (g >= self.domain_size)):
            raise ValueError(f"values must be {want}, got a group outside")
        if np.any((v < self.low) | (v > self.high)):
            raise ValueError(f"values must be {want}, got a value outside the bounds")
        return x

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Round each value to a bit, send (group, bit) through the oracle."""
        x = self.check_values(values)
        gen = as_generator(rng)
        bit = round_to_grid((x[:, 1] - self.low) / (self.high - self.low), 1, gen)
        item = 2 * x[:, 0].astype(np.int64) + bit
        return Reports(self, **self.inner().randomize(item, rng=gen).arrays)

    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields of the (group, bit) oracle."""
        return dict(self.inner().stats_schema())

    def empty_stats(self) -> Stats:
        """Return the Stats of no report (zero arrays): the neutral element of merge."""
        return Stats(self, 0, counts=np.zeros(2 * self.domain_size, dtype=np.int64))

    def aggregate(self, reports: Reports) -> Stats:
        """Reduce the reports to the (group, bit) oracle's counts."""
        return inner_aggregate(self, self.inner(), reports)

    def estimate(self, stats: Stats) -> GroupMeans:
        """Every group's mean (ratio estimator, delta-method variance) and share."""
        stats = self.check_stats(stats, nonempty=True)
        inner = self.inner()
        est = inner.estimate(Stats(inner, stats.n, **stats.arrays))
        f = est.frequencies.reshape(-1, 2)
        var = est.variance.reshape(-1, 2)
        f0, f1 = f[:, 0], f[:, 1]
        share = f0 + f1
        cov = np.zeros_like(f0)
        if self.oracle == "grr":  # multinomial outputs of fixed users (off-diagonal)
            pq = inner.p - inner.q
            p0, p1 = inner.q + pq * np.clip(f0, 0, 1), inner.q + pq * np.clip(f1, 0, 1)
            cov = -(p0 * p1 - pq**2 * np.clip(f0, 0, 1) * np.clip(f1, 0, 1)) / (stats.n * pq**2)
        elif isinstance(inner, OLH):  # plain items 2c, 2c + 1: the family's triple collisions
            cov = _olh_pair_covariance(inner, est.frequencies, stats.n)
        width = self.high - self.low
        ok = share > 0
        safe = np.where(ok, share, 1.0)
        means = np.where(ok, self.low + width * f1 / safe, (self.low + self.high) / 2.0)
        delta = (f0**2 * var[:, 1] + f1**2 * var[:, 0] - 2.0 * f0 * f1 * cov) / safe**4
        # the rounding of each value to a bit moves users between (c, 0) and (c, 1): it adds
        # sum_i t_i (1 - t_i) / (n B)^2 to the ratio's variance, at most m (1 - m) / (n B)
        m = np.clip(f1 / safe, 0.0, 1.0)
        delta = delta + m * (1.0 - m) / (stats.n * safe)
        variance = np.where(ok, width**2 * np.maximum(delta, 0.0), (width / 2.0) ** 2)
        share_var = var[:, 0] + var[:, 1] + 2.0 * cov
        return GroupMeans(
            means, variance, share, np.maximum(share_var, 0.0), ok, stats.n, spec=self
        )

    def privacy_loss(self) -> float:
        """Return the exact epsilon of the (group, bit) oracle."""
        return float(self.inner().privacy_loss())

    def transition_matrix(self) -> np.ndarray:
        """P[report | (group, rounded bit)] (rows ``2 c + b``), for GRR."""
        if self.oracle != "grr":
            raise NotImplementedError("GroupMean(oracle='olh') has no enumerable output space")
        return self.inner().transition_matrix()

    def output_index(self, reports: Reports) -> np.ndarray:
        """Return the (group, bit) oracle's column of each report (GRR only)."""
        if self.oracle != "grr":
            raise NotImplementedError("GroupMean(oracle='olh') has no enumerable output space")
        return inner_output_index(self, self.inner(), reports)

    # -- hooks of ldpkit.testing.check_mechanism ------------------------------------------
    def _contract_values(self, n: int, gen: np.random.Generator) -> np.ndarray:
        groups = gen.integers(0, self.domain_size, n).astype(np.float64)
        values = gen.uniform(self.low, self.high, n)
        groups[:2] = [0, self.domain_size - 1]
        values[:2] = [self.low, self.high]
        return np.stack([groups, values], axis=1)

    def _contract_bad_values(self) -> tuple[list[Any], list[Any]]:
        k, lo, hi = self.domain_size, self.low, self.high
        outside: list[Any] = [
            [[0, lo], [k, lo]],
            [[0, lo], [0, hi + (hi - lo)]],
            [[0.5, lo]],
            [[0, float("nan")]],
            [0, 1],
        ]
        return outside, [[["a", "b"]], [[True, False]]]

    def _contract_check_estimate(self, estimate: Any, stats: Stats) -> None:
        assert isinstance(estimate, GroupMeans), type(estimate).__name__
        k = self.domain_size
        for name in ("means", "variance", "shares", "share_variance"):
            arr = getattr(estimate, name)
            assert arr.shape == (k,) and np.all(np.isfinite(arr)), name
        assert np.all(estimate.variance >= 0)
