"""Longitudinal unary encodings: L-OUE, L-OSUE, L-SUE, L-SOUE (Arcolezi et al. 2021/2022).

Each chains two unary encodings bit by bit: the permanent round turns the one-hot vector of
the value into bits with ``(p1, q1)`` (OUE or SUE at ``epsilon_inf``, memoized per value);
the instantaneous round re-randomizes every permanent bit with ``(p2, q2)`` (OUE: ``p2 =
1/2``; SUE: ``p2 + q2 = 1``), chosen so that one report is ``epsilon_1``-LDP. The chained
bit probabilities are ``p* = p1 p2 + (1 - p1) q2`` and ``q* = q1 p2 + (1 - q1) q2``.

Every bit of both rounds is a uniform 64-bit integer compared with an integer threshold
(probability ``T / 2^64``, exactly), so the chained probabilities are exact rationals over
2^128 and the losses are computed from them. A first-day ``randomize`` (no memo) draws
each bit once from those 2^-128 rationals (one 128-bit comparison per bit, bit-sliced over
64 lanes, several users' rows sharing one word when d <= 32; the true item's lane compared
with its own threshold in the same pass), which is the chained law itself.
"""

from __future__ import annotations

import dataclasses
import functools
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np

from .. import _crmath
from .._rng import RNGLike, as_generator, derive_seeds, is_secure
from .._validation import check_memory
from ..frequency import _bits
from ..frequency._unary_sampler import (
    sample_unary_bits,
    sample_unary_bits_secure,
    sample_unary_bits_wide,
    wide_seed_count,
)
from ..frequency.unary import (
    UnaryBitsLaw,
    unary_integer_probabilities,
    unary_privacy_loss,
)
from ..spec import Reports
from ._base import LongitudinalOracle, composite_loss

__all__ = ["LongitudinalUnary", "LOUE", "LOSUE", "LSUE", "LSOUE"]

_SCALE = 1 << 64
_SCALE2 = 1 << 128
_U64_MAX = _SCALE - 1


def _first_round(kind: str, epsilon_inf: float) -> tuple[int, int]:
    if kind == "oue":
        t = _crmath.exp(-epsilon_inf)
        return unary_integer_probabilities(0.5, t / (1.0 + t), epsilon_inf)
    t = _crmath.exp(-epsilon_inf / 2.0)
    return unary_integer_probabilities(1.0 / (1.0 + t), t / (1.0 + t), epsilon_inf)


def _chained(tp1: int, tq1: int, tp2: int, tq2: int) -> tuple[int, int]:
    # P[report bit = 1 | true bit 1], P[... | true bit 0], times 2^128
    return tp1 * tp2 + (_SCALE - tp1) * tq2, tq1 * tp2 + (_SCALE - tq1) * tq2


@functools.lru_cache(maxsize=256)
def unary_round_thresholds(
    first: str, second: str, epsilon_inf: float, epsilon_1: float
) -> tuple[tuple[int, int], tuple[int, int]]:
    """Thresholds ``((T_p1, T_q1), (T_p2, T_q2))`` of the two rounds (units of 2^-64).

    The permanent round is ``first`` ("oue" or "sue") at ``epsilon_inf``, rounded as
    :func:`ldpkit.frequency.unary.unary_integer_probabilities` does. The instantaneous
    round's free parameter (``T_q2`` with ``T_p2 = 2^63`` for "oue"; ``T_p2 = 2^64 - T_q2``
    for "sue") is found by bisection on the integers: the chained loss is monotone in it,
    and the one chosen is the closest to ``epsilon_1`` from below.

    Raises
    ------
    ValueError
        When no instantaneous round reaches ``epsilon_1`` (too close to epsilon_inf).
    """
    tp1, tq1 = _first_round(first, epsilon_inf)
    limit = epsilon_1 - 4.0 * np.spacing(epsilon_1)

    def loss(tp2: int, tq2: int) -> float:
        return composite_loss(*_chained(tp1, tq1, tp2, tq2), _SCALE2)

    if second == "oue":
        half = _SCALE // 2
        best = loss(half, 1)
        lo, hi = 1, half  # the loss decreases in T_q2: loss(lo) > limit >= loss(hi) = 0
        if best <= limit:
            top = best
        else:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if loss(half, mid) <= limit:
                    hi = mid
                else:
                    lo = mid
            second_round = (half, hi)
            return (tp1, tq1), second_round
    else:
        top = loss(_U64_MAX, 1)
        if top > limit:
            lo, hi = _SCALE // 2, _U64_MAX  # loss(lo) = 0 <= limit < loss(hi); increasing
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if loss(mid, _SCALE - mid) <= limit:
                    lo = mid
                else:
                    hi = mid
            return (tp1, tq1), (lo, _SCALE - lo)
    raise ValueError(
        f"epsilon (epsilon_1) must be < {top:.6g} for epsilon_inf = {epsilon_inf!r} with this chaining "
        f"(the largest one report can leak), got {epsilon_1!r}"
    )


@dataclasses.dataclass(frozen=True, kw_only=True, init=False)
class LongitudinalUnary(UnaryBitsLaw, LongitudinalOracle):
    """Two chained unary encodings (base of LOUE, LOSUE, LSUE, LSOUE).

    Reports are packed bits (``reports.bits``, the layout of :class:`ldpkit.OUE`).
    """

    @abstractmethod
    def _kinds(self) -> tuple[str, str]:
        """Return the permanent and the instantaneous encodings ("oue" or "sue")."""

    def _rounds(self) -> tuple[tuple[int, int], tuple[int, int]]:
        assert self.epsilon_inf is not None
        first, second = self._kinds()
        return unary_round_thresholds(first, second, self.epsilon_inf, self.epsilon)

    @property
    def p1(self) -> float:
        """Realized P[permanent bit v = 1 | value v]."""
        return self._rounds()[0][0] / _SCALE

    @property
    def q1(self) -> float:
        """Realized P[permanent bit w = 1 | value v != w]."""
        return self._rounds()[0][1] / _SCALE

    @property
    def p2(self) -> float:
        """Realized P[reported bit = 1 | permanent bit 1]."""
        return self._rounds()[1][0] / _SCALE

    @property
    def q2(self) -> float:
        """Realized P[reported bit = 1 | permanent bit 0]."""
        return self._rounds()[1][1] / _SCALE

    def _attack_channel(self, memoized: bool) -> tuple[str, Any] | None:
        """Return the privacy attack's view of this spec's reports, or None for the default.

        Read by :func:`ldpkit.privacy.attack`, which imports no mechanism: it takes
        ``(kind, law)`` from here, else the spec's ``transition_matrix()``. ``("bits", (p1, q1, p2, q2))``: each bit's chained law
        (memoized), or one fresh round ``(1, 0, p, q)``.
        """
        if memoized:
            return "bits", (self.p1, self.q1, self.p2, self.q2)
        return "bits", (1.0, 0.0, self.p, self.q)

    def _chained_thresholds(self) -> tuple[int, int]:
        (tp1, tq1), (tp2, tq2) = self._rounds()
        return _chained(tp1, tq1, tp2, tq2)

    @property
    def p(self) -> float:
        """Realized ``p* = p1 p2 + (1 - p1) q2`` of one report."""
        return self._chained_thresholds()[0] / _SCALE2

    @property
    def q(self) -> float:
        """Realized ``q* = q1 p2 + (1 - q1) q2`` of one report."""
        return self._chained_thresholds()[1] / _SCALE2

    def privacy_loss(self) -> float:
        """epsilon_1 as realized: ``log(p* (1 - q*) / (q* (1 - p*)))`` from the integers."""
        return composite_loss(*self._chained_thresholds(), _SCALE2)

    def longitudinal_privacy_loss(self, distinct_values: int = 1) -> float:
        """``min(distinct_values, d) x`` the permanent round's realized loss."""
        k = min(self._check_distinct(distinct_values), self.domain_size)
        return k * unary_privacy_loss(*self._rounds()[0])

    # -- sampling --------------------------------------------------------------------------
    def _bits(
        self, values: np.ndarray, big: int, small: int, gen: np.random.Generator
    ) -> np.ndarray:
        """Sample packed bits.

        Bit ``values[i]`` of row i is 1 w.p. ``big / 2^64``, every other one w.p.
        ``small / 2^64`` (the unary encodings' exact sampler: one uniform 64-bit word per
        bit against the integer threshold; secure generator or per-row xoshiro streams
        seeded from ``gen``, as :meth:`ldpkit.OUE.randomize` does).
        """
        d = self.domain_size
        out = self._packed_output(values.shape[0])
        if values.shape[0]:
            if is_secure(gen):
                sample_unary_bits_secure(values, gen, d, big, small, out)
            else:
                sample_unary_bits(values, derive_seeds(gen, values.shape[0]), d, big, small, out)
        return out

    def _packed_output(self, n: int) -> np.ndarray:
        d = self.domain_size
        check_memory(
            float(n) * _bits.packed_width(d),
            f"len(values)={n} at domain_size={d}",
            f"{self.name}.randomize",
        )
        return np.empty((n, _bits.packed_width(d)), dtype=np.uint8)

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """One fresh report per user (a first day: no memo yet), both rounds in one draw.

        Nothing is memoized here, so the permanent bits are never kept: given the value,
        the report's bits are independent, bit v is 1 w.p. ``p* = T_p* / 2^128`` and every
        other one w.p. ``q* = T_q* / 2^128`` (the chained integer thresholds that
        :meth:`privacy_loss` reads). With a seed they are sampled directly at resolution
        2^-128 (one bit-sliced pass instead of three); the secure generator (``rng=None``)
        draws the two rounds. Memoized reporting goes through :meth:`ldpkit.Device.report`.
        """
        gen = as_generator(rng)
        if is_secure(gen):
            return super().randomize(values, rng=gen)
        v = np.asarray(self.check_values(values), dtype=np.int64)
        big, small = self._chained_thresholds()
        out = self._packed_output(v.shape[0])
        if v.shape[0]:
            seeds = derive_seeds(gen, wide_seed_count(v.shape[0], self.domain_size))
            sample_unary_bits_wide(v, seeds, self.domain_size, big, small, out)
        return Reports(self, bits=out)

    def _permanent_round(self, values: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        tp1, tq1 = self._rounds()[0]
        return self._bits(np.asarray(values, dtype=np.int64), tp1, tq1, gen)

    def _permanent_from_words(self, value: int, words: Any) -> np.ndarray:
        """Return one value's packed permanent bits from 64-bit words.

        The words are :class:`ldpkit.device.DerivedWords`: bit j is ``word_j < T_p1`` for
        j = value, ``< T_q1`` elsewhere, one word per bit in order (the JS client's
        derivation).
        """
        tp1, tq1 = self._rounds()[0]
        bits = [words.u64() < (tp1 if j == value else tq1) for j in range(self.domain_size)]
        return np.packbits(np.asarray(bits, dtype=np.uint8))

    def _instantaneous_round(self, permanent: np.ndarray, gen: np.random.Generator) -> Reports:
        perm = _bits.check_packed(np.asarray(permanent), self.domain_size, "permanent")
        tp2, tq2 = self._rounds()[1]
        zeros = np.zeros(perm.shape[0], dtype=np.int64)
        # every bit: 1 w.p. p2 where the permanent bit is 1, q2 where it is 0; two i.i.d.
        # bit matrices selected by the permanent bits (padding bits stay 0: both are 0 there)
        ones_law = self._bits(zeros, tp2, tp2, gen)
        zeros_law = self._bits(zeros, tq2, tq2, gen)
        return Reports(self, bits=(perm & ones_law) | (~perm & zeros_law))


_DOC = """{title}: {first} at ``epsilon_inf`` (permanent, memoized per value), then {second}
    on every permanent bit (instantaneous), so that one report is ``epsilon_1``-LDP.

    Permanent bits: ``p1 = {p1}``, ``q1 = {q1}`` (at epsilon_inf). Instantaneous: {p2q2},
    the free parameter solved (on 2^-64 integer thresholds) so that ``log(p* (1 - q*) /
    (q* (1 - p*))) = epsilon_1`` with ``p* = p1 p2 + (1 - p1) q2``, ``q* = q1 p2 + (1 - q1)
    q2``.

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
    Unbiased estimator ``(C_v / n - q*) / (p* - q*)``, ``Var = (q* (1 - q*) + f (p* -
    q*)(1 - p* - q*)) / (n (p* - q*)^2)``, which at f = 0 is the paper's ``q* (1 - q*) /
    (n (p1 - q1)^2 (p2 - q2)^2)`` (Arcolezi et al. 2022, section 3, {title}).

    References
    ----------
    H. H. Arcolezi, J.-F. Couchot, B. Al Bouna, X. Xiao. Longitudinal Collection and
    Analysis of Mobile Phone Data with Local Differential Privacy. IFIP PrivacyCamp 2021;
    arXiv:2111.04636 (2022). Ú. Erlingsson, V. Pihur, A. Korolova. RAPPOR. CCS 2014
    (permanent + instantaneous randomized response).

    Examples
    --------
    >>> spec = {name}(epsilon_inf=2.0, epsilon_1=1.0, domain_size=10)
    >>> round(spec.privacy_loss(), 6), round(spec.longitudinal_privacy_loss(), 6)
    (1.0, 2.0)
    >>> spec.randomize([0, 3, 9], rng=0).bits.shape
    (3, 2)
    """

#: Each class's max_epsilon (epsilon_1) is the largest one-report budget its chaining reaches
#: at epsilon_inf = max_epsilon_inf (the default epsilon_inf is capped there), rounded down.
_OUE = ("OUE", "1/2", "1 / (e^eps_inf + 1)")
_SUE = ("SUE", "e^(eps_inf/2) / (e^(eps_inf/2) + 1)", "1 - p1")


@dataclasses.dataclass(frozen=True, kw_only=True, init=False)
class LOUE(LongitudinalUnary):
    __doc__ = _DOC.format(
        title="L-OUE",
        name="LOUE",
        first="OUE",
        second="OUE",
        p1=_OUE[1],
        q1=_OUE[2],
        p2q2="``p2 = 1/2``",
    )

    def _kinds(self) -> tuple[str, str]:
        return "oue", "oue"

    max_epsilon: ClassVar[float] = 29.5
    max_epsilon_inf: ClassVar[float] = 30.0


@dataclasses.dataclass(frozen=True, kw_only=True, init=False)
class LOSUE(LongitudinalUnary):
    __doc__ = _DOC.format(
        title="L-OSUE",
        name="LOSUE",
        first="OUE",
        second="SUE",
        p1=_OUE[1],
        q1=_OUE[2],
        p2q2="``q2 = 1 - p2``",
    )

    def _kinds(self) -> tuple[str, str]:
        return "oue", "sue"

    max_epsilon: ClassVar[float] = 29.9
    max_epsilon_inf: ClassVar[float] = 30.0


@dataclasses.dataclass(frozen=True, kw_only=True, init=False)
class LSUE(LongitudinalUnary):
    __doc__ = _DOC.format(
        title="L-SUE",
        name="LSUE",
        first="SUE",
        second="SUE",
        p1=_SUE[1],
        q1=_SUE[2],
        p2q2="``q2 = 1 - p2``",
    )

    def _kinds(self) -> tuple[str, str]:
        return "sue", "sue"

    max_epsilon: ClassVar[float] = 49.9
    max_epsilon_inf: ClassVar[float] = 50.0


@dataclasses.dataclass(frozen=True, kw_only=True, init=False)
class LSOUE(LongitudinalUnary):
    __doc__ = _DOC.format(
        title="L-SOUE",
        name="LSOUE",
        first="SUE",
        second="OUE",
        p1=_SUE[1],
        q1=_SUE[2],
        p2q2="``p2 = 1/2``",
    )

    def _kinds(self) -> tuple[str, str]:
        return "sue", "oue"

    max_epsilon: ClassVar[float] = 25.5
    max_epsilon_inf: ClassVar[float] = 50.0
