"""Longitudinal GRR (L-GRR): GRR chained with GRR (Arcolezi et al. 2021/2022)."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import numpy as np

from .. import _crmath
from .._exact import RR_MAX_EPSILON, ratio_loss, rr_weights
from ..frequency._base import index_dtype
from ..frequency.grr import OneItemReports, grr_sample
from ..spec import Reports
from ._base import LongitudinalOracle

__all__ = ["LGRR"]

#: Largest domain whose reports :meth:`LGRR.support_counts` counts by pairs (d^2 bins).
_PAIR_MAX_D = 64
#: Pairs per block of :meth:`LGRR.support_counts` (its temporaries: 32 KiB uint16, 128 KiB
#: of bincount's intp copy).
_PAIR_BLOCK = 1 << 14


@functools.lru_cache(maxsize=256)
def lgrr_weights(
    epsilon_inf: float, epsilon_1: float, domain_size: int
) -> tuple[tuple[int, int], tuple[int, int]]:
    """Integer weights ``((a, b), (c, e))`` of L-GRR's permanent and instantaneous rounds.

    The permanent round is GRR at ``epsilon_inf`` (``rr_weights``). The instantaneous one
    is GRR of ratio ``g = c / e`` solving ``(p1 g + 1 - p1) / (q1 g + 1 - q1) = e^eps_1``
    (the chained ratio of one report), then stepped down until the exact integer ratio of
    the chained law is within ``epsilon_1``.

    Raises
    ------
    ValueError
        When the instantaneous round would need a ratio beyond ``e^40`` (epsilon_1 too close
        to epsilon_inf).
    """
    d = domain_size
    a, b = rr_weights(epsilon_inf, d - 1)
    t1 = a + (d - 1) * b
    p1, q1 = a / t1, b / t1
    growth = _crmath.exp(epsilon_1)
    denominator = p1 - growth * q1
    g = (growth * (1.0 - q1) - (1.0 - p1)) / denominator if denominator > 0 else math.inf
    if not g < math.exp(RR_MAX_EPSILON):
        raise ValueError(
            f"epsilon (epsilon_1) must leave room below epsilon_inf = {epsilon_inf!r} at domain_size = "
            f"{d} (the instantaneous round's ratio must stay below e^{RR_MAX_EPSILON:g}), "
            f"got {epsilon_1!r}"
        )
    # log(g) correctly rounded (log1p of the exact g - 1): the JS client computes the same
    # double, hence the same integer weights (libm's log may differ by an ulp)
    c, e = rr_weights(max(_crmath.log1p(g - 1.0), 1e-12), d - 1)
    while c > e and _chained_loss(a, b, t1, c, e) > epsilon_1:
        c -= max(1, c >> 50)
    return (a, b), (c, e)


def _chained(a: int, b: int, t1: int, c: int, e: int) -> tuple[int, int]:
    # P[y = v | v] and P[y = w | v] (w != v) times t1 * t2: keep through both rounds, or
    # move in the first and come back (or land on w) in the second.
    return a * c + (t1 - a) * e, b * c + (t1 - b) * e


def chained_rr(epsilon_inf: float, epsilon_1: float, k: int) -> tuple[int, int, int]:
    """Return the weights of L-GRR over ``k`` outputs, both rounds chained.

    ``(keep, other, total)`` integer weights of P[y = v | v] and P[y = w | v] (w != v), over
    ``total = t1 t2``.
    """
    (a, b), (c, e) = lgrr_weights(epsilon_inf, epsilon_1, k)
    t1, t2 = a + (k - 1) * b, c + (k - 1) * e
    keep, other = _chained(a, b, t1, c, e)
    return keep, other, t1 * t2


def _chained_loss(a: int, b: int, t1: int, c: int, e: int) -> float:
    keep, other = _chained(a, b, t1, c, e)
    return ratio_loss(other, keep)


def _round_matrix(keep: int, other: int, d: int) -> np.ndarray:
    """Return one GRR round's d x d law from its integer weights (keep on the diagonal)."""
    total = keep + (d - 1) * other
    m = np.full((d, d), other / total)
    np.fill_diagonal(m, keep / total)
    return m


class ChainedGRR:
    """Two chained GRR rounds over ``_rr_size()`` outputs: L-GRR's and LOLOHA's law.

    The permanent round at ``epsilon_inf`` and the instantaneous one making a report
    ``epsilon``-LDP (Arcolezi et al. 2022, L-GRR; EDBT 2023 for LOLOHA over the hash range).
    """

    epsilon: float
    epsilon_inf: float | None

    def _rr_size(self) -> int:
        raise NotImplementedError  # the domain size (L-GRR) or the hash range (LOLOHA)

    def _rounds(self) -> tuple[tuple[int, int], tuple[int, int]]:
        assert self.epsilon_inf is not None
        return lgrr_weights(self.epsilon_inf, self.epsilon, self._rr_size())

    def _chained(self) -> tuple[int, int, int]:
        assert self.epsilon_inf is not None
        return chained_rr(self.epsilon_inf, self.epsilon, self._rr_size())

    @property
    def p(self) -> float:
        """Realized P[report = v | v] of one report over the two rounds (v hashed for LOLOHA)."""
        keep, _, total = self._chained()
        return keep / total


@dataclasses.dataclass(frozen=True, kw_only=True, init=False)
class LGRR(OneItemReports, ChainedGRR, LongitudinalOracle):
    """Longitudinal GRR: a memoized GRR answer, re-randomized by GRR at every report.

    The permanent answer is GRR at ``epsilon_inf``; the second GRR makes one report
    ``epsilon_1``-LDP.

    Round 1 (permanent, memoized per value by :class:`ldpkit.Device`): GRR with ``p1 =
    e^eps_inf / (e^eps_inf + d - 1)``. Round 2 (every report): GRR of its output with
    ``p2`` such that the chained probabilities ``p* = p1 p2 + (1 - p1) q2`` and ``q* = q1
    p2 + (1 - q1) q2`` satisfy ``p* / q* = e^eps_1``.

    Both rounds are exact integer laws (:func:`ldpkit._exact.rr_weights`);
    ``privacy_loss()`` is ``log(p* / q*)`` and ``longitudinal_privacy_loss()`` is ``log(p1 /
    q1)``, both from the exact integers.

    Parameters
    ----------
    epsilon_inf : float
        Loss of any number of reports of one value (default ``3 epsilon_1``).
    epsilon_1 : float
        Loss of one report (alias ``epsilon``), ``< epsilon_inf``.
    domain_size : int
        Number of items d (>= 2).

    Notes
    -----
    The estimator ``(C_v / n - q*) / (p* - q*)`` is unbiased with ``Var = (q* (1 - q*) +
    f (p* - q*)(1 - p* - q*)) / (n (p* - q*)^2)``; at f = 0 this is the paper's variance
    ``q* (1 - q*) / (n (p1 - q1)^2 (p2 - q2)^2)`` (Arcolezi et al., section 3, eq. of
    L-GRR; ``p* - q* = (p1 - q1)(p2 - q2)``).

    References
    ----------
    H. H. Arcolezi, J.-F. Couchot, B. Al Bouna, X. Xiao. Longitudinal Collection and
    Analysis of Mobile Phone Data with Local Differential Privacy. IFIP PrivacyCamp 2021
    (and arXiv:2111.04636, "Improving the Utility of Locally Differentially Private
    Protocols for Longitudinal and Multidimensional Frequency Estimates", 2022), L-GRR.

    Examples
    --------
    >>> lgrr = LGRR(epsilon_inf=2.0, epsilon_1=1.0, domain_size=8)
    >>> round(lgrr.privacy_loss(), 9), round(lgrr.longitudinal_privacy_loss(), 9)
    (1.0, 2.0)
    >>> lgrr.randomize([0, 3, 7], rng=0).values.dtype
    dtype('uint8')
    """

    max_epsilon_inf = RR_MAX_EPSILON
    #: The largest epsilon_1 whose instantaneous round fits the integer law at the largest
    #: epsilon_inf (the default epsilon_inf is capped at max_epsilon_inf).
    max_epsilon = 30.0

    def _rr_size(self) -> int:
        return self.domain_size

    def support_counts(self, reports: Reports) -> np.ndarray:
        """Return the count of reports of every item, as GRR's, in one pass over byte pairs.

        L-GRR's reports are uint8 items when d <= 256; for d <= 64 two consecutive reports
        ``(a, b)`` are counted together as the pair ``a d + b`` (bincounts over n / 2
        uint16 words into d^2 bins, ~2.5x faster than one bincount over n bytes), then the
        pair counts are summed along both axes: exact integers, the same counts. Blocks of
        :data:`_PAIR_BLOCK` pairs keep the temporaries small: fresh large ones cost page
        faults on a batch's first pass, which were most of its time.
        """
        y = reports.values
        d = self.domain_size
        if not (d <= _PAIR_MAX_D and y.dtype == np.uint8 and y.ndim == 1 and y.size > 1):
            return super().support_counts(reports)
        if int(y.max()) >= d:  # a pair index must not alias another pair
            raise ValueError(f"reports.values must be items in [0, {d})")
        m = y.size & ~1
        pairs = np.ascontiguousarray(y[:m]).view("<u2")  # (a, b) -> a + 256 b on any CPU
        flat = np.zeros(d * d, dtype=np.int64)
        for start in range(0, pairs.size, _PAIR_BLOCK):
            block = pairs[start : start + _PAIR_BLOCK]
            index = block & np.uint16(0xFF)
            index *= np.uint16(d)
            index += block >> np.uint16(8)
            flat += np.bincount(index, minlength=d * d)
        grid = flat.reshape(d, d)
        counts = grid.sum(axis=1) + grid.sum(axis=0)
        if m < y.size:
            counts[int(y[-1])] += 1
        return counts.astype(np.int64, copy=False)

    @property
    def q(self) -> float:
        """Realized P[report = w | v] for each w != v (both rounds)."""
        _, other, total = self._chained()
        return other / total

    def privacy_loss(self) -> float:
        """epsilon_1 as realized: ``log(p* / q*)`` from the exact integers."""
        keep, other, _ = self._chained()
        return ratio_loss(other, keep)

    def longitudinal_privacy_loss(self, distinct_values: int = 1) -> float:
        """``min(distinct_values, d) x log(p1 / q1)`` (the permanent round, realized)."""
        k = min(self._check_distinct(distinct_values), self.domain_size)
        a, b = self._rounds()[0]
        return k * ratio_loss(b, a)

    def permanent_matrix(self) -> np.ndarray:
        """P[permanent answer | value], d x d (the memoized round)."""
        return _round_matrix(*self._rounds()[0], self.domain_size)

    def instantaneous_matrix(self) -> np.ndarray:
        """P[report | permanent answer], d x d (the fresh round)."""
        return _round_matrix(*self._rounds()[1], self.domain_size)

    def _attack_channel(self, memoized: bool) -> tuple[str, Any] | None:
        """Return the privacy attack's view of this spec's reports, or None for the default.

        Read by :func:`ldpkit.privacy.attack`, which imports no mechanism: it takes
        ``(kind, law)`` from here, else the spec's ``transition_matrix()``. Memoized: ``("matrix", (P1, P2))``, the permanent and the
        instantaneous rounds; fresh reports: the default (one GRR round each).
        """
        if memoized:
            return "matrix", (self.permanent_matrix(), self.instantaneous_matrix())
        return None

    def _permanent_round(self, values: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        return grr_sample(values, self.domain_size, self._rounds()[0], gen)

    def _permanent_from_words(self, value: int, words: Any) -> np.ndarray:
        """Return one value's permanent answer from 64-bit words (``DerivedWords``).

        ``U = words.below(T)``, then :func:`grr_sample`'s rule (``U < w_keep`` keeps, else
        ``(U - w_keep) // w_other`` indexes the other items); the JS client's derivation.
        """
        a, b = self._rounds()[0]
        u = words.below(a + (self.domain_size - 1) * b)
        if u < a:
            return np.asarray(value, dtype=np.int64)
        other = (u - a) // b
        return np.asarray(other + (other >= value), dtype=np.int64)

    def _instantaneous_round(self, permanent: np.ndarray, gen: np.random.Generator) -> Reports:
        perm = np.asarray(permanent, dtype=np.int64).reshape(-1)
        y = grr_sample(perm, self.domain_size, self._rounds()[1], gen)
        return Reports(self, values=y.astype(index_dtype(self.domain_size)))
