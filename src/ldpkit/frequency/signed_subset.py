"""Signed subset selection: a categorical oracle over signed one-hot vectors (WAV25 section 4).

A user holds one of ``2 d`` inputs (a coordinate in [0, d) and a sign) and reports a sparse
vector of {-1, 0, 1}^d with m non-zeros (which coordinates are non-zero, and their signs):
the true coordinate is non-zero with an exact integer coin and keeps its sign with another,
so the report is epsilon-LDP for the realized weights. The server sums the reports per
coordinate (net of the signs) and unbiases them. :class:`ldpkit.numeric.HaarWavelet`
reports each user's Haar level through it; its names are re-exported by
:mod:`ldpkit.numeric.wavelet`.

References
----------
WAV25 (see :mod:`ldpkit.numeric.wavelet`), section 4: signed subset selection, eq. 61 (m*).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from typing import Any, ClassVar

import numpy as np

from .._exact import RR_MAX_EPSILON, coin, ratio_weights
from .._rng import RNGLike, as_generator
from .._validation import (
    check_categorical_values,
    check_frequencies,
    check_integer,
    check_real,
)
from ..estimate import FrequencyEstimate
from ..spec import Mechanism, Reports, Stats, StatsField
from ._base import MAX_DENSE_OUTPUTS
from ._bits import check_packed, column_counts, packed_width
from .subset import _CHUNK_DRAWS, _sample_subsets

__all__ = [
    "SignedSubsetLaw",
    "signed_subset_law",
    "subset_size_objective",
    "optimal_subset_size",
    "sample_signed_subsets",
    "SignedSubsetSelection",
]

#: Largest signed-subset domain: beyond it one report is absurdly large (two bitmaps of 2^20
#: bits, 2 x 128 KiB; :data:`ldpkit.numeric.haar.MAX_LEVEL` is the matching largest Haar level).
_MAX_DOMAIN = 1 << 20


# --------------------------------------------------------------------------------------------
# Signed subset selection: the law
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SignedSubsetLaw:
    """Exact constants of signed subset selection (WAV25 Lemmas 2-3) for one (eps, d, m).

    The randomizer maps a signed one-hot vector ``v = s e_k`` (s = +-1) to a vector
    ``y in {-1, 0, 1}^d`` with exactly m non-zeros, with probability ``e^eps / Omega`` if
    ``<y, v> = 1`` and ``1 / Omega`` otherwise.

    Attributes
    ----------
    epsilon : float
    domain_size : int
        d (>= 1).
    subset_size : int
        m, in [1, d].
    log_omega : float
        ``log Omega``, ``Omega = C(d-1,m-1) 2^(m-1) (e^eps + 1) + C(d-1,m) 2^m`` (eq. 46),
        kept as a log because Omega overflows a float near d = 1024.
    p : float
        ``P[Y_k = v_k]`` at the true coordinate: ``m e^eps / (m (e^eps + 1) + 2 (d - m))``.
    p_flip : float
        ``P[Y_k = -v_k] = p e^-eps`` (Lemma 3 (3)).
    included : float
        ``P[Y_k != 0] = p (1 + e^-eps)`` at the true coordinate.
    q : float
        ``P[Y_l = +1 | v_l = 0]`` (Lemma 3 (2)); ``P[Y_l = -1 | v_l = 0]`` is also q, since
        the other non-zeros carry independent uniform signs. So ``Var[Y_l | v_l = 0] = 2q``
        (not q as eq. 117 has it).
    gain : float
        ``E[Y_k | v] = gain v_k`` with ``gain = p (1 - e^-eps)`` (eq. 56).
    """

    epsilon: float
    domain_size: int
    subset_size: int
    log_omega: float
    p: float
    p_flip: float
    included: float
    q: float
    gain: float

    @property
    def variance_true(self) -> float:
        """``Var[Y_k | v_k = +-1] = p (1 + e^-eps) - gain^2`` (eq. 115)."""
        return self.included - self.gain**2

    @property
    def variance_other(self) -> float:
        """``Var[Y_l | v_l = 0] = 2 q`` (both signs have probability q)."""
        return 2.0 * self.q


@functools.lru_cache(maxsize=4096)
def _weights(epsilon: float, d: int, m: int) -> tuple[int, int]:
    """Return the integer weights ``(w_hi, w_lo)`` of outputs with ``<y, v> = 1`` and others.

    Exact integer laws (:mod:`ldpkit._exact`): ratio ``<= e^eps`` and
    ``m (w_hi + w_lo) + 2 (d - m) w_lo <= 2^62``, so the sampler's two coins
    (:func:`_sample`) are exact integer draws.
    """
    w_lo, w_hi = ratio_weights(epsilon, m + 2 * (d - m), float(m))
    return w_hi, w_lo


@functools.lru_cache(maxsize=4096)
def _law(epsilon: float, d: int, m: int) -> SignedSubsetLaw:
    # Eq. 45 with the integer weights (w_hi, w_lo) in place of (e^eps, 1); everything over
    # C(d-1, m-1) 2^(m-1) / m: Omega -> denom = m (w_hi + w_lo) + 2 (d - m) w_lo.
    w_hi, w_lo = _weights(epsilon, d, m)
    denom = m * (w_hi + w_lo) + 2 * (d - m) * w_lo
    p = m * w_hi / denom
    included = m * (w_hi + w_lo) / denom
    # q = C(d-2,m-2) 2^(m-2) (e^eps + 1) + C(d-2,m-1) 2^(m-1), over Omega (eq. 54), i.e.
    # m ((m-1)(w_hi + w_lo) + 2 (d-m) w_lo) / (2 (d-1) denom); no other coordinate at d = 1.
    q = m * ((m - 1) * (w_hi + w_lo) + 2 * (d - m) * w_lo) / (2 * (d - 1) * denom) if d > 1 else 0.0
    log_omega = (  # Omega in units of the low weight (eq. 46 when w_hi / w_lo = e^eps)
        math.lgamma(d)
        - math.lgamma(m)
        - math.lgamma(d - m + 1)
        + (m - 1) * math.log(2.0)
        + math.log(denom / (m * w_lo))
    )
    return SignedSubsetLaw(
        epsilon=epsilon,
        domain_size=d,
        subset_size=m,
        log_omega=log_omega,
        p=p,
        p_flip=m * w_lo / denom,
        included=included,
        q=q,
        gain=m * (w_hi - w_lo) / denom,
    )


def signed_subset_law(epsilon: float, domain_size: int, subset_size: int) -> SignedSubsetLaw:
    """Return the exact constants p, q, Omega of signed subset selection (WAV25 Lemmas 2-3).

    Examples
    --------
    >>> law = signed_subset_law(1.0, 8, 3)
    >>> round(law.p, 6), round(law.p_flip / law.p, 6) == round(math.exp(-1), 6)
    (0.385484, True)
    """
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_inclusive=False)
    d = check_integer(domain_size, "domain_size", low=1, high=_MAX_DOMAIN)
    m = check_integer(subset_size, "subset_size", low=1, high=d)
    return _law(epsilon, d, m)


def subset_size_objective(epsilon: float, domain_size: int) -> np.ndarray:
    """WAV25 eq. 61 for m = 1..d: ``(1 + e^-eps)/(p (1-e^-eps)^2) + q (d-1)/(p^2 (1-e^-eps)^2)``.

    Element ``m - 1`` belongs to subset size m. It bounds d/2^j times the summed per-user
    variance of one level's coefficients (eq. 60), with Lemma 3's q. With the random
    filler signs the exact figure has 2q and a -1 (eq. 59 corrected); its minimizer is
    within one of this one, and equal except near the switch from m = 1 to m = 2, where
    this choice costs up to 23% more variance at that level (measured over eps 0.1..8,
    d <= 1024; see the tests). We keep eq. 61 as the paper states it.
    """
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_inclusive=False)
    d = check_integer(domain_size, "domain_size", low=1, high=_MAX_DOMAIN)
    t = math.exp(-epsilon)
    m = np.arange(1, d + 1, dtype=np.float64)
    denom = m * (1.0 + t) + 2.0 * (d - m) * t
    p = m / denom
    q = (
        m * ((m - 1) * (1.0 + t) + 2.0 * (d - m) * t) / (2.0 * (d - 1) * denom)
        if d > 1
        else np.zeros_like(m)
    )
    g = -math.expm1(-epsilon)
    return (1.0 + t) / (p * g * g) + q * (d - 1) / (p * p * g * g)


@functools.lru_cache(maxsize=4096)
def _optimal_m(epsilon: float, d: int) -> int:
    return int(np.argmin(subset_size_objective(epsilon, d))) + 1


def optimal_subset_size(epsilon: float, domain_size: int) -> int:
    """m* of WAV25 eq. 61: the smallest minimizer of :func:`subset_size_objective`.

    At eps <= 1 every coordinate is reported (m* = d); at eps = 2, m* ~ 0.31 d; at
    eps = 4, m* ~ d / 26 (m* = 39 at d = 1024); m* = 1 (randomized response over the 2d
    signed items) once e^eps is large compared with d.

    Examples
    --------
    >>> [optimal_subset_size(e, 1024) for e in (0.5, 1.0, 2.0, 4.0, 8.0)]
    [1024, 1024, 321, 39, 1]
    """
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_inclusive=False)
    d = check_integer(domain_size, "domain_size", low=1, high=_MAX_DOMAIN)
    return _optimal_m(epsilon, d)


# --------------------------------------------------------------------------------------------
# Signed subset selection: the sampler
# --------------------------------------------------------------------------------------------
def _last_byte_mask(d: int) -> int:
    """Bits of the last packed byte that belong to the d coordinates (big-endian)."""
    pad = 8 * packed_width(d) - d
    return (0xFF << pad) & 0xFF


def sample_signed_subsets(
    coords: Any,
    negative: Any,
    domain_size: int,
    subset_size: int,
    epsilon: float,
    rng: RNGLike = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Signed subset selection for a batch of signed one-hot inputs (WAV25 Alg. 2, corrected).

    Parameters
    ----------
    coords : array of int, shape (c,)
        The non-zero coordinate k of each input, in [0, d).
    negative : array of bool, shape (c,)
        True where the input is ``-e_k``, False for ``+e_k``.
    domain_size, subset_size : int
        d and m (1 <= m <= d).
    epsilon : float
        Privacy budget.
    rng : Generator, SeedSequence, int or None
        Source of all randomness.

    Returns
    -------
    support, negative : ndarray of uint8, shape (c, ceil(d / 8)) each
        Bit-packed rows (``np.packbits`` layout, big-endian): ``support`` marks the m
        non-zero coordinates of y, ``negative`` those equal to -1 (a subset of support).

    Notes
    -----
    Law (eq. 45): the true coordinate is ``v_k`` with probability p, ``-v_k`` with p e^-eps
    and 0 otherwise; then m - 1 (if it is non-zero) or m (if it is 0) *other* coordinates
    are chosen uniformly without replacement and each gets an **independent uniform random
    sign**. Every output y then has probability e^eps / Omega if ``<y, v> = 1`` and
    1 / Omega otherwise. WAV25's listing sets the other coordinates to +1: then outputs
    with a -1 away from the true coordinate are impossible under one input and possible
    under another (not eps-LDP for any eps), and ``E[Y_l | v_l = 0] = q != 0`` biases
    every coefficient.

    The support is exactly a subset-selection draw (the true item joins with probability
    ``p (1 + e^-eps)``); it reuses the vectorized Floyd sampler of
    :class:`ldpkit.frequency.SubsetSelection` (O(min(m, d - m)) steps per user; no
    sampling at all when m = d). Signs are random bytes masked by the support; the true
    coordinate's sign is flipped with probability ``1 / (e^eps + 1)``.

    Examples
    --------
    >>> support, neg = sample_signed_subsets([0, 5], [False, True], 8, 3, 1.0, rng=0)
    >>> np.unpackbits(support, axis=1).sum(axis=1).tolist()
    [3, 3]
    >>> bool(np.all(neg & ~support == 0))
    True
    """
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_inclusive=False)
    d = check_integer(domain_size, "domain_size", low=1, high=_MAX_DOMAIN)
    m = check_integer(subset_size, "subset_size", low=1, high=d)
    k = check_categorical_values(coords, d, "coords")
    neg_in = np.asarray(negative)
    if neg_in.dtype != np.bool_ or neg_in.shape != k.shape:
        raise ValueError(
            f"negative must be a boolean array of shape {k.shape}, got dtype {neg_in.dtype} "
            f"and shape {neg_in.shape}"
        )
    return _sample(k, neg_in, d, m, _law(epsilon, d, m), as_generator(rng))


def _sample(
    k: np.ndarray,
    neg_in: np.ndarray,
    d: int,
    m: int,
    law: SignedSubsetLaw,
    gen: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Unvalidated core of :func:`sample_signed_subsets` (inputs already checked)."""
    c, w = k.size, packed_width(d)
    last = _last_byte_mask(d)
    w_hi, w_lo = _weights(law.epsilon, d, m)
    if m == d:
        # Every coordinate is non-zero (included = 1 exactly): nothing to sample.
        support = np.full((c, w), 0xFF, dtype=np.uint8)
        support[:, -1] = last
    else:
        support = np.zeros((c, w), dtype=np.uint8)
        # P[true coordinate non-zero] = m (w_hi + w_lo) / denom, an exact integer coin
        odds = (m * (w_hi + w_lo), 2 * (d - m) * w_lo)
        steps = max(1, min(m, d - m))
        chunk = max(1, _CHUNK_DRAWS // steps)
        for start in range(0, c, chunk):
            stop = min(c, start + chunk)
            _sample_subsets(k[start:stop], d, m, odds, gen, support[start:stop])
    signs = gen.integers(0, 256, size=(c, w), dtype=np.uint8)
    signs &= support
    rows = np.arange(c)
    byte = k >> 3
    bit = (128 >> (k & 7)).astype(np.uint8)
    held = signs[rows, byte] & ~bit
    included = (support[rows, byte] & bit) != 0
    # Given that the true coordinate is non-zero, it keeps v's sign w.p. w_hi / (w_hi + w_lo)
    # (~ e^eps / (e^eps + 1)): an exact integer coin.
    flip = coin(gen, c, w_lo, w_hi + w_lo)
    true_negative = included & (neg_in ^ flip)
    signs[rows, byte] = held | np.where(true_negative, bit, np.uint8(0))
    return support, signs


# --------------------------------------------------------------------------------------------
# Signed subset selection as a mechanism
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class SignedSubsetSelection(Mechanism):
    """Signed subset selection: report a vector of {-1, 0, 1}^d with m non-zeros (WAV25 4.4).

    Inputs are signed one-hot vectors, given as codes in [0, 2d): code c < d is ``+e_c``
    and code c >= d is ``-e_(c-d)``. The output y has probability ``e^eps / Omega`` when
    ``<y, v> = 1`` and ``1 / Omega`` otherwise (eq. 45). The server estimates, for every
    coordinate, the *net frequency* ``(#users with +e_k - #users with -e_k) / n``, the mean
    of the input vectors, by ``sum_i Y_i(k) / (n p (1 - e^-eps))`` (unbiased, eq. 57).

    Parameters
    ----------
    epsilon : float
        Privacy budget, in [1e-6, ``max_epsilon``] (per class: docs/design/THREAT_MODEL.md).
    domain_size : int
        d (>= 1; with d = 1 this is binary randomized response on the sign).
    subset_size : int or None
        m in [1, d]; None uses :func:`optimal_subset_size` (WAV25 eq. 61).

    Notes
    -----
    eps-LDP, tightly: every output has probability e^eps/Omega or 1/Omega, and each output
    is at inner product 1 with some input and -1 with its negation. The sampler realizes
    this law exactly (integer laws of ldpkit._exact) with integer weights ``w_hi / w_lo <= e^eps`` in place of
    ``(e^eps, 1)`` and two exact integer coins (true coordinate kept non-zero, sign kept);
    p, q, the estimator and ``privacy_loss()`` use the realized values (within ~1e-15 of
    eq. 45-57). Epsilon is accepted in ``[1e-6, 40]``, and up to ``log(2^62 / m)`` for
    large m (refused at construction beyond).

    Reports: ``reports.negative`` holds the -1 coordinates as bit-packed rows
    (``np.packbits`` layout, ceil(d/8) bytes per user) and ``reports.support`` the non-zero
    coordinates, stored only when m < d (with m = d every coordinate is non-zero, so
    the support would be a constant). Why bitmaps rather than index lists: m* = d at
    eps <= ~1.5 and m* ~ 0.31 d at eps = 2, where d/8 bytes per bitmap beat 2 bytes per
    index by 2.5-16x; index lists only win at eps >= ~4 (m* ~ d/26).

    Variance (per coordinate, from n users of whom a fraction f have ``|v_k| = 1``):
    ``Var = (f (p (1 + e^-eps) - g^2) + (1 - f) 2 q) / (n g^2)``, g = p (1 - e^-eps)
    (:meth:`variance`).

    References
    ----------
    P. Zhao, Z. Zhang, B. Sun, L. Shen, L. Zhang, S. Wang, Z. Liu. Consistent Estimation of
    Numerical Distributions under Local Differential Privacy by Wavelet Expansion, 2025
    (WAV25), section 4.4-4.6, Lemmas 2-4, eq. 45, 57, 61.

    Examples
    --------
    >>> ss = SignedSubsetSelection(epsilon=2.0, domain_size=16)
    >>> ss.effective_subset_size
    6
    >>> reports = ss.randomize([0, 3, 16 + 3], rng=0)
    >>> reports.support.shape, reports.negative.shape
    ((3, 2), (3, 2))
    >>> round(ss.privacy_loss(), 12)
    2.0
    """

    domain_size: int
    subset_size: int | None = None
    max_epsilon: ClassVar[float] = RR_MAX_EPSILON

    def _validate(self) -> None:
        self._set(
            "domain_size", check_integer(self.domain_size, "domain_size", low=1, high=_MAX_DOMAIN)
        )
        if self.subset_size is not None:
            self._set(
                "subset_size",
                check_integer(self.subset_size, "subset_size", low=1, high=self.domain_size),
            )
        self.law  # noqa: B018 - raises when m e^eps overflows the integer law (names the limit)

    # -- constants ----------------------------------------------------------------------------
    @property
    def effective_subset_size(self) -> int:
        """The m in use: ``subset_size`` or m* (eq. 61)."""
        if self.subset_size is not None:
            return self.subset_size
        return _optimal_m(self.epsilon, self.domain_size)

    @property
    def law(self) -> SignedSubsetLaw:
        """The exact constants of this (epsilon, d, m) (:func:`signed_subset_law`)."""
        return _law(self.epsilon, self.domain_size, self.effective_subset_size)

    @property
    def p(self) -> float:
        """``P[Y_k = v_k]`` at the true coordinate."""
        return self.law.p

    @property
    def q(self) -> float:
        """``P[Y_l = +1 | v_l = 0]`` (= ``P[Y_l = -1 | v_l = 0]``)."""
        return self.law.q

    @property
    def has_support(self) -> bool:
        """Whether reports carry a support bitmap (m < d)."""
        return self.effective_subset_size < self.domain_size

    def variance(self, n: int, f: Any = None) -> Any:
        """Variance of the net-frequency estimate of one coordinate from n reports.

        ``(f (p (1 + e^-eps) - g^2) + (1 - f) 2 q) / (n g^2)`` with f the fraction of users
        whose input is non-zero at that coordinate (default 0, the "Var*" convention of
        frequency oracles). The 2q is exact for random filler signs (WAV25's eq. 117
        states q).
        """
        n = check_integer(n, "n", low=1)
        law = self.law
        f_arr = 0.0 if f is None else check_frequencies(f, self.domain_size)
        per_user = f_arr * law.variance_true + (1.0 - f_arr) * law.variance_other
        return per_user / (n * law.gain**2)

    # -- client ----------------------------------------------------------------------------
    def check_values(self, values: Any) -> np.ndarray:
        """Check the input codes: integers in [0, 2d) (coordinate and sign)."""
        return check_categorical_values(values, 2 * self.domain_size, "values")

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Randomize input codes (``c < d``: +e_c; ``c >= d``: -e_(c-d))."""
        codes = self.check_values(values)
        d = self.domain_size
        negative = codes >= d
        support, signs = _sample(
            codes - d * negative,
            negative,
            d,
            self.effective_subset_size,
            self.law,
            as_generator(rng),
        )
        if self.has_support:
            return Reports(self, negative=signs, support=support)
        return Reports(self, negative=signs)

    # -- server ----------------------------------------------------------------------------
    def _bitmaps(self, reports: Reports) -> tuple[np.ndarray | None, np.ndarray]:
        reports = self.check_reports(reports)
        d, m = self.domain_size, self.effective_subset_size
        neg = check_packed(reports.negative, d, "reports.negative")
        if not self.has_support:
            if "support" in reports.fields:
                raise ValueError("reports must not carry a support bitmap when m = d")
            return None, neg
        sup = check_packed(reports.support, d, "reports.support")
        if sup.shape != neg.shape:
            raise ValueError(f"reports.support must have shape {neg.shape}, got {sup.shape}")
        if np.any(neg & ~sup):
            raise ValueError("reports.negative must only mark coordinates held in reports.support")
        if sup.shape[0] and np.any(np.bitwise_count(sup).sum(axis=1, dtype=np.int64) != m):
            raise ValueError(f"reports.support must have exactly {m} bits set in every row")
        return sup, neg

    def stats_schema(self) -> dict[str, StatsField]:
        """Return the schema: ``sums``, signed column sums, each in [-n, n]."""
        return {"sums": StatsField((self.domain_size,), low=-1.0)}

    def empty_stats(self) -> Stats:
        """Return the Stats of no reports (zero sums)."""
        return Stats(self, 0, sums=np.zeros(self.domain_size, dtype=np.int64))

    def aggregate(self, reports: Reports) -> Stats:
        """``Stats.sums[k] = sum_i Y_i(k)`` (int64)."""
        sup, neg = self._bitmaps(reports)
        n, d = neg.shape[0], self.domain_size
        nonzero = column_counts(sup, d) if sup is not None else np.full(d, n, dtype=np.int64)
        return Stats(self, n, sums=nonzero - 2 * column_counts(neg, d))

    def estimate(self, stats: Stats) -> FrequencyEstimate:
        """Return unbiased net frequencies ``sums / (n p (1 - e^-eps))``, plug-in variance.

        The variance takes f = |estimate| clipped to [0, 1]. Not a distribution: entries lie
        in [-1, 1] and consistency post-processing does not apply.
        """
        stats = self.check_stats(stats, nonempty=True)
        net = stats.sums / (stats.n * self.law.gain)
        var = self.variance(stats.n, np.clip(np.abs(net), 0.0, 1.0))
        return FrequencyEstimate(net, var, stats.n, spec=self)

    # -- exact law (small d) -----------------------------------------------------------------
    def _outputs(self) -> tuple[np.ndarray, np.ndarray]:
        """Return all outputs as (support, negative) integer bitmasks (bit k = coordinate k).

        Sorted by ``support * 2^d + negative``.
        """
        d, m = self.domain_size, self.effective_subset_size
        count = math.comb(d, m) * 2**m
        if 2 * d * count > MAX_DENSE_OUTPUTS:
            raise ValueError(
                f"transition_matrix must have at most {MAX_DENSE_OUTPUTS} entries, got "
                f"{2 * d} x {count}: use a smaller domain_size"
            )
        sup, neg = [], []
        for combo in itertools.combinations(range(d), m):
            s = sum(1 << i for i in combo)
            for signs in range(2**m):
                sup.append(s)
                neg.append(sum(1 << combo[i] for i in range(m) if signs >> i & 1))
        sup_a, neg_a = np.array(sup, dtype=np.int64), np.array(neg, dtype=np.int64)
        order = np.argsort(sup_a * (1 << d) + neg_a)
        return sup_a[order], neg_a[order]

    def _log_output_probabilities(self) -> tuple[float, float, float]:
        """Return log P[y | v] of one output y with ``<y, v>`` = 1, 0 and -1.

        From the sampler's probabilities: the true coordinate's outcome (p, 1 - p (1 +
        e^-eps), p e^-eps) times one uniform choice of the other non-zeros and their signs.
        The middle entry is -inf when m = d (every output is non-zero at the true
        coordinate).
        """
        d, m = self.domain_size, self.effective_subset_size
        law = self.law
        log_rest_in = (
            math.lgamma(d) - math.lgamma(m) - math.lgamma(d - m + 1) + (m - 1) * math.log(2)
        )
        log_one = _log(law.p) - log_rest_in
        log_minus = _log(law.p_flip) - log_rest_in
        if m == d:
            return log_one, -math.inf, log_minus
        log_rest_out = math.lgamma(d) - math.lgamma(m + 1) - math.lgamma(d - m) + m * math.log(2)
        # 1 - P[included] = 2 (d - m) w_lo / denom, from the integers (no cancellation)
        w_hi, w_lo = _weights(self.epsilon, d, m)
        log_zero = _log(2 * (d - m) * w_lo / (m * (w_hi + w_lo) + 2 * (d - m) * w_lo))
        return log_one, log_zero - log_rest_out, log_minus

    def transition_matrix(self) -> np.ndarray:
        """Return ``P[y | v]`` of the sampler, shape (2d, C(d, m) 2^m).

        Rows are input codes, columns outputs in :meth:`output_index` order.

        Built from the sampler's own decomposition (:meth:`_log_output_probabilities`),
        not from eq. 45; the tests check that it equals eq. 45 (``e^eps / Omega`` or
        ``1 / Omega``) and that the sampler follows it.
        """
        d = self.domain_size
        sup, neg = self._outputs()
        log_one, log_zero, log_minus = self._log_output_probabilities()
        codes = np.arange(2 * d)
        k = codes % d
        sign = np.where(codes < d, 1, -1)
        held = (sup[None, :] >> k[:, None]) & 1
        y_k = held * (1 - 2 * ((neg[None, :] >> k[:, None]) & 1))
        inner = y_k * sign[:, None]
        log_p = np.where(inner == 1, log_one, np.where(inner == -1, log_minus, log_zero))
        return np.exp(log_p)

    def output_index(self, reports: Reports) -> np.ndarray:
        """Column of :meth:`transition_matrix` of each report."""
        d = self.domain_size
        sup_bits, neg_bits = self._bitmaps(reports)
        weights = 1 << np.arange(d, dtype=np.int64)
        neg = np.unpackbits(neg_bits, axis=1, count=d).astype(np.int64) @ weights
        if sup_bits is None:
            sup = np.full(neg.shape, (1 << d) - 1, dtype=np.int64)
        else:
            sup = np.unpackbits(sup_bits, axis=1, count=d).astype(np.int64) @ weights
        all_sup, all_neg = self._outputs()
        keys = all_sup * (1 << d) + all_neg
        return np.searchsorted(keys, sup * (1 << d) + neg)

    def privacy_loss(self) -> float:
        """Return the exact epsilon from the sampler's output probabilities.

        It is inf once e^-eps underflows, near eps = 745, as for the other oracles.

        Every output y is at inner product 1 with some input, -1 with its negation and,
        when m < d, 0 with an input on a zero coordinate of y; so the loss is the spread
        of the (two or three) log-probabilities of :meth:`_log_output_probabilities`.
        """
        log_one, log_zero, log_minus = self._log_output_probabilities()
        logs = [log_one, log_minus]
        if self.effective_subset_size < self.domain_size:
            logs.append(log_zero)
        if min(logs) == -math.inf:  # e^-eps underflowed: some output impossible for one input
            return math.inf
        return max(logs) - min(logs)


def _log(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf
