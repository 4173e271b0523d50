"""CALM (Zhang, Wang, Li, He, Chen, CCS 2018) and the full-domain baseline: k-way marginals.

* :class:`CALM` splits the users into one group per ``way``-subset of the attributes (every
  user reports one marginal, drawn uniformly, at the whole budget); each group sends the
  cell of its marginal through a frequency oracle (OLH, as CALM, or GRR). The server
  estimates every marginal, then makes them **consistent** (CALM sec. 4.4, after Qardaji et
  al.'s PriView): every set of attributes shared by several marginals gets one answer, the
  inverse-variance weighted average of theirs, and each marginal's cells are shifted
  uniformly to agree with it. The shift is linear, so the consistent tables stay unbiased.
  A marginal larger than the collected ones (a 3-way table from 2-way CALM) is their
  max-entropy reconstruction (CALM sec. 4.5; :mod:`ldpkit.multidim.maxent`), with bootstrap
  error bars. CALM's choice of larger collected marginals (``ell > way``) is not
  implemented: here ``ell = way`` and ``m = C(d, way)``, a configuration of CALM's search.
* :class:`FullDomain` is the full-domain baseline: every user sends her whole tuple as one
  item of the product domain (Hadamard response, whose aggregation is one fast transform,
  or OLH); a marginal sums the cells.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, ClassVar, Literal

import numpy as np

from .._constraints import Alternatives, Integer, Options, Ref
from .._exact import RR_MAX_EPSILON
from .._rng import RNGLike, as_generator
from .._validation import check_integer
from ..frequency._base import index_dtype
from ..frequency.grr import GRR
from ..frequency.hadamard import HadamardResponse
from ..frequency.hashing import OLH
from ..spec import Reports, Stats, StatsField
from ._base import (
    MultiAttributeMechanism,
    grouped_support_counts,
    inner_aggregate,
    inner_output_index,
)
from .marginals import MarginalsEstimate, MarginalTable
from .maxent import consistent_tables

__all__ = ["CALM", "FullDomain"]

#: Largest product domain of one collected marginal (CALM) or of the whole tuple (FullDomain).
MAX_CELLS = 1 << 24


def _cells(sizes: tuple[int, ...], attributes: tuple[int, ...]) -> int:
    return int(math.prod(sizes[a] for a in attributes))


@dataclasses.dataclass(frozen=True, kw_only=True)
class CALM(MultiAttributeMechanism):
    """Every ``way``-way marginal of a tuple of categorical attributes (CALM, CCS 2018).

    Parameters
    ----------
    epsilon : float
        The whole report's budget (in ``[1e-6, 40]``): each user sends one marginal cell.
    domain_sizes : sequence of int
        Items per attribute.
    way : int
        Order of the marginals (2 to d).
    oracle : {"olh", "grr"}
        The frequency oracle of each marginal's cell (CALM uses OLH).

    Notes
    -----
    Reports: ``marginals`` (the user's marginal, public) and the oracle's fields (OLH:
    ``seeds``, ``values``; GRR: ``values``). Marginal m's plain estimate is the oracle's
    over its ``n_m`` reports, variance FO17 eq. 2 at ``n_m`` plus the sampling of the group
    ``f (1 - f) (n - n_m) / (n_m (n - 1))``. The consistent tables' error bars (way = 2) are
    the exact variance of the consistency map applied to the groups' cell covariances
    (GRR's multinomial outputs, the groups' sampling; OLH's cells taken as uncorrelated);
    for way > 2 the plain variances are kept (larger). ``privacy_loss()``: the largest
    marginal oracle's loss.

    References
    ----------
    Z. Zhang, T. Wang, N. Li, S. He, J. Chen. CALM: Consistent Adaptive Local Marginal for
    Marginal Release under Local Differential Privacy. CCS 2018, sections 4.2-4.4.

    Examples
    --------
    >>> calm = CALM(epsilon=2.0, domain_sizes=(3, 4, 2), oracle="grr")
    >>> x = np.random.default_rng(0).integers(0, 2, size=(3000, 3))
    >>> table = calm.run(x, rng=0).marginal((1, 0))
    >>> table.table.shape, table.attributes
    ((4, 3), (1, 0))
    """

    way: int = 2
    oracle: Literal["olh", "grr"] = "olh"

    max_epsilon: ClassVar[float] = RR_MAX_EPSILON
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "way": [Integer(2, Ref("attributes"))],
        "oracle": [Options("olh", "grr")],
    }

    def _validate(self) -> None:
        super()._validate()
        if math.comb(self.attributes, self.way) > 4096:
            raise ValueError(
                f"way must give at most 4096 marginals, got C({self.attributes}, {self.way})"
            )
        for attrs in self.marginal_sets:
            if _cells(self.domain_sizes, attrs) > MAX_CELLS:
                raise ValueError(
                    f"domain_sizes must give marginals of at most {MAX_CELLS} cells, got "
                    f"{_cells(self.domain_sizes, attrs)} for attributes {attrs}"
                )

    @property
    def marginal_sets(self) -> tuple[tuple[int, ...], ...]:
        """The collected marginals: every ``way``-subset of the attributes."""
        return tuple(itertools.combinations(range(self.attributes), self.way))

    def cell_offsets(self) -> np.ndarray:
        """Return where each marginal's cells start in the concatenated counts."""
        sizes = [_cells(self.domain_sizes, a) for a in self.marginal_sets]
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    def marginal_oracle(self, m: int) -> GRR | OLH:
        """Return the oracle of marginal m (over its cells)."""
        cells = _cells(self.domain_sizes, self.marginal_sets[m])
        if self.oracle == "grr":
            return GRR(epsilon=self.epsilon, domain_size=cells)
        return OLH(epsilon=self.epsilon, domain_size=cells)

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Draw one marginal per user and send its cell through the oracle."""
        x = self.check_values(values)
        gen = as_generator(rng)
        n = x.shape[0]
        sets = self.marginal_sets
        which = np.asarray(gen.integers(0, len(sets), size=n, dtype=np.int64))
        fields: dict[str, np.ndarray] = {}
        for m, attrs in enumerate(sets):  # a loop over marginals, not users
            mine = np.flatnonzero(which == m)
            dims = tuple(self.domain_sizes[a] for a in attrs)
            cell = (
                np.ravel_multi_index(tuple(x[mine][:, list(attrs)].T), dims) if mine.size else mine
            )
            part = self.marginal_oracle(m).randomize(cell, rng=gen)
            for k, arr in part.arrays.items():
                if k not in fields:
                    dtype = np.uint64 if k == "seeds" else index_dtype(max(self._max_cells(), 2))
                    fields[k] = np.zeros(n, dtype=dtype)
                fields[k][mine] = arr
        return Reports(self, marginals=which.astype(index_dtype(len(sets))), **fields)

    def _max_cells(self) -> int:
        if self.oracle == "olh":
            return int(OLH(epsilon=self.epsilon, domain_size=2).range_size)
        return max(_cells(self.domain_sizes, a) for a in self.marginal_sets)

    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields: ``counts`` and ``sizes``.

        ``counts``: each marginal's support counts, concatenated; ``sizes``: reports per
        marginal (sum to n).
        """
        total = int(self.cell_offsets()[-1])
        counts = StatsField((total,), total=1) if self.oracle == "grr" else StatsField((total,))
        return {"counts": counts, "sizes": StatsField((len(self.marginal_sets),), total=1)}

    def aggregate(self, reports: Reports) -> Stats:
        """Reduce the reports to their mergeable Stats: counts and sizes per marginal."""
        r = self.check_reports(reports)
        counts, sizes = grouped_support_counts(
            r, "marginals", self.cell_offsets(), self.marginal_oracle
        )
        return Stats(self, len(r), counts=counts, sizes=sizes)

    def plain_tables(self, stats: Stats) -> list[MarginalTable]:
        """Every marginal's plain (unbiased) estimate from its own group."""
        stats = self.check_stats(stats, nonempty=True)
        n, o = stats.n, self.cell_offsets()
        out = []
        for m, attrs in enumerate(self.marginal_sets):
            n_m = int(stats.sizes[m])
            if n_m == 0:
                raise ValueError(
                    f"stats must hold at least one report of every marginal, got none of "
                    f"marginal {attrs}"
                )
            spec = self.marginal_oracle(m)
            f = (stats.counts[o[m] : o[m + 1]] / n_m - spec.q) / (spec.p - spec.q)
            fc = np.clip(f, 0.0, 1.0)
            var = spec.variance(n_m, fc) + fc * (1.0 - fc) / n_m * (n - n_m) / max(n - 1, 1)
            dims = tuple(self.domain_sizes[a] for a in attrs)
            out.append(MarginalTable(attrs, f.reshape(dims), np.reshape(var, dims), n))
        return out

    def estimate(self, stats: Stats) -> MarginalsEstimate:
        """Return the consistent marginals (CALM sec. 4.4): one answer per shared attribute set."""
        plain = self.plain_tables(stats)
        tables = [np.array(t.table) for t in plain]
        # Var* of one cell per marginal (f = 0): weights that do not depend on the data
        null = [
            float(self.marginal_oracle(m).variance(int(stats.sizes[m]))) for m in range(len(plain))
        ]
        # CALM's consistency step; weights 1 / (Var* x cells summed) do not depend on the data
        tables = consistent_tables(
            self.marginal_sets, tables, lambda m, collapsed: 1.0 / (null[m] * collapsed)
        )
        if self.way == 2:
            variances = self._consistent_pair_variances(plain, null, stats)
        else:  # (the plain variances: an upper bound, up to the cells' covariances)
            variances = [t.variance for t in plain]
        out = tuple(
            MarginalTable(t.attributes, table, var, t.n)
            for t, table, var in zip(plain, tables, variances, strict=True)
        )
        plain_var = tuple(t.variance for t in plain)
        return MarginalsEstimate(out, stats.n, spec=self, plain_variances=plain_var)

    def _cell_covariance(
        self, m: int, table: MarginalTable, n: int, n_m: int
    ) -> tuple[np.ndarray, list[tuple[float, np.ndarray]]]:
        """Return marginal m's cell covariance as ``diag(s') + sum_i sign_i r_i r_i^T``.

        Its diagonal is the plain variance. Off the diagonal, GRR's group of n_m users gives
        ``-P_u P_v / (n_m (p-q)^2) + f_u f_v / n_m`` (multinomial outputs of fixed users)
        and OLH's gives 0 (its support indicators are pairwise uncorrelated for every
        user); the group being a sample of the n users adds ``-f_u f_v (n - n_m) /
        (n_m (n - 1))``.
        """
        f = np.clip(table.table, 0.0, 1.0)
        spec = self.marginal_oracle(m)
        fpc = (n - n_m) / max(n - 1, 1)
        terms: list[tuple[float, np.ndarray]]
        if self.oracle == "grr":
            pq = spec.p - spec.q
            terms = [
                (-1.0, (spec.q + pq * f) / (math.sqrt(n_m) * pq)),
                (1.0, f * math.sqrt((1.0 - fpc) / n_m)),
            ]
        else:
            terms = [(-1.0, f * math.sqrt(fpc / n_m))]
        diag = table.variance - sum(sign * r**2 for sign, r in terms)
        return diag, terms

    def _consistent_pair_variances(
        self, plain: list[MarginalTable], null: list[float], stats: Stats
    ) -> list[np.ndarray]:
        """Return the per-cell variance of the consistent 2-way tables.

        With way = 2 there is one shift per shared attribute. Cell (u, v) of marginal (a, b)
        becomes ``f(u, v) + (t_a(u) - P_a(u)) / k_b + (t_b(v) - P_b(v)) / k_a`` with
        ``t_a = sum_m' w_m' P^m'_a`` over the marginals holding a: a linear map of
        independent groups, whose variance is computed exactly from each group's cell
        covariance (:meth:`_cell_covariance`).
        """
        sets = self.marginal_sets
        n = stats.n
        cov = [self._cell_covariance(m, t, n, int(stats.sizes[m])) for m, t in enumerate(plain)]

        def projection_variance(m: int, attribute: int) -> np.ndarray:
            """Var of marginal m's projection on ``attribute`` (one value per item)."""
            # after the first step (the table shifted to sum 1): coefficients R_u - 1/k
            axis = 1 - sets[m].index(attribute)  # the axis summed away
            k = self.domain_sizes[attribute]
            diag, terms = cov[m]
            row, total = diag.sum(axis=axis), float(diag.sum())
            out = row * (1.0 - 1.0 / k) ** 2 + (total - row) / k**2
            for sign, r in terms:
                out = out + sign * (r.sum(axis=axis) - float(r.sum()) / k) ** 2
            return out

        weights: dict[int, dict[int, float]] = {}
        for a in range(self.attributes):
            holders = [m for m, attrs in enumerate(sets) if a in attrs]
            raw = {
                m: 1.0 / (null[m] * self.domain_sizes[sets[m][1 - sets[m].index(a)]])
                for m in holders
            }
            total = sum(raw.values())
            weights[a] = {m: w / total for m, w in raw.items()}
        out = []
        for m, (a, b) in enumerate(sets):
            k_a, k_b = self.domain_sizes[a], self.domain_sizes[b]
            s, terms = cov[m]
            alpha = -(1.0 - weights[a][m]) / k_b  # on row u (attribute a's shift)
            beta = -(1.0 - weights[b][m]) / k_a  # on column v (attribute b's shift)
            row_s, col_s = s.sum(axis=1, keepdims=True), s.sum(axis=0, keepdims=True)
            # coefficients of cell (u, v) on this table's plain cells: E + alpha R + beta C,
            # composed with the first step (minus delta on every cell)
            delta = (1.0 + alpha * k_b + beta * k_a) / (k_a * k_b)
            var = (
                alpha**2 * (row_s - s)
                + beta**2 * (col_s - s)
                + (1.0 + alpha + beta) ** 2 * s
                - 2.0 * delta * (s + alpha * row_s + beta * col_s)
                + delta**2 * float(s.sum())
            )
            for sign, r in terms:
                dot = r + alpha * r.sum(axis=1, keepdims=True) + beta * r.sum(axis=0, keepdims=True)
                var = var + sign * (dot - delta * float(r.sum())) ** 2
            for other, w in weights[a].items():
                if other != m:
                    var = var + (w / k_b) ** 2 * projection_variance(other, a)[:, None]
            for other, w in weights[b].items():
                if other != m:
                    var = var + (w / k_a) ** 2 * projection_variance(other, b)[None, :]
            out.append(np.maximum(var, 0.0))
        return out

    def variance(self, n: int) -> np.ndarray:
        """Var* (f = 0) of every collected cell from n reports (``n / m`` per marginal)."""
        m = len(self.marginal_sets)
        n = check_integer(n, "n", low=1)
        return np.concatenate(
            [
                np.full(_cells(self.domain_sizes, a), m * self.marginal_oracle(j).variance(n))
                for j, a in enumerate(self.marginal_sets)
            ]
        )

    def privacy_loss(self) -> float:
        """Return the largest exact epsilon of the marginal oracles."""
        return float(
            max(self.marginal_oracle(m).privacy_loss() for m in range(len(self.marginal_sets)))
        )

    def transition_matrix(self) -> np.ndarray:
        """Return P[(marginal, cell report) | tuple] for GRR and small domains.

        Columns: ``cell_offsets()[m] + y``.
        """
        if self.oracle != "grr":
            raise NotImplementedError("CALM(oracle='olh') has no enumerable output space")
        tuples = self._tuples()
        sets, o = self.marginal_sets, self.cell_offsets()
        mat = np.zeros((tuples.shape[0], int(o[-1])))
        for m, attrs in enumerate(sets):
            dims = tuple(self.domain_sizes[a] for a in attrs)
            cell = np.ravel_multi_index(tuple(tuples[:, list(attrs)].T), dims)
            mat[:, o[m] : o[m + 1]] = self.marginal_oracle(m).transition_matrix()[cell] / len(sets)
        return mat

    def output_index(self, reports: Reports) -> np.ndarray:
        """Return the column of :meth:`transition_matrix` that each report is."""
        r = self.check_reports(reports)
        if self.oracle != "grr":
            raise NotImplementedError("CALM(oracle='olh') has no enumerable output space")
        return self.cell_offsets()[r.marginals.astype(np.int64)] + r.values.astype(np.int64)

    def _contract_check_estimate(self, estimate: Any, stats: Stats) -> None:
        assert isinstance(estimate, MarginalsEstimate), type(estimate).__name__
        assert len(estimate.tables) == len(self.marginal_sets)
        for t, attrs in zip(estimate.tables, self.marginal_sets, strict=True):
            dims = tuple(self.domain_sizes[a] for a in attrs)
            assert t.table.shape == dims and t.variance.shape == dims, t.table.shape
            assert abs(float(t.table.sum()) - 1.0) < 1e-9, "a consistent table sums to 1"


@dataclasses.dataclass(frozen=True, kw_only=True)
class FullDomain(MultiAttributeMechanism):
    """The full-domain baseline: each user's whole tuple as one item of the product domain.

    Parameters
    ----------
    epsilon : float
        The report's budget.
    domain_sizes : sequence of int
        Items per attribute (their product at most 2^24).
    oracle : {"hr", "olh"}
        Hadamard response (aggregation by one fast Walsh-Hadamard transform, the default) or
        OLH (aggregation costs n x product, for small products).

    Notes
    -----
    Any marginal is the sum of the product-domain estimates over the other attributes;
    its error bars sum the cells' variances (the oracles' cell covariances are negligible
    against them). The variance of a marginal cell grows with the number of summed
    cells: the reason CALM collects marginals instead (CCS 2018, sec. 3).

    Examples
    --------
    >>> full = FullDomain(epsilon=2.0, domain_sizes=(3, 4))
    >>> x = np.random.default_rng(0).integers(0, 3, size=(2000, 2))
    >>> full.run(x, rng=0).marginal((0,)).table.shape
    (3,)
    """

    oracle: Literal["hr", "olh"] = "hr"

    max_epsilon: ClassVar[float] = RR_MAX_EPSILON
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {"oracle": [Options("hr", "olh")]}

    def _validate(self) -> None:
        super()._validate()
        cells = math.prod(self.domain_sizes)
        if cells > MAX_CELLS:
            raise ValueError(
                f"domain_sizes must have a product of at most {MAX_CELLS}, got {cells}"
            )

    def inner(self) -> HadamardResponse | OLH:
        """Return the oracle over the product domain."""
        cells = int(math.prod(self.domain_sizes))
        if self.oracle == "hr":
            return HadamardResponse(epsilon=self.epsilon, domain_size=cells)
        return OLH(epsilon=self.epsilon, domain_size=cells)

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Randomize each tuple as one cell of the product domain."""
        x = self.check_values(values)
        cell = np.ravel_multi_index(tuple(x.T), self.domain_sizes)
        return Reports(self, **self.inner().randomize(cell, rng=rng).arrays)

    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields of the product-domain oracle."""
        return dict(self.inner().stats_schema())

    def aggregate(self, reports: Reports) -> Stats:
        """Reduce the reports to the product-domain oracle's Stats."""
        return inner_aggregate(self, self.inner(), reports)

    def estimate(self, stats: Stats) -> MarginalsEstimate:
        """Return the product-domain estimate as one table over every attribute."""
        stats = self.check_stats(stats, nonempty=True)
        inner = self.inner()
        est = inner.estimate(Stats(inner, stats.n, **stats.arrays))
        table = MarginalTable(
            tuple(range(self.attributes)),
            est.frequencies.reshape(self.domain_sizes),
            est.variance.reshape(self.domain_sizes),
            stats.n,
        )
        return MarginalsEstimate((table,), stats.n, spec=self)

    def variance(self, n: int) -> np.ndarray:
        """Return the variance of every cell's estimate from n reports (f = 0)."""
        return np.full(int(math.prod(self.domain_sizes)), float(self.inner().variance(n)))

    def privacy_loss(self) -> float:
        """Return the exact epsilon of the product-domain oracle."""
        return float(self.inner().privacy_loss())

    def transition_matrix(self) -> np.ndarray:
        """Return the product-domain oracle's exact P[output | input]."""
        return self.inner().transition_matrix()

    def output_index(self, reports: Reports) -> np.ndarray:
        """Return the product-domain oracle's column of each report."""
        return inner_output_index(self, self.inner(), reports)

    def _contract_check_estimate(self, estimate: Any, stats: Stats) -> None:
        assert isinstance(estimate, MarginalsEstimate), type(estimate).__name__
        (t,) = estimate.tables
        assert t.table.shape == self.domain_sizes, t.table.shape
        assert np.all(np.isfinite(t.table)) and np.all(t.variance >= 0)
