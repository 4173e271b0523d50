"""Unary encoding: symmetric (SUE, basic RAPPOR) and optimized (OUE), FO17 section 4.3.

Each user's item v becomes a d-bit one-hot vector; every bit is then reported
independently: bit v is 1 with probability p, every other bit with probability q. Reports
are bit-packed (``reports.bits``: ``np.packbits(..., axis=1)`` layout, one row per user,
ceil(d/8) bytes), on the wire and in memory.

Sampling is exact: a bit with probability T / 2^64 is a comparison of a uniform 64-bit
integer with the integer threshold T (a compiled kernel, see ``_kernels_unary``). The
nominal probabilities of the paper are rounded to such thresholds *towards less privacy
loss* (p down, q up), and ``p``, ``q``, ``variance``, ``estimate`` and ``privacy_loss``
all use the rounded, realized values.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np

from .. import _crmath
from .._rng import RNGLike, as_generator, derive_seeds, is_secure
from .._validation import check_memory
from ..spec import Reports
from . import _bits
from ._base import PureFrequencyOracle, independent_support_variance
from ._unary_sampler import (  # numba kernel or its bit-exact numpy twin; secure path
    PROBABILITY_SCALE,
    sample_unary_bits,
    sample_unary_bits_secure,
)

__all__ = ["UnaryEncoding", "SUE", "OUE", "unary_integer_probabilities", "unary_privacy_loss"]

_U64_MAX = PROBABILITY_SCALE - 1

#: Largest domain for which ``transition_matrix`` enumerates the 2^d outputs.
MAX_ENUMERABLE_BITS = 12


def _reference_bits(
    values: np.ndarray,
    domain_size: int,
    true_threshold: int,
    other_threshold: int,
    rng: np.random.Generator,
    chunk_rows: int = 4096,
) -> np.ndarray:
    """Plain-numpy sampler of the kernel's law (slow; tests cross-check the kernel with it).

    One uniform 64-bit integer per bit, compared with the bit's threshold; packed in
    chunks of rows so that no n x d matrix of wide values is ever held.
    """
    n = values.shape[0]
    out = np.empty((n, _bits.packed_width(domain_size)), dtype=np.uint8)
    for start in range(0, n, chunk_rows):
        v = values[start : start + chunk_rows]
        u = rng.integers(
            0, _U64_MAX, size=(v.shape[0], domain_size), dtype=np.uint64, endpoint=True
        )
        thresholds = np.full(u.shape, other_threshold, dtype=np.uint64)
        thresholds[np.arange(v.shape[0]), v] = true_threshold
        out[start : start + chunk_rows] = np.packbits(u < thresholds, axis=1)
    return out


def unary_privacy_loss(true_threshold: int, other_threshold: int) -> float:
    """Exact epsilon of independent bits with P[bit = 1] = T / 2^64 (FO17 Theorem 6).

    Two inputs' one-hot vectors differ in two coordinates; the worst output sets the
    first one to 1 and the second to 0, giving ``log(p (1 - q) / (q (1 - p)))`` =
    ``log1p((num - den) / den)`` with the integers ``num = T_p (2^64 - T_q)`` and
    ``den = T_q (2^64 - T_p)``. Python divides integers with correct rounding, so the
    result has a relative error of a few ulps at every epsilon (no cancellation at tiny
    epsilon, where four logs of ~44 would lose ~1e-14 absolute).
    """
    big, small = int(true_threshold), int(other_threshold)
    if small <= 0 or big >= PROBABILITY_SCALE:
        return math.inf
    num = big * (PROBABILITY_SCALE - small)
    den = small * (PROBABILITY_SCALE - big)
    # correctly rounded (the JS client computes the same double: clients/js/src/exact.js)
    return _crmath.log1p((num - den) / den)


@functools.lru_cache(maxsize=256)
def unary_integer_probabilities(p: float, q: float, epsilon: float) -> tuple[int, int]:
    """Integer thresholds (T_p, T_q) realizing p and q at resolution 2^-64 within epsilon.

    ``T_p = floor(p 2^64)`` and ``T_q = ceil(q 2^64)``: lowering p and raising q can only
    lower ``log(p (1-q) / (q (1-p)))``. Both are clipped to [1, 2^64 - 1] so that no bit is
    deterministic (a deterministic bit would make the loss infinite). Should the loss
    still exceed epsilon (floating-point rounding of p or q, or a p and q that do not fit
    epsilon at all), T_q is raised, by bisection, to the smallest value that satisfies it
    (with a 4-ulp margin for the rounding of :func:`unary_privacy_loss`). The realized loss
    falls short of epsilon by about the relative rounding of q, ``2^64 / T_q``: below 1e-8
    relative within each class's ``max_epsilon``.

    Raises
    ------
    ValueError
        If p - q is too small to survive the rounding (cannot happen for epsilon >= 1e-6).
    """
    big = min(math.floor(p * PROBABILITY_SCALE), PROBABILITY_SCALE - 1)
    small = max(math.ceil(q * PROBABILITY_SCALE), 1)
    limit = epsilon - 4.0 * math.ulp(epsilon)
    if big > small and unary_privacy_loss(big, small) > limit:
        lo, hi = small, big  # loss(lo) > limit >= loss(hi) = 0; loss decreases with T_q
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if unary_privacy_loss(big, mid) <= limit:
                hi = mid
            else:
                lo = mid
        small = hi
    if big <= small:
        raise ValueError(
            "epsilon must be large enough for p > q to survive 64-bit quantization, "
            f"got {epsilon!r}"
        )
    return big, small


class UnaryBitsLaw:
    """Packed-bit reports with independent bits: supports, and the exact law for small d.

    Mixed into the unary encodings (:class:`UnaryEncoding`) and the longitudinal ones
    (:class:`ldpkit.longitudinal.LongitudinalUnary`): bit v of a report is 1 with
    probability ``p`` when v is the user's item, ``q`` otherwise (for a longitudinal spec,
    one report's, both rounds chained).
    """

    # The specs it is mixed into hold domain_size, p, q, name and check_reports.
    def support_counts(self: Any, reports: Reports) -> np.ndarray:
        """Count the reports with bit v set, for every v (validates shape and padding)."""
        packed = _bits.check_packed(reports.bits, self.domain_size)
        return _bits.column_counts(packed, self.domain_size)

    def _check_enumerable(self: Any) -> None:
        if self.domain_size > MAX_ENUMERABLE_BITS:
            raise NotImplementedError(
                f"{self.name} enumerates its 2^d outputs only for domain_size <= "
                f"{MAX_ENUMERABLE_BITS}, got {self.domain_size}"
            )

    def transition_matrix(self: Any) -> np.ndarray:
        """Return P[output | input] of one report, shape (d, 2^d).

        Output y's bits are y's binary digits with item 0 as the most significant bit (as
        :meth:`output_index` numbers them).

        Raises NotImplementedError for domain_size > 12.
        """
        self._check_enumerable()
        return _bits.independent_bits_matrix(self.domain_size, self.p, self.q)

    def output_index(self: Any, reports: Reports) -> np.ndarray:
        """Each report's bits read as a d-bit integer, item 0 most significant."""
        self._check_enumerable()
        packed = _bits.check_packed(self.check_reports(reports).bits, self.domain_size)
        return _bits.packed_index(packed, self.domain_size)


@dataclasses.dataclass(frozen=True, kw_only=True)
class UnaryEncoding(UnaryBitsLaw, PureFrequencyOracle):
    """Unary encoding with independent bits (FO17 section 4.3); base of SUE, OUE and THE.

    Subclasses give the paper's real-valued ``nominal_p`` and ``nominal_q``; this class
    rounds them to 64-bit thresholds (p down, q up), samples packed bits with a compiled
    kernel, and counts supports column by column.
    """

    #: q ~ e^-(eps/2) is still a 2^64-resolution probability with relative rounding
    #: below 1e-6 (so the realized loss is within 1e-6 of epsilon).
    max_epsilon: ClassVar[float] = 50.0

    def _validate(self) -> None:
        super()._validate()
        self._thresholds()  # raises for an epsilon too small to represent

    @property
    @abstractmethod
    def nominal_p(self) -> float:
        """The paper's P[bit v = 1 | input v], before rounding to a multiple of 2^-64."""

    @property
    @abstractmethod
    def nominal_q(self) -> float:
        """The paper's P[bit v = 1 | input v' != v], before rounding to a multiple of 2^-64."""

    def _thresholds(self) -> tuple[int, int]:
        return unary_integer_probabilities(self.nominal_p, self.nominal_q, self.epsilon)

    @property
    def p(self) -> float:
        """Realized P[bit v = 1 | input v]: ``nominal_p`` rounded down to k 2^-64."""
        return self._thresholds()[0] / PROBABILITY_SCALE

    @property
    def q(self) -> float:
        """Realized P[bit v = 1 | input v' != v]: ``nominal_q`` rounded up to k 2^-64."""
        return self._thresholds()[1] / PROBABILITY_SCALE

    def _support_variance(self, u: np.ndarray) -> np.ndarray:
        """``Var[u[:, i] . s | v]`` for every true item v (rows): independent support bits."""
        return independent_support_variance(float(self.p), float(self.q), u)

    def privacy_loss(self) -> float:
        """``log(p (1 - q) / (q (1 - p)))`` at the realized p and q (FO17 eq. 5)."""
        return unary_privacy_loss(*self._thresholds())

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Perturb each user's one-hot vector; ``reports.bits`` holds the packed bits.

        With a secure generator (``rng=None``, deployment) every bit comes from it
        (:func:`._unary_sampler.sample_unary_bits_secure`); with a seed or a statistical
        Generator, from per-report xoshiro256** streams seeded from it (reproducible, and
        the same bytes with or without numba). Both realize the same law.
        """
        v = self.check_values(values)
        width = _bits.packed_width(self.domain_size)
        # n x ceil(d/8) bytes of reports: refused up front rather than exhausting memory
        check_memory(
            float(v.shape[0]) * width,
            f"len(values)={v.shape[0]} at domain_size={self.domain_size}",
            f"{self.name}.randomize",
        )
        gen = as_generator(rng)
        if is_secure(gen):
            big, small = self._thresholds()
            out = np.empty((v.shape[0], _bits.packed_width(self.domain_size)), dtype=np.uint8)
            if v.shape[0]:
                sample_unary_bits_secure(v, gen, self.domain_size, big, small, out)
            return Reports(self, bits=out)
        seeds = derive_seeds(gen, v.shape[0])
        return Reports(self, bits=self._sample(v, seeds))

    def _sample(self, values: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        big, small = self._thresholds()
        out = np.empty((values.shape[0], _bits.packed_width(self.domain_size)), dtype=np.uint8)
        if values.shape[0]:
            sample_unary_bits(values, seeds, self.domain_size, big, small, out)
        return out

    def _attack_channel(self, memoized: bool) -> tuple[str, Any] | None:
        """Return the privacy attack's view of this spec's reports, or None for the default.

        Read by :func:`ldpkit.privacy.attack`, which imports no mechanism: it takes
        ``(kind, law)`` from here, else the spec's ``transition_matrix()``. Independent bits ``(1, 0, p, q)``: ``"bits"`` for fresh
        reports, ``"whole"`` for one report repeated (memoized).
        """
        return ("whole" if memoized else "bits"), (1.0, 0.0, self.p, self.q)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SUE(UnaryEncoding):
    """Symmetric unary encoding (basic one-time RAPPOR): ``p + q = 1``.

    Bit v of the one-hot vector is kept as 1 with ``p = e^(eps/2) / (e^(eps/2) + 1)``;
    every other bit becomes 1 with ``q = 1 / (e^(eps/2) + 1)``.

    Parameters
    ----------
    epsilon : float
        Privacy budget, in [1e-6, ``max_epsilon``] (per class: docs/design/THREAT_MODEL.md).
    domain_size : int
        Number of items d (>= 2).

    Notes
    -----
    Two inputs' encodings differ in two bits, so ``P[y | v] / P[y | v'] <=
    p (1 - q) / (q (1 - p)) = e^eps`` (FO17 Theorem 6). Per-user variance of the unbiased
    estimate: ``n Var* = q (1 - q) / (p - q)^2 = e^(eps/2) / (e^(eps/2) - 1)^2``.

    ``p`` and ``q`` are the probabilities the sampler realizes: the nominal values rounded
    to multiples of 2^-64, p down and q up, so ``privacy_loss()`` never exceeds epsilon
    and falls short of it by less than 1e-15 for epsilon <= 8 (the relative rounding of q
    grows as q shrinks: about 1e-8 at the largest accepted epsilon, 50).
    ``nominal_p`` and ``nominal_q`` hold the unrounded values.

    References
    ----------
    T. Wang, J. Blocki, N. Li, S. Jha. Locally Differentially Private Protocols for
    Frequency Estimation. USENIX Security 2017, section 4.3 (SUE). Ú. Erlingsson,
    V. Pihur, A. Korolova. RAPPOR. CCS 2014.

    Examples
    --------
    >>> sue = SUE(epsilon=1.0, domain_size=10)
    >>> reports = sue.randomize([0, 3, 9], rng=0)
    >>> reports.bits.shape, reports.bits.dtype
    ((3, 2), dtype('uint8'))
    >>> round(sue.p + sue.q, 9), sue.privacy_loss() <= 1.0
    (1.0, True)
    """

    @property
    def nominal_p(self) -> float:
        # e^(eps/2) / (e^(eps/2) + 1) in the form that cannot overflow at huge epsilon
        """The nominal keep probability p of the paper's formula (before integer rounding)."""
        return 1.0 / (1.0 + _crmath.exp(-self.epsilon / 2.0))

    @property
    def nominal_q(self) -> float:
        """The nominal probability q of the paper's formula (before integer rounding)."""
        t = _crmath.exp(-self.epsilon / 2.0)
        return t / (1.0 + t)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OUE(UnaryEncoding):
    """Optimized unary encoding: ``p = 1/2``, ``q = 1 / (e^eps + 1)``.

    Parameters
    ----------
    epsilon : float
        Privacy budget, in [1e-6, ``max_epsilon``] (per class: docs/design/THREAT_MODEL.md).
    domain_size : int
        Number of items d (>= 2).

    Notes
    -----
    With p fixed by ``p (1 - q) / (q (1 - p)) = e^eps`` (FO17 eq. 5), the variance
    ``q (1 - q) / (p - q)^2`` is minimized at ``p = 1/2``, ``q = 1 / (e^eps + 1)`` (FO17
    eq. 9), giving ``n Var* = 4 e^eps / (e^eps - 1)^2``, the same as OLH, with d bits per
    report. FO17 section 5 recommends OUE whenever d bits per report are affordable and
    ``d >= 3 e^eps + 2``.

    ``p`` and ``q`` are the probabilities the sampler realizes (multiples of 2^-64; p =
    1/2 exactly, q rounded up), so ``privacy_loss()`` never exceeds epsilon and falls
    short of it by less than 1e-14 for epsilon <= 8 (about 1e-6 at the largest accepted
    epsilon, 30, as the relative rounding of a small q grows). ``nominal_q`` holds the
    unrounded value.

    References
    ----------
    T. Wang, J. Blocki, N. Li, S. Jha. Locally Differentially Private Protocols for
    Frequency Estimation. USENIX Security 2017, section 4.3, eq. (9).

    Examples
    --------
    >>> oue = OUE(epsilon=1.0, domain_size=1024)
    >>> reports = oue.randomize([5] * 1000, rng=0)
    >>> reports.bits.shape
    (1000, 128)
    >>> est = oue.estimate(oue.aggregate(reports))
    >>> bool(abs(est.frequencies[5] - 1.0) < 6 * est.std_error[5])
    True
    """

    #: q = 1/(e^eps + 1) >= 2^44 / 2^64 keeps the realized loss within 1e-6 of epsilon.
    max_epsilon: ClassVar[float] = 30.0

    @property
    def nominal_p(self) -> float:
        """The nominal keep probability p of the paper's formula (before integer rounding)."""
        return 0.5

    @property
    def nominal_q(self) -> float:
        # correctly rounded: the thresholds are the same integers on every platform (and in
        # the JS client), not one libm's
        """The nominal probability q of the paper's formula (before integer rounding)."""
        t = _crmath.exp(-self.epsilon)
        return t / (1.0 + t)
