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
  error bars.
* CALM's choice of the collected marginals' size (CALM sec. 4.3): the analyst asks for
  ``way``-way marginals; CALM may collect larger, ``ell``-way ones (``ell >= way``) and
  project them, trading the oracle's noise of larger tables (more cells, summed) against
  the sampling error of more groups, each smaller. ``ell=None`` (the default) picks the
  ``ell`` of least expected error (:meth:`CALM.expected_errors`);
  an integer forces it (``ell = way``: the tables of the earlier releases, bit for bit).
  The collected marginals are every ``ell``-subset (``m = C(d, ell)``), a balanced design:
  every ``way``-way marginal is covered by the same number, ``C(d - way, ell - way)``, of
  them. A requested ``way``-way marginal is then the projection of the consistent tables
  that cover it (equal after the consistency step), with the **exact** variance of that
  linear map of the groups' counts (the adjoint of the consistency step applied to each
  group's cell covariance).
* :class:`FullDomain` is the full-domain baseline: every user sends her whole tuple as one
  item of the product domain (Hadamard response, whose aggregation is one fast transform,
  or OLH); a marginal sums the cells.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from typing import Any, ClassVar, Literal

import numpy as np

from .._constraints import Alternatives, Boolean, Integer, Options, Ref
from .._exact import RR_MAX_EPSILON
from .._rng import RNGLike, as_generator
from .._validation import check_integer
from ..frequency._base import index_dtype
from ..frequency.grr import GRR
from ..frequency.hadamard import HadamardResponse, fwht
from ..frequency.hashing import OLH
from ..spec import Reports, Stats, StatsField
from ._base import (
    MultiAttributeMechanism,
    grouped_support_counts,
    inner_aggregate,
    inner_output_index,
)
from .marginals import MarginalsEstimate, MarginalTable
from .maxent import consistency_steps, consistent_tables

__all__ = ["CALM", "FullDomain"]

#: Largest product domain of one collected marginal (CALM) or of the whole tuple (FullDomain).
MAX_CELLS = 1 << 24
#: Most collected marginals of one CALM spec.
MAX_MARGINALS = 4096
#: Most cells of all the collected marginals for the exact variance of every consistent
#: table (its cost: this number squared, per step of the consistency map); beyond it a
#: table keeps its plain variance (larger), while a requested marginal's stays exact.
MAX_EXACT_CELLS = 2048
#: Most cells of all the collected marginals together, when ``ell`` is chosen (the Stats'
#: size, and the cost of an OLH aggregation: each report hashes its marginal's cells).
MAX_TOTAL_CELLS = 1 << 20


def _cells(sizes: tuple[int, ...], attributes: tuple[int, ...]) -> int:
    return int(math.prod(sizes[a] for a in attributes))


def _oracle(kind: str, epsilon: float, cells: int, mix_items: bool = False) -> GRR | OLH:
    if kind == "grr":
        return GRR(epsilon=epsilon, domain_size=cells)
    return OLH(epsilon=epsilon, domain_size=cells, mix_items=mix_items)


def _resolve_mix_items(spec: Any, olh: bool) -> None:
    """Resolve ``mix_items`` (None: True with OLH) and refuse it with another oracle."""
    if spec.mix_items is None:
        spec._set("mix_items", olh)
    elif spec.mix_items and not olh:
        raise ValueError(
            f"mix_items must be False or None unless oracle is 'olh', got True with "
            f"oracle={spec.oracle!r}"
        )


def _params_without_mix(out: dict[str, Any]) -> dict[str, Any]:
    """Drop ``mix_items`` when False: the wire identity of the specs before it existed."""
    if not out.get("mix_items"):
        out.pop("mix_items", None)
    return out


def _feasible_ell(sizes: tuple[int, ...], ell: int) -> bool:
    """Whether collecting every ``ell``-subset fits CALM's limits (count, cells, memory)."""
    d = len(sizes)
    if math.comb(d, ell) > MAX_MARGINALS:
        return False
    sets = list(itertools.combinations(range(d), ell))
    return max(_cells(sizes, a) for a in sets) <= MAX_CELLS and (
        sum(_cells(sizes, a) for a in sets) <= MAX_TOTAL_CELLS
    )


def _expected_errors(
    sizes: tuple[int, ...], way: int, epsilon: float, oracle: str
) -> dict[int, float]:
    """Return, per feasible ``ell``, the expected error of a ``way``-way marginal x n.

    The trade-off CALM's choice of ell and m weighs (CCS 2018, sec. 4.3: the oracle's
    noise of larger tables against the sampling error of more, smaller groups), written
    here in closed form for this design (ldpkit's statement of it, not a transcription of
    the paper's equation), for m = C(d, ell) groups of n / m users: a
    collected table T (c_T cells) has per-cell oracle variance ``V_T m / n`` (``V_T``: the
    oracle's variance of one cell at f = 0 from one report, FO17 eq. 2) and sampling
    variance ``f (1 - f) m / n``. Projecting T on a requested S (c_S cells) sums
    c_T / c_S cells into each, so the squared error summed over S's cells is ``err_T =
    m (c_T V_T + 1 - 1 / c_S) / n`` (the sampling term at its largest, uniform f). The
    tables covering S are averaged with inverse-variance weights: ``err_S = 1 / sum_T
    1 / err_T``. The value is the mean of ``n err_S`` over the C(d, way) requests.
    """
    d = len(sizes)
    out: dict[int, float] = {}
    for ell in range(way, d + 1):
        # ell = way is always a candidate (the plain tables, which validation bounds)
        if ell > way and not _feasible_ell(sizes, ell):
            continue
        m = math.comb(d, ell)
        noise = {
            c: c * float(_oracle(oracle, epsilon, c).variance(1))
            for c in {_cells(sizes, a) for a in itertools.combinations(range(d), ell)}
        }
        total = 0.0
        requests = list(itertools.combinations(range(d), way))
        for s in requests:
            c_s = _cells(sizes, s)
            rest = [a for a in range(d) if a not in s]
            precision = 0.0
            for extra in itertools.combinations(rest, ell - way):
                c_t = c_s * _cells(sizes, extra)
                precision += 1.0 / (m * (noise[c_t] + 1.0 - 1.0 / c_s))
            total += 1.0 / precision
        out[ell] = total / len(requests)
    return out


def _choose_ell(sizes: tuple[int, ...], way: int, epsilon: float, oracle: str) -> int:
    """Return the ``ell`` of least expected error (ties: the smaller ``ell``)."""
    errors = _expected_errors(sizes, way, epsilon, oracle)
    best = min(errors.values())
    return min(ell for ell, e in errors.items() if e <= best * (1.0 + 1e-12))


def _consistency_adjoint(
    axes: list[tuple[int, ...]], seeds: list[np.ndarray], weight: Any
) -> list[np.ndarray]:
    """Pull linear functionals of the consistent tables back to the plain tables.

    ``seeds[m]`` (a leading batch axis of functionals, then table m's shape) weighs the
    consistent tables' cells; the result weighs the plain tables' cells so that both give
    the same value for every input: the transpose of the linear part of
    :func:`consistent_tables`, its steps in reverse. A step moves table m by ``E_m (t -
    P_m x_m) / c_m`` (P_m: the sum over its collapsed axes, E_m: the expansion back, t =
    sum_j w_j P_j x_j, or the constant 1 for the empty set), so its transpose maps the
    functionals g to ``g_j - E_j P_j g_j / c_j + w_j E_j sum_m P_m g_m / c_m``.
    """
    g = [s.copy() for s in seeds]
    steps = consistency_steps(axes, [s.shape[1:] for s in seeds], weight, lead=1)
    for size, holders, drops, w in reversed(steps):
        pulled = [
            g[m].sum(axis=drop, keepdims=True) / collapsed
            for m, (drop, collapsed) in zip(holders, drops, strict=True)
        ]
        back = None
        if size:  # the shared target's part (the empty set's target is the constant 1)
            back = sum(p.sum(axis=drop) for p, (drop, _) in zip(pulled, drops, strict=True))
        for i, (m, (drop, _)) in enumerate(zip(holders, drops, strict=True)):
            g[m] = g[m] - pulled[i]
            if back is not None:
                g[m] = g[m] + w[i] * np.expand_dims(back, drop)
    return g


#: The plug-in of CALM's exact variances (:meth:`CALM._functional_variances`): the
#: unclipped estimates, floored at the variance at f = 0; False: each cell's estimate
#: clipped to [0, 1] (the earlier rule, conservative for sums of small cells).
PLUG_IN_UNCLIPPED = True


def _partition_covariance(spread: np.ndarray, target: np.ndarray, n: int) -> np.ndarray:
    """Return the groups' sampling covariance across groups, summed for each functional.

    The groups are a random partition of the n users: ``(sum_m s2_m - f (1 - f)) / (n -
    1)``, with ``spread = sum_m s2_m`` and ``target = f`` (see
    :meth:`CALM._functional_variances`). Negative when several groups share a functional.
    """
    return (spread - target * (1.0 - target)) / max(n - 1, 1)


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
        Order of the marginals the analyst asks for (2 to d).
    oracle : {"olh", "grr"}
        The frequency oracle of each marginal's cell (CALM uses OLH).
    ell : int or None
        Order of the collected marginals (``way`` to d): None (the default) chooses it as
        CALM sec. 4.3 does, by least expected error (:meth:`expected_errors`; the spec
        then holds the chosen integer, so that clients and collectors see it); an
        integer forces it. Every ``ell``-subset of the attributes is collected.
    mix_items : bool or None
        With OLH, hash a fixed bijective mix of each cell index instead of the index
        (:class:`~ldpkit.frequency.hashing.OLH`, ``mix_items``): the cells' estimates are
        then uncorrelated, as the error bars assume. None (the default) is True with OLH
        and False with GRR (resolved at construction); False is the earlier wire format
        (cells of one marginal in arithmetic progression correlate through the hash),
        kept so that collections made with it still load: ``params()`` omits a False
        ``mix_items``, and a missing one loads as False.

    Notes
    -----
    Reports: ``marginals`` (the user's marginal, public) and the oracle's fields (OLH:
    ``seeds``, ``values``; GRR: ``values``). A chosen ``ell`` is resolved once, at
    construction: ``spec.replace(epsilon=...)`` keeps it (pass ``ell=None`` to choose
    again). Marginal m's plain estimate is the oracle's
    over its ``n_m`` reports, variance FO17 eq. 2 at ``n_m`` plus the sampling of the group
    ``f (1 - f) (n - n_m) / (n_m (n - 1))``. The consistent tables' error bars (way = 2) are
    the exact variance of the consistency map applied to the groups' cell covariances
    (GRR's multinomial outputs, the groups' sampling; OLH's cells uncorrelated, which
    holds with ``mix_items`` and not quite without: its cells' hashes correlate);
    for ell > 2 the plain variances are kept (larger) when ``ell = way``; when ``ell >
    way`` each table's variance is exact (by :meth:`projection_variance`, up to 2048
    collected cells in all; beyond, the plain ones). A requested marginal inside
    a collected one, when ``ell > way``, has the exact variance of the consistent tables'
    projection (:meth:`projection_variance`). These exact variances count the groups'
    sampling covariance across groups (the users are split among the groups, so one
    group's excess of a cell is the others' deficit): without it, a marginal averaged over
    the tables of several groups had its sampling part overstated by about the covering
    groups' share of the users (binary flight questions, eps 4, ell = 5: 11 %). The 2-way
    closed form (``ell = 2``) takes the groups as independent (within 2 % of the exact
    variance: each cell comes mostly from one group). ``privacy_loss()``: the largest
    marginal oracle's loss.

    References
    ----------
    Z. Zhang, T. Wang, N. Li, S. He, J. Chen. CALM: Consistent Adaptive Local Marginal for
    Marginal Release under Local Differential Privacy. CCS 2018, sections 4.2-4.4 (4.3:
    the choice of the collected marginals' size).

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
    ell: int | None = None
    mix_items: bool | None = None

    max_epsilon: ClassVar[float] = RR_MAX_EPSILON
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "way": [Integer(2, Ref("attributes"))],
        "oracle": [Options("olh", "grr")],
        "ell": [None, Integer(Ref("way"), Ref("attributes"))],
        "mix_items": [None, Boolean()],
    }

    def _validate(self) -> None:
        super()._validate()
        if math.comb(self.attributes, self.way) > MAX_MARGINALS:
            raise ValueError(
                f"way must give at most {MAX_MARGINALS} marginals, got "
                f"C({self.attributes}, {self.way})"
            )
        _resolve_mix_items(self, self.oracle == "olh")
        if self.ell is None:
            self._set("ell", _choose_ell(self.domain_sizes, self.way, self.epsilon, self.oracle))
        elif math.comb(self.attributes, self.ell) > MAX_MARGINALS:
            raise ValueError(
                f"ell must give at most {MAX_MARGINALS} marginals, got "
                f"C({self.attributes}, {self.ell})"
            )
        for attrs in self.marginal_sets:
            if _cells(self.domain_sizes, attrs) > MAX_CELLS:
                raise ValueError(
                    f"domain_sizes must give marginals of at most {MAX_CELLS} cells, got "
                    f"{_cells(self.domain_sizes, attrs)} for attributes {attrs}"
                )

    def params(self) -> dict[str, Any]:
        """Return the spec's fields as a plain dict (without ``ell`` when it equals ``way``).

        The tables of ``ell = way`` keep the wire identity (fingerprint) they had before
        ``ell`` existed, so collections created then still load and accept their reports.
        """
        out = super().params()
        if out["ell"] == out["way"]:
            del out["ell"]
        return _params_without_mix(out)

    @classmethod
    def _from_params(cls, params: dict[str, Any]) -> CALM:
        """Build from a params dict: a missing ``ell`` is ``way`` (see :meth:`params`).

        An explicit ``"ell": null`` chooses it, as ``CALM(...)`` does in Python; a missing
        ``mix_items`` is False (the cell indices hashed as they are).
        """
        params.setdefault("ell", params.get("way", 2))
        params.setdefault("mix_items", False)
        return cls(**params)

    @property
    def marginal_sets(self) -> tuple[tuple[int, ...], ...]:
        """The collected marginals: every ``ell``-subset of the attributes."""
        return tuple(itertools.combinations(range(self.attributes), int(self.ell or self.way)))

    def expected_errors(self) -> dict[int, float]:
        """Return CALM's expected error of a ``way``-way marginal, x n, per feasible ``ell``.

        The squared error summed over a requested marginal's cells, averaged over the
        C(d, way) requests, for n = 1 (divide by n), under CALM's error model (sec. 4.3):
        the oracle's noise of the covering tables' summed cells plus the groups'
        sampling error, the covering tables averaged with inverse-variance weights. The
        default ``ell`` is its argmin.
        """
        return _expected_errors(self.domain_sizes, self.way, self.epsilon, self.oracle)

    def cell_offsets(self) -> np.ndarray:
        """Return where each marginal's cells start in the concatenated counts."""
        sizes = [_cells(self.domain_sizes, a) for a in self.marginal_sets]
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    def marginal_oracle(self, m: int) -> GRR | OLH:
        """Return the oracle of marginal m (over its cells)."""
        cells = _cells(self.domain_sizes, self.marginal_sets[m])
        return _oracle(self.oracle, self.epsilon, cells, bool(self.mix_items))

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
        if self.ell == 2:
            variances = self._consistent_pair_variances(plain, null, stats)
        elif self.ell != self.way and int(self.cell_offsets()[-1]) <= MAX_EXACT_CELLS:
            # a chosen (or forced) ell > way: every table's exact variance, by the adjoint
            variances = self._table_variances(plain, null, stats, tables)
        else:  # (the plain variances: an upper bound, up to the cells' covariances)
            variances = [t.variance for t in plain]
        out = tuple(
            MarginalTable(t.attributes, table, var, t.n)
            for t, table, var in zip(plain, tables, variances, strict=True)
        )
        plain_var = tuple(t.variance for t in plain)
        exact = None
        if self.ell != self.way:  # requested tables are projections: their exact variance
            exact = functools.partial(
                self.projection_variance, plain, null, stats, consistent=tables
            )
        return MarginalsEstimate(
            out, stats.n, spec=self, plain_variances=plain_var, projection_variance=exact
        )

    def projection_variance(
        self,
        plain: list[MarginalTable],
        null: list[float],
        stats: Stats,
        attributes: tuple[int, ...],
        weights: dict[int, float],
        *,
        consistent: list[np.ndarray] | None = None,
    ) -> np.ndarray:
        """Return the exact per-cell variance of ``sum_m w_m`` (consistent table m on S).

        S = ``attributes`` (the result's axes follow their order), ``weights`` maps
        collected tables (indices of :attr:`marginal_sets`, each holding S) to weights
        summing to 1. The consistent tables are a linear map of the plain ones (plus a
        constant); each cell of the answer is the functional whose weights on the plain
        cells the adjoint of the consistency step gives (:func:`_consistency_adjoint`),
        and its variance is that functional's quadratic form in the groups' cell
        covariances (:meth:`_cell_covariance`: GRR's multinomial outputs, OLH's
        uncorrelated cells, the groups' sampling), plus the groups' sampling
        covariance across groups (:meth:`_functional_variances`). ``consistent``: the
        consistent tables (recomputed from ``plain`` when None).
        """
        sets = self.marginal_sets
        shape = tuple(self.domain_sizes[a] for a in attributes)
        # each cell of table m: the index of the answer's cell it is summed into
        target = {}
        for m in weights:
            axes = [sets[m].index(a) for a in attributes]
            idx = np.indices(plain[m].table.shape).reshape(len(sets[m]), -1)
            target[m] = np.ravel_multi_index(tuple(idx[i] for i in axes), shape)

        def seeds(start: int, b: int) -> list[np.ndarray]:
            out = []
            for m, t in enumerate(plain):
                seed = np.zeros((b, t.table.size))
                if m in weights:
                    cells = np.flatnonzero((target[m] >= start) & (target[m] < start + b))
                    seed[target[m][cells] - start, cells] = weights[m]
                out.append(seed)
            return out

        if consistent is None:
            consistent = self._consistent(plain, null)
        count = int(math.prod(shape))
        out = self._functional_variances(plain, null, stats, count, seeds, consistent)
        return out.reshape(shape)

    def _consistent(self, plain: list[MarginalTable], null: list[float]) -> list[np.ndarray]:
        """Return the consistent tables of the plain ones (as :meth:`estimate` makes them)."""
        return consistent_tables(
            self.marginal_sets,
            [np.array(t.table) for t in plain],
            lambda m, collapsed: 1.0 / (null[m] * collapsed),
        )

    def _table_variances(
        self,
        plain: list[MarginalTable],
        null: list[float],
        stats: Stats,
        consistent: list[np.ndarray],
    ) -> list[np.ndarray]:
        """Return the exact per-cell variance of every consistent table (one adjoint pass)."""
        o = self.cell_offsets()

        def seeds(start: int, b: int) -> list[np.ndarray]:
            out = []
            for m, t in enumerate(plain):
                seed = np.zeros((b, t.table.size))
                lo, hi = max(start, int(o[m])), min(start + b, int(o[m + 1]))
                if lo < hi:  # the identity on the cells of table m inside this batch
                    seed[np.arange(lo, hi) - start, np.arange(lo, hi) - int(o[m])] = 1.0
                out.append(seed)
            return out

        flat = self._functional_variances(plain, null, stats, int(o[-1]), seeds, consistent)
        return [flat[o[m] : o[m + 1]].reshape(t.table.shape) for m, t in enumerate(plain)]

    def _functional_variances(
        self,
        plain: list[MarginalTable],
        null: list[float],
        stats: Stats,
        count: int,
        seeds: Any,
        consistent: list[np.ndarray],
    ) -> np.ndarray:
        """Return the variances of ``count`` linear functionals of the consistent tables.

        ``seeds(start, b)`` gives functionals ``start .. start + b - 1`` as weights on each
        consistent table's (flattened) cells; they are pulled back to the plain cells by
        :func:`_consistency_adjoint` (``g_m`` on group m's cells), and each variance is
        the quadratic form in the groups' cell covariances (:meth:`_cell_covariance`)
        plus the covariance of the groups' sampling across groups.

        The groups are a random partition of the n users, so their sampling errors are
        not independent: for a fixed population split at random into groups of sizes
        ``n_m``, ``Cov(mean_m h, mean_m' h') = -cov(h, h') / (n - 1)`` between two groups
        (the finite-population covariance of sampling without replacement; it makes the
        groups' errors sum to 0 over the whole population). Summed, the sampling
        variance of the functional is ``sum_m s2_m n / (n_m (n - 1)) - s2_H / (n - 1)``
        with ``s2_m`` the variance over the users of ``g_m`` at their cell of marginal m
        and ``H(x) = sum_m g_m(x_m)``; the per-group terms of :meth:`_cell_covariance`
        hold ``s2_m (n - n_m) / (n_m (n - 1))``, so ``(sum_m s2_m - s2_H) / (n - 1)`` is
        added. The consistency map is affine and leaves consistent tables unchanged, so
        on the tables of one user's tuple x (1 at her cells) it returns them: ``H(x)`` is
        the seed's value at x minus a constant, i.e. the indicator of the target cell
        for a cell of a consistent table or of a projection (weights summing to 1), and
        ``s2_H = f (1 - f)`` at the target cell's estimate (``consistent``, clipped).
        The term matters when several groups share a functional: a requested marginal
        averaged over the ``C(d - way, ell - way)`` tables that cover it (``ell >
        way``), where treating the groups as independent overstates the sampling part
        by about the covering groups' share of the users.

        The plug-in frequencies are the unbiased (unclipped) estimates, where the
        variance's oracle term, linear in f, is unbiased; the result is floored at the
        functional's variance at f = 0 (the oracle's noise alone, the exact variance when
        every cell is empty), which keeps every interval's width positive. Clipping
        each cell at 0 first (``PLUG_IN_UNCLIPPED = False``, the earlier rule) raises
        the variance of every empty cell by the mean of its clipped estimate: a sum of
        many small cells, from small groups, is then overstated (8 binary flight
        questions, n = 4000, eps 4, ell = 5: by 10 %).
        """
        sets = self.marginal_sets
        n = stats.n
        sizes = [int(s) for s in stats.sizes]
        if PLUG_IN_UNCLIPPED:
            points = [np.asarray(t.table, dtype=float) for t in plain]
            cov = [
                self._cell_covariance(m, t, n, sizes[m], at=points[m]) for m, t in enumerate(plain)
            ]
        else:
            points = [np.clip(t.table, 0.0, 1.0) for t in plain]
            cov = [self._cell_covariance(m, t, n, sizes[m]) for m, t in enumerate(plain)]
        floor = [
            self._cell_covariance(m, t, n, sizes[m], at=np.zeros(t.table.shape))
            for m, t in enumerate(plain)
        ]
        freq = [f.ravel() for f in points]
        flat_consistent = [np.asarray(c).ravel() for c in consistent]
        total = int(self.cell_offsets()[-1])
        chunk = max(1, (1 << 22) // max(total, 1))
        out = np.zeros(count)
        for start in range(0, count, chunk):  # batches of functionals (memory)
            b = min(chunk, count - start)
            batch = seeds(start, b)
            target = sum(s @ c for s, c in zip(batch, flat_consistent, strict=True))
            if not PLUG_IN_UNCLIPPED:
                target = np.clip(target, 0.0, 1.0)
            adj = _consistency_adjoint(
                list(sets),
                [seed.reshape((b, *t.table.shape)) for seed, t in zip(batch, plain, strict=True)],
                lambda m, collapsed: 1.0 / (null[m] * collapsed),
            )
            var, null_var = np.zeros(b), np.zeros(b)
            spread = np.zeros(b)  # sum_m s2_m: each group's sampling spread of g_m
            for a, (diag, terms), (diag0, terms0), f in zip(adj, cov, floor, freq, strict=True):
                flat = a.reshape(b, -1)
                square = np.square(flat)
                var += square @ diag.ravel()
                for sign, r in terms:
                    var += sign * np.square(flat @ r.ravel())
                null_var += square @ diag0.ravel()
                for sign, r in terms0:
                    null_var += sign * np.square(flat @ r.ravel())
                spread += square @ f - np.square(flat @ f)
            var += _partition_covariance(spread, target, n)
            out[start : start + b] = np.maximum(var, null_var)
        return np.maximum(out, 0.0)

    def _cell_covariance(
        self, m: int, table: MarginalTable, n: int, n_m: int, *, at: np.ndarray | None = None
    ) -> tuple[np.ndarray, list[tuple[float, np.ndarray]]]:
        """Return marginal m's cell covariance as ``diag(s') + sum_i sign_i r_i r_i^T``.

        Its diagonal is the plain variance. Off the diagonal, GRR's group of n_m users gives
        ``-P_u P_v / (n_m (p-q)^2) + f_u f_v / n_m`` (multinomial outputs of fixed users)
        and OLH's gives 0 (a user's support indicators of two cells are uncorrelated for
        a 3-wise independent hash, which the mixed keys of ``mix_items`` approximate to
        noise level; the plain index's hash leaves positive correlations); the group being a sample of the n users adds ``-f_u f_v (n - n_m) /
        (n_m (n - 1))``.

        ``at``: the frequencies where the covariance is evaluated (any reals, e.g. the
        unclipped estimate or 0); None: the table's estimate clipped to [0, 1], where
        the diagonal is the table's variance.
        """
        spec = self.marginal_oracle(m)
        fpc = (n - n_m) / max(n - 1, 1)
        if at is None:
            f, total = np.clip(table.table, 0.0, 1.0), table.variance
        else:  # FO17 eq. 2 and the group's sampling, at any real f
            f = np.asarray(at, dtype=float).reshape(table.table.shape)
            p, q = spec.p, spec.q
            oracle = (q * (1.0 - q) + f * (p - q) * (1.0 - p - q)) / (n_m * (p - q) ** 2)
            total = oracle + f * (1.0 - f) * fpc / n_m
        terms: list[tuple[float, np.ndarray]]
        if self.oracle == "grr":
            pq = spec.p - spec.q
            terms = [
                (-1.0, (spec.q + pq * f) / (math.sqrt(n_m) * pq)),
                (1.0, f * math.sqrt((1.0 - fpc) / n_m)),
            ]
        else:
            terms = [(-1.0, f * math.sqrt(fpc / n_m))]
        diag = total - sum(sign * r**2 for sign, r in terms)
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


#: Most ``marginal cells x K`` entries for which a FullDomain(oracle="hr") marginal gets the
#: covariance term (one Walsh-Hadamard transform of length K per marginal cell, about 1 s
#: per 2^22 entries here); beyond, the summed cell variances alone (see FullDomain).
MAX_HR_COVARIANCE_ENTRIES = 1 << 24


def _olh_sum_covariance(
    oracle: OLH, freq: np.ndarray, sizes: tuple[int, ...], attributes: tuple[int, ...], n: int
) -> np.ndarray:
    """Return the covariance part of the variance of OLH cell sums over plain cell indices.

    The cells of one marginal cell hold arithmetic progressions of product-domain indices,
    on which the pairwise (not 3-wise) independent hash family correlates their estimates:
    ``(p - q') sum_x f_x X(x) / (n (p - q)^2)``, X the family's triple term
    (:mod:`ldpkit.frequency._hash_moments`; docs/design/METHODS.md, "Sums of plain
    local-hashing estimates"), at the unbiased frequencies as :func:`_hr_sum_covariance`
    (the term is linear in them). Zero past the triple term's work bound.
    """
    from ..frequency._hash_moments import excess_functions, plain_triple_excess

    shape = tuple(sizes[a] for a in attributes)
    d, m = int(np.prod(sizes)), int(np.prod(shape))
    if excess_functions(d, m) == 0:
        return np.zeros(shape)
    grid = np.indices(sizes).reshape(len(sizes), -1)
    column = np.ravel_multi_index(tuple(grid[a] for a in attributes), shape)
    u = np.zeros((d, m))
    u[np.arange(d), column] = 1.0  # full cell -> its marginal cell
    excess = plain_triple_excess(u, oracle.range_size)
    if excess is None:
        return np.zeros(shape)
    pq = float(oracle.p) - float(oracle.q)
    keep_gap = float(oracle.p) - float(oracle.other_probability)
    return (keep_gap * (np.ravel(freq) @ excess) / (n * pq**2)).reshape(shape)


def _hr_sum_covariance(
    freq: np.ndarray, sizes: tuple[int, ...], attributes: tuple[int, ...], scale: float
) -> np.ndarray:
    """Return the covariance part of the variance of Hadamard-response cell sums.

    For Hadamard response over d items (K outputs), two cells u != v of one fixed user
    with item x have support indicators that are uncorrelated unless
    ``x + 1 = (u + 1) XOR (v + 1)``, where ``P[y in C_u and C_v] = p/2`` against
    ``1/4``; hence ``Cov(f~_u, f~_v) = f_w / (n (2p - 1))`` with ``w + 1 = (u + 1) XOR
    (v + 1)`` (derived in docs/design/METHODS.md, "FullDomain"). A marginal cell sums
    the product-domain cells S; the sum of their pairwise covariances is the XOR
    autocorrelation of S's shifted indicator ``s`` against ``g[j] = f_{j-1}``:
    ``sum_{a, b} g[a XOR b] s_a s_b = (1/K) sum_k (H g)_k (H s)_k^2``, one transform per
    marginal cell (never a d x d matrix).

    Parameters
    ----------
    freq : ndarray, shape sizes
        The product-domain frequencies (the unbiased estimates: the term is linear in
        them, so it is unbiased too; clipping would add the noise of every empty cell).
    sizes : tuple of int
        The attributes' domain sizes.
    attributes : tuple of int
        The marginal's attributes (its axes in this order).
    scale : float
        ``1 / (n (2p - 1))``.

    Returns
    -------
    ndarray
        The covariance term of every marginal cell (shape: the attributes' sizes), at
        least 0 (it is for every true distribution); 0 beyond
        ``MAX_HR_COVARIANCE_ENTRIES``.
    """
    d = int(freq.size)
    k = 1 << d.bit_length()  # HadamardResponse.hadamard_size
    shape = tuple(sizes[a] for a in attributes)
    cells = int(math.prod(shape))
    # marginal cell of every product-domain cell (axes in ``attributes`` order)
    index = np.indices(sizes).reshape(len(sizes), -1)
    owner = np.ravel_multi_index(tuple(index[a] for a in attributes), shape)
    if cells * k > MAX_HR_COVARIANCE_ENTRIES:  # too costly: the summed variances alone
        return np.zeros(shape)
    g = np.zeros(k)
    g[1 : d + 1] = freq.ravel()
    g_hat = fwht(g)
    out = np.empty(cells)
    chunk = max(1, MAX_HR_COVARIANCE_ENTRIES // (16 * k))
    for start in range(0, cells, chunk):  # batches of marginal cells (memory)
        b = min(chunk, cells - start)
        ind = np.zeros((b, k))
        mine = (owner >= start) & (owner < start + b)
        ind[owner[mine] - start, np.flatnonzero(mine) + 1] = 1.0
        out[start : start + b] = (np.square(fwht(ind, axis=1)) @ g_hat) / k
    return (scale * np.maximum(out, 0.0)).reshape(shape)


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
    mix_items : bool or None
        With OLH, hash a fixed bijective mix of each product cell's index (as
        :class:`CALM`'s ``mix_items``): a marginal cell sums product cells in arithmetic
        progression, whose estimates the plain index's hash correlates. None (default):
        True with OLH, False with Hadamard response; False is the earlier wire format
        (omitted from ``params()``, and a missing one loads as False).

    Notes
    -----
    Any marginal is the sum of the product-domain estimates over the other attributes.
    With Hadamard response its error bars are the exact variance of that sum: the cells'
    variances (FO17 eq. 2) plus their pairwise covariances ``Cov(f~_u, f~_v) = f_w / (n
    (2p - 1))`` with ``w + 1 = (u + 1) XOR (v + 1)`` (derived in docs/design/METHODS.md,
    "FullDomain"), summed per marginal cell by Walsh-Hadamard transforms
    (:func:`_hr_sum_covariance`); they add 12-26 % on skewed binary data. Where a
    marginal's cells times the Hadamard size exceed ``MAX_HR_COVARIANCE_ENTRIES`` (2^24)
    the covariances are left out (their cost grows as cells x K log K; on spread-out
    data over large domains they are small: 6 flight attributes, 483,840 cells, measured
    MSE / variance 0.97-1.06 without them). With OLH the
    error bars sum the cells' variances: exact when the cells' estimates are
    uncorrelated, as they are (up to noise) with ``mix_items`` (the default); with
    ``mix_items=False`` (the earlier wire format) the hash family's 3-wise dependence
    correlates the summed cells, which are in arithmetic progression, and the intervals
    of a marginal are too narrow (METHODS.md, "FullDomain"). The variance of a marginal cell grows
    with the number of summed cells: the reason CALM collects marginals instead (CCS
    2018, sec. 3).

    Examples
    --------
    >>> full = FullDomain(epsilon=2.0, domain_sizes=(3, 4))
    >>> x = np.random.default_rng(0).integers(0, 3, size=(2000, 2))
    >>> full.run(x, rng=0).marginal((0,)).table.shape
    (3,)
    """

    oracle: Literal["hr", "olh"] = "hr"
    mix_items: bool | None = None

    max_epsilon: ClassVar[float] = RR_MAX_EPSILON
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "oracle": [Options("hr", "olh")],
        "mix_items": [None, Boolean()],
    }

    def _validate(self) -> None:
        super()._validate()
        _resolve_mix_items(self, self.oracle == "olh")
        cells = math.prod(self.domain_sizes)
        if cells > MAX_CELLS:
            raise ValueError(
                f"domain_sizes must have a product of at most {MAX_CELLS}, got {cells}"
            )

    def params(self) -> dict[str, Any]:
        """Return the spec's fields as a plain dict (without ``mix_items`` when False)."""
        return _params_without_mix(super().params())

    @classmethod
    def _from_params(cls, params: dict[str, Any]) -> FullDomain:
        """Build from a params dict: a missing ``mix_items`` is False (see :meth:`params`)."""
        params.setdefault("mix_items", False)
        return cls(**params)

    def inner(self) -> HadamardResponse | OLH:
        """Return the oracle over the product domain."""
        cells = int(math.prod(self.domain_sizes))
        if self.oracle == "hr":
            return HadamardResponse(epsilon=self.epsilon, domain_size=cells)
        return OLH(epsilon=self.epsilon, domain_size=cells, mix_items=bool(self.mix_items))

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
        # OLH: the summed variances (uncorrelated cells with mix_items); over plain cell
        # indices (earlier specs) plus the hash family's triple term
        if self.oracle == "olh" and self.mix_items:
            return MarginalsEstimate((table,), stats.n, spec=self)
        freq = table.table
        if isinstance(inner, OLH):
            olh = inner

            def olh_projection_variance(
                attrs: tuple[int, ...], weights: dict[int, float]
            ) -> np.ndarray:
                """Per-cell variance of the marginal: summed variances + the triple term."""
                drop = tuple(a for a in range(self.attributes) if a not in attrs)
                kept = [a for a in range(self.attributes) if a in attrs]
                plain = np.transpose(table.variance.sum(axis=drop), [kept.index(a) for a in attrs])
                cov = _olh_sum_covariance(olh, freq, self.domain_sizes, attrs, stats.n)
                return float(weights[0]) ** 2 * (plain + cov)

            return MarginalsEstimate(
                (table,), stats.n, spec=self, projection_variance=olh_projection_variance
            )
        scale = 1.0 / (stats.n * (2.0 * inner.p - 1.0))

        def projection_variance(attrs: tuple[int, ...], weights: dict[int, float]) -> np.ndarray:
            """Exact per-cell variance of the marginal: summed variances + covariances."""
            drop = tuple(a for a in range(self.attributes) if a not in attrs)
            kept = [a for a in range(self.attributes) if a in attrs]
            plain = np.transpose(table.variance.sum(axis=drop), [kept.index(a) for a in attrs])
            cov = _hr_sum_covariance(freq, self.domain_sizes, attrs, scale)
            return float(weights[0]) ** 2 * (plain + cov)

        return MarginalsEstimate(
            (table,), stats.n, spec=self, projection_variance=projection_variance
        )

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
