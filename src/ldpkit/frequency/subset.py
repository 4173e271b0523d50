"""Subset selection (k-subset mechanism): each user reports a set of k items.

Wang et al. 2016 and Ye & Barg 2018; CON20 section III summarizes it as a pure protocol.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, ClassVar

import numpy as np

from .. import _parallel
from .._exact import RR_MAX_EPSILON, coin, ratio_loss, rr_weights
from .._rng import RNGLike, as_generator
from .._validation import check_epsilon, check_integer, check_memory, check_work
from ..spec import Reports, StatsField
from ._base import MAX_DENSE_OUTPUTS, PureFrequencyOracle
from ._bits import check_packed, column_counts, packed_width

__all__ = ["SubsetSelection", "default_subset_size"]

#: Batches of at least this many Floyd steps (users x steps) run the compiled kernel when
#: numba is installed; smaller ones its numpy twin (same bits, no numba import).
_COMPILED_MIN_STEPS = 1 << 22

#: Users per sampling chunk are chosen so that one chunk's random draws (int32, one per
#: Floyd step per user) hold about this many entries (16 MiB), bounding memory at any n.
_CHUNK_DRAWS = 1 << 22


def default_subset_size(epsilon: float, domain_size: int) -> int:
    """``max(1, round(d / (e^eps + 1)))``, rounding halves up.

    ``d / (e^eps + 1)`` minimizes the variance over real k (it makes p* = 1/2); the
    variance is flat around it, so the nearest integer is used rather than a search
    (Wang et al. 2016, Ye & Barg 2018; CON20 section III). The result is <= d/2, hence
    a valid size ``<= d - 1`` for every d >= 2.

    Examples
    --------
    >>> default_subset_size(1.0, 1024), default_subset_size(1.0, 4), default_subset_size(8.0, 64)
    (275, 1, 1)
    """
    epsilon = check_epsilon(epsilon)
    d = check_integer(domain_size, "domain_size", low=2)
    t = math.exp(-epsilon)  # d/(e+1) = d t/(1+t), safe for huge epsilon
    return max(1, math.floor(d * t / (1.0 + t) + 0.5))


@dataclasses.dataclass(frozen=True, kw_only=True)
class SubsetSelection(PureFrequencyOracle):
    """Subset selection: report k of the d items, favouring sets that hold the true one.

    A user with item v reports a k-subset S of [d] with probability proportional to
    ``e^eps`` if ``v in S`` and to 1 otherwise. ``reports.bits`` holds S as a bit-packed
    indicator row (``np.packbits(..., axis=1)``, big-endian, ceil(d/8) bytes per user).

    Parameters
    ----------
    epsilon : float
        Privacy budget, in [1e-6, ``max_epsilon``] (per class: docs/design/THREAT_MODEL.md).
    domain_size : int
        Number of items d (>= 2).
    subset_size : int or None, default None
        k, in ``[1, d - 1]``. None uses :func:`default_subset_size`, i.e.
        ``max(1, round(d / (e^eps + 1)))``, recomputed from the current epsilon and d
        (so ``replace(epsilon=...)`` adapts it); :attr:`effective_subset_size` gives
        the k in use. With k = 1 the mechanism is GRR.

    Notes
    -----
    With ``Omega = C(d-1, k-1) e^eps + C(d-1, k)``, ``P[S | v] = e^eps / Omega`` if
    ``v in S`` else ``1 / Omega``: the ratio is at most ``e^eps`` and, as every k-subset
    with ``1 <= k <= d-1`` contains some item and misses another, exactly ``e^eps``
    (eps-LDP, tight). Support(S) = S gives a pure protocol (FO17 Definition 2) with

    - ``p* = P[v in S | v] = C(d-1,k-1) e^eps / Omega = k e^eps / (k e^eps + d - k)``,
    - ``q* = P[v' in S | v] = (p* (k-1) + (1-p*) k) / (d-1)`` (given the side of v, the
      other members are a uniform (k-1)- or k-subset of the d-1 other items),

    and per-user variance ``n Var* = q*(1-q*) / (p*-q*)^2`` (FO17 eq. 3). At the real
    optimum ``k = d/(e^eps+1)``, ``p* = 1/2``.

    The law is exact: a subset holding v has integer weight ``w_in``, one
    missing it ``w_out``, ``w_in / w_out <= e^eps`` (:func:`ldpkit._exact.rr_weights`, total
    ``k w_in + (d - k) w_out <= 2^62``); p*, q* and ``privacy_loss()`` (``log(w_in /
    w_out)``) are the realized values. Epsilon is accepted up to 40, and up to
    ``log(2^62 / k)`` for large k (refused at construction beyond).

    Sampling is vectorized over users in chunks: v joins S with probability p*; the
    other k-1 or k members are drawn without replacement from the d-1 other items by
    Floyd's algorithm (k steps, one exact bounded integer per step drawn by numpy from
    ``rng``), or the d-1-k (+1) non-members instead when they are fewer. The set
    bookkeeping runs in a small numba kernel that writes the packed rows directly:
    O(n min(k, d-k)) work, about 2.5x faster than the same steps written as numpy array
    operations (benchmarks/subset_hadamard.py: 0.58 vs 0.24 million users/s at d = 1024).

    References
    ----------
    S. Wang, L. Huang, P. Wang, Y. Nie, H. Xu, W. Yang, X.-Y. Li, C. Qiao. Mutual
    Information Optimally Local Private Discrete Distribution Estimation. arXiv:1607.08025,
    2016. M. Ye, A. Barg. Optimal Schemes for Discrete Distribution Estimation Under
    Locally Differential Privacy. IEEE Trans. Inf. Theory 64(8), 2018, section III.
    T. Wang et al. Locally Differentially Private Protocols for Frequency Estimation.
    USENIX Security 2017 (pure protocols, eq. 1-3). R. W. Floyd, J. Bentley. Programming
    Pearls: a sample of brilliance. CACM 30(9), 1987 (sampling without replacement).

    Examples
    --------
    >>> ss = SubsetSelection(epsilon=1.0, domain_size=16)
    >>> ss.effective_subset_size
    4
    >>> reports = ss.randomize([0, 3, 3, 15], rng=0)
    >>> reports.bits.shape, reports.bits.dtype
    ((4, 2), dtype('uint8'))
    >>> int(ss.support_counts(reports).sum())  # 4 users x 4 items
    16
    """

    subset_size: int | None = None
    #: Where ``k e^eps + (d - k)`` integer weights fit 2^62 for every k <= 2^21; larger
    #: ``k e^eps`` is refused at construction with the limit of that configuration.
    max_epsilon: ClassVar[float] = RR_MAX_EPSILON

    def _validate(self) -> None:
        super()._validate()
        # The state (one count per item) is checked before the integer law: a domain_size too
        # large to hold must be refused naming domain_size, not epsilon.
        d = self.domain_size
        check_memory(8.0 * d, f"domain_size={d!r}", self.name)
        if self.subset_size is not None:
            d = self.domain_size
            self._set(
                "subset_size", check_integer(self.subset_size, "subset_size", low=1, high=d - 1)
            )
        self._weights()  # raises when k e^eps overflows the integer law (names the limit)
        # randomize draws the k-subsets in min(k, d - k) vectorized steps of ~50 us of
        # Python each, whatever the number of users: d = 2^20 at eps = 1 spent 30 s in
        # them for 40 users. Refused beyond ~1 s of that overhead.
        k = self.effective_subset_size
        check_work(
            _STEP_OPS * min(k, self.domain_size - k),
            f"domain_size={self.domain_size}, subset_size={k}",
            f"{self.name}.randomize",
        )

    def _weights(self) -> tuple[int, int]:
        """Return the integer weights ``(w_in, w_out)``.

        Integer weight of a subset holding / missing the input, ratio ``<= e^eps``;
        ``P[v in S | v] = k w_in / (k w_in + (d - k) w_out)`` exactly.
        """
        k = self.effective_subset_size
        return rr_weights(self.epsilon, self.domain_size - k, k)

    # -- constants -------------------------------------------------------------------------
    @property
    def effective_subset_size(self) -> int:
        """The k in use: ``subset_size``, or :func:`default_subset_size` when it is None."""
        if self.subset_size is not None:
            return self.subset_size
        return default_subset_size(self.epsilon, self.domain_size)

    def _odds_terms(self) -> tuple[int, int]:
        """(k w_in, (d-k) w_out): p* = k w_in / (k w_in + (d-k) w_out), exact integers."""
        k = self.effective_subset_size
        w_in, w_out = self._weights()
        return k * w_in, (self.domain_size - k) * w_out

    @property
    def p(self) -> float:
        """Realized ``p*`` (the paper's ``k e^eps / (k e^eps + d - k)``, from the weights)."""
        a, b = self._odds_terms()
        return a / (a + b)

    @property
    def _p_out(self) -> float:
        """1 - p*, computed directly (no cancellation at large epsilon)."""
        a, b = self._odds_terms()
        return b / (a + b)

    @property
    def q(self) -> float:
        """Probability q that a report's subset contains a given item other than v."""
        k, d = self.effective_subset_size, self.domain_size
        return (self.p * (k - 1) + self._p_out * k) / (d - 1)

    # -- client ----------------------------------------------------------------------------
    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Each user's k-subset; ``reports.bits`` holds the packed indicator rows."""
        v = self.check_values(values)
        gen = as_generator(rng)
        d, k = self.domain_size, self.effective_subset_size
        odds = self._odds_terms()
        n = v.shape[0]
        out = np.zeros((n, packed_width(d)), dtype=np.uint8)
        steps = min(k, d - k)  # Floyd steps per user (members or non-members, see below)
        chunk = max(1, _CHUNK_DRAWS // steps)
        for start in range(0, n, chunk):
            part = v[start : start + chunk]
            _sample_subsets(part, d, k, odds, gen, out[start : start + part.shape[0]])
        return Reports(self, bits=out)

    # -- server ----------------------------------------------------------------------------
    def _check_bits(self, reports: Reports) -> np.ndarray:
        return check_packed(reports.bits, self.domain_size)

    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields: ``counts``, k supported items per report (sum k n)."""
        k = self.effective_subset_size
        return {"counts": StatsField((self.domain_size,), total=k)}

    def support_counts(self, reports: Reports) -> np.ndarray:
        """Count, for every item v, the reports whose subset contains v."""
        d, k = self.domain_size, self.effective_subset_size
        bits = self._check_bits(reports)
        counts = column_counts(bits, d)
        # Every report must be a k-subset. The total is a cheap necessary check; the
        # per-row popcount is exact and costs about as much as the column counts.
        if int(counts.sum()) != bits.shape[0] * k or (
            bits.shape[0] and np.any(np.bitwise_count(bits).sum(axis=1, dtype=np.int64) != k)
        ):
            raise ValueError(f"reports.bits must have exactly {k} bits set in every row")
        return counts

    # -- exact law (small d) ---------------------------------------------------------------
    def _log_output_probabilities(self) -> tuple[float, float]:
        """Return log P[S | v] for ``v in S`` and for ``v not in S``.

        From p* and the counts of subsets on each side (C(d-1, k-1) and C(d-1, k)).
        """
        d, k = self.domain_size, self.effective_subset_size
        log_in = _log(self.p) - _log_comb(d - 1, k - 1)
        log_out = _log(self._p_out) - _log_comb(d - 1, k)
        return log_in, log_out

    def transition_matrix(self) -> np.ndarray:
        """Return ``P[S | v]`` over all C(d, k) subsets, columns in colexicographic order.

        Column of S = ``sum_i C(s_i, i + 1)`` over its sorted members s_0 < s_1 < ....
        """
        d, k = self.domain_size, self.effective_subset_size
        outputs = math.comb(d, k)
        if d * outputs > MAX_DENSE_OUTPUTS:
            raise ValueError(
                f"transition_matrix must have at most {MAX_DENSE_OUTPUTS} entries, got "
                f"{d} x C({d}, {k}) = {d} x {outputs}: use a smaller domain_size"
            )
        members = np.zeros((outputs, d), dtype=bool)
        combos = np.array(list(itertools.combinations(range(d), k)), dtype=np.int64)
        members[np.arange(outputs)[:, None], combos] = True
        log_in, log_out = self._log_output_probabilities()
        matrix = np.empty((d, outputs))
        matrix[:, _colex_rank(members, k)] = np.where(
            members.T, math.exp(log_in), math.exp(log_out)
        )
        return matrix

    def output_index(self, reports: Reports) -> np.ndarray:
        """Colexicographic rank of each reported subset (a column of transition_matrix)."""
        d = self.domain_size
        bits = self._check_bits(self.check_reports(reports))
        members = np.unpackbits(bits, axis=1, count=d).astype(bool)
        k = self.effective_subset_size
        if np.any(members.sum(axis=1) != k):
            raise ValueError(f"reports.bits must have exactly {k} bits set in every row")
        return _colex_rank(members, k)

    def privacy_loss(self) -> float:
        """Return log(max/min) of P[S | v] over inputs, for the worst S.

        Every S is held by some v and missed by another, so it is ``log(w_in / w_out)``,
        from the integers.
        """
        w_in, w_out = self._weights()
        return ratio_loss(w_out, w_in)


def _log(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf


def _log_comb(n: int, r: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(r + 1) - math.lgamma(n - r + 1)


def _colex_rank(members: np.ndarray, k: int) -> np.ndarray:
    """Rank of each row's k-subset (boolean indicator rows) in colexicographic order."""
    d = members.shape[1]
    # table[i, j] = C(i, j); member number j (0-based) at position i contributes C(i, j+1)
    table = np.array([[math.comb(i, j) for j in range(k + 2)] for i in range(d)], dtype=np.int64)
    order = np.cumsum(members, axis=1)  # 1-based member number at each set position
    contrib = table[np.arange(d)[None, :], np.minimum(order, k + 1)]
    return np.where(members, contrib, 0).sum(axis=1)


#: Cost of one of :func:`_sample_subsets`'s steps (~50 us measured), in WORK_BUDGET
#: operations (~1 ns each).
_STEP_OPS = 50_000


def _sample_subsets(
    values: np.ndarray,
    d: int,
    k: int,
    odds: tuple[int, int],
    gen: np.random.Generator,
    out: np.ndarray,
) -> None:
    """Write each user's k-subset as a packed indicator row into ``out`` (zeroed, c x w).

    v joins w.p. ``odds[0] / (odds[0] + odds[1])`` exactly (one uniform integer); the remaining members come from the d-1 other items, indexed
    0..d-2 ("others space", item = t + (t >= v)). Floyd's algorithm draws a uniform
    m-subset of [0, N) in m steps: for j = N-m .. N-1, draw t uniform in [0, j] and add
    t, or j if t is already in (j never is); after the step for j the set is a uniform
    subset of [0, j]. Users needing one member fewer skip the first step. When more than
    half of the others are members, the non-members are drawn instead (fewer steps) and
    the rows complemented. All randomness is drawn here from ``gen`` (exact bounded
    integers); the compiled kernel only does the set bookkeeping.
    """
    c = values.shape[0]
    rows = np.arange(c)
    included = coin(gen, c, odds[0], odds[0] + odds[1])
    others = d - 1
    complement = 2 * k > others + 1
    if complement:
        # included users need k-1 members, i.e. others-k+1 non-members; the rest others-k
        steps, short = others - k + 1, ~included
    else:
        steps, short = k, included
    draws = np.empty((steps, c), dtype=np.int32)
    for step in range(steps):
        draws[step] = gen.integers(0, others - steps + step + 1, size=c, dtype=np.int32)
    if _parallel.use_compiled(steps * c, _COMPILED_MIN_STEPS):
        from ._kernels_subset import floyd_kernel  # numba: loaded on first use

        floyd_kernel(values, ~short, draws, others, out)
    else:
        _floyd_numpy(values, ~short, draws, others, out)
    byte, mask = values >> 3, (128 >> (values & 7)).astype(np.uint8)
    if complement:
        np.invert(out, out=out)
        pad = 8 * out.shape[1] - d
        out[:, -1] &= np.uint8((0xFF << pad) & 0xFF)
        out[rows, byte] &= ~mask
    out[rows, byte] |= np.where(included, mask, np.uint8(0))


def _floyd_numpy(
    values: np.ndarray, full: np.ndarray, draws: np.ndarray, others: int, out: np.ndarray
) -> None:
    """Run the Floyd bookkeeping of ``_kernels_subset.floyd_kernel``, vectorized over users.

    Each user only touches her own row, so running a step for all users at once gives the
    kernel's bits exactly.
    """
    steps, c = draws.shape
    rows = np.arange(c)
    v = values.astype(np.int64)
    for s in range(steps):
        j = others - steps + s
        active = rows if s else rows[full]
        vi = v[active]
        t = draws[s, active].astype(np.int64)
        t += t >= vi
        present = (out[active, t >> 3] & (128 >> (t & 7))) != 0
        t = np.where(present, np.where(j >= vi, j + 1, j), t)
        out[active, t >> 3] |= (128 >> (t & 7)).astype(np.uint8)
