"""Square Wave reporting (SW20 section 5): continuous, discrete, and general wave shapes.

A user with value v (mapped to [0, 1]) reports a point of [-b, 1 + b] that is likely
(``density_high``) within b of v and unlikely (``density_low``) elsewhere, their ratio
``e^eps``. The report is a cell of a fixed grid drawn from an exact integer
law (:mod:`ldpkit._exact`; the float samplers leaked v through their last bits). The server
buckets the reports into ``output_buckets`` buckets of [-b, 1 + b] (the mergeable
``Stats.counts``) and recovers a ``buckets``-bucket histogram of the inputs by EMS or EM
(:mod:`ldpkit.numeric.em`) using the grid law's exact bucket matrix
(``P[output bucket | input uniform in input bucket]``, inputs x outputs).
:func:`wave_bucket_matrix` is the same matrix for SW20's continuous law (reference).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from abc import abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from .. import _crmath
from .._constraints import FINITE_BOUND, Alternatives, Real, Size
from .._exact import ratio_loss, ratio_weights, round_to_grid, sample_bump, sample_flat_bump
from .._matrix_loss import privacy_loss as _matrix_privacy_loss
from .._rng import RNGLike, as_generator
from .._validation import (
    MAX_ENTRIES,
    check_categorical_values,
    check_epsilon,
    check_integer,
    check_memory,
    check_numeric_values,
    check_real,
    check_work,
)
from ..frequency._base import index_dtype
from ..spec import Mechanism, Reports, Stats, StatsField
from .distribution import Distribution, check_bounds

__all__ = [
    "MAX_EPSILON",
    "square_wave_bandwidth",
    "SquareWave",
    "GeneralWave",
    "DiscreteSquareWave",
    "wave_bucket_matrix",
]

#: Largest budget of the waves: their integer grid law needs ``2 w e^eps <= 2^62`` (w >= 1
#: plateau cells on each side of the input).
MAX_EPSILON = 40.0

#: Up to this many buckets, EMS's smoothing (kernel (1, 2, 1)/4) biases the estimate heavily
#: towards uniform: estimating with method="ems" warns.
EMS_MIN_BUCKETS = 8

#: Smallest number of input grid steps L of the waves (L is a multiple of ``buckets``).
MIN_INPUT_STEPS = 1 << 14


def _f(x: float) -> float:
    """``e^x - 1 - x`` without cancellation near 0 (series) or overflow for large -x.

    The series ``sum_{k>=2} x^k / k!`` is summed for |x| < 0.1 with a fixed number of terms
    (12: the remainder is below 1e-16 relative there); it used to loop until the terms were
    negligible, which never happened once x^2 / 2 underflowed.
    """
    if abs(x) < 0.1:
        term, total = x * x / 2.0, 0.0
        for k in range(3, 15):
            total += term
            term *= x / k
        return total
    return _crmath.expm1(x) - x


def _plateau_ratio(epsilon: float) -> float:
    """``t = 2 b e^eps`` for SW's b: ``(eps - 1 + e^-eps) / (1 - (1 + eps) e^-eps)``.

    Written as ``f(-eps) e^eps / f(eps)`` with ``f(x) = e^x - 1 - x``; finite for every eps
    (t ~ eps - 1 for large eps, t -> 1 as eps -> 0).
    """
    if epsilon > 30.0:
        r = _crmath.exp(-epsilon)
        return (epsilon - 1.0 + r) / (1.0 - (1.0 + epsilon) * r)
    return _f(-epsilon) * _crmath.exp(epsilon) / _f(epsilon)


def square_wave_bandwidth(epsilon: float) -> float:
    """SW20's b: ``(eps e^eps - e^eps + 1) / (2 e^eps (e^eps - 1 - eps))`` (section 5.3).

    Maximizes an upper bound of the mutual information between input and output on [0, 1].
    Decreases from 1/2 (eps -> 0) to 0 (eps -> inf); evaluated without cancellation, for
    eps up to 700 (beyond, b underflows to 0).

    Examples
    --------
    >>> [round(square_wave_bandwidth(e), 4) for e in (0.5, 1, 2, 4)]
    [0.3582, 0.2561, 0.1293, 0.0304]
    """
    # Above 700, e^-eps nears float64's smallest number and b underflows to 0, outside
    # (0, 1/2]; SquareWave itself stops at MAX_EPSILON.
    epsilon = check_epsilon(epsilon, high=700.0)
    return 0.5 * _plateau_ratio(epsilon) * _crmath.exp(-epsilon)


# --- exact transition matrices ---------------------------------------------------------------
def _smoothed_ramp(x: np.ndarray, h1: float, h2: float) -> np.ndarray:
    """``E[max(x + Z, 0)]`` for Z = U1 + U2, U1 ~ U[-h1, h1], U2 ~ U[-h2, h2] (h1 >= h2 >= 0).

    Equal to x for ``x >= h1 + h2`` and 0 for ``x <= -(h1 + h2)``; only the middle needs
    the closed form, where all terms are O(h), so tiny widths lose no precision.
    With ``h2 = 0``: ``(x + h1)^2 / (4 h1)`` (SW20's r/R integrals divided by 2b).
    """
    out = np.maximum(x, 0.0)
    h = h1 + h2
    mid = np.abs(x) < h
    # Work in units of h so that tiny waves (huge epsilon) neither underflow nor overflow.
    xm, a1, a2 = x[mid] / h, h1 / h, h2 / h
    if a2 <= 1e-9 * a1:
        out[mid] = h * (xm + a1) ** 2 / (4.0 * a1)
    else:

        def rho3(y: np.ndarray) -> np.ndarray:
            y = np.maximum(y, 0.0)
            return y * y * y / 6.0

        out[mid] = (
            h
            * (rho3(xm + a1 + a2) - rho3(xm + a1 - a2) - rho3(xm - a1 + a2) + rho3(xm - a1 - a2))
            / (4.0 * a1 * a2)
        )
    return out


def wave_bucket_matrix(
    b: float, ratio: float, density_low: float, buckets: int, output_buckets: int
) -> np.ndarray:
    """Exact ``M[i, j] = P[report in output bucket j | v uniform in input bucket i]``.

    Parameters
    ----------
    b : float
        Half-width of the wave on the unit scale (outputs in [-b, 1 + b]).
    ratio : float
        Top/bottom ratio r of the trapezoid (1: square wave, 0: triangle).
    density_low : float
        The low density (outside the wave), on the unit scale.
    buckets, output_buckets : int
        d input buckets of [0, 1] and d~ output buckets of [-b, 1 + b] (any sizes).

    Returns
    -------
    ndarray, shape (buckets, output_buckets)
        Rows (inputs) sum to 1 (up to ~1e-12), the orientation of every
        ``transition_matrix()`` in ldpkit.

    Notes
    -----
    The density is ``q = density_low`` everywhere on [-b, 1 + b] plus an excess of total mass
    ``1 - q (1 + 2b)`` shaped like the wave, i.e. the law of ``v + Z`` with ``Z`` uniform
    on [-b, b] (square) or a sum of two uniforms (trapezoid). For input bucket [s, t] and
    output bucket [a, c], ``P[v + Z in [a, c]] = (S(c - s) - S(c - t) - S(a - s) +
    S(a - t)) / (t - s)`` with ``S(x) = E max(x + Z, 0)``: the overlap of [s, t] with
    [a - Z, c - Z] written with ramps r(x) = max(x, 0) and averaged over Z. For the square
    wave S is SW20's ``R(x) = r(x)^2/2`` difference divided by 2b (METHODS.md section 3).
    This holds for any d and d~ (the authors' fill does not when d~ > d or when 2b spans
    at most two output buckets).
    """
    b = check_real(b, "b", low=0.0, low_inclusive=False)
    ratio = check_real(ratio, "ratio", low=0.0, high=1.0)
    q = check_real(density_low, "density_low", low=0.0, high=1.0 / (1.0 + 2.0 * b))
    d = check_integer(buckets, "buckets", low=1, high=MAX_ENTRIES)
    dt = check_integer(output_buckets, "output_buckets", low=1, high=MAX_ENTRIES // d)
    inp = np.linspace(0.0, 1.0, d + 1)
    out = np.linspace(-b, 1.0 + b, dt + 1)
    h1, h2 = (1.0 + ratio) * b / 2.0, (1.0 - ratio) * b / 2.0
    excess = 1.0 - q * (1.0 + 2.0 * b)
    width_in = np.diff(inp)[None, :]
    result = np.empty((d, dt))
    # Blocks of output rows bound the temporaries (~10 arrays of block x d floats).
    step = max(1, (1 << 19) // (d + 1))
    for j0 in range(0, dt, step):
        j1 = min(dt, j0 + step)
        o = out[j0 : j1 + 1]
        x = o[:, None] - inp[None, :]  # x = o - v at every (output edge, input edge)
        # S(c - s) - S(c - t) - S(a - s) + S(a - t) for every (output cell, input cell).
        # S(x) = x + S(-x) and x has no mixed difference, so either form gives the same
        # cell value; take the one whose S values are small near the cell (S(x) near
        # x = -b, S(-x) near x = +b) so that no large terms cancel.
        lower = -np.diff(np.diff(_smoothed_ramp(x, h1, h2), axis=0), axis=1)
        upper = -np.diff(np.diff(_smoothed_ramp(-x, h1, h2), axis=0), axis=1)
        lo_x = o[:-1, None] - inp[None, 1:]  # a - t: smallest o - v over the cell
        hi_x = o[1:, None] - inp[None, :-1]  # c - s: largest
        wave = np.where(lo_x + hi_x >= 0.0, upper, lower)
        # Cells entirely beyond the wave or entirely under its flat top have exact values.
        area = np.diff(o)[:, None] * width_in
        top = ratio * b
        wave = np.where((lo_x >= h1 + h2) | (hi_x <= -(h1 + h2)), 0.0, wave)
        wave = np.where((lo_x >= -top) & (hi_x <= top), area / (2.0 * h1), wave)
        wave /= width_in
        np.maximum(wave, 0.0, out=wave)
        result[:, j0:j1] = (q * np.diff(o)[:, None] + excess * wave).T
    return result


# --- the waves' exact grid law ----------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class _WaveGrid:
    """A wave on a grid: L input steps, N = L + 2w report cells of width 1/L.

    Grid input k (v_k = k / L) reports cell j (centre ``-b' + (j + 1/2) / L`` with
    ``b' = w / L``) with probability ``(w_low + bump[j - k]) / T``; ``bump`` covers the 2w
    cells ``k .. k + 2w - 1``, i.e. ``[v_k - b', v_k + b']``.
    """

    steps: int
    half: int
    w_low: int
    bump: np.ndarray  # int64, read-only
    cumulative: np.ndarray  # [0, bump[0], bump[0] + bump[1], ...], int64
    total: int
    flat: bool

    @property
    def cells(self) -> int:
        return self.steps + 2 * self.half


@functools.lru_cache(maxsize=32)
def _wave_grid(epsilon: float, ratio: float, b: float, buckets: int) -> _WaveGrid:
    steps = buckets * max(1, -(-MIN_INPUT_STEPS // buckets))
    half = max(1, round(b * steps))
    width = 2 * half
    # The trapezoid's height at each bump cell's centre, in units of the top (SW: all 1).
    x = np.abs((np.arange(width) + 0.5) / half - 1.0)  # |centre - v| / b', in (0, 1)
    if ratio >= 1.0:
        shape = np.ones(width)
    else:
        shape = np.clip((1.0 - x) / (1.0 - ratio), 0.0, 1.0)
    w_low, w_high = ratio_weights(epsilon, steps + width, float(shape.sum()))
    bump = np.floor((w_high - w_low) * shape).astype(np.int64)
    cumulative = np.concatenate([[0], np.cumsum(bump)]).astype(np.int64)
    total = (steps + width) * w_low + int(cumulative[-1])
    for arr in (bump, cumulative):
        arr.flags.writeable = False
    flat = bool(np.all(bump == bump[0]))
    return _WaveGrid(steps, half, w_low, bump, cumulative, total, flat)


@functools.lru_cache(maxsize=4)  # a 4096 x 4096 matrix is 134 MB
def _cached_matrix(spec: _Wave) -> np.ndarray:
    g = spec._grid
    build = _flat_bucket_matrix if g.flat else _grid_bucket_matrix
    m = build(g, spec.buckets, spec.n_output_buckets)
    m.flags.writeable = False
    return m


def _cell_buckets(cells: np.ndarray, n_cells: int, n_buckets: int) -> np.ndarray:
    """Output bucket of each cell: the one holding the cell's centre (integer arithmetic)."""
    return ((2 * cells + 1) * n_buckets) // (2 * n_cells)


def _ramp_sum(x: np.ndarray, width: int) -> np.ndarray:
    """``F(x) = sum_{t <= x} clip(t, 0, width)`` for integer arrays x (exact, int64)."""
    x = x.astype(np.int64)
    inside = np.clip(x, 0, width)
    return inside * (inside + 1) // 2 + np.maximum(x - width, 0) * width


def _flat_bucket_matrix(grid: _WaveGrid, buckets: int, output_buckets: int) -> np.ndarray:
    """:func:`_grid_bucket_matrix` for a flat bump (SquareWave) in closed form.

    With a flat bump of ``W`` cells of extra weight ``e``, ``C(t) = e clip(t, 0, W)``, so
    the sum over the grid inputs of one input bucket is a difference of the integer
    prefix sums :func:`_ramp_sum`: O(d d~) integer work instead of O(L d~) gathers
    (L = 16 d or more grid inputs). The integers are exact; only the final division by
    the total is floating point, as in the general path.
    """
    n, steps, d = grid.cells, grid.steps, buckets
    r = steps // d
    width = int(grid.bump.size)
    extra = float(grid.bump[0])
    edges = np.searchsorted(
        _cell_buckets(np.arange(n), n, output_buckets), np.arange(output_buckets + 1)
    )
    lo_edge, hi_edge = edges[None, :-1], edges[None, 1:]
    k0 = (np.arange(d) * r)[:, None]  # first grid input of each input bucket
    k1 = k0 + r  # last one (shared with the next bucket)

    def window(k_first: np.ndarray, k_last: np.ndarray, edge: np.ndarray) -> np.ndarray:
        # sum_{k = k_first}^{k_last} clip(edge - k, 0, W)
        return _ramp_sum(edge - k_first, width) - _ramp_sum(edge - k_last - 1, width)

    def single(k: np.ndarray, edge: np.ndarray) -> np.ndarray:
        return np.clip(edge - k, 0, width)

    # 2r x (bump mass in bucket j, averaged over the input bucket with end weights 1/2)
    twice = 2 * (window(k0, k1, hi_edge) - window(k0, k1, lo_edge)) - (
        single(k0, hi_edge) - single(k0, lo_edge) + single(k1, hi_edge) - single(k1, lo_edge)
    )
    sizes = np.diff(edges).astype(np.float64)[None, :]
    total = float(grid.total)
    return grid.w_low * sizes / total + extra * twice.astype(np.float64) / (2.0 * r * total)


def _grid_bucket_matrix(grid: _WaveGrid, buckets: int, output_buckets: int) -> np.ndarray:
    """Exact ``M[i, j] = P[output bucket j | v uniform in input bucket i]`` of the grid law.

    v uniform in ``[i/d, (i+1)/d]`` is rounded to ``k / L`` (L = r d): the r - 1 interior
    grid points with weight 1/r, the two ends with 1/(2r). Given k, output bucket j (cells
    ``a_j .. b_j - 1``) has probability ``(w_low (b_j - a_j) + C(b_j - k) - C(a_j - k)) / T``
    with C the bump's cumulative weights (clipped to its ends).
    """
    n, steps, d = grid.cells, grid.steps, buckets
    r = steps // d
    edges = np.searchsorted(
        _cell_buckets(np.arange(n), n, output_buckets), np.arange(output_buckets + 1)
    )
    sizes = np.diff(edges).astype(np.float64)
    cum = grid.cumulative.astype(np.float64)
    width = cum.size - 1
    total = float(grid.total)
    rows = np.empty((steps + 1, output_buckets))
    block = max(1, (1 << 20) // output_buckets)
    for k0 in range(0, steps + 1, block):
        k = np.arange(k0, min(steps + 1, k0 + block))[:, None]
        hi = cum[np.clip(edges[None, 1:] - k, 0, width)]
        lo = cum[np.clip(edges[None, :-1] - k, 0, width)]
        rows[k0 : k0 + k.shape[0]] = (grid.w_low * sizes[None, :] + hi - lo) / total
    inner = rows[:steps].reshape(d, r, output_buckets).sum(axis=1)
    ends = 0.5 * (rows[0:steps:r] + rows[r : steps + 1 : r]) - rows[0:steps:r]
    return (inner + ends) / r  # (d, d~), rows sum to 1


@functools.lru_cache(maxsize=16)
def _wave_values(spec: _Wave) -> np.ndarray:
    g = spec._grid
    centres = (np.arange(g.cells) + 0.5 - g.half) / g.steps  # unit scale
    values = spec.low + centres * spec.span
    values.flags.writeable = False
    return values


class _OutputCounts:
    """Stats of reports that each fall in one of ``n`` outputs: ``counts`` per output.

    Mixed into the continuous waves (outputs: the d~ output buckets, :meth:`_Wave.bucket_index`)
    and :class:`DiscreteSquareWave` (outputs: its items, :meth:`DiscreteSquareWave.output_index`).
    """

    # The specs it is mixed into give _counted: (number of outputs, each report's output).
    def stats_schema(self: Any) -> dict[str, StatsField]:
        """Return the Stats fields: ``counts`` of the reports per output (sum n)."""
        return {"counts": StatsField((self._counted()[0],), total=1)}

    def empty_stats(self: Any) -> Stats:
        """Return the Stats of no report (zero counts): the neutral element of merge."""
        return Stats(self, 0, counts=np.zeros(self._counted()[0], dtype=np.int64))

    def aggregate(self: Any, reports: Reports) -> Stats:
        """Reduce the reports to their mergeable Stats: ``counts`` per output."""
        size, index = self._counted()
        idx = index(reports)
        counts = np.bincount(idx, minlength=size).astype(np.int64, copy=False)
        return Stats(self, idx.size, counts=counts)


# --- continuous waves ------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class _Wave(_OutputCounts, Mechanism):
    """Shared machinery of the wave mechanisms (SW20 Definition 5.1) on an exact grid.

    Reports are cells of a grid of width ``1 / L`` on ``[-b', 1 + b']`` (unit scale), with
    ``L = buckets * ceil(2^14 / buckets)`` input steps and ``b' = max(1, round(b L)) / L``:
    the user's value is rounded (unbiasedly) to the nearest grid points ``k / L`` and the
    cell is drawn from the integer law of :mod:`ldpkit._exact`. On the wire a report is the
    cell's centre in the original units (float64); the spec (``buckets``, ``epsilon``,
    ``bandwidth``) determines the grid and the server rejects values off it.
    """

    #: Report fields sent as real numbers (float64); every other field holds integers.
    float_report_fields: ClassVar[frozenset[str]] = frozenset({"values"})

    low: float = 0.0
    high: float = 1.0
    buckets: int = 1024
    output_buckets: int | None = None
    bandwidth: float | None = None
    max_epsilon: ClassVar[float] = MAX_EPSILON
    # buckets >= 2: one bucket (in or out) has nothing to estimate (the histogram is [1]).
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "low": [FINITE_BOUND],
        "high": [FINITE_BOUND],
        "buckets": [Size(2, 1 << 20, small=16)],
        "output_buckets": [Size(2, 1 << 20), None],
        "bandwidth": [Real(0.0, 1.0, low_inclusive=False), None],
    }

    def _validate(self) -> None:
        lo, hi = check_bounds(self.low, self.high)  # the pair: low < high, a usable width
        self._set("low", lo)
        self._set("high", hi)
        # Build the exact integer grid now (cached): a configuration whose integer law would
        # overflow 2^62 (e.g. a wide explicit bandwidth at large epsilon) is refused here,
        # not at the first randomize.
        self._grid  # noqa: B018
        # Every estimate builds the d x d~ bucket matrix (a few operations per entry, 8
        # bytes each): d = 1024, d~ = 2^20 would need 8 GiB and minutes.
        entries = float(self.buckets) * float(self.n_output_buckets)
        sizes = f"buckets={self.buckets}, output_buckets={self.n_output_buckets}"
        check_memory(8.0 * entries, sizes, f"{self.name}.bucket_matrix")
        check_work(16.0 * entries, sizes, f"{self.name}.bucket_matrix")

    @property
    @abstractmethod
    def _ratio(self) -> float:
        """Top/bottom ratio r of the wave (1 = square)."""

    @property
    def _grid(self) -> _WaveGrid:
        return _wave_grid(self.epsilon, self._ratio, self.nominal_b, self.buckets)

    # -- constants (unit scale: inputs [0, 1], outputs [-b, 1 + b]) ---------------------
    @property
    def n_output_buckets(self) -> int:
        """d~: ``output_buckets``, or ``buckets`` when that is None (SW20 sets d~ = d)."""
        return self.buckets if self.output_buckets is None else self.output_buckets

    @property
    def nominal_b(self) -> float:
        """``bandwidth`` or SW20's optimum, before rounding to the grid."""
        return square_wave_bandwidth(self.epsilon) if self.bandwidth is None else self.bandwidth

    @property
    def b(self) -> float:
        """Half-width of the wave on the unit scale: ``w / L``, the nominal b on the grid."""
        g = self._grid
        return g.half / g.steps

    @property
    def input_steps(self) -> int:
        """L: inputs are rounded to ``k / L`` (unit scale) before randomizing."""
        return self._grid.steps

    @property
    def n_cells(self) -> int:
        """Number of report cells, ``L + 2 w``."""
        return self._grid.cells

    @property
    def density_low(self) -> float:
        """Low density on [-b, 1 + b] (unit scale) of the grid law.

        ``L w_low / T`` (SW20's q up to ~1/L; a density, not a probability).
        """
        g = self._grid
        return g.steps * g.w_low / g.total

    @property
    def density_high(self) -> float:
        """High density (top of the wave, unit scale).

        ``L (w_low + max bump) / T``, at most ``e^eps density_low`` (SW20's p).
        """
        g = self._grid
        return g.steps * (g.w_low + int(g.bump.max())) / g.total

    @property
    def span(self) -> float:
        return self.high - self.low

    @property
    def output_low(self) -> float:
        """Smallest possible report (edge of the first cell), ``low - b (high - low)``."""
        return self.low - self.b * self.span

    @property
    def output_high(self) -> float:
        """Largest possible report edge, ``high + b (high - low)``."""
        return self.high + self.b * self.span

    def output_edges(self) -> np.ndarray:
        """Return the edges of the d~ output buckets, in the original units.

        Each bucket holds the cells whose centres fall in it.
        """
        return np.linspace(self.output_low, self.output_high, self.n_output_buckets + 1)

    def report_values(self) -> np.ndarray:
        """Every value a report can take (the cells' centres), original units, sorted."""
        return _wave_values(self)

    # -- client ------------------------------------------------------------------------------
    def check_values(self, values: Any) -> np.ndarray:
        return check_numeric_values(values, self.low, self.high, "values")

    def _grid_inputs(self, v: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        """Grid input k of each value: unbiased randomized rounding to ``k / L`` (unit scale)."""
        return round_to_grid((v - self.low) / self.span, self._grid.steps, gen)

    def _sample_cells(self, k: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        g = self._grid
        if g.flat:
            return sample_flat_bump(k, g.cells, g.w_low, int(g.bump[0]), g.bump.size, gen)
        return sample_bump(k, g.cells, g.w_low, g.cumulative, gen)

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Report one grid cell per user.

        ``reports.values`` is its centre (float64) in ``[output_low, output_high]``, one of
        :meth:`report_values`.
        """
        v = self.check_values(values)
        gen = as_generator(rng)
        cells = self._sample_cells(self._grid_inputs(v, gen), gen)
        return Reports(self, values=self.report_values()[cells])

    # -- server -------------------------------------------------------------------------------
    def report_cells_of(self, reports: Reports) -> np.ndarray:
        """Return the cell of each report (validated: values must lie on the grid exactly)."""
        y = self.check_reports(reports).values
        if y.ndim != 1 or y.dtype.kind != "f":
            raise ValueError("reports.values must be a 1-D float array")
        grid = self.report_values()
        g = self._grid
        # The cell is an affine function of the value: one rint per report, then an exact
        # membership check; the rare value that rint puts in a neighbour cell is looked up.
        with np.errstate(invalid="ignore"):
            guess = np.rint((y - self.low) / self.span * g.steps + (g.half - 0.5))
        idx = np.clip(np.nan_to_num(guess, nan=0.0), 0, grid.size - 1).astype(np.int64)
        miss = grid[idx] != y
        if miss.any():
            idx[miss] = np.clip(np.searchsorted(grid, y[miss]), 0, grid.size - 1)
        if y.size and not np.array_equal(grid[idx], y):  # NaN fails too
            raise ValueError(
                f"reports.values must be real numbers in [{self.output_low:g}, "
                f"{self.output_high:g}] on {self.name}'s report grid (the {grid.size} values "
                "of report_values())"
            )
        return idx

    def bucket_index(self, reports: Reports) -> np.ndarray:
        """Output bucket (0 .. d~ - 1) of every report."""
        cells = self.report_cells_of(reports)
        return _cell_buckets(cells, self.n_cells, self.n_output_buckets)

    def _counted(self) -> tuple[int, Callable[[Reports], np.ndarray]]:
        # the Stats (:class:`_OutputCounts`): counts over the d~ output buckets
        return self.n_output_buckets, self.bucket_index

    def _em_bootstrap(self, stats: Stats, theta: np.ndarray, **options: Any) -> Any:
        """Parametric bootstrap of this spec's EM/EMS pipeline (:func:`.em.bootstrap`)."""
        from .em import bootstrap  # server side: loaded when intervals are asked for

        return bootstrap(stats, theta, **options)

    def bucket_matrix(self) -> np.ndarray:
        """Exact ``M[i, j] = P[output bucket j | input uniform in bucket i]``, shape (d, d~).

        Rows (inputs) sum to 1, as in every transition matrix of ldpkit. This is what EM
        deconvolves: it is computed exactly from the grid law (:func:`_grid_bucket_matrix`),
        averaging over each input bucket, so it is not the mechanism's law and
        ``privacy_loss(bucket_matrix()) < epsilon`` (:meth:`bucketized_privacy_loss`); the
        law itself is :meth:`cell_probabilities`. Cached and read-only.
        """
        return _cached_matrix(self)

    def cell_probabilities(self, k: int) -> np.ndarray:
        """Return the exact ``P[cell | grid input k]`` (float64, length ``n_cells``).

        The mechanism's law, one input at a time (v = k / L is reported without rounding).
        """
        g = self._grid
        k = check_integer(k, "k", low=0, high=g.steps)
        weights = np.full(g.cells, float(g.w_low))
        weights[k : k + g.bump.size] += g.bump
        return weights / g.total

    def privacy_loss(self) -> float:
        """Return ``log((w_low + max bump) / w_low)``.

        Every cell is under the top of the wave for some grid input and outside it for
        another.
        """
        g = self._grid
        return ratio_loss(g.w_low, g.w_low + int(g.bump.max()))

    def bucketized_privacy_loss(self) -> float:
        """Return the epsilon of the bucketized channel (input bucket -> output bucket).

        Below :meth:`privacy_loss`: averaging within buckets pulls probabilities together.
        """
        return _matrix_privacy_loss(self.bucket_matrix())

    def estimate(
        self,
        stats: Stats,
        method: str | None = None,
        *,
        tol: float | None = None,
        max_iter: int = 10_000,
    ) -> Distribution:
        """Histogram of the inputs on ``buckets`` buckets of [low, high].

        The plain estimate is SW20's: EMS, the estimator the paper proposes and evaluates
        with SW (section 5.5); ``method="em"`` gives plain EM (maximum likelihood, which
        over-fits the noise; section 6.1).

        Parameters
        ----------
        stats : Stats
            Aggregated (and possibly merged) reports of this spec.
        method : {"ems", "em"}, optional
            EMS (SW20's estimator) or plain EM. Default: EMS, except with ``buckets <= 8``,
            where EMS's smoothing is heavily biased towards uniform and the default is EM
            (asking for ``"ems"`` there gives a UserWarning).
        tol : float, optional
            Log-likelihood tolerance; default 1e-3 for EMS and ``1e-3 e^eps`` for EM
            (SW20 section 6.1).
        max_iter : int
            Iteration cap.
        """
        return _deconvolve(self, stats, method, tol, max_iter)


def _deconvolve(
    spec: Mechanism, stats: Stats, method: str | None, tol: float | None, max_iter: int
) -> Distribution:
    """EMS or EM on the spec's bucket matrix (SW20 section 5.5), shared by all waves."""
    from .em import em, ems  # server-side code: imported only when estimating

    stats = spec.check_stats(stats, nonempty=True)
    buckets = int(getattr(spec, "buckets", EMS_MIN_BUCKETS + 1))
    if method is None:  # the default never takes the biased smoothing
        method = "ems" if buckets > EMS_MIN_BUCKETS else "em"
    if method == "ems" and buckets <= EMS_MIN_BUCKETS:
        # The (1, 2, 1)/4 kernel moves a quarter of each bucket's mass to its neighbours at
        # every step: on a few buckets that is a large part of the domain, and the fixed
        # point is pulled far towards uniform (SW eps = 8, 2 buckets: [0.61, 0.39] for a
        # true [0.89, 0.11]). EM has no such bias.
        warnings.warn(
            f"method='ems' with buckets = {buckets} <= {EMS_MIN_BUCKETS} is heavily biased "
            "towards uniform (the smoothing kernel spans much of the domain); use "
            "method='em' or more buckets",
            UserWarning,
            stacklevel=3,
        )
    if method == "ems":
        return ems(stats, tol=1e-3 if tol is None else tol, max_iter=max_iter)
    if method == "em":
        t = 1e-3 * math.exp(min(spec.epsilon, 700.0)) if tol is None else tol
        return em(stats, tol=t, max_iter=max_iter)
    raise ValueError(f"method must be one of 'ems', 'em', got {method!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SquareWave(_Wave):
    """Square Wave (SW) reporting for a numerical value in [low, high] (SW20 section 5.2).

    With v mapped to [0, 1], the report has density ``density_high = e^eps / (2 b e^eps +
    1)`` on ``[v - b, v + b]`` and ``density_low = 1 / (2 b e^eps + 1)`` elsewhere on
    [-b, 1 + b] (SW20's p and q), mapped
    back to the original units. The server histograms reports into ``output_buckets``
    buckets and estimates a ``buckets``-bucket input histogram with EMS (or EM).

    Parameters
    ----------
    epsilon : float
        Privacy budget, in [1e-6, 40] (``max_epsilon``: the exact integer law).
    low, high : float
        The value domain (default [0, 1]).
    buckets : int
        Number d of input buckets the estimate has (default 1024; SW20 used 256 for
        Beta(5, 2) and 1024 for real data).
    output_buckets : int, optional
        Number d~ of output buckets (default: d).
    bandwidth : float, optional
        b on the unit scale; default SW20's ``(eps e^eps - e^eps + 1) /
        (2 e^eps (e^eps - 1 - eps))`` (section 5.3).
    log_scale : float, optional
        Report on a logarithmic scale (default None: linear). With ``s = log_scale > 0``
        (in the values' units) the wave runs on ``u = log(1 + (v - low) / s) / Lambda``,
        ``Lambda = log(1 + (high - low) / s)``, instead of ``(v - low) / (high - low)``: the
        same wave and the same epsilon, with a *relative* resolution (about ``Lambda / L``)
        for values well above ``s`` and a linear one below it, for heavy-tailed values
        whose bulk sits in a sliver of ``[low, high]``. The value is rounded unbiasedly
        *in its own units* to the grid ``low + s (e^(Lambda k / L) - 1)`` (so reports
        carry an exactly unbiased value estimate,
        :meth:`value_estimates`), and :meth:`estimate` is
        the histogram of ``log(1 + (v - low) / s)`` on ``[0, Lambda]``
        (:meth:`linear_histogram` maps it back to equal buckets of ``[low, high]``).

    Notes
    -----
    A monotone transform of the value before the wave is pre-processing on the device:
    each report is still drawn from the wave's law for some grid input, so the
    mechanism is eps-LDP exactly as the linear one (SW20 Thm. 5.2 holds for any input in
    [0, 1]; here ``privacy_loss()`` is the same). Used by :class:`ldpkit.stream.ToPL`'s
    threshold phase.

    Reports live on a grid (see :class:`_Wave`): with ``L`` input steps and
    ``w = round(b L)``, the value is rounded unbiasedly to ``k / L`` and the report is one of
    ``L + 2w`` cells of width 1/L, the 2w cells within b' = w/L of ``k / L`` with integer
    weight ``w_high``, the others ``w_low``, ``w_high / w_low <= e^eps``: eps-LDP exactly for
    the values sent (``privacy_loss()`` is ``log(w_high / w_low)``, within ~1e-15 of eps).
    ``density_high``, ``density_low`` and ``b`` are the grid law's (they differ from SW20's continuous ones by
    about 1/L). The EM/EMS matrix is the grid law's exact bucket matrix.

    References
    ----------
    Z. Li, T. Wang, M. Lopuhaä-Zwakenberg, N. Li, B. Škorić. Estimating Numerical
    Distributions under Local Differential Privacy. SIGMOD 2020, sections 5.2-5.5.

    Examples
    --------
    >>> sw = SquareWave(epsilon=1.0, buckets=64)
    >>> round(sw.b, 4)
    0.2561
    >>> values = np.random.default_rng(0).beta(5, 2, size=20_000)
    >>> dist = sw.run(values, rng=0)
    >>> dist.buckets, bool(abs(dist.mean() - values.mean()) < 0.02)
    (64, True)

    On a log scale, the estimate is the histogram of ``log(1 + v / s)``:

    >>> lsw = SquareWave(epsilon=1.0, high=1000.0, buckets=64, log_scale=1.0)
    >>> round(lsw.log_span, 3), lsw.run([1.0, 10.0, 100.0] * 5000, rng=0).high == lsw.log_span
    (6.909, True)
    """

    #: Coverage of the EM/EMS bootstrap intervals was measured for this class (not for its
    #: relatives): :meth:`Distribution.interval_approximate` reads it.
    _bootstrap_coverage_measured: ClassVar[bool] = True

    log_scale: float | None = None
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "log_scale": [Real(0.0, low_inclusive=False), None]
    }

    def _validate(self) -> None:
        super()._validate()
        if self.log_scale is not None:  # the pair: a width the scale keeps finite
            s = self.log_scale
            if not math.isfinite(self.span / s) or not self.span / s > 0:
                raise ValueError(
                    f"log_scale must be a positive number with (high - low) / log_scale finite "
                    f"and > 0, got {self.log_scale!r} for [{self.low:g}, {self.high:g}]"
                )

    def params(self) -> dict[str, Any]:
        """Return the spec's fields as a plain dict (without ``log_scale`` when linear)."""
        out = super().params()
        if self.log_scale is None:  # the linear wave's wire identity is unchanged
            del out["log_scale"]
        return out

    @property
    def _ratio(self) -> float:
        return 1.0

    @property
    def log_span(self) -> float | None:
        """``Lambda = log(1 + (high - low) / log_scale)`` (None on the linear scale).

        A grid constant: correctly rounded (:mod:`ldpkit._crmath`), so the JavaScript client
        (clients/js/src/numeric.js) and every platform get the same double.
        """
        return None if self.log_scale is None else _crmath.log1p(self.span / self.log_scale)

    def grid_values(self) -> np.ndarray:
        """Return the ``L + 1`` values the inputs are rounded to, in the original units.

        ``low + k (high - low) / L`` (linear) or ``low + s (e^(Lambda k / L) - 1)`` (log).
        """
        k = np.arange(self.input_steps + 1, dtype=np.float64) / self.input_steps
        if self.log_scale is None:
            return self.low + k * self.span
        lam = self.log_span
        assert lam is not None
        return self.low + self.log_scale * np.expm1(lam * k)

    def _grid_inputs(self, v: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        if self.log_scale is None:
            return super()._grid_inputs(v, gen)
        # unbiased in the value's own units: E[grid value] = v exactly (up to rounding)
        steps = self.input_steps
        lam = self.log_span
        assert lam is not None
        x = (v - self.low) / self.log_scale
        k = np.clip(np.floor(np.log1p(x) / lam * steps), 0, steps - 1).astype(np.int64)
        below = np.expm1(lam * k / steps)
        above = np.expm1(lam * (k + 1) / steps)
        k += gen.random(x.shape[0]) < np.clip((x - below) / (above - below), 0.0, 1.0)
        return k

    def estimate(
        self,
        stats: Stats,
        method: str | None = None,
        *,
        tol: float | None = None,
        max_iter: int = 10_000,
    ) -> Distribution:
        """Estimate the histogram of the inputs on ``buckets`` buckets of [low, high].

        Log scale: of ``log(1 + (v - low) / log_scale)`` on ``[0, log_span]``. See
        :meth:`_Wave.estimate`.
        """
        dist = _deconvolve(self, stats, method, tol, max_iter)
        if self.log_scale is None:
            return dist
        return Distribution(dist.probabilities, 0.0, float(self.log_span or 1.0))

    def value_estimates(self) -> tuple[np.ndarray, float]:
        """Per-cell unbiased estimates of a log-scale report's value, and their worst variance.

        A report in cell ``j`` estimates the value by ``low + g_j`` with
        ``g_j = s (T e^(c j) - w_low E) / B_c - s``, ``c = Lambda / L``,
        ``E = sum_{j < N} e^(c j)``, ``B_c = sum_t bump_t e^(c t)`` (``T``, ``w_low``,
        ``bump`` the grid law's integer weights, :class:`_Wave`): for grid input ``k``,
        ``E[g | k] = s (e^(c k) - 1)``, its value, exactly (the wave is a convolution and
        ``e^(c j)`` its eigenfunction), and the rounding to the grid is unbiased in the
        value's units, so ``E[low + g] = v`` for every v. The same construction as SW20's
        unbiased mean from the linear wave (their §5.2), for the exponential of the
        report. Post-processing of the reports.

        Returns
        -------
        (ndarray, float)
            ``low + g`` per report cell (length ``n_cells``; index with
            :meth:`report_cells_of`) and ``max_k Var(g | k)``, the worst case over inputs
            (the variance at the rounded inputs; a value between two grid points mixes
            their laws, whose variance is at most the larger plus the rounding's, below
            ``(e^(c) - 1)^2 v^2 / 4``).
        """
        if self.log_scale is None:
            raise ValueError(
                "value_estimates needs log_scale (linear Square Wave reports are affine in "
                "the value: ldpkit.stream.square_wave_mean_constants)"
            )
        g = self._grid
        lam = self.log_span
        assert lam is not None
        c = lam / g.steps
        j = np.arange(g.cells, dtype=np.float64)
        big_e = float(np.expm1(c * g.cells) / np.expm1(c))
        b_c = float(g.bump.astype(np.float64) @ np.exp(c * np.arange(g.bump.size)))
        s = self.log_scale
        est = s * (float(g.total) * np.exp(c * j) - g.w_low * big_e) / b_c - s
        sq = est * est
        if g.flat:
            csum = np.concatenate(([0.0], np.cumsum(sq)))
            window = float(g.bump[0]) * (csum[g.bump.size :] - csum[: -g.bump.size])
        else:
            window = np.convolve(sq, g.bump[::-1].astype(np.float64), mode="valid")
        window = window[: g.steps + 1]
        truth = s * np.expm1(c * np.arange(g.steps + 1))
        var = (g.w_low * float(sq.sum()) + window) / float(g.total) - truth * truth
        return self.low + est, float(var.max())

    def linear_histogram(self, probabilities: Any, buckets: int) -> np.ndarray:
        """Return the masses of ``buckets`` equal buckets of [low, high] from an estimate.

        The estimate is on this wave's buckets (post-processing). On the log scale each
        bucket's mass is spread evenly over its interval of ``log(1 + (v - low) / s)``; on
        the linear scale the histogram is re-binned the same way (even spread within a
        bucket).
        """
        f = (
            probabilities.probabilities
            if isinstance(probabilities, Distribution)
            else probabilities
        )
        f = np.asarray(f, dtype=np.float64)
        if f.shape != (self.buckets,) or not np.all(np.isfinite(f)) or np.any(f < 0):
            raise ValueError(
                f"probabilities must be {self.buckets} finite masses >= 0, got shape {f.shape}"
            )
        d = check_integer(buckets, "buckets", low=1, high=1 << 24)
        edges = np.arange(d + 1, dtype=np.float64) / d  # unit scale of [low, high]
        if self.log_scale is not None:
            lam = self.log_span
            assert lam is not None
            edges = np.log1p(edges * self.span / self.log_scale) / lam
        cdf = np.concatenate(([0.0], np.cumsum(f)))
        out = np.diff(np.interp(edges, np.linspace(0.0, 1.0, f.size + 1), cdf))
        return np.maximum(out, 0.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class GeneralWave(_Wave):
    """General Wave with a trapezoid shape of top/bottom ratio ``ratio`` (SW20 section 5.1).

    The output density on [-b, 1 + b] is q plus a symmetric trapezoid centred at v with
    bottom width 2b, top width ``2 ratio b`` and top height ``e^eps q``;
    ``q = density_low = 1 / (1 + 2b + (e^eps - 1) b (1 + ratio))``. ``ratio = 1`` is the Square Wave,
    ``ratio = 0`` the triangle.

    Parameters
    ----------
    epsilon, low, high, buckets, output_buckets, bandwidth
        As for :class:`SquareWave` (b defaults to the Square Wave's).
    ratio : float
        Trapezoid top/bottom ratio r in [0, 1].

    Notes
    -----
    Reports live on the waves' grid (see :class:`_Wave`): the 2w cells within b' of the
    (rounded) value get the base weight plus ``floor((w_high - w_low) h)``, h the
    trapezoid's height at the cell's centre, so every cell's probability lies in
    ``[w_low / T, w_high / T]`` and ``privacy_loss() <= eps`` (equal to it when some cell
    centre lies on the top; ``ratio = 0`` peaks between two cells, slightly below eps).

    References
    ----------
    Z. Li et al., SIGMOD 2020, Definition 5.1 and section 6.4 (wave shapes).

    Examples
    --------
    >>> gw = GeneralWave(epsilon=1.0, ratio=0.0, buckets=32)
    >>> bool(math.e * (1 - 1e-3) < gw.density_high / gw.density_low <= math.e)
    True
    >>> bool(gw.privacy_loss() <= 1.0)
    True
    """

    ratio: float = 1.0
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {"ratio": [Real(0.0, 1.0)]}

    @property
    def _ratio(self) -> float:
        return self.ratio


# --- discrete square wave --------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class DiscreteSquareWave(_OutputCounts, Mechanism):
    """Square Wave on a discrete domain of d items ("bucketize before randomize", SW20 5.4).

    Bucket index v in {0..d-1} is reported as an item of {-b~ .. d - 1 + b~} (sent shifted, as
    ``v + b~`` in ``[0, d + 2 b~)``): the 2b~ + 1 items within b~ of v each with probability
    ``p = e^eps / ((2b~ + 1) e^eps + d - 1)``, every other one with ``q = p e^-eps``;
    ``b~ = floor(b d)`` with SW20's b. The d items index the equal buckets of [low, high]
    (the user bucketizes her value first); the estimate is a Distribution on them.

    Parameters
    ----------
    epsilon : float
        Privacy budget, in [1e-6, ``max_epsilon``] (per class: docs/design/THREAT_MODEL.md).
    buckets : int
        Number d of buckets of [low, high], i.e. of input items (>= 2).
    low, high : float
        Interval the d items partition (for the estimated Distribution); default [0, 1].

    Notes
    -----
    eps-LDP, tightly: every output column of the transition matrix (inputs x outputs)
    holds p and q.

    References
    ----------
    Z. Li et al., SIGMOD 2020, section 5.4 ("Bucketize before randomize").

    Examples
    --------
    >>> dsw = DiscreteSquareWave(epsilon=1.0, buckets=16)
    >>> dsw.half_width, dsw.n_outputs
    (4, 24)
    >>> round(dsw.privacy_loss(), 12)
    1.0
    """

    buckets: int
    low: float = 0.0
    high: float = 1.0
    #: The integer law needs ``(2 b~ + 1) e^eps + d <= 2^62`` (b~ = 0 at large epsilon).
    max_epsilon: ClassVar[float] = MAX_EPSILON
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "buckets": [Size(2, 1 << 24, small=16)],
        "low": [FINITE_BOUND],
        "high": [FINITE_BOUND],
    }

    def _validate(self) -> None:
        lo, hi = check_bounds(self.low, self.high)  # the pair: low < high, a usable width
        self._set("low", lo)
        self._set("high", hi)
        # The estimate's d x (d + 2 b~) transition matrix: 12 TiB at 2^20 buckets.
        entries = float(self.buckets) * float(self.n_outputs)
        sizes = f"buckets={self.buckets} (n_outputs={self.n_outputs})"
        check_memory(8.0 * entries, sizes, f"{self.name}.transition_matrix")
        check_work(16.0 * entries, sizes, f"{self.name}.transition_matrix")

    @property
    def half_width(self) -> int:
        """b~ = floor(b d)."""
        b = 0.5 * _plateau_ratio(self.epsilon) * _crmath.exp(-self.epsilon)
        return math.floor(b * self.buckets)

    @property
    def n_outputs(self) -> int:
        """Number of outputs: the buckets plus ``2 half_width``."""
        return self.buckets + 2 * self.half_width

    @property
    def _weights(self) -> tuple[int, int]:
        """Integer weights (w_low, w_high), ``w_high / w_low <= e^eps`` (:mod:`ldpkit._exact`)."""
        w = 2 * self.half_width + 1
        return ratio_weights(self.epsilon, self.buckets - 1, w)

    @property
    def _total(self) -> int:
        w_low, w_high = self._weights
        return (2 * self.half_width + 1) * w_high + (self.buckets - 1) * w_low

    @property
    def p(self) -> float:
        """``w_high / T``: SW20's ``e^eps / ((2b~ + 1) e^eps + d - 1)`` up to ~1e-16."""
        return self._weights[1] / self._total

    @property
    def q(self) -> float:
        """``w_low / T``: SW20's ``p e^-eps`` up to ~1e-16."""
        return self._weights[0] / self._total

    def check_values(self, values: Any) -> np.ndarray:
        """Return the validated bucket indices; raise naming ``values``."""
        return check_categorical_values(values, self.buckets, "values")

    def bucketize(self, values: Any) -> np.ndarray:
        """Bucket index in ``0..d-1`` of each value of ``[low, high]`` (what :meth:`randomize` takes).

        Bucket ``k`` is ``[low + k w, low + (k + 1) w)`` with ``w = (high - low) / d``, the last
        one closed: ``min(floor((x - low) / (high - low) * d), d - 1)``, SW20 section 5.4's
        "bucketize before randomize". The same float64 operations in the same order as the
        JavaScript client (clients/js/src/question.js), so both give the same bucket.
        """
        x = check_numeric_values(values, self.low, self.high, "values")
        k = np.floor((x - self.low) / (self.high - self.low) * self.buckets).astype(np.int64)
        return np.minimum(k, self.buckets - 1)

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """``reports.values``: output items shifted by b~, in ``[0, d + 2 b~)``."""
        v = self.check_values(values)
        w_low, w_high = self._weights
        # Exact integer law: every output has weight w_low plus w_high - w_low on v's window.
        y = sample_flat_bump(
            v, self.n_outputs, w_low, w_high - w_low, 2 * self.half_width + 1, as_generator(rng)
        )
        return Reports(self, values=y.astype(index_dtype(self.n_outputs)))

    def output_index(self, reports: Reports) -> np.ndarray:
        """Return the column of :meth:`transition_matrix` that each report is."""
        y = self.check_reports(reports).values
        if y.ndim != 1 or y.dtype.kind not in "iu" or (y.size and int(y.max()) >= self.n_outputs):
            raise ValueError(f"reports.values must be items in [0, {self.n_outputs})")
        return np.asarray(y, dtype=np.int64)

    def _counted(self) -> tuple[int, Callable[[Reports], np.ndarray]]:
        # the Stats (:class:`_OutputCounts`): counts over the d + 2 b~ outputs
        return self.n_outputs, self.output_index

    def transition_matrix(self) -> np.ndarray:
        """``M[i, j] = P[output j | item i]``, shape (d, d + 2b~); rows sum to 1."""
        d, bt = self.buckets, self.half_width
        i = np.arange(d)[:, None]
        j = np.arange(self.n_outputs)[None, :]
        return np.where(np.abs(j - bt - i) <= bt, self.p, self.q)

    def _em_bootstrap(self, stats: Stats, theta: np.ndarray, **options: Any) -> Any:
        """Parametric bootstrap of this spec's EM/EMS pipeline (:func:`.em.bootstrap`)."""
        from .em import bootstrap  # server side: loaded when intervals are asked for

        return bootstrap(stats, theta, **options)

    def bucket_matrix(self) -> np.ndarray:
        """Return what EM deconvolves: the transition matrix itself (inputs are the buckets)."""
        return self.transition_matrix()

    def privacy_loss(self) -> float:
        """``log(w_high / w_low)`` of the integer weights (every output column holds both)."""
        return ratio_loss(*self._weights)

    def estimate(
        self,
        stats: Stats,
        method: str | None = None,
        *,
        tol: float | None = None,
        max_iter: int = 10_000,
    ) -> Distribution:
        """Distribution over the d buckets of [low, high] by EMS (default above 8 buckets) or EM.

        Parameters as for :meth:`SquareWave.estimate`.
        """
        return _deconvolve(self, stats, method, tol, max_iter)
