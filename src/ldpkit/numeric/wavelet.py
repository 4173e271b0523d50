"""Haar wavelet expansion of a numerical distribution under LDP (WAV25 sections 4-5).

The density of the values (mapped to [0, 1]) is written as ``f = 1 + sum_jk a_jk psi_jk``
with the Haar wavelets ``psi_jk`` of levels j = 0..J. Users are split into J + 1 groups;
a user of group j encodes her value as a signed one-hot vector of length 2^j (which
level-j cell holds it, and in which half) and reports it through *signed subset
selection*, a randomizer over the sparse vectors of {-1, 0, 1}^d with m non-zeros. The
server sums the reports per level, unbiases them into the coefficients a_jk, rebuilds the
density level by level (clipping each coefficient so that the density stays
non-negative) and returns a :class:`~ldpkit.numeric.Distribution` on 2^(J+1) buckets.

Signed subset selection, the categorical oracle each level reports through, lives in
:mod:`ldpkit.frequency.signed_subset` (its names are re-exported here). Client side:
:func:`sample_signed_subsets`, :func:`haar_encode` and the ``randomize`` of
:class:`SignedSubsetSelection` and :class:`HaarWavelet`. Server side: ``aggregate``,
``estimate``, :func:`haar_reconstruct` (numpy only; the aggregation kernel is compiled on
first use).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from .._exact import RR_MAX_EPSILON
from .._rng import RNGLike, as_generator
from .._validation import (
    check_integer,
    check_numeric_values,
)
from ..frequency._bits import packed_width
from ..frequency.signed_subset import (  # re-exported: a categorical oracle, in frequency/
    SignedSubsetLaw,
    SignedSubsetSelection,
    _last_byte_mask,
    _law,
    _optimal_m,
    _sample,
    optimal_subset_size,
    sample_signed_subsets,
    signed_subset_law,
    subset_size_objective,
)
from ..spec import Mechanism, Reports, Stats, StatsField
from .distribution import Distribution, check_bounds
from .haar import (  # re-exported: the Haar transform's one home is haar.py
    MAX_LEVEL,
    default_max_level,
    haar_coefficients,
    haar_encode,
    haar_reconstruct,
)

__all__ = [
    "MAX_LEVEL",
    "SignedSubsetLaw",
    "signed_subset_law",
    "subset_size_objective",
    "optimal_subset_size",
    "sample_signed_subsets",
    "SignedSubsetSelection",
    "haar_encode",
    "haar_coefficients",
    "haar_reconstruct",
    "default_max_level",
    "HaarWavelet",
]


# --------------------------------------------------------------------------------------------
# The mechanism
# --------------------------------------------------------------------------------------------
_REPORT_ERRORS = {
    1: "reports.negative must only mark coordinates held in reports.support",
    2: "reports.support must hold exactly subset_sizes[level] bits in every row",
    3: "reports must have zero bits past the 2^level coordinates of their level",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class HaarWavelet(Mechanism):
    """Haar wavelet expansion of a numerical distribution (WAV25, sections 4-5).

    Each user is assigned a level j in 0..J with probability proportional to
    ``2^-j sqrt(V_j)`` (eq. 83), encodes her value v in [low, high] (mapped to x in
    [0, 1]) as the signed one-hot vector ``2^(-j/2) (psi_j0(x), ..., psi_j,2^j-1(x))``
    (cell ``k = floor(2^j x)``, +1 in its left half, -1 in its right half; eq. 39) and
    reports it by signed subset selection over d = 2^j coordinates with ``m_j = m*``
    non-zeros (eq. 45, 61). The server sums the reports per level, unbiases them into
    ``a_jk = 2^(j/2) sum_i Y_i(k) / (n_j p (1 - e^-eps))`` (eq. 57), and rebuilds the
    density ``1 + sum a_jk psi_jk`` level by level with clipping.

    Parameters
    ----------
    epsilon : float
        Privacy budget of each user's single report, in [1e-6, ``max_epsilon``].
    low, high : float
        The value domain (default [0, 1]).
    max_level : int, optional
        J, in [0, 20]. Default: ``ceil(log2(expected_n) / 2)`` (section 5.4), kept for
        fidelity to the paper although our measurements find it too fine (see *Choice of
        J* below).
    expected_n : int, optional
        The number of users expected; used only to choose J when ``max_level`` is None.
        One of the two must be given (clients need J to pick their level).

    Notes
    -----
    eps-LDP: a user reports once, through signed subset selection (exactly eps-LDP, see
    :class:`SignedSubsetSelection`); the level is drawn independently of the value.

    *Level assignment.* ``randomize(..., assignment="random")`` (default) lets every user
    draw her level independently from the allocation, as a client alone can; the server
    uses the realized group sizes n_j. ``assignment="split"`` permutes the batch and cuts
    it into groups of exactly ``floor(w_j n)`` users (largest remainders get the rest),
    as WAV25 section 5.3 does. Both are unbiased (given n_j, a group is a uniformly random
    subset of the users).

    *Reports.* ``reports.level`` (uint8) and, as bit-packed rows of ``ceil(2^J / 8)``
    bytes, ``reports.negative`` (coordinates equal to -1) and ``reports.support``
    (non-zero coordinates; present only if some level has m_j < 2^j, i.e. eps above
    ~1.5). A level-j row uses its first 2^j bits; the rest is zero padding that keeps
    the batch arrays rectangular (129 or 257 bytes per user in memory at J = 10). A
    single client needs to send only 1 + ceil(2^j / 8) bytes (one bitmap) or
    1 + 2 ceil(2^j / 8) (two): on average over the allocation at n = 1e6, J = 10, that is
    23 bytes at eps <= 1, 43 at eps = 2, 31 at eps = 4 and 12 at eps = 8. Bitmaps rather
    than index lists because m* = 2^j at eps <= ~1.5 and m* ~ 0.31 2^j at eps = 2 (see
    :class:`SignedSubsetSelection`); an index list would be shorter only at eps >= ~4.

    *Stats.* ``sums`` (int64, length 2^(J+1) - 1: level j's ``sum_i Y_i(k)`` at offset
    2^j - 1) and ``level_counts`` (n_j), both additive.

    *Choice of J.* WAV25's rule is beaten in our W1-vs-J sweep (``ldpkit reproduce
    wav25``: J = 1..11, 15 runs per cell, 28 (data set, eps) cells, n = 1e4..1e6, eps
    0.5..4): the best J was below the rule's in 27 cells, by 4 levels at the median (2-6
    on smooth data, 2-8 on heaped data, 7-8 on data with large point masses); the rule cost
    1.00-1.85x the best J's W1 (median 1.38x), and J - 2 beat it in 23 of 28 cells (by 8 %
    at the median). The bound WAV25 minimizes assumes the worst-case bias ``2^-(J+1)``,
    which smooth data never reach. :func:`ldpkit.numeric.recommend` uses J - 2.

    *Variance.* ``Var[a_jk | S_j] = 2^j (f_jk (p (1 + e^-eps) - g^2) + (1 - f_jk) 2 q) /
    (n_j g^2)``, g = p (1 - e^-eps), f_jk the fraction of group j in cell k
    (:meth:`coefficient_variance`); the 2q replaces eq. 117's q because the filler
    coordinates carry random signs.

    References
    ----------
    P. Zhao, Z. Zhang, B. Sun, L. Shen, L. Zhang, S. Wang, Z. Liu. Consistent Estimation of
    Numerical Distributions under Local Differential Privacy by Wavelet Expansion, 2025,
    sections 4 (eq. 36-69, Alg. 1-2) and 5 (eq. 75, 83, Theorem 1).

    Examples
    --------
    >>> hw = HaarWavelet(epsilon=1.0, expected_n=100_000)
    >>> hw.effective_max_level, hw.subset_sizes[:4]
    (9, (1, 2, 4, 8))
    >>> values = np.random.default_rng(0).beta(5, 2, size=100_000)
    >>> dist = hw.run(values, rng=0)
    >>> dist.buckets, bool(abs(dist.mean() - values.mean()) < 0.01)
    (1024, True)
    """

    low: float = 0.0
    high: float = 1.0
    max_level: int | None = None
    expected_n: int | None = None
    #: Its levels report with signed subset selection's exact integer coins.
    max_epsilon: ClassVar[float] = RR_MAX_EPSILON

    def _validate(self) -> None:
        lo, hi = check_bounds(self.low, self.high)
        self._set("low", lo)
        self._set("high", hi)
        if self.max_level is not None:
            self._set(
                "max_level", check_integer(self.max_level, "max_level", low=0, high=MAX_LEVEL)
            )
        if self.expected_n is not None:
            self._set("expected_n", check_integer(self.expected_n, "expected_n", low=1))
        if self.max_level is None and self.expected_n is None:
            raise ValueError(
                "max_level or expected_n must be given (J = ceil(log2(expected_n) / 2), "
                "WAV25 section 5.4), got neither"
            )

    # -- constants ---------------------------------------------------------------------------
    @property
    def effective_max_level(self) -> int:
        """J: ``max_level``, or ``ceil(log2(expected_n) / 2)``."""
        if self.max_level is not None:
            return self.max_level
        assert self.expected_n is not None
        return default_max_level(self.expected_n)

    @property
    def subset_sizes(self) -> tuple[int, ...]:
        """m*_j (eq. 61) for each level j = 0..J."""
        return tuple(_optimal_m(self.epsilon, 2**j) for j in range(self.effective_max_level + 1))

    def level_law(self, level: int) -> SignedSubsetLaw:
        """Return the signed-subset constants used at ``level``."""
        level = check_integer(level, "level", low=0, high=self.effective_max_level)
        return _law(self.epsilon, 2**level, self.subset_sizes[level])

    @property
    def level_variances(self) -> np.ndarray:
        """V_j = 2^j times the minimum of eq. 61 at d = 2^j (eq. 75)."""
        return np.array(
            [
                2.0**j * subset_size_objective(self.epsilon, 2**j)[m - 1]
                for j, m in enumerate(self.subset_sizes)
            ]
        )

    @property
    def allocation(self) -> np.ndarray:
        """Probability of each level, ``2^-j sqrt(V_j) / sum_l 2^-l sqrt(V_l)`` (eq. 83)."""
        j = np.arange(self.effective_max_level + 1)
        w = 2.0 ** (-j) * np.sqrt(self.level_variances)
        return w / w.sum()

    def allocation_counts(self, n: int) -> np.ndarray:
        """Group sizes for ``assignment="split"``.

        ``floor(w_j n)`` plus one for the largest remainders until they sum to n (eq. 83).
        """
        n = check_integer(n, "n", low=0)
        exact = self.allocation * n
        counts = np.floor(exact).astype(np.int64)
        short = n - int(counts.sum())
        if short > 0:
            counts[np.argsort(-(exact - counts), kind="stable")[:short]] += 1
        return counts

    @property
    def report_width(self) -> int:
        """Bytes per bitmap row: ``ceil(2^J / 8)``."""
        return packed_width(2**self.effective_max_level)

    @property
    def has_support(self) -> bool:
        """Whether reports carry a support bitmap (some level has m_j < 2^j)."""
        return any(m < 2**j for j, m in enumerate(self.subset_sizes))

    def coefficient_variance(self, level: int, n_level: int, cell_mass: Any = None) -> Any:
        """Return ``Var[a_jk | S_j]`` for a group of ``n_level`` users (2q-corrected eq. 59).

        A fraction ``cell_mass`` of them (per k; default 0) lies in cell k.
        """
        law = self.level_law(level)
        n_level = check_integer(n_level, "n_level", low=1)
        f = 0.0 if cell_mass is None else np.asarray(cell_mass, dtype=np.float64)
        per_user = f * law.variance_true + (1.0 - f) * law.variance_other
        return 2.0**level * per_user / (n_level * law.gain**2)

    def privacy_loss(self) -> float:
        """Return the exact epsilon of one report.

        The largest over levels of the signed-subset mechanism's loss (the level is drawn
        independently of the value, so it adds nothing).
        """
        return max(
            SignedSubsetSelection(
                epsilon=self.epsilon, domain_size=2**j, subset_size=m
            ).privacy_loss()
            for j, m in enumerate(self.subset_sizes)
        )

    # -- client ------------------------------------------------------------------------------
    def check_values(self, values: Any) -> np.ndarray:
        """Return the validated values in [low, high]; raise naming ``values``."""
        return check_numeric_values(values, self.low, self.high, "values")

    def randomize(self, values: Any, *, rng: RNGLike = None, assignment: str = "random") -> Reports:
        """Assign levels, encode and randomize every user's value (vectorized per level).

        Parameters
        ----------
        values : array of float
            One value in [low, high] per user.
        rng : Generator, SeedSequence, int or None
            Source of all randomness (level draws and reports).
        assignment : {"random", "split"}
            Independent level draws (default; what separate clients do) or an exact
            split of the permuted batch (WAV25 section 5.3).
        """
        v = self.check_values(values)
        if assignment not in ("random", "split"):
            raise ValueError(f"assignment must be one of 'random', 'split', got {assignment!r}")
        gen = as_generator(rng)
        n, top = v.size, self.effective_max_level
        if assignment == "random":
            cum = np.cumsum(self.allocation)
            level = np.minimum(np.searchsorted(cum, gen.random(n), side="right"), top)
        else:
            level = np.empty(n, dtype=np.int64)
            level[gen.permutation(n)] = np.repeat(np.arange(top + 1), self.allocation_counts(n))
        level = level.astype(np.uint8)
        u = (v - self.low) / (self.high - self.low)
        width = self.report_width
        negative = np.zeros((n, width), dtype=np.uint8)
        support = np.zeros((n, width), dtype=np.uint8) if self.has_support else None
        order = np.argsort(level, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(level, minlength=top + 1))])
        for j, m in enumerate(self.subset_sizes):
            idx = order[bounds[j] : bounds[j + 1]]
            if idx.size == 0:
                continue
            k, neg = haar_encode(u[idx], j)
            sup_j, neg_j = _sample(k, neg, 2**j, m, _law(self.epsilon, 2**j, m), gen)
            w = sup_j.shape[1]
            negative[idx, :w] = neg_j
            if support is not None:
                support[idx, :w] = sup_j
        if support is None:
            return Reports(self, level=level, negative=negative)
        return Reports(self, level=level, negative=negative, support=support)

    # -- server ------------------------------------------------------------------------------
    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields: ``sums`` (signed, per level), ``level_counts`` (sum n)."""
        top = self.effective_max_level
        return {
            "sums": StatsField((2 ** (top + 1) - 1,), low=-1.0),
            "level_counts": StatsField((top + 1,), total=1),
        }

    def empty_stats(self) -> Stats:
        """Return the Stats of no report (zero arrays): the neutral element of merge."""
        top = self.effective_max_level
        return Stats(
            self,
            0,
            sums=np.zeros(2 ** (top + 1) - 1, dtype=np.int64),
            level_counts=np.zeros(top + 1, dtype=np.int64),
        )

    def aggregate(self, reports: Reports) -> Stats:
        """Per-level sums of the reported vectors and group sizes (validating every row)."""
        from ._kernels_wavelet import level_bit_counts  # server side: compiled on use

        reports = self.check_reports(reports)
        top, width = self.effective_max_level, self.report_width
        level = np.asarray(reports.level)
        if level.dtype != np.uint8 or level.ndim != 1:
            raise ValueError(f"reports.level must be a 1-D uint8 array, got dtype {level.dtype}")
        if level.size and int(level.max()) > top:
            raise ValueError(f"reports.level must be levels in [0, {top}], got {int(level.max())}")
        neg = np.asarray(reports.negative)
        shape = (level.size, width)
        if neg.dtype != np.uint8 or neg.shape != shape:
            raise ValueError(
                f"reports.negative must be a uint8 array of shape {shape}, got dtype "
                f"{neg.dtype} and shape {neg.shape}"
            )
        sup = None
        if self.has_support:
            if "support" not in reports.fields:
                raise ValueError("reports must carry a support bitmap for this spec")
            sup = np.ascontiguousarray(reports.support)
            if sup.dtype != np.uint8 or sup.shape != shape:
                raise ValueError(
                    f"reports.support must be a uint8 array of shape {shape}, got dtype "
                    f"{sup.dtype} and shape {sup.shape}"
                )
        elif "support" in reports.fields:
            raise ValueError("reports must not carry a support bitmap for this spec (m_j = 2^j)")
        widths = np.array([packed_width(2**j) for j in range(top + 1)], dtype=np.int64)
        col_offset = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
        last_mask = np.array([_last_byte_mask(2**j) for j in range(top + 1)], dtype=np.int64)
        sizes = np.array(self.subset_sizes, dtype=np.int64)
        sup_bits, neg_bits, err, row = level_bit_counts(
            level,
            sup,
            np.ascontiguousarray(neg),
            widths,
            col_offset,
            last_mask,
            sizes,
            int(widths.sum()),
        )
        if err:
            raise ValueError(f"{_REPORT_ERRORS[err]} (first bad row: {row})")
        counts = np.bincount(level, minlength=top + 1).astype(np.int64)
        sums = np.empty(2 ** (top + 1) - 1, dtype=np.int64)
        for j in range(top + 1):
            d, start = 2**j, 8 * col_offset[j]
            nonzero = sup_bits[start : start + d] if sup_bits is not None else counts[j]
            sums[d - 1 : 2 * d - 1] = nonzero - 2 * neg_bits[start : start + d]
        return Stats(self, level.size, sums=sums, level_counts=counts)

    def coefficients(self, stats: Stats) -> list[np.ndarray]:
        """Unbiased ``a_jk`` for j = 0..J (eq. 57); a level with no users gives zeros."""
        stats = self.check_stats(stats)
        out = []
        for j in range(self.effective_max_level + 1):
            nj = int(stats.level_counts[j])
            s = np.asarray(stats.sums[2**j - 1 : 2 ** (j + 1) - 1], dtype=np.float64)
            if nj == 0:
                out.append(np.zeros(2**j))
            else:
                out.append(2.0 ** (j / 2.0) * s / (nj * self.level_law(j).gain))
        return out

    def estimate(self, stats: Stats, *, buckets: int | None = None) -> Distribution:
        """Return the clipped reconstruction as a Distribution on [low, high].

        Parameters
        ----------
        stats : Stats
            Aggregated (and possibly merged) reports of this spec.
        buckets : int, optional
            Number of buckets of the result; default 2^(J+1), the resolution of the
            expansion (other values re-bin it exactly, spreading mass uniformly inside
            each of the 2^(J+1) cells).
        """
        stats = self.check_stats(stats, nonempty=True)
        density = haar_reconstruct(self.coefficients(stats), clip=True)
        mass = density / density.size
        dist = Distribution(mass / mass.sum(), self.low, self.high, n=stats.n, spec=self)
        if buckets is not None:
            dist = dist.rebin(check_integer(buckets, "buckets", low=1))
        return dist
