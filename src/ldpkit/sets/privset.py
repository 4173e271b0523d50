"""PrivSet.

Set-valued frequencies by an exponential mechanism over k-subsets (Wang et al., IEEE INFOCOM
2018).

A user pads her set to exactly ``ell`` items (dummies ``d + L, ..., d + ell - 1``; a longer
set is sampled down to ``ell`` of its items uniformly) and reports a subset ``z`` of ``k``
items out of the ``D = d + ell`` padded items, with probability proportional to ``e^eps``
when ``z`` meets her padded set and to 1 otherwise.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from .. import _crmath
from .._constraints import Alternatives, Integer, Ref, Size
from .._exact import RR_MAX_EPSILON
from .._rng import RNGLike, as_generator
from .._validation import check_array, check_integer, check_memory
from ..spec import Mechanism, Reports, Stats, StatsField
from ._input import SetContractHooks, UserSets, as_user_sets
from .padding import SetFrequencyEstimate

__all__ = ["PrivSet"]

#: Denominator of the branch coin (meets / misses the padded set): P = a / 2^62.
_BRANCH_TOTAL = 1 << 62
#: Largest number of padded items D = d + ell (reports are D bits; the default k is a scan).
_MAX_ITEMS = 1 << 16


def _nominal_variance(d: int, ell: int, epsilon: float) -> np.ndarray:
    """``q (1 - q) / (p - q)^2`` (the f = 0 variance times n) for k = 1..d at e^eps."""
    big = d + ell
    k = np.arange(1, d + 1, dtype=np.float64)
    # rho = C(d, k) / C(D, k) = prod_{i < k} (d - i) / (D - i): the share of k-subsets
    # missing a padded set (libm's log, not numpy's SIMD one: the same k on every CPU)
    logs = itertools.accumulate(
        math.log((d - i) / (big - i)) if i < d else -math.inf for i in range(d)
    )
    rho = np.array([math.exp(x) for x in logs])
    growth = math.exp(epsilon)
    meet = growth * (1.0 - rho) / (growth * (1.0 - rho) + rho)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = meet * (k / big) / (1.0 - rho)
        q = meet * (k / big - (k / d) * rho) / (1.0 - rho) + (1.0 - meet) * (k / d)
        out = q * (1.0 - q) / (p - q) ** 2
    # the branch coin must fit 2^62: (1 - rho) / rho not beyond 2^40
    out[~(rho * 2.0**40 >= 1.0 - rho) | ~np.isfinite(out)] = np.inf
    return out


def _branch_loss(a: int, meet: int, miss: int) -> float:
    """``|log(P N_miss / ((1 - P) N_meet))|`` for P = a / 2^62, on the integers."""
    num, den = a * miss, (_BRANCH_TOTAL - a) * meet
    if num < den:
        num, den = den, num
    return _crmath.log1p((num - den) / den)


def _floyd(m: int, k: int, rows: int, gen: np.random.Generator) -> np.ndarray:
    """Draw ``rows`` uniform k-subsets of ``[0, m)`` as a rows x k int64 array.

    Floyd's algorithm: exact given exact uniform integers.
    """
    out = np.empty((rows, k), dtype=np.int64)
    for c, j in enumerate(range(m - k, m)):
        t = np.asarray(gen.integers(0, j + 1, size=rows), dtype=np.int64)
        seen = (out[:, :c] == t[:, None]).any(axis=1)
        out[:, c] = np.where(seen, j, t)
    return out


def _skip(index: np.ndarray, excluded: np.ndarray) -> np.ndarray:
    """Return, per row, the ``index``-th items of ``[0, D)`` that are not in ``excluded``.

    ``excluded`` is sorted ascending per row: each excluded item at or below the running
    item shifts it up.
    """
    item = index.copy()
    for j in range(excluded.shape[1]):
        item += excluded[:, j, None] <= item
    return item


@functools.lru_cache(maxsize=64)
def _law(epsilon: float, d: int, ell: int, subset_size: int | None) -> tuple[int, int, int, int]:
    """PrivSet's ``(a, N_meet, N_miss, k)`` (cached: the k scan and the binomials)."""
    if subset_size is None:
        var = _nominal_variance(d, ell, epsilon)
        if not np.isfinite(var).any():
            raise ValueError(
                f"domain_size and padding must leave a subset size whose law fits 2^62, "
                f"got {d} and {ell}"
            )
        k = int(np.argmin(var)) + 1
    else:
        k = subset_size
    miss = math.comb(d, k)
    meet = math.comb(d + ell, k) - miss
    total = _BRANCH_TOTAL
    growth = _crmath.exp(epsilon) * (meet / miss)
    a = min(total - 1, max(1, int(total * (growth / (1.0 + growth)))))
    while a > 1 and _branch_loss(a, meet, miss) > epsilon:  # down until within
        a -= max(1, a >> 50)
    return a, meet, miss, k


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivSet(SetContractHooks, Mechanism):
    """PrivSet: each user reports a k-subset of the padded domain (exponential mechanism).

    With ``D = d + ell`` padded items, ``N = C(D, k)`` subsets, of which ``N_miss = C(d, k)``
    miss a padded set of ``ell`` items and ``N_meet = N - N_miss`` meet it: the report is a
    uniform meeting subset with probability ``P = a / 2^62`` and a uniform missing subset
    otherwise, where ``a`` makes ``P N_miss / ((1 - P) N_meet)`` the largest ratio
    ``<= e^eps`` (checked on the integers): the paper's ``e^eps : 1`` weights, exactly.

    Parameters
    ----------
    epsilon : float
        Privacy budget, in ``[1e-6, 40]``.
    domain_size : int
        Number of real items d (>= 2); ``d + padding <= 2^16`` (reports are bit vectors).
    padding : int
        The padding length ell (>= 1); longer sets are sampled down to ell items (their
        items' frequencies are then biased low by at most the share of such users, which
        the estimate reports as ``long_share``, as :class:`PaddingSampling` does).
    subset_size : int or None
        k, the size of the reported subset, in ``[1, d]``; None (default) picks the k that
        minimizes the variance of a frequency at 0 (the paper tunes k for utility; this is
        ldpkit's criterion), among those whose branch coin fits 2^62.

    Notes
    -----
    Estimation (the unbiased estimator of Wang et al. 2018, section IV): for an item v, ``p = P[v in z | v in x] =
    P C(D-1, k-1) / N_meet`` and ``q = P[v in z | v not in x] = P (C(D-1, k-1) - C(D-1-ell,
    k-1)) / N_meet + (1 - P) C(D-1-ell, k-1) / N_miss``; ``f^_v = (C_v / n - q) / (p - q)``
    is unbiased for the padded frequency ``t_v = (1/n) sum over holders of min(1, ell /
    L)``, with ``Var = (q (1 - q) + t (p - q)(1 - p - q)) / (n (p - q)^2)``. The dummies
    estimate the length CDF (a dummy ``d + j`` is held by the users with ``L <= j``).

    Sampling is exact: the branch coin is an integer coin; a missing subset is a uniform
    k-subset of the items not hers; a meeting subset is one of her ell items uniformly plus
    a uniform (k - 1)-subset of the others, kept with probability ``1 / |z & x|`` (one
    integer coin), else redrawn, which makes it uniform over the meeting subsets. Uniform
    subsets come from Floyd's algorithm (or, for ``k^2 > 8 D``, a uniform permutation).
    ``privacy_loss()`` is ``log(P N_miss / ((1 - P) N_meet))`` from the integers (a set
    sampled down mixes such laws, within the same ratio).

    References
    ----------
    S. Wang, L. Huang, Y. Nie, P. Wang, H. Xu, W. Yang. PrivSet: Set-Valued Data Analyses
    with Locale Differential Privacy. IEEE INFOCOM 2018, section IV.

    Examples
    --------
    >>> ps = PrivSet(epsilon=2.0, domain_size=6, padding=2)
    >>> 1 <= ps.k <= 6
    True
    >>> est = ps.run([[0, 1], [2], [0, 3, 4], []], rng=0)
    >>> est.frequencies.shape, est.length_cdf.shape
    ((6,), (2,))
    """

    domain_size: int
    padding: int
    subset_size: int | None = None

    max_epsilon: ClassVar[float] = RR_MAX_EPSILON
    exact_epsilon: ClassVar[bool] = False  # the 2^62 coin lands just below e^eps
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "domain_size": [Size(2, small=6)],
        "padding": [Size(1, 1 << 10, small=2)],
        "subset_size": [Integer(1, Ref("domain_size")), None],
    }

    def _validate(self) -> None:
        if self.domain_size + self.padding > _MAX_ITEMS:
            raise ValueError(
                f"domain_size + padding must be <= {_MAX_ITEMS}, "
                f"got {self.domain_size + self.padding}"
            )
        if self.subset_size is not None:
            k = self.subset_size
            if not np.isfinite(_nominal_variance(self.domain_size, self.padding, self.epsilon))[
                k - 1
            ]:
                raise ValueError(
                    f"subset_size must keep C(d + ell, k) / C(d, k) below 2^40 at this "
                    f"domain_size and padding, got {k}"
                )
        self._law()  # raises if no k fits

    # -- the realized law ------------------------------------------------------------------
    @property
    def items(self) -> int:
        """D = d + ell, the padded items."""
        return self.domain_size + self.padding

    @property
    def k(self) -> int:
        """The size of the reported subset (``subset_size`` or the variance-optimal one)."""
        return self._law()[3]

    def _law(self) -> tuple[int, int, int, int]:
        """Return ``(a, N_meet, N_miss, k)``: the branch coin ``a / 2^62``, subset counts."""
        return _law(self.epsilon, self.domain_size, self.padding, self.subset_size)

    def _pq(self) -> tuple[float, float]:
        a, meet, miss, k = self._law()
        big, ell = self.items, self.padding
        branch = Fraction(a, _BRANCH_TOTAL)
        with_v = math.comb(big - 1, k - 1)
        miss_with_v = math.comb(big - 1 - ell, k - 1)
        p = branch * Fraction(with_v, meet)
        q = branch * Fraction(with_v - miss_with_v, meet) + (1 - branch) * Fraction(
            miss_with_v, miss
        )
        return float(p), float(q)

    @property
    def p(self) -> float:
        """P[v in the report | v in the padded set] (realized)."""
        return self._pq()[0]

    @property
    def q(self) -> float:
        """P[v in the report | v not in the padded set] (realized)."""
        return self._pq()[1]

    def privacy_loss(self) -> float:
        """Return the loss of the realized law, from the integers (see Notes)."""
        a, meet, miss, _ = self._law()
        return _branch_loss(a, meet, miss)

    def variance(self, n: int, f: Any = None) -> Any:
        """Variance of one item's estimate from n reports at padded frequency f (None: 0)."""
        n = check_integer(n, "n", low=1)
        p, q = self._pq()
        base: Any = q * (1.0 - q)
        if f is not None:
            f = check_array(f, "f", ndim=(0, 1), low=0.0, high=1.0)
            base = base + f * (p - q) * (1.0 - p - q)
        return base / (n * (p - q) ** 2)

    # -- the flow ------------------------------------------------------------------------
    def check_values(self, values: Any) -> UserSets:
        """``values`` as :class:`UserSets` over ``[0, domain_size)``."""
        return as_user_sets(values, self.domain_size)

    def _padded(self, sets: UserSets, gen: np.random.Generator) -> np.ndarray:
        """Return n x ell padded sets: her items and dummies, or ell of her items uniformly."""
        n, d, ell = len(sets), self.domain_size, self.padding
        lengths = sets.lengths
        width = max(ell, int(lengths.max()) if n else 0)
        cols = np.arange(width)
        # her items first, then the dummies d + L, ..., d + width - 1 (only < ell survive
        # for a short set; a long set has no dummy among its first L slots)
        grid = d + np.broadcast_to(cols, (n, width)).copy()
        rows = np.repeat(np.arange(n), lengths)
        grid[rows, np.arange(sets.items.size) - np.repeat(sets.offsets[:-1], lengths)] = sets.items
        long = np.flatnonzero(lengths > ell)
        if long.size:  # ell of her L items uniformly: the first ell of a uniform permutation
            sub = np.where(cols[None, :] < lengths[long, None], grid[long], -1)
            sub = gen.permuted(sub, axis=1)
            keep = np.argsort(sub < 0, axis=1, kind="stable")[:, :ell]
            grid[long, :ell] = np.take_along_axis(sub, keep, axis=1)
        return grid[:, :ell]

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Pad, then report a k-subset as ``bits`` (n x ceil(D / 8) packed bits)."""
        sets = self.check_values(values)
        n, big = len(sets), self.items
        check_memory(
            3.0 * n * big, f"len(values)={n} at domain_size={self.domain_size}", "PrivSet.randomize"
        )
        gen = as_generator(rng)
        a, _, _, k = self._law()
        padded = self._padded(sets, gen)
        mine = np.zeros((n, big), dtype=bool)
        mine[np.arange(n)[:, None], padded] = True
        meets = np.asarray(gen.integers(0, _BRANCH_TOTAL, size=n)) < a
        chosen = np.zeros((n, big), dtype=bool)
        # Floyd's sampler (O(k^2) per user) unless k^2 > 8 D: the first items of a permutation
        floyd = k * k <= 8 * big
        miss_rows = np.flatnonzero(~meets)
        if miss_rows.size and floyd:  # a uniform k-subset of the D - ell items not hers
            index = _floyd(big - self.padding, k, miss_rows.size, gen)
            items = _skip(index, np.sort(padded[miss_rows], axis=1))
            chosen[miss_rows[:, None], items] = True
        elif miss_rows.size:  # the first k items of a uniform permutation that are not hers
            perm = gen.permuted(np.broadcast_to(np.arange(big), (miss_rows.size, big)), axis=1)
            free = ~np.take_along_axis(mine[miss_rows], perm, axis=1)
            take = free & (np.cumsum(free, axis=1) <= k)
            r, c = np.nonzero(take)
            chosen[miss_rows[r], perm[r, c]] = True
        todo = np.flatnonzero(meets)
        while todo.size:  # one of her items + k - 1 others, kept w.p. 1 / |z & x|
            first = padded[todo, gen.integers(0, self.padding, size=todo.size)]
            z = np.zeros((todo.size, big), dtype=bool)
            z[np.arange(todo.size), first] = True
            if floyd:
                index = _floyd(big - 1, k - 1, todo.size, gen)
                z[np.arange(todo.size)[:, None], _skip(index, first[:, None])] = True
            else:
                perm = gen.permuted(np.broadcast_to(np.arange(big), (todo.size, big)), axis=1)
                other = perm != first[:, None]
                take = other & (np.cumsum(other, axis=1) <= k - 1)
                r, c = np.nonzero(take)
                z[r, perm[r, c]] = True
            hits = np.take_along_axis(z, padded[todo], axis=1).sum(axis=1)
            keep = np.asarray(gen.integers(0, hits)) == 0
            chosen[todo[keep]] = z[keep]
            todo = todo[~keep]
        return Reports(self, bits=np.packbits(chosen, axis=1))

    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields: ``counts``, reports holding each padded item (k each)."""
        return {"counts": StatsField((self.items,), total=self.k)}

    def empty_stats(self) -> Stats:
        """Return the Stats of no report (zero arrays): the neutral element of merge."""
        return Stats(self, 0, counts=np.zeros(self.items, dtype=np.int64))

    def aggregate(self, reports: Reports) -> Stats:
        """Reduce the reports to their mergeable Stats: counts per padded item."""
        reports = self.check_reports(reports)
        n, big = len(reports), self.items
        bits = reports.arrays.get("bits")
        width = (big + 7) // 8
        if bits is None or bits.shape != (n, width) or bits.dtype != np.uint8:
            raise ValueError(f"reports.bits must be uint8 of shape ({n}, {width})")
        counts = np.zeros(big, dtype=np.int64)
        for start in range(0, n, 1 << 14):  # bounded temporaries (rows x D bytes)
            rows = np.unpackbits(bits[start : start + (1 << 14)], axis=1)
            if np.any(rows[:, big:]):
                raise ValueError(f"reports.bits must be zero past the {big} items")
            if np.any(rows.sum(axis=1) != self.k):
                raise ValueError(f"reports.bits must hold exactly k = {self.k} items per report")
            counts += rows[:, :big].sum(axis=0, dtype=np.int64)
        return Stats(self, n, counts=counts)

    def estimate(self, stats: Stats) -> SetFrequencyEstimate:
        """Unbiased padded frequencies, their variance and the dummies' length CDF."""
        stats = self.check_stats(stats, nonempty=True)
        p, q = self._pq()
        d = self.domain_size
        freq = (stats.counts / stats.n - q) / (p - q)
        var = self.variance(stats.n, np.clip(freq, 0.0, 1.0))
        cdf = freq[d:]
        return SetFrequencyEstimate(
            freq[:d],
            var[:d],
            stats.n,
            spec=self,
            padding=self.padding,
            long_share=float(1.0 - cdf[-1]),
            long_share_variance=float(var[-1]),
            length_cdf=cdf,
        )
