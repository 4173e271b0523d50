"""Attribute sampling with PM/HM: many numerical and categorical attributes per user.

Wang et al. (ICDE 2019, section IV, Algorithm 4): each user samples ``k`` of her ``d``
attributes uniformly without replacement and reports each sampled one at ``epsilon / k``:
a numerical attribute with the Piecewise or the Hybrid Mechanism
(:class:`ldpkit.numeric.PiecewiseMechanism`, :class:`ldpkit.numeric.HybridMechanism`, reused
here with their exact grid laws), a categorical one with a frequency oracle. The server
scales every report by ``d / k``, so that each user's term ``X_ij = (d / k) 1[j sampled]
y_ij`` is unbiased for her own value and the means (frequencies) are averages over all n
users. The paper's rule for k (section IV) is ``k = max(1, min(d, floor(epsilon / 2.5)))``.

Categorical attributes use GRR at ``epsilon / k`` (the paper uses OUE; GRR keeps one
integer per report and an exact integer law, and is the better oracle for the small
domains of a tuple's categorical columns when ``e^(eps/k) > k_j - 2``).

Variance. ``Var X_ij = (d / k) (V(t) + t^2) - t^2`` with ``V`` the mechanism's per-user
variance (the paper's section IV analysis): the mean of attribute j has variance ``sum_i Var X_ij /
n^2``. The estimate reports the empirical version, ``(sum X^2 - n Xbar^2) / ((n - 1) n)``,
computed from the Stats (the sum and the sum of squares of each attribute's reports), so
its intervals need no knowledge of the values.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Literal

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_integer, check_sequence
from ..estimate import FrequencyEstimate
from ..frequency.grr import GRR, grr_sample
from ..numeric.mean import DEFAULT_REPORT_CELLS, HybridMechanism, PiecewiseMechanism
from ..spec import Mechanism, Reports, Stats, StatsField
from ._base import MAX_ATTRIBUTES, MAX_TOTAL_ITEMS
from ._tuples import TupleMeans, check_mixed_values, check_numeric_bounds

__all__ = ["AttributeSampling", "sampled_attributes"]

#: The paper's constant in k = floor(epsilon / 2.5) (ICDE 2019, section IV).
EPSILON_PER_ATTRIBUTE = 2.5


def sampled_attributes(epsilon: float, d: int) -> int:
    """Return the paper's k: ``max(1, min(d, floor(epsilon / 2.5)))`` (ICDE 2019, section IV).

    Examples
    --------
    >>> sampled_attributes(1.0, 6), sampled_attributes(8.0, 6), sampled_attributes(40.0, 6)
    (1, 3, 6)
    """
    d = check_integer(d, "d", low=1)
    return max(1, min(d, math.floor(epsilon / EPSILON_PER_ATTRIBUTE)))


@dataclasses.dataclass(frozen=True, kw_only=True)
class AttributeSampling(Mechanism):
    """Sample k of d attributes, report each with PM/HM (numerical) or GRR at ``epsilon/k``.

    Parameters
    ----------
    epsilon : float
        The whole tuple's budget (in ``[1e-6, 30]``).
    low, high : sequence of float
        Bounds of the numerical attributes (1 or more; they come first in every row).
    domain_sizes : sequence of int
        Items of each categorical attribute (may be empty; they follow the numerical ones).
    mechanism : {"hm", "pm"}
        The numerical attributes' mechanism: Hybrid (default, the paper's best) or Piecewise.
    sampled : int or None
        k, the attributes each user reports (None: the paper's rule,
        :func:`sampled_attributes`).
    report_cells : int
        Grid cells of PM's exact law (see :class:`ldpkit.numeric.PiecewiseMechanism`).

    Notes
    -----
    Reports: ``attributes`` (an ``(n, k)`` array of the sampled attribute indices, sorted;
    public, independent of the values) and ``values`` (an ``(n, k)`` array: the report cell
    of PM/HM's grid for a numerical attribute, the GRR item for a categorical one).
    ``privacy_loss()`` sums the k largest per-attribute exact losses (each ``<= epsilon/k``).

    References
    ----------
    T. Wang, J. Zhao, X. Yang, X. Xiao et al. Collecting and analyzing multidimensional
    data with local differential privacy. ICDE 2019, section IV (Algorithm 4 and its
    variance analysis).

    Examples
    --------
    >>> spec = AttributeSampling(epsilon=4.0, low=(0.0, 0.0), high=(1.0, 60.0),
    ...                          domain_sizes=(3,))
    >>> spec.k
    1
    >>> gen = np.random.default_rng(0)
    >>> x = np.column_stack([gen.random(30_000), np.full(30_000, 45.0),
    ...                      gen.integers(0, 3, 30_000)])
    >>> est = spec.run(x, rng=0)
    >>> bool(abs(est.means[1] - 45.0) < 6 * est.std_error[1])
    True
    """

    low: tuple[float, ...] = (0.0,)
    high: tuple[float, ...] = (1.0,)
    domain_sizes: tuple[int, ...] = ()
    mechanism: Literal["hm", "pm"] = "hm"
    sampled: int | None = None
    report_cells: int = DEFAULT_REPORT_CELLS

    exact_epsilon: ClassVar[bool] = True
    max_epsilon: ClassVar[float] = 30.0

    def _validate(self) -> None:
        lo, hi = check_numeric_bounds(self.low, self.high, minimum=1, maximum=MAX_ATTRIBUTES)
        self._set("low", lo)
        self._set("high", hi)
        items = check_sequence(
            self.domain_sizes, "domain_sizes", "integers >= 2 (one per categorical attribute)"
        )
        sizes = tuple(check_integer(k, f"domain_sizes[{j}]", low=2) for j, k in enumerate(items))
        self._set("domain_sizes", sizes)
        d = len(lo) + len(sizes)
        if not 2 <= d <= MAX_ATTRIBUTES:
            raise ValueError(
                f"low and domain_sizes must declare 2 to {MAX_ATTRIBUTES} attributes in all, "
                f"got {d}"
            )
        if sum(sizes) > MAX_TOTAL_ITEMS:
            raise ValueError(
                f"domain_sizes must total at most {MAX_TOTAL_ITEMS} items, got {sum(sizes)}"
            )
        if self.mechanism not in ("hm", "pm"):
            raise ValueError(f"mechanism must be 'hm' or 'pm', got {self.mechanism!r}")
        if self.sampled is not None:
            self._set("sampled", check_integer(self.sampled, "sampled", low=1, high=d))
        self._set(
            "report_cells", check_integer(self.report_cells, "report_cells", low=4, high=1 << 24)
        )
        self.numeric_oracle()  # raises when epsilon / k is outside the mechanism's range

    # -- the schema ------------------------------------------------------------------------
    @property
    def attributes(self) -> int:
        """The number of attributes d (numerical, then categorical)."""
        return len(self.low) + len(self.domain_sizes)

    @property
    def numerical(self) -> int:
        """The number of numerical attributes (the first columns)."""
        return len(self.low)

    @property
    def k(self) -> int:
        """The attributes each user reports (``sampled``, or the paper's rule)."""
        if self.sampled is not None:
            return self.sampled
        return sampled_attributes(self.epsilon, self.attributes)

    @property
    def offsets(self) -> np.ndarray:
        """Where each categorical attribute's items start in ``counts`` (length + 1)."""
        return np.concatenate([[0], np.cumsum(self.domain_sizes)]).astype(np.int64)

    def numeric_oracle(self) -> HybridMechanism | PiecewiseMechanism:
        """Return the mechanism of every numerical attribute (``epsilon / k``, ``[-1, 1]``)."""
        cls = HybridMechanism if self.mechanism == "hm" else PiecewiseMechanism
        return cls(epsilon=self.epsilon / self.k, report_cells=self.report_cells)

    def category_oracle(self, j: int) -> GRR:
        """Return the GRR spec of categorical attribute j (counted among the categorical)."""
        return GRR(epsilon=self.epsilon / self.k, domain_size=self.domain_sizes[j])

    @property
    def _half_spans(self) -> np.ndarray:
        return (np.asarray(self.high) - np.asarray(self.low)) / 2.0

    # -- client ----------------------------------------------------------------------------
    def check_values(self, values: Any) -> np.ndarray:
        """``values`` as a float64 ``(n, d)`` array (reals, then item indices)."""
        return check_mixed_values(values, self.low, self.high, self.domain_sizes)

    def _to_unit(self, x: np.ndarray) -> np.ndarray:
        lo = np.asarray(self.low)
        return np.clip((x[:, : self.numerical] - lo) / self._half_spans - 1.0, -1.0, 1.0)

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Sample k attributes per user, report each with its mechanism at ``epsilon / k``."""
        x = self.check_values(values)
        gen = as_generator(rng)
        n, d = x.shape
        k, dn = self.k, self.numerical
        # a uniform k-subset per user: the first k of a uniform permutation (integer draws)
        perm = gen.permuted(np.broadcast_to(np.arange(d), (n, d)), axis=1)
        which = np.sort(perm[:, :k], axis=1)
        picked = np.take_along_axis(x, which, axis=1)
        out = np.zeros((n, k), dtype=np.int64)
        num = which < dn
        if num.any():  # one draw for every numerical report (the same mechanism for all)
            col = which[num]
            lo, h = np.asarray(self.low)[col], self._half_spans[col]
            t = np.clip((picked[num] - lo) / h - 1.0, -1.0, 1.0)
            out[num] = self.numeric_oracle()._sample_cells(t, gen)
        for j in range(d - dn):  # a loop over categorical attributes, not users
            mine = which == dn + j
            if mine.any():
                g = self.category_oracle(j)
                out[mine] = grr_sample(
                    picked[mine].astype(np.int64), g.domain_size, g._weights(), gen
                )
        return Reports(self, attributes=which.astype(np.int64), values=out)

    # -- server ----------------------------------------------------------------------------
    def stats_schema(self) -> dict[str, StatsField]:
        """Declare the Stats arrays.

        ``reporters`` per attribute (they sum to k n), each numerical attribute's ``sums``
        and ``squares`` of its unit-scale reports, the categorical ``counts``.
        """
        b = self.numeric_oracle().output_bound
        schema = {
            "reporters": StatsField((self.attributes,), total=self.k),
            "sums": StatsField((self.numerical,), low=-b, high=b, integer=False),
            "squares": StatsField((self.numerical,), low=0.0, high=b * b, integer=False),
        }
        if self.domain_sizes:
            schema["counts"] = StatsField((int(sum(self.domain_sizes)),))
        return schema

    def empty_stats(self) -> Stats:
        """Return the Stats of no report."""
        arrays: dict[str, Any] = {
            "reporters": np.zeros(self.attributes, dtype=np.int64),
            "sums": np.zeros(self.numerical),
            "squares": np.zeros(self.numerical),
        }
        if self.domain_sizes:
            arrays["counts"] = np.zeros(int(sum(self.domain_sizes)), dtype=np.int64)
        return Stats(self, 0, **arrays)

    def aggregate(self, reports: Reports) -> Stats:
        """Per attribute: reporters, the sum and sum of squares (numerical), the counts."""
        r = self.check_reports(reports)
        a, y = r.attributes, r.values
        d, k, dn = self.attributes, self.k, self.numerical
        if a.ndim != 2 or a.shape[1] != k or y.shape != a.shape:
            raise ValueError(
                f"reports.attributes and reports.values must have shape (n, {k}), got "
                f"{a.shape} and {y.shape}"
            )
        a64, y64 = a.astype(np.int64), y.astype(np.int64)
        if a.size and (int(a64.min()) < 0 or int(a64.max()) >= d):
            raise ValueError(f"reports.attributes must be attribute indices in [0, {d})")
        if k > 1 and a.size and np.any(np.diff(a64, axis=1) <= 0):
            raise ValueError("reports.attributes must be k distinct attributes per row, sorted")
        if y.size and int(y64.min()) < 0:
            raise ValueError("reports.values must be cells or items >= 0")
        grid = self.numeric_oracle().unit_report_values()
        num = a64 < dn
        cells = y64[num]
        if cells.size and int(cells.max()) >= grid.size:
            raise ValueError(f"reports.values must be report cells in [0, {grid.size})")
        unit = grid[cells] if cells.size else np.zeros(0)
        attr = a64[num]
        sums = np.bincount(attr, weights=unit, minlength=dn)[:dn].astype(np.float64)
        squares = np.bincount(attr, weights=unit * unit, minlength=dn)[:dn].astype(np.float64)
        arrays: dict[str, Any] = {
            "reporters": np.bincount(a64.ravel(), minlength=d).astype(np.int64),
            "sums": sums,
            "squares": squares,
        }
        if self.domain_sizes:
            cat = a64[~num] - dn
            items = y64[~num]
            sizes = np.asarray(self.domain_sizes, dtype=np.int64)
            if items.size and np.any(items >= sizes[cat]):
                raise ValueError("reports.values must be items in [0, domain_sizes[j])")
            arrays["counts"] = np.bincount(
                self.offsets[cat] + items, minlength=int(sum(self.domain_sizes))
            ).astype(np.int64)
        return Stats(self, a.shape[0], **arrays)

    def estimate(self, stats: Stats) -> TupleMeans:
        """Unbiased means (and frequencies), scaled by ``d / k``, with empirical variances."""
        stats = self.check_stats(stats, nonempty=True)
        n = stats.n
        c = self.attributes / self.k
        ybar = c * stats.sums / n
        if n > 1:
            unit_var = np.maximum(c * c * stats.squares - n * ybar * ybar, 0.0) / ((n - 1) * n)
        else:  # one report has no sample variance: the worst case stands in
            unit_var = np.asarray(self._unit_worst() / n)
        h = self._half_spans
        means = np.asarray(self.low) + (ybar + 1.0) * h
        freqs = []
        o = self.offsets
        for j in range(len(self.domain_sizes)):
            g = self.category_oracle(j)
            p, q = g.p, g.q
            counts = stats.counts[o[j] : o[j + 1]].astype(np.float64)
            n_j = float(stats.reporters[self.numerical + j])
            total = c * (counts - n_j * q) / (p - q)
            squares = c * c * (counts * (1 - q) ** 2 + (n_j - counts) * q * q) / (p - q) ** 2
            f = total / n
            if n > 1:
                var = np.maximum(squares - n * f * f, 0.0) / ((n - 1) * n)
            else:
                var = squares / n
            freqs.append(FrequencyEstimate(f, var, n))
        return TupleMeans(means, h * h * unit_var, tuple(freqs), n, spec=self)

    def _unit_worst(self) -> float:
        """Return the largest per-user ``Var X = (d/k)(V(t) + t^2) - t^2`` over t.

        It is reached at t^2 = 0 or 1: the expression is linear in t^2 for PM, SR and HM.
        """
        c = self.attributes / self.k
        t = np.array([0.0, 1.0])
        v = np.asarray(self.numeric_oracle().unit_variance(t))
        return float(np.max(c * (v + t * t) - t * t))

    def variance(self, n: int) -> np.ndarray:
        """Worst-case variance of every numerical attribute's mean from n reports."""
        n = check_integer(n, "n", low=1)
        return self._half_spans**2 * self._unit_worst() / n

    def variance_at(self, n: int, values: Any) -> np.ndarray:
        """Return the exact variance of every numerical mean when the users hold ``values``.

        ``sum_i [(d/k)(V(t_i) + t_i^2) - t_i^2] / n^2`` in the attributes' units squared.
        """
        t = self._to_unit(self.check_values(values))
        n = check_integer(n, "n", low=1)
        if t.shape[0] != n:
            raise ValueError(f"values must hold n = {n} rows, got {t.shape[0]}")
        c = self.attributes / self.k
        v = np.asarray(self.numeric_oracle().unit_variance(t.ravel())).reshape(t.shape)
        return self._half_spans**2 * np.sum(c * (v + t * t) - t * t, axis=0) / n**2

    def privacy_loss(self) -> float:
        """Return the sum of the k largest per-attribute exact losses.

        The sample is independent of the values; two tuples may differ in every sampled
        attribute.
        """
        losses = [self.numeric_oracle().privacy_loss()] * self.numerical
        losses += [self.category_oracle(j).privacy_loss() for j in range(len(self.domain_sizes))]
        return float(sum(sorted(losses, reverse=True)[: self.k]))

    # -- hooks of ldpkit.testing.check_mechanism ------------------------------------------
    def _contract_values(self, n: int, gen: np.random.Generator) -> np.ndarray:
        lo, hi = np.asarray(self.low), np.asarray(self.high)
        num = lo + (hi - lo) * gen.random((n, self.numerical))
        num[0], num[1] = lo, hi
        sizes = np.asarray(self.domain_sizes, dtype=np.int64)
        cat = gen.integers(0, sizes[None, :], size=(n, sizes.size)) if sizes.size else None
        if cat is None:
            return num
        cat[0], cat[1] = 0, sizes - 1
        return np.column_stack([num, cat.astype(np.float64)])

    def _contract_bad_values(self) -> tuple[list[Any], list[Any]]:
        lo, hi = list(self.low), list(self.high)
        ok = [*lo, *[0.0] * len(self.domain_sizes)]
        above = list(ok)
        above[0] = hi[0] + (hi[0] - lo[0])
        nan = list(ok)
        nan[0] = float("nan")
        outside: list[Any] = [[ok, above], [ok, nan], [0.0, 1.0], [[*ok, 0.0]]]
        if self.domain_sizes:
            item = list(ok)
            item[-1] = float(self.domain_sizes[-1])
            half = list(ok)
            half[-1] = 0.5
            outside += [[ok, item], [ok, half]]
        return outside, [[["a"] * self.attributes], [[True] * self.attributes]]

    def _contract_check_estimate(self, estimate: Any, stats: Stats) -> None:
        assert isinstance(estimate, TupleMeans), type(estimate).__name__
        dn = self.numerical
        assert estimate.means.shape == (dn,) and estimate.variance.shape == (dn,)
        assert np.all(np.isfinite(estimate.means)) and np.all(estimate.variance >= 0)
        assert len(estimate.categorical) == len(self.domain_sizes)
        for est, k in zip(estimate.categorical, self.domain_sizes, strict=True):
            assert est.frequencies.shape == (k,) and np.all(est.variance >= 0)
