"""Histogram encoding: summation (SHE) and thresholding (THE), FO17 section 4.2.

The user's item becomes a one-hot vector of d reals and every coordinate gets independent
Laplace noise of scale 2/epsilon (two inputs' vectors are at L1 distance 2). SHE sends the
noisy vector and the server sums it; THE keeps only the bits ``B_v > theta``, which makes
the protocol pure and, for a well chosen theta, more accurate than SHE.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, ClassVar

import numpy as np

from .. import _crmath
from .._exact import coin
from .._rng import RNGLike, as_generator
from .._validation import check_frequencies, check_integer, check_real
from ..estimate import FrequencyEstimate
from ..spec import Reports, Stats, StatsField, with_report_count
from ._base import FrequencyOracle
from .unary import UnaryEncoding

__all__ = ["SHE", "THE", "the_probabilities", "the_variance_star", "optimal_cutoff"]

# SHE reports are rounded to multiples of 2^-GRID_BITS, so that the server can sum them
# exactly in int64 fixed point (merges are then exactly associative and commutative).
_GRID_BITS = 20
_GRID = float(2**_GRID_BITS)
# |report coordinate| is clipped here: then value * 2^20 <= 2^51 is an exact integer.
_CLIP = float(2**31)
# Rows per aggregation chunk times d stays near this many elements (bounded temporaries).
_CHUNK_ELEMENTS = 1 << 20
_INT64_SAFE = float(2**62)
# Noise cells per unit: a power of two s with 2 s / eps ~ 2^15 table entries.
_TABLE_CELLS = 1 << 15


@dataclasses.dataclass(frozen=True, eq=False)
class _NoiseLaw:
    """SHE's exact discrete Laplace noise on the grid ``1/s``, in cells.

    ``P[N = k] ∝ g(|k|)`` with ``g(q B + t) = (V[B] / V[0])^q V[t]`` for ``0 <= t < B``:
    integer weights ``V[0..B]`` (``V[t] ~ W r^t``, ``r = e^(-eps / (2 s))``, one block of
    ``B`` cells) repeated geometrically. Sampling: the block q by exact integer coins
    (continue w.p. ``V[B] / V[0]``), t by an integer Walker alias table (two uniform
    integers; exact), a uniform sign, and rejection of ``-0`` (so that 0 is not counted
    twice).
    """

    cells: int  # s: grid cells per unit of the one-hot vector (a power of two)
    block: int  # B
    weights: np.ndarray  # V[0..B], int64, non-increasing
    cumulative: np.ndarray  # [V[0], V[0] + V[1], ...] over the first B entries
    alias_cut: np.ndarray  # Walker alias table over t in [0, B), integer cuts out of C
    alias: np.ndarray
    coordinate_loss: float  # exact max over inputs of the loss of one coordinate
    variance_cells: float  # Var[N] in cells^2


def _window_loss(weights: list[int], block: int, s: int) -> float:
    """Return the largest ``log g(m) - log g(m + s)``.

    The sum of s consecutive exact log-ratios of the periodic sequence ``V[t] / V[t + 1]``
    (t mod B), the loss of a shift by s cells.
    """
    logs = np.array(
        [math.log1p((weights[t] - weights[t + 1]) / weights[t + 1]) for t in range(block)]
    )
    reps = -(-s // block) + 1
    seq = np.concatenate([np.zeros(1), np.cumsum(np.tile(logs, reps))])
    return float(np.max(seq[s : s + block] - seq[:block]))


def _alias_table(weights: list[int]) -> tuple[np.ndarray, np.ndarray, int]:
    """Walker's alias table with integers: ``P[t] = weights[t] / sum`` exactly.

    Column c (uniform over B) keeps c when a uniform integer in ``[0, C)`` is below
    ``cut[c]``, else gives ``alias[c]``; every column holds ``C = sum(weights)`` of the
    ``B C`` total, i.e. the weights scaled by B (integer arithmetic throughout).
    """
    size, capacity = len(weights), sum(weights)
    mass = [w * size for w in weights]
    cut = [capacity] * size
    alias = list(range(size))
    small = [i for i, m in enumerate(mass) if m < capacity]
    large = [i for i, m in enumerate(mass) if m >= capacity]
    while small and large:
        lo, hi = small.pop(), large.pop()
        cut[lo], alias[lo] = mass[lo], hi
        mass[hi] -= capacity - mass[lo]
        (small if mass[hi] < capacity else large).append(hi)
    return np.array(cut, dtype=np.int64), np.array(alias, dtype=np.int64), capacity


@functools.lru_cache(maxsize=64)
def _noise_law(epsilon: float) -> _NoiseLaw:
    s = 1 << max(0, min(20, math.floor(math.log2(max(epsilon * _TABLE_CELLS / 2, 1.0)))))
    block = max(1, math.ceil(2 * s / epsilon))
    # W so that sum(V) and the alias masses V[t] B stay below 2^61 (exact int64 draws)
    top = (1 << 61) // (block + 1)
    margin = 1e-8 * epsilon + 1e-11
    for _ in range(20):
        rate = (epsilon / 2 - margin) / s  # per-cell log-ratio, a little under eps / (2 s)
        # V[t] = round(W e^(-rate t)) in integer arithmetic: the same table on every platform
        ints = _crmath.exp_powers(-rate, block + 1, top)
        v = np.array(ints, dtype=np.int64)
        loss = _window_loss(ints, block, s)
        if loss <= epsilon / 2 and ints[-1] >= 1:
            break
        margin *= 4
    else:  # pragma: no cover - the margin grows geometrically
        raise ValueError(f"epsilon must allow an exact noise table, got {epsilon!r}")
    rho = ints[block] / ints[0]
    t = np.arange(block, dtype=np.float64)
    vf = v[:block].astype(np.float64)
    s0, s1, s2 = vf.sum(), (t * vf).sum(), (t * t * vf).sum()
    a0, a1, a2 = 1 / (1 - rho), rho / (1 - rho) ** 2, rho * (1 + rho) / (1 - rho) ** 3
    mass = a0 * s0  # sum over m >= 0 of g(m)
    second = block * block * a2 * s0 + 2 * block * a1 * s1 + a0 * s2  # sum m^2 g(m)
    variance = 2 * second / (2 * mass - vf[0])
    cumulative = np.cumsum(v[:block])
    cut, alias, _ = _alias_table(ints[:block])
    for arr in (v, cumulative, cut, alias):
        arr.flags.writeable = False
    return _NoiseLaw(s, block, v, cumulative, cut, alias, loss, variance)


def _sample_noise(law: _NoiseLaw, size: int, gen: np.random.Generator) -> np.ndarray:
    """``size`` draws of the noise law (int64 cells), exactly, vectorized."""
    out = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    total = int(law.cumulative[-1])
    cont, whole = int(law.weights[law.block]), int(law.weights[0])
    while todo.size:
        # t by the integer alias table (P[t] = V[t] / total exactly), the sign with it
        x = np.asarray(gen.integers(0, 2 * law.block, size=todo.size, dtype=np.int64))
        column, negative = x >> 1, (x & 1).astype(bool)
        u = np.asarray(gen.integers(0, total, size=todo.size, dtype=np.int64))
        g = np.where(u < law.alias_cut[column], column, law.alias[column])
        active = np.arange(todo.size)
        while active.size:  # the block: geometric, continue w.p. V[B] / V[0]
            more = coin(gen, active.size, cont, whole)
            active = active[more]
            g[active] += law.block
        bad = negative & (g == 0)  # -0: rejected, drawn again (P[N = 0] = g(0) / Z)
        out[todo] = np.where(negative, -g, g)
        todo = todo[bad]
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class SHE(FrequencyOracle):
    """Summation with histogram encoding: one-hot vector plus Laplace(2/epsilon) noise.

    Parameters
    ----------
    epsilon : float
        Privacy budget, in [1e-6, ``max_epsilon``] (per class: docs/design/THREAT_MODEL.md).
    domain_size : int
        Number of items d (>= 2).

    Notes
    -----
    Two inputs' one-hot vectors are at L1 distance 2, so Laplace noise of scale
    ``2 / eps`` on every coordinate gives eps-LDP (FO17 Theorem 4).

    **Exact discrete noise**. The noise is a discrete Laplace law on the grid
    ``1/s`` (s a power of two, ``2 s / eps ~ 2^15``: s = 2^14 at eps = 1, 1 below eps
    ~ 6e-5), drawn with integer arithmetic only (:func:`_sample_noise`): integer weights
    ``V[t] ~ r^t`` (``r = e^(-eps/(2s))``) over one block of ``B ~ 2s/eps`` cells,
    repeated geometrically (exact integer coins), a uniform sign. ``privacy_loss()`` is
    twice the largest exact log-ratio of the weights over a shift of s cells (one
    coordinate), <= eps and within ~1e-8 of it. Reports are multiples of ``1/s``; the
    estimator stays the unbiased mean (the noise is symmetric) and ``variance`` uses the
    law's exact variance (within ~1e-9 of ``8 / eps^2`` for eps <= 8; the continuous law's
    at coarse grids only differs by the discretization). The report (``reports.values``, float64, shape (n, d))
    is summed by the server; the estimate is the mean, unbiased with
    ``Var = (8 / eps^2 + f (1 - f)) / n`` (FO17 Theorem 5; ``n Var* = 8 / eps^2``). SHE is
    not pure and is dominated by THE and OUE (FO17 section 5); it is here as a baseline.

    Each coordinate is clipped to +-2^31 (post-processing; it matters only for noise
    beyond 1000 scales). Report values are multiples of ``1/s``, hence of 2^-20, so the
    server sums them exactly in int64 fixed point (``stats.sums`` counts units of 2^-20)
    and merging statistics is exactly associative.

    Floating-point side channel: textbook floating-point Laplace leaks the input through
    the low-order bits of ``x + Lap`` (Mironov 2012); the integer law above has no such
    bits: every report value is reachable from every input with the accounted ratio.

    References
    ----------
    T. Wang, J. Blocki, N. Li, S. Jha. Locally Differentially Private Protocols for
    Frequency Estimation. USENIX Security 2017, section 4.2 (SHE), Theorems 4-5.
    I. Mironov. On Significance of the Least Significant Bits for Differential Privacy.
    CCS 2012.

    Examples
    --------
    >>> she = SHE(epsilon=2.0, domain_size=4)
    >>> reports = she.randomize([0, 1, 1, 3], rng=0)
    >>> reports.values.shape, reports.values.dtype
    ((4, 4), dtype('float64'))
    >>> she.noise_scale, she.privacy_loss()
    (1.0, 2.0)
    """

    #: Beyond it the noise block shrinks to a few cells of the 2^-20 grid.
    max_epsilon: ClassVar[float] = 700.0
    #: Report fields sent as real numbers (float64); every other field holds integers.
    float_report_fields: ClassVar[frozenset[str]] = frozenset({"values"})

    @property
    def noise_scale(self) -> float:
        """Scale b of the (nominal) Laplace noise on each coordinate: ``2 / epsilon``."""
        return 2.0 / self.epsilon

    @property
    def grid_cells(self) -> int:
        """s: the noise lives on the grid ``1/s`` (a power of two, at most 2^20)."""
        return _noise_law(self.epsilon).cells

    def privacy_loss(self) -> float:
        """Return the exact loss of the discrete noise.

        Two coordinates shift by one unit (s cells), each costing the largest exact
        log-ratio over such a shift (<= epsilon / 2).
        """
        return 2.0 * _noise_law(self.epsilon).coordinate_loss

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Noisy one-hot vectors; ``reports.values`` is float64 of shape (n, d)."""
        v = self.check_values(values)
        gen = as_generator(rng)
        law = _noise_law(self.epsilon)
        n, d = v.shape[0], self.domain_size
        cells = np.empty((n, d), dtype=np.int64)
        rows = max(1, _CHUNK_ELEMENTS // d)
        for start in range(0, n, rows):
            part = cells[start : start + rows]
            part[:] = _sample_noise(law, part.size, gen).reshape(part.shape)
        cells[np.arange(n), v] += law.cells
        bound = int(_CLIP) * law.cells
        np.clip(cells, -bound, bound, out=cells)
        noisy = cells.astype(np.float64)
        noisy /= law.cells  # exact: a power of two, values multiples of 2^-20
        return Reports(self, values=noisy)

    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields: ``sums`` and ``count``.

        ``sums``: per-coordinate sums in units of 2^-20, each report within +-2^31; their
        ``count`` (= n: the noisy sums alone do not fix it).
        """
        bound = _CLIP * _GRID
        return with_report_count({"sums": StatsField((self.domain_size,), low=-bound, high=bound)})

    def empty_stats(self) -> Stats:
        """Return the Stats of no report: zero sums and count."""
        return Stats(self, 0, sums=np.zeros(self.domain_size, dtype=np.int64), count=np.int64(0))

    def aggregate(self, reports: Reports) -> Stats:
        """Per-coordinate sums, exact, in units of 2^-20 (``stats.sums``, int64)."""
        reports = self.check_reports(reports)
        x = reports.values
        d = self.domain_size
        if x.dtype != np.float64 or x.ndim != 2 or x.shape[1] != d:
            raise ValueError(
                f"reports.values must be a float64 array of shape (n, {d}), "
                f"got dtype {x.dtype} and shape {x.shape}"
            )
        sums = np.zeros(d, dtype=np.int64)
        bound = 0.0  # running bound on |sums| in units, to rule out int64 overflow
        step = max(1, _CHUNK_ELEMENTS // d)
        for start in range(0, x.shape[0], step):
            units = x[start : start + step] * _GRID
            if not np.all(np.abs(units) <= _CLIP * _GRID) or not np.array_equal(
                units, np.rint(units)
            ):
                raise ValueError(
                    "reports.values must be finite multiples of 2^-20 within +-2^31 "
                    "(as SHE.randomize makes them)"
                )
            bound += float(np.abs(units).max(initial=0.0)) * units.shape[0]
            if bound > _INT64_SAFE:
                raise ValueError(
                    "reports must be aggregated in smaller batches: their sums could "
                    "overflow the int64 fixed-point accumulator"
                )
            sums += units.astype(np.int64).sum(axis=0)
        return Stats(self, x.shape[0], sums=sums, count=np.int64(x.shape[0]))

    def estimate(self, stats: Stats) -> FrequencyEstimate:
        """Mean noisy count per item: unbiased (FO17 Theorem 5)."""
        stats = self.check_stats(stats, nonempty=True)
        freq = stats.sums / _GRID / stats.n
        var = self.variance(stats.n, np.clip(freq, 0.0, 1.0))
        return FrequencyEstimate(freq, var, stats.n, spec=self)

    def variance(self, n: int, f: Any = None) -> Any:
        """Return the estimate's variance ``(Var[N] + f (1 - f)) / n``.

        Var[N] is the exact discrete noise's (~ ``8/eps^2``, FO17 Theorem 5's ``2 b^2``).

        With ``f=None`` only the noise term (FO17's Var*) is returned.
        """
        n = check_integer(n, "n", low=1)
        law = _noise_law(self.epsilon)
        base = law.variance_cells / law.cells**2
        if f is not None:
            f = check_frequencies(f, self.domain_size)
            base = base + f * (1.0 - f)
        return base / n


def the_probabilities(epsilon: float, cutoff: float) -> tuple[float, float]:
    """THE's ``(p*, q*) = (P[1 + Lap > theta], P[Lap > theta])`` for 0 <= theta <= 1.

    With Lap of scale 2/eps: ``p* = 1 - e^(eps (theta - 1) / 2) / 2`` and
    ``q* = e^(-eps theta / 2) / 2`` (FO17 section 4.2).
    """
    # correctly rounded exp: THE's 2^-64 thresholds do not depend on the platform's libm
    p = 1.0 - 0.5 * _crmath.exp(0.5 * epsilon * (cutoff - 1.0))
    q = 0.5 * _crmath.exp(-0.5 * epsilon * cutoff)
    return p, q


def the_variance_star(epsilon: float, cutoff: float) -> float:
    """THE's per-user ``n Var* = q*(1 - q*) / (p* - q*)^2`` at nominal p*, q*.

    Equal to ``(2 e^(eps theta/2) - 1) / (1 + e^(eps (theta - 1/2)) - 2 e^(eps theta/2))^2``
    (FO17 section 4.2).
    """
    p, q = the_probabilities(epsilon, cutoff)
    return q * (1.0 - q) / (p - q) ** 2


@functools.lru_cache(maxsize=256)
def optimal_cutoff(epsilon: float) -> float:
    """Return the theta in (1/2, 1) minimizing THE's Var* at this epsilon (bounded Brent search).

    FO17 section 4.2 shows numerically that the optimum lies in (1/2, 1) and tends to 1
    as epsilon grows.
    """
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(
        lambda t: the_variance_star(epsilon, t),
        bounds=(0.5, 1.0),
        method="bounded",
        options={"xatol": 1e-10},
    )
    return float(res.x)


@dataclasses.dataclass(frozen=True, kw_only=True)
class THE(UnaryEncoding):
    """Thresholding with histogram encoding: support ``{v : B_v > theta}``.

    Parameters
    ----------
    epsilon : float
        Privacy budget of the underlying histogram encoding (> 0).
    domain_size : int
        Number of items d (>= 2).
    cutoff : float or None
        FO17's threshold theta in [0, 1] (named ``cutoff`` in ldpkit, where ``threshold``
        is the clipping threshold of a stream release). None (default) picks the theta in (1/2, 1) that minimizes the
        variance (:func:`optimal_cutoff`); FO17 Table 2 uses theta = 1.

    Notes
    -----
    The client adds Laplace(2/eps) noise to its one-hot vector (as SHE) and thresholds it
    on the device, which is post-processing. The reported bits are then independent, bit v
    being 1 with ``p* = P[1 + Lap > theta]`` and the others with ``q* = P[Lap > theta]``,
    so THE is a pure protocol and ``reports.bits`` is bit-packed exactly like OUE's. We
    sample those Bernoulli bits directly with the exact 32-bit-threshold kernel of
    :class:`UnaryEncoding` (equal in law, faster, and free of floating-point noise);
    ``p`` and ``q`` are the realized probabilities (p* rounded down, q* up, to multiples of
    2^-64), ``nominal_p``/``nominal_q`` the exact ones.

    ``n Var* = q*(1-q*)/(p*-q*)^2`` (FO17 section 4.2). The report's true privacy loss,
    ``log(p*(1 - q*) / (q*(1 - p*)))``, is *strictly below* epsilon: the noise protects
    the whole real vector, and the threshold discards part of it. ``privacy_loss()``
    returns that honest value (``exact_epsilon`` is False); to spend exactly epsilon on
    bits, use OUE, which is also more accurate.

    References
    ----------
    T. Wang, J. Blocki, N. Li, S. Jha. Locally Differentially Private Protocols for
    Frequency Estimation. USENIX Security 2017, section 4.2 (THE).

    Examples
    --------
    >>> the = THE(epsilon=1.0, domain_size=16)
    >>> 0.5 < the.effective_cutoff < 1.0
    True
    >>> the.privacy_loss() < 1.0
    True
    >>> THE(epsilon=1.0, domain_size=16, cutoff=1.0).randomize([2, 7], rng=0).bits.shape
    (2, 2)
    """

    cutoff: float | None = None
    exact_epsilon: ClassVar[bool] = False

    def _validate(self) -> None:
        if self.cutoff is not None:
            self._set("cutoff", check_real(self.cutoff, "cutoff", low=0.0, high=1.0))
        super()._validate()

    def _attack_channel(self, memoized: bool) -> tuple[str, Any] | None:
        """Return None: the privacy attack reads THE's ``transition_matrix()``.

        Its realized bit law is not the plain ``(p, q)`` of :class:`UnaryEncoding`'s view.
        """
        return None

    @property
    def effective_cutoff(self) -> float:
        """Theta actually used: ``cutoff``, or the variance-optimal one when None."""
        if self.cutoff is None:
            return optimal_cutoff(self.epsilon)
        return self.cutoff

    @property
    def noise_scale(self) -> float:
        """Scale of the Laplace noise the thresholded vector carries: ``2 / epsilon``."""
        return 2.0 / self.epsilon

    @property
    def nominal_p(self) -> float:
        """The nominal keep probability p of the paper's formula (before integer rounding)."""
        return the_probabilities(self.epsilon, self.effective_cutoff)[0]

    @property
    def nominal_q(self) -> float:
        """The nominal probability q of the paper's formula (before integer rounding)."""
        return the_probabilities(self.epsilon, self.effective_cutoff)[1]
