"""RAPPOR: Bloom filters, cohorts, permanent and instantaneous randomized response.

Erlingsson, Pihur and Korolova (CCS 2014); FO17 section 2.3. Each user belongs to one of
``num_cohorts`` cohorts; in cohort c an item v sets the ``num_hashes`` Bloom bits
``H_{c,j}(v)`` of a ``num_bits``-bit filter. The filter goes through the permanent randomized
response (PRR, parameter f) and, optionally, the instantaneous randomized response (IRR,
parameters p and q). The server unbiases the bit counts of every cohort and regresses them
on the candidates' Bloom patterns by least squares (unbiased, the plain estimate); RAPPOR's
LASSO candidate selection is an explicit post-processing (``postprocess="lasso_selection"``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple, NoReturn

import numpy as np

from .. import _crmath
from .._constraints import Alternatives, Check, Ref, Size
from .._rng import RNGLike, as_generator
from .._validation import (
    check_array,
    check_frequencies,
    check_integer,
    check_memory,
    check_probability,
    check_real,
)
from ..estimate import FrequencyEstimate
from ..spec import Reports, Stats, StatsField
from ._base import FrequencyOracle, index_dtype
from ._bits import check_packed, pack_bits, packed_width, unpack_bits

if TYPE_CHECKING:  # scipy loads with the server-side decoding, not with the client
    import scipy.sparse as sp

__all__ = ["RAPPOR", "RAPPORClient", "bloom_positions"]

# Users randomized per block: bounds the temporary (block x num_bits) byte matrices.
_BLOCK = 1 << 15
# Largest output space (num_cohorts * 2**num_bits) for which transition_matrix() is dense.
_MAX_PATTERNS = 1 << 20
# Byte value -> its 8 bits (big-endian, the np.packbits layout).
_BYTE_BITS = unpack_bits(np.arange(256, dtype=np.uint8)[:, None], 8).astype(np.int64)

#: Bit probabilities are multiples of 2^-64 (exact integer thresholds).
_SCALE = 1 << 64

_U64 = np.uint64
_MIX_1 = _U64(0xBF58476D1CE4E5B9)
_MIX_2 = _U64(0x94D049BB133111EB)
_GOLDEN = _U64(0x9E3779B97F4A7C15)
_TWEAK = _U64(0xD1B54A32D192ED03)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """Return the splitmix64 finalizer on a uint64 array (wrapping arithmetic, vectorized)."""
    z = x + _GOLDEN
    z = (z ^ (z >> _U64(30))) * _MIX_1
    z = (z ^ (z >> _U64(27))) * _MIX_2
    return z ^ (z >> _U64(31))


def bloom_positions(items: Any, cohorts: Any, *, num_bits: int, num_hashes: int) -> np.ndarray:
    """Return the public RAPPOR hash: Bloom bit positions of ``items`` in ``cohorts``.

    ``H_{c,j}(v) = splitmix64(splitmix64(v) XOR (c * 2**16 + j) * K) mod num_bits`` with
    ``K = 0xD1B54A32D192ED03`` and 64-bit wrapping arithmetic. It is part of the protocol:
    clients written in other languages must reproduce it bit for bit.

    Parameters
    ----------
    items, cohorts : array_like of int
        Broadcastable non-negative integers (e.g. a grid ``items[None, :]``,
        ``cohorts[:, None]``); two 1-D lists must have the same length (a list of one
        cohort is not stretched over many items: pass the number itself).
    num_bits, num_hashes : int
        Filter size k and number of hash functions h.

    Returns
    -------
    ndarray of int64, shape ``broadcast(items, cohorts).shape + (num_hashes,)``
        Positions in ``[0, num_bits)``; positions of one item may coincide.

    Examples
    --------
    >>> bloom_positions([0, 1], 0, num_bits=128, num_hashes=2).shape
    (2, 2)
    """
    num_bits = check_integer(num_bits, "num_bits", low=1, high=2**62)
    num_hashes = check_integer(num_hashes, "num_hashes", low=1, high=2**16)
    dims = (0, 1, 2, 3, 4)
    items_arr = check_array(items, "items", ndim=dims, integer=True, low=0)
    cohorts_arr = check_array(cohorts, "cohorts", ndim=dims, integer=True, low=0, high=2**47)
    try:
        # One cohort per item: a 1-D list of one stretched over a longer 1-D list is a
        # caller's mismatched lengths, not an intended broadcast.
        if items_arr.ndim == cohorts_arr.ndim == 1 and items_arr.shape != cohorts_arr.shape:
            raise ValueError
        v, c = np.broadcast_arrays(items_arr, cohorts_arr)
    except ValueError:
        raise ValueError(
            f"items and cohorts must have broadcastable shapes (1-D: the same length), got "
            f"{items_arr.shape} and {cohorts_arr.shape}"
        ) from None
    shape = v.shape
    # 1-D arrays throughout: numpy scalars would warn on the (intended) 64-bit wrap-around.
    v = v.reshape(-1).astype(np.uint64)
    c = c.reshape(-1).astype(np.uint64)
    j = np.arange(num_hashes, dtype=np.uint64)
    tweak = ((c[:, None] << _U64(16)) + j) * _TWEAK
    keys = _splitmix64(_splitmix64(v)[:, None] ^ tweak)
    return (keys % _U64(num_bits)).astype(np.int64).reshape(*shape, num_hashes)


class _Design(NamedTuple):
    """Everything the server derives from the public hash for one configuration."""

    positions: np.ndarray  # (m, d, h) Bloom positions of every candidate in every cohort
    matrix: sp.csc_array  # (m*k, d) 0/1: row c*k + i, column v is 1 iff v sets bit i in c
    rows: sp.csr_array  # the same matrix in row-major form (cohort blocks)
    # differences[a, b]: some cohort has items u, v with |B(u) - B(v)| = a, |B(v) - B(u)| = b
    differences: np.ndarray


@functools.lru_cache(maxsize=16)
def _design(d: int, k: int, h: int, m: int) -> _Design:
    pos = bloom_positions(np.arange(d)[None, :], np.arange(m)[:, None], num_bits=k, num_hashes=h)
    rows = (np.arange(m)[:, None, None] * k + pos).ravel()
    cols = np.broadcast_to(np.arange(d)[None, :, None], pos.shape).ravel()
    import scipy.sparse as sp  # server side: the decoding's design matrix

    mat = sp.csr_array((np.ones(rows.size), (rows, cols)), shape=(m * k, d))
    mat.sum_duplicates()
    mat.data[:] = 1.0  # a bit hit by two hashes of one item is still one bit
    diffs = _pair_differences(pos, mat, d, k, h, m)
    diffs.flags.writeable = False
    pos = pos.astype(np.uint16)  # num_bits <= 2**16: positions fit
    pos.flags.writeable = False
    return _Design(pos, mat.tocsc(), mat, diffs)


def _pair_differences(
    pos: np.ndarray, mat: sp.csr_array, d: int, k: int, h: int, m: int
) -> np.ndarray:
    """Return which ``(|B(u) - B(v)|, |B(v) - B(u)|)`` are achievable: a (h+1, h+1) table.

    Over cohorts and ordered item pairs u != v.

    The privacy loss of a pair is ``a ln(p*/q*) + b ln((1-q*)/(1-p*))`` (the bits only u
    sets are best reported 1, those only v sets 0), so (h, h) dominates all others: stop
    as soon as two items with h distinct, disjoint bits turn up.
    """
    seen = np.zeros((h + 1, h + 1), dtype=bool)
    ordered = np.sort(pos, axis=-1)
    weight = 1 + np.count_nonzero(np.diff(ordered, axis=-1), axis=-1)  # (m, d) distinct bits
    for c in range(m):
        # The heaviest 256 items against each other: dense filters of those only.
        top = np.argsort(-weight[c], kind="stable")[:256]
        x = np.zeros((top.size, k), dtype=np.float32)
        x[np.arange(top.size)[:, None], pos[c, top]] = 1.0
        seen |= _block_differences(x, weight[c, top].astype(np.float32), None, h)
        if seen[h, h]:
            return seen
    # Rare (tiny filters): all pairs, in blocks of rows.
    for c in range(m):
        x = mat[c * k : (c + 1) * k].T.toarray().astype(np.float32)  # (d, k)
        w = weight[c].astype(np.float32)
        for start in range(0, d, 256):
            seen |= _block_differences(x, w, np.arange(start, min(start + 256, d)), h)
    return seen


def _block_differences(
    x: np.ndarray, weight: np.ndarray, rows: np.ndarray | None, h: int
) -> np.ndarray:
    """Return the (a, b) table for u in ``rows`` (all when None) and any v != u of ``x``."""
    rows = np.arange(x.shape[0]) if rows is None else rows
    inter = x[rows] @ x.T
    a = np.rint(weight[rows, None] - inter).astype(np.int64)
    b = np.rint(weight[None, :] - inter).astype(np.int64)
    distinct = rows[:, None] != np.arange(x.shape[0])[None, :]
    table = np.bincount((a * (h + 1) + b)[distinct], minlength=(h + 1) ** 2)
    return table.reshape(h + 1, h + 1) > 0


def _bernoulli(rng: np.random.Generator, shape: tuple[int, ...], threshold: int) -> np.ndarray:
    """Independent booleans, each True with probability exactly ``threshold / 2^64``.

    With U a uniform 64-bit integer, ``U < T`` iff its top byte is below ``T >> 56``, or
    equal to it and its low 56 bits are below ``T mod 2^56``: one random byte per draw,
    and an exact 56-bit integer for the 1/256 ties. No float.
    """
    threshold = int(threshold)
    if threshold >= _SCALE:
        return np.ones(shape, dtype=bool)
    level, rest = threshold >> 56, threshold & ((1 << 56) - 1)
    count = math.prod(shape)
    raw = rng.bit_generator.random_raw((count + 7) // 8).view(np.uint8)[:count].reshape(shape)
    out = raw < level
    if rest:
        ties = np.flatnonzero(raw == level)
        low = rng.integers(0, 1 << 56, size=ties.size, dtype=np.int64)
        out.ravel()[ties] = low < rest
    return out


def _log_ratio(big: int, small: int) -> float:
    """``log(big / small)`` of two positive integers (exact ratio, no cancellation)."""
    if small <= 0:
        return math.inf
    return _crmath.log1p((big - small) / small)  # correctly rounded: platform-independent


@functools.lru_cache(maxsize=256)
def _prr_thresholds(epsilon: float, num_hashes: int) -> tuple[int, int]:
    """Return the PRR's integer thresholds ``(T_keep, T_flip)`` over 2^64.

    The PRR's ``1 - f/2`` and ``f/2``, f/2 rounded up (and raised further if needed) so that
    ``log(T_keep / T_flip) <= epsilon / (2h)``.
    """
    budget = epsilon / (2 * num_hashes)
    t = _crmath.exp(-budget)  # correctly rounded: the same thresholds on every platform
    flip = min(max(math.ceil(t / (1.0 + t) * _SCALE), 1), _SCALE // 2)
    while _log_ratio(_SCALE - flip, flip) > budget:
        flip += max(1, flip >> 50)
    return _SCALE - flip, flip


def _irr_thresholds(irr: tuple[float, float] | None) -> tuple[int, int] | None:
    """IRR ``(p, q)`` rounded to the nearest multiples of 2^-64 (as integers)."""
    if irr is None:
        return None
    return round(irr[0] * _SCALE), round(irr[1] * _SCALE)


_INSTANTANEOUS = "None or a pair (p, q) with 0 <= p < q <= 1"


def _check_instantaneous(irr: Any, name: str) -> tuple[float, float]:
    """Return RAPPOR's instantaneous pair ``(p, q)`` as floats, distinct at 2^-64."""
    if isinstance(irr, (str, bytes)) or not isinstance(irr, Sequence) or len(irr) != 2:
        raise TypeError(f"{name} must be {_INSTANTANEOUS}, got {irr!r}")
    p = check_real(irr[0], f"{name}[0] (p)", low=0.0, high=1.0)
    q = check_real(irr[1], f"{name}[1] (q)", low=0.0, high=1.0)
    if not p < q or round(p * _SCALE) >= round(q * _SCALE):
        raise ValueError(
            f"{name} must be {_INSTANTANEOUS} (distinct at 2^-64 resolution), got {irr!r}"
        )
    return (p, q)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RAPPOR(FrequencyOracle):
    r"""RAPPOR over a public candidate list ``{0, ..., domain_size - 1}``.

    A user with item v in cohort c builds the Bloom filter ``B`` with bits
    ``H_{c,1}(v), ..., H_{c,h}(v)`` set (:func:`bloom_positions`), then the permanent
    randomized response keeps each bit w.p. ``1 - f`` and replaces it by a fair coin w.p.
    ``f``: ``P[B'_i = 1] = 1 - f/2`` if ``B_i = 1`` else ``f/2``. With ``instantaneous=(p, q)``
    each report draws ``S_i = 1`` w.p. ``q`` if ``B'_i = 1`` and ``p`` if ``B'_i = 0``
    (Erlingsson et al.'s notation: p belongs to the 0 bits). ``reports.bits`` holds S
    (or B' without IRR) bit-packed, ``reports.cohorts`` the cohort.

    Parameters
    ----------
    epsilon : float
        The longitudinal budget of the permanent randomized response,
        ``epsilon = 2 h ln((1 - f/2) / (f/2))`` (FO17 section 2.3): f is derived from
        epsilon and h. Without IRR this is also exactly the privacy of one report.
    domain_size : int
        Number of candidates d (>= 2); map labels to items with :class:`ldpkit.Encoder`.
    num_bits : int, default 128
        Bloom filter size k (FO17 section 6.2 uses 128).
    num_hashes : int, default 2
        Hash functions h per cohort (FO17 and the RAPPOR deployment use 2).
    num_cohorts : int, default 8
        Cohorts m (FO17 uses 8 and 16).
    instantaneous : (float, float) or None, default None
        IRR probabilities ``(p, q)`` with ``0 <= p < q <= 1`` (RAPPOR's defaults are
        ``(0.5, 0.75)``), or None for no IRR (FO17's one-report setting).

    Notes
    -----
    **Privacy.** A report is the cohort (drawn independently of the item) and k bits that
    are independent given the Bloom filter: a bit set by v is 1 w.p. ``p*``, any other bit
    w.p. ``q*`` (:attr:`p_star`, :attr:`q_star`). For items u, v of one cohort, let a bits
    be set by u only and b by v only (``a, b <= h``). The likelihood ratio of any output
    is a product over those bits, largest when u's bits read 1 and v's read 0:
    ``ln P[y|u]/P[y|v] <= a ln(p*/q*) + b ln((1-q*)/(1-p*))``, with equality at such y.
    :meth:`privacy_loss` is the max over the actual hash patterns, at most
    ``h (ln(p*/q*) + ln((1-q*)/(1-p*)))``.
    Without IRR both logs equal ``eps/(2h)`` and two candidates with disjoint filters exist
    in every realistic configuration, so ``privacy_loss() == epsilon``. With IRR one report
    leaks less (RAPPOR's eps_1; e.g. f = 1/2, (p, q) = (0.5, 0.75), h = 2 gives 1.0743 for
    epsilon = ln 81), while ``epsilon`` remains the bound for any number of reports of the
    same value (eps_infinity), provided the PRR is memoized.

    **Exact sampling**. Every bit probability is an integer threshold over
    2^64 drawn exactly (:func:`_bernoulli`): the PRR's f/2 is rounded up (with
    ``log((1 - f/2) / (f/2)) <= eps / (2h)``), the IRR's p and q to the nearest multiple
    of 2^-64, and :meth:`randomize`'s composed channel to p* down and q* up from the exact
    products. ``p_star``, ``q_star``, the decoder and :meth:`privacy_loss` use these
    realized values. Epsilon is accepted in ``[1e-6, 60]`` (``max_epsilon``).

    **Deployment.** ``randomize`` simulates one fresh report per user: it draws the cohort
    uniformly from ``rng`` and samples each bit from the composed PRR+IRR channel (the same
    distribution as running both stages). A real client must (1) keep its cohort fixed for
    its lifetime, chosen independently of its values (the decoder's unbiasedness rests on
    ``E[N_c] = n_c f``), and (2) draw the PRR once per distinct value and reuse it for
    every later report of that value; otherwise averaging repeated reports defeats the PRR
    and the longitudinal guarantee is lost. :class:`RAPPORClient` keeps that state;
    :meth:`permanent_response` and :meth:`instantaneous_response` are the two stages.

    **Decoding.** Per cohort c with ``n_c`` reports and bit counts ``t_c``,
    ``y_c = (t_c - n_c q*) / (p* - q*)`` is unbiased for the number of users in c whose
    Bloom filter has each bit set. Stacking the cohorts gives ``E[y] = A N`` with the
    0/1 design ``A`` (``m k x d``, candidates' Bloom patterns) and the per-cohort item
    counts N, and ``E[N_c] = n_c f`` given the cohort sizes. The weighted least-squares
    estimate ``f = M^{-1} A^T y``, ``M = sum_c n_c A_c^T A_c`` (weights ``n_c`` are inverse
    to the per-row noise variance) is exactly unbiased whenever ``M`` is invertible, which
    needs ``d <= m k`` at least; this is what :meth:`estimate` returns by default.
    ``postprocess="lasso_selection"`` (RAPPOR's decoder, Erlingsson et al. section 4)
    first solves a non-negative weighted LASSO, refits least squares on the selected
    candidates and keeps the significant ones; it scales to ``d > m k`` but is biased by
    construction (missed items read 0, selected ones absorb their mass), and the estimate
    says so (``postprocessing=("lasso_selection",)``).

    References
    ----------
    Ú. Erlingsson, V. Pihur, A. Korolova. RAPPOR: Randomized Aggregatable
    Privacy-Preserving Ordinal Response. CCS 2014, sections 3 and 4.
    T. Wang, J. Blocki, N. Li, S. Jha. Locally Differentially Private Protocols for
    Frequency Estimation. USENIX Security 2017, sections 2.2-2.3 and 6.2.

    Examples
    --------
    >>> rappor = RAPPOR(epsilon=4.0, domain_size=16)
    >>> reports = rappor.randomize([3] * 600 + [7] * 400, rng=0)
    >>> reports.bits.shape, reports.cohorts.dtype
    ((1000, 16), dtype('uint8'))
    >>> est = rappor.estimate(rappor.aggregate(reports))
    >>> est.unbiased, sorted(est.top(2).tolist())
    (True, [3, 7])
    >>> est = rappor.estimate(rappor.aggregate(reports), postprocess="lasso_selection")
    >>> sorted(est.top(2).tolist())
    [3, 7]
    >>> round(rappor.privacy_loss(), 12)
    4.0
    """

    num_bits: int = 128
    num_hashes: int = 2
    num_cohorts: int = 8
    instantaneous: tuple[float, float] | None = None
    # epsilon is the budget of 2h distinct Bloom bits; when two items' filters share bits
    # (hash collisions, likely with few bits) the exact privacy_loss() is below it.
    exact_epsilon: ClassVar[bool] = False
    #: With h = 1, f/2 = 1/(1 + e^30) is still ~2^20.7 units of 2^-64 (loss within ~1e-6).
    max_epsilon: ClassVar[float] = 60.0
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "num_bits": [Size(1, 1 << 16, small=16)],
        "num_hashes": [Size(1, Ref("num_bits"))],
        "num_cohorts": [Size(1, 1 << 16, small=2)],
        "instantaneous": [
            Check(
                _check_instantaneous,
                _INSTANTANEOUS,
                kind="tuple[float, float]",
                hostile_values=["ab", (0.5,), (0.5, 0.25), (0.1, 2.0), (math.nan, 0.5)],
            ),
            None,
        ],
    }

    def _validate(self) -> None:
        super()._validate()
        # The estimate's design holds every candidate's Bloom positions in every cohort
        # (int64): domain_size = 10**20 passed, then numpy refused the size.
        check_memory(
            8.0 * self.num_cohorts * self.domain_size * self.num_hashes,
            f"domain_size={self.domain_size}, num_cohorts={self.num_cohorts}, "
            f"num_hashes={self.num_hashes}",
            "RAPPOR's candidate design (estimate)",
        )

    # -- the protocol's constants ----------------------------------------------------------
    @property
    def _prr(self) -> tuple[float, float]:
        """Realized (1 - f/2, f/2): the integer thresholds of :meth:`_prr_thresholds` / 2^64."""
        keep, flip = _prr_thresholds(self.epsilon, self.num_hashes)
        return keep / _SCALE, flip / _SCALE

    def _thresholds(self) -> tuple[int, int]:
        """``(T_p*, T_q*)``: the composed PRR+IRR channel's bit probabilities over 2^64.

        Exact products of the stages' integer thresholds, p* rounded down and q* up (so
        the loss can only shrink); without IRR they are the PRR's ``(T_keep, T_flip)``.
        """
        keep, flip = _prr_thresholds(self.epsilon, self.num_hashes)
        irr = _irr_thresholds(self.instantaneous)
        if irr is None:
            return keep, flip
        p, q = irr
        # P[S = 1 | Bloom bit set] = keep q + flip p; unset: flip q + keep p (over 2^128)
        big = (keep * q + flip * p) >> 64
        small = -((-(flip * q + keep * p)) >> 64)
        return big, small

    @property
    def f(self) -> float:
        """The PRR parameter f: ``f/2 = 1 / (1 + exp(epsilon / (2h)))``."""
        return 2.0 * self._prr[1]

    def _channel(self) -> tuple[float, float, float, float]:
        """Return ``(p*, 1 - p*, q*, 1 - q*)`` of the composed per-bit channel as sampled.

        Each complement comes from its integer (no cancellation when p* is close to 1).
        """
        big, small = self._thresholds()
        return big / _SCALE, (_SCALE - big) / _SCALE, small / _SCALE, (_SCALE - small) / _SCALE

    @property
    def p_star(self) -> float:
        """P[reported bit = 1 | the item sets that Bloom bit]."""
        return self._channel()[0]

    @property
    def q_star(self) -> float:
        """P[reported bit = 1 | the item does not set that Bloom bit]."""
        return self._channel()[2]

    @property
    def _gap(self) -> float:
        """p* - q* (~ ``tanh(eps / (4h)) (q - p)``), exact from the integer thresholds."""
        big, small = self._thresholds()
        return (big - small) / _SCALE

    @property
    def _design(self) -> _Design:
        return _design(self.domain_size, self.num_bits, self.num_hashes, self.num_cohorts)

    def design_matrix(self) -> sp.csc_array:
        """Return the decoder's 0/1 design (``num_cohorts * num_bits`` x ``domain_size``, sparse).

        Row ``c * num_bits + i``, column v is 1 iff item v sets bit i in cohort c.
        """
        return self._design.matrix.copy()

    def privacy_loss(self) -> float:
        """Return the exact epsilon of one report.

        The max over cohorts and ordered candidate pairs (u, v) of
        ``a ln(p*/q*) + b ln((1-q*)/(1-p*))``, where u sets a Bloom bits v does not and v
        sets b bits u does not.
        """
        big, small = self._thresholds()
        a, b = np.nonzero(self._design.differences)
        if a.size == 0 or not (a.max() > 0 or b.max() > 0):
            return 0.0
        # a bits set only by u (best reported 1), b bits set only by v (best reported 0);
        # both logs from the exact integer ratios of the sampled probabilities.
        one = _log_ratio(big, small)
        zero = _log_ratio(_SCALE - small, _SCALE - big)
        return float(np.max(a * one + b * zero))

    def longitudinal_privacy_loss(self) -> float:
        """Return the exact epsilon of the memoized PRR (any number of reports of one value).

        ``D * eps / (2h)``; equals ``epsilon`` when two candidates can differ in 2h bits.
        """
        a, b = np.nonzero(self._design.differences)
        most = int(np.max(a + b)) if a.size else 0
        keep, flip = _prr_thresholds(self.epsilon, self.num_hashes)
        return most * _log_ratio(keep, flip)

    # -- client ----------------------------------------------------------------------------
    def hash_positions(self, values: Any, cohorts: Any) -> np.ndarray:
        """Bloom bit positions (int64, shape (n, num_hashes)) of ``values`` in ``cohorts``."""
        v = self.check_values(values)
        c = self._check_cohorts(cohorts, v.size, "cohorts")
        return np.asarray(self._design.positions[c, v], dtype=np.int64)

    def _check_cohorts(self, cohorts: Any, n: int, name: str) -> np.ndarray:
        c = np.asarray(cohorts)
        if c.ndim == 0:
            c = c.reshape(1)
        m = self.num_cohorts
        if c.dtype.kind not in "iu" or c.shape != (n,):
            raise ValueError(
                f"{name} must be a 1-D integer array of {n} cohorts in [0, {m}), "
                f"got dtype {c.dtype} and shape {c.shape}"
            )
        if c.size and (int(c.min()) < 0 or int(c.max()) >= m):
            raise ValueError(
                f"{name} must be cohorts in [0, {m}), got {int(c.min())}..{int(c.max())}"
            )
        return c.astype(np.int64, copy=False)

    def _sample(
        self,
        values: np.ndarray,
        cohorts: np.ndarray,
        p_set: int,
        p_unset: int,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Sample packed bits.

        Bloom bits of (value, cohort) are 1 w.p. p_set / 2^64, others w.p. p_unset / 2^64
        (integer thresholds).
        """
        n, k = values.size, self.num_bits
        out = np.empty((n, packed_width(k)), dtype=np.uint8)
        positions = self._design.positions
        for start in range(0, n, _BLOCK):
            stop = min(start + _BLOCK, n)
            bits = _bernoulli(rng, (stop - start, k), p_unset)
            pos = positions[cohorts[start:stop], values[start:stop]]
            rows = np.arange(stop - start)[:, None]
            # Fresh draws overwrite the Bloom positions (a position hit twice is drawn twice,
            # the last draw stays: still one Bernoulli(p_set) bit).
            bits[rows, pos] = _bernoulli(rng, pos.shape, p_set)
            out[start:stop] = pack_bits(bits)
        return out

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """One fresh report per user: a uniform cohort and the PRR(+IRR) bits.

        Each bit is drawn from the composed channel (``p*`` for the user's Bloom bits,
        ``q*`` for the others), which is the distribution of PRR followed by IRR. See the
        class Notes for the state a real client must keep.
        """
        v = self.check_values(values)
        gen = as_generator(rng)
        cohorts = gen.integers(0, self.num_cohorts, size=v.size)
        bits = self._sample(v, cohorts, *self._thresholds(), gen)
        return Reports(self, bits=bits, cohorts=cohorts.astype(index_dtype(self.num_cohorts)))

    def permanent_response(self, values: Any, cohorts: Any, *, rng: RNGLike = None) -> np.ndarray:
        """Return the PRR stage: packed bits B' (shape (n, ceil(k/8))) of ``values`` in ``cohorts``.

        Draw it once per (client, value), keep it secret on the client, and feed it to
        :meth:`instantaneous_response` for every report of that value.
        """
        v = self.check_values(values)
        c = self._check_cohorts(cohorts, v.size, "cohorts")
        keep, flip = _prr_thresholds(self.epsilon, self.num_hashes)
        return self._sample(v, c, keep, flip, as_generator(rng))

    def instantaneous_response(
        self, permanent_bits: Any, cohorts: Any, *, rng: RNGLike = None
    ) -> Reports:
        """Return the IRR stage: Reports from memoized PRR bits (a copy of them when IRR is off)."""
        packed = check_packed(np.asarray(permanent_bits), self.num_bits, "permanent_bits")
        c = self._check_cohorts(cohorts, packed.shape[0], "cohorts")
        gen = as_generator(rng)
        if self.instantaneous is None:
            bits = packed.copy()
        else:
            p, q = _irr_thresholds(self.instantaneous)  # type: ignore[misc]
            prr = unpack_bits(packed, self.num_bits).astype(bool)
            ones, zeros = _bernoulli(gen, prr.shape, q), _bernoulli(gen, prr.shape, p)
            bits = pack_bits(np.where(prr, ones, zeros))
        return Reports(self, bits=bits, cohorts=c.astype(index_dtype(self.num_cohorts)))

    # -- server ----------------------------------------------------------------------------
    def stats_schema(self) -> dict[str, StatsField]:
        """``bit_counts`` (cohort x bit, each in [0, n]); ``cohort_counts`` (sum n)."""
        m, k = self.num_cohorts, self.num_bits
        return {"bit_counts": StatsField((m, k)), "cohort_counts": StatsField((m,), total=1)}

    def empty_stats(self) -> Stats:
        """Return the Stats of no report (zero arrays): the neutral element of merge."""
        m, k = self.num_cohorts, self.num_bits
        return Stats(
            self,
            0,
            bit_counts=np.zeros((m, k), dtype=np.int64),
            cohort_counts=np.zeros(m, dtype=np.int64),
        )

    def aggregate(self, reports: Reports) -> Stats:
        """Per-cohort report counts and per-cohort counts of 1s in every bit position."""
        reports = self.check_reports(reports)
        bits = check_packed(reports.bits, self.num_bits, "reports.bits")
        cohorts = self._check_cohorts(reports.cohorts, bits.shape[0], "reports.cohorts")
        m, k = self.num_cohorts, self.num_bits
        width = packed_width(k)
        counts = np.zeros((m, 8 * width), dtype=np.int64)
        # One bincount of (cohort, byte value) per byte column, then a 256 x 8 lookup:
        # O(n) per column, no sorting and no unpacking of n x k bits.
        key = cohorts * 256
        for j in range(width):
            hist = np.bincount(key + bits[:, j], minlength=256 * m).reshape(m, 256)
            counts[:, 8 * j : 8 * j + 8] = hist @ _BYTE_BITS
        return Stats(
            self,
            bits.shape[0],
            bit_counts=counts[:, :k],
            cohort_counts=np.bincount(cohorts, minlength=m).astype(np.int64),
        )

    def estimate(
        self,
        stats: Stats,
        *,
        postprocess: Literal["lasso_selection"] | None = None,
        alpha: float = 0.05,
    ) -> FrequencyEstimate:
        """Frequencies of all candidates, with per-candidate variance.

        Parameters
        ----------
        stats : Stats
            Aggregated (and possibly merged) statistics of this spec.
        postprocess : {None, "lasso_selection"}
            None (default): least squares over all candidates, unbiased; needs a design of
            full column rank (``domain_size <= num_cohorts * num_bits`` and no two
            candidates with identical patterns in every cohort).
            ``"lasso_selection"`` (RAPPOR's decoder, biased): a non-negative LASSO selects
            candidates, least squares on the selected ones gives their estimates (keeping
            only the significant ones), the others read 0.
        alpha : float
            Significance level of the selection (``"lasso_selection"`` only), with
            ``z = Phi^{-1}(1 - alpha / d)``. The LASSO penalty of candidate v is
            ``lambda_v = z * sigma0 * sqrt(M_vv)``, where ``sigma0^2 M_vv`` is the variance of
            its regression score ``(A^T y)_v`` when its bits are noise only: at the all-zero
            point a null candidate enters with probability alpha / d, so under the global
            null anything is selected with probability at most about alpha. After the
            least-squares refit, candidates with ``f_v <= z * std_error_v`` are dropped and
            the rest refitted until all pass (RAPPOR's Bonferroni-corrected test at
            0.05 / d; FO17 section 6.2's threshold with alpha = 0.05).

        Notes
        -----
        Variances come from the least-squares covariance on the fitted set S,
        ``M_S^{-1} (A_S^T V A_S) M_S^{-1}``, with the per-row variance V estimated from the
        observed bit counts, plus the first-order (delta-method) variance from the random
        assignment of users to cohorts, evaluated at the clipped estimate; they ignore the
        randomness of the selection itself. A candidate LASSO left out gets the variance
        it would have if it were added to S, under noise-only bits
        (``sigma0^2 / (M_vv - M_vS M_S^{-1} M_Sv)``): its error bar says how large its
        frequency could be while reading 0.
        """
        stats = self.check_stats(stats, nonempty=True)
        if postprocess not in (None, "lasso_selection"):
            raise ValueError(f"postprocess must be None or 'lasso_selection', got {postprocess!r}")
        alpha = check_probability(alpha, "alpha")
        mat = self._design.matrix
        d, k = self.domain_size, self.num_bits
        p1, p0, q1, q0 = self._channel()
        gap = self._gap
        n_c = np.asarray(stats.cohort_counts, dtype=np.float64)
        t = np.asarray(stats.bit_counts, dtype=np.float64)
        y = ((t - n_c[:, None] * q1) / gap).ravel()
        w = np.repeat(n_c, k)
        score = mat.T @ y  # (A^T y)_v: E = M f
        # Plug-in per-row variance: q*(1-q*) per report plus the excess of the users whose
        # Bloom bit is set (estimated by y, clipped to [0, n_c]).
        row_var = (w * q1 * q0 + (p1 * p0 - q1 * q0) * np.clip(y, 0.0, w)) / gap**2
        if postprocess is None:
            support = np.arange(d)
            if d > np.count_nonzero(w):  # rank <= rows with reports: no d x d matrix needed
                _rank_error(d)
            gram = _gram(mat, w, support)
            _check_full_rank(gram, d)
            freq, var_s = self._fit(support, gram, score, row_var, stats.n)
        else:
            sigma0 = math.sqrt(q1 * q0) / gap
            from scipy import stats as _sps

            z = float(_sps.norm.isf(alpha / d))
            diag = mat.T @ w
            support = _nonnegative_lasso(mat, w, score, z * sigma0 * np.sqrt(diag), diag)
            # Refit by least squares and keep the significant candidates only, until all
            # are (Erlingsson et al. section 4: Bonferroni-corrected p-values of the fit).
            while True:
                gram = _gram(mat, w, support)
                freq, var_s = self._fit(support, gram, score, row_var, stats.n)
                keep = freq[support] > z * np.sqrt(var_s)
                if keep.all():
                    break
                support = support[keep]
        var = np.empty(d)
        var[support] = var_s
        rest = np.setdiff1d(np.arange(d), support)
        if rest.size:
            var[rest] = _added_variance(mat, w, support, rest, gram, q1 * q0 / gap**2)
        post = ("lasso_selection",) if postprocess else ()
        return FrequencyEstimate(freq, var, stats.n, spec=self, postprocessing=post)

    def _fit(
        self, support: np.ndarray, gram: np.ndarray, score: np.ndarray, row_var: np.ndarray, n: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Least squares on ``support``: all frequencies (0 off it) and the support's variances."""
        freq = np.zeros(self.domain_size)
        if not support.size:
            return freq, np.zeros(0)
        freq[support] = _solve(gram, score[support])
        clipped = np.clip(freq, 0.0, None)
        total = clipped.sum()
        plug_in = clipped / total if total > 0 else clipped
        return freq, self._ls_variance(support, row_var, plug_in, n, gram)

    def _ls_variance(
        self,
        support: np.ndarray,
        row_var: np.ndarray,
        freq: np.ndarray,
        n: float,
        gram: np.ndarray,
    ) -> np.ndarray:
        """Diagonal of the covariance of ``M_S^{-1} A_S^T y`` (frequency units).

        Bit noise: ``P A_S^T diag(V) A_S P`` with ``P = M_S^{-1}``. Cohort assignment: to
        first order ``f_S - f = P sum_u (G_{c_u}[S, v_u] - G_{c_u}[S, S] f_S)`` with
        ``G_c = A_c^T A_c`` and each user's cohort uniform, so the term is
        ``sum_v N_v Var_c(P (G_c[S, v] - G_c[S, S] f_S))``.
        """
        design = self._design
        k, m = self.num_bits, self.num_cohorts
        a_s = design.matrix[:, support].toarray()  # (m k, s)
        try:
            p_mat = np.linalg.inv(gram)
        except np.linalg.LinAlgError:
            return np.full(support.size, np.inf)
        pa = p_mat @ a_s.T  # (s, m k)
        var = (pa**2) @ row_var
        held = np.flatnonzero(freq > 0)
        if held.size and m > 1:
            n_held = n * freq[held]  # users holding each item
            f_s = freq[support]
            first = np.zeros(support.size)
            mean_q = np.zeros((support.size, held.size))
            for c in range(m):
                block = slice(c * k, (c + 1) * k)
                a_c = design.rows[block][:, held].toarray()  # (k, |held|)
                u_c = a_c - (a_s[block] @ f_s)[:, None]
                q_c = pa[:, block] @ u_c  # (s, |held|)
                first += (q_c**2) @ n_held
                mean_q += q_c
            mean_q /= m
            var += np.maximum(first / m - (mean_q**2) @ n_held, 0.0)
        return var

    def variance(self, n: int, f: Any = None) -> Any:
        """Variance of the least-squares frequency estimates (the plain estimate).

        Parameters
        ----------
        n : int
            Number of reports (cohorts of n / m each).
        f : array_like, shape (d,), or scalar, optional
            True frequencies. With None, the variance at f = 0 (noise-only bits), averaged
            over candidates: a scalar comparable to FO17's Var*. Pass ``np.zeros(d)`` for
            the per-candidate values.

        Returns
        -------
        float or ndarray of shape (d,)
            The bit-noise covariance ``M^{-1} A^T V A M^{-1}`` with ``M = (n/m) A^T A`` and
            ``V_{c,i} = (n/m) (q*(1-q*) + (p*(1-p*) - q*(1-q*)) (A_c f)_i) / (p* - q*)^2`` is
            exact given cohorts of n/m users; the cohort-assignment term is first order in
            1/n (see :meth:`estimate`). ``inf`` when the design lacks full column rank.
        """
        n = check_integer(n, "n", low=1)
        d, m = self.domain_size, self.num_cohorts
        scalar = f is None
        freq = np.zeros(d) if f is None else np.broadcast_to(check_frequencies(f, d), (d,))
        design = self._design
        mat = design.matrix
        n_c = np.full(m, n / m)
        w = np.repeat(n_c, self.num_bits)
        support = np.arange(d)
        try:
            if d > m * self.num_bits:
                raise ValueError("more candidates than regression rows")
            gram = _gram(mat, w, support)
            _check_full_rank(gram, d)
        except ValueError:
            return math.inf if scalar else np.full(d, np.inf)
        p1, p0, q1, q0 = self._channel()
        row_var = w * (q1 * q0 + (p1 * p0 - q1 * q0) * (mat @ freq)) / self._gap**2
        var = self._ls_variance(support, row_var, np.clip(freq, 0.0, None), n, gram)
        return float(var.mean()) if scalar else var

    # -- enumerable output space (tiny configurations) ---------------------------------------
    def transition_matrix(self) -> np.ndarray:
        """Return the exact ``P[(cohort, bits) | item]``.

        Shape (d, m 2^k), column ``c 2^k + b`` with b the bits read as a big-endian integer
        (first bit most significant).
        """
        k, m, d = self.num_bits, self.num_cohorts, self.domain_size
        if m << k > _MAX_PATTERNS or d * (m << k) > 1 << 24:
            raise NotImplementedError(
                f"{self.name} enumerates num_cohorts * 2**num_bits outputs; only for tiny "
                f"configurations (<= {_MAX_PATTERNS} outputs), got {m} * 2**{k}"
            )
        p1, p0, q1, q0 = self._channel()
        patterns = (np.arange(1 << k)[:, None] >> np.arange(k - 1, -1, -1)) & 1  # (2^k, k)
        bloom = self._design.matrix.toarray().reshape(m, k, d).transpose(0, 2, 1) > 0
        probs = np.where(
            bloom[:, :, None, :],  # (m, d, 1, k)
            np.where(patterns == 1, p1, p0)[None, None],
            np.where(patterns == 1, q1, q0)[None, None],
        ).prod(axis=3)  # (m, d, 2^k)
        return probs.transpose(1, 0, 2).reshape(d, m << k) / m

    def output_index(self, reports: Reports) -> np.ndarray:
        """Return the column of :meth:`transition_matrix` that each report is."""
        reports = self.check_reports(reports)
        k = self.num_bits
        bits = unpack_bits(check_packed(reports.bits, k, "reports.bits"), k).astype(np.int64)
        cohorts = self._check_cohorts(reports.cohorts, bits.shape[0], "reports.cohorts")
        return (cohorts << k) + bits @ (1 << np.arange(k - 1, -1, -1))


# -- decoding helpers ------------------------------------------------------------------------
def _gram(mat: sp.csc_array, w: np.ndarray, support: np.ndarray) -> np.ndarray:
    """``M_S = A_S^T diag(w) A_S`` as a dense matrix."""
    if not support.size:
        return np.zeros((0, 0))
    import scipy.sparse as sp

    a_s = mat[:, support]
    return np.asarray((a_s.T @ sp.diags_array(w) @ a_s).toarray())


def _check_full_rank(gram: np.ndarray, d: int) -> None:
    """Raise unless the PSD ``gram`` is numerically invertible.

    A Cholesky pivot squared bounds the smallest eigenvalue from above, so a pivot at
    rounding level (or a failed factorization) proves (near) rank deficiency; an exact
    linear dependency among 0/1 design columns always produces one.
    """
    scale = float(np.max(np.diag(gram))) if d else 0.0
    try:
        factor = np.linalg.cholesky(gram)
        deficient = scale <= 0 or float(np.min(np.diag(factor))) ** 2 <= 1e-10 * scale
    except np.linalg.LinAlgError:
        deficient = True
    if deficient:
        _rank_error(d)


def _rank_error(d: int) -> NoReturn:
    raise ValueError(
        f"the unbiased least-squares estimate needs a design of full column rank for the {d} candidates "
        "(at most num_cohorts * num_bits of them, no two with identical Bloom patterns in "
        "every cohort, no empty cohorts that break it); use postprocess='lasso_selection'"
    )


def _solve(gram: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.solve(gram, rhs)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(gram, rhs, rcond=None)[0]


def _nonnegative_lasso(
    mat: sp.csc_array,
    w: np.ndarray,
    score: np.ndarray,
    penalty: np.ndarray,
    diag: np.ndarray,
    *,
    max_sweeps: int = 10_000,
) -> np.ndarray:
    """Support of ``argmin_{f >= 0} f^T M f / 2 - score^T f + penalty^T f``, ``M = A^T W A``.

    Coordinate descent on a working set (as glmnet does): solve the problem restricted to
    the working set, recheck the optimality condition ``score_v - (M f)_v <= penalty_v``
    of every candidate at zero with one sparse product, and add the worst violators, at
    most as many as the working set already holds (at least 16). Adding them all at once
    would not do: before the heavy items are fitted, every candidate sharing a few of
    their bits violates the condition, which with many candidates means thousands.
    """
    d = score.size
    f = np.zeros(d)
    grad = score.copy()  # score - M f
    active = np.zeros(0, dtype=np.int64)
    tol = 1e-10 * max(float(np.max(np.abs(score))), 1e-300)
    usable = diag > 0
    scale = np.sqrt(np.where(usable, diag, 1.0))
    for _ in range(1000):
        violators = np.flatnonzero(usable & (f == 0) & (grad > penalty * (1 + 1e-9)))
        violators = np.setdiff1d(violators, active)
        if violators.size == 0:
            break
        room = max(16, active.size)
        if violators.size > room:
            excess = (grad[violators] - penalty[violators]) / scale[violators]
            violators = violators[np.argpartition(-excess, room - 1)[:room]]
        active = np.union1d(active[f[active] > 0], violators)
        gram = _gram(mat, w, active)
        g = grad[active].copy()
        fa = f[active].copy()
        pen = penalty[active]
        dg = np.diag(gram).copy()
        for _sweep in range(max_sweeps):
            biggest = 0.0
            for i in range(active.size):
                new = max(0.0, fa[i] + (g[i] - pen[i]) / dg[i])
                step = new - fa[i]
                if step != 0.0:
                    g -= step * gram[i]  # gram is symmetric: a row is a column
                    fa[i] = new
                    biggest = max(biggest, abs(step) * dg[i])
            if biggest <= tol:
                break
        f[active] = fa
        grad = score - mat.T @ (w * (mat @ f))
    return np.flatnonzero(f > 0)


def _added_variance(
    mat: sp.csc_array,
    w: np.ndarray,
    support: np.ndarray,
    rest: np.ndarray,
    gram: np.ndarray,
    sigma2: float,
) -> np.ndarray:
    """Return the variance of candidate v's least-squares estimate if v joined S.

    Under noise-only rows (Cov(A^T y) = sigma2 M): ``sigma2 / (M_vv - M_vS M_S^{-1} M_Sv)``.
    """
    diag = mat[:, rest].T @ w
    if support.size:
        import scipy.sparse as sp

        cross = np.asarray((mat[:, support].T @ sp.diags_array(w) @ mat[:, rest]).toarray())
        try:
            sol = np.linalg.solve(gram, cross)
        except np.linalg.LinAlgError:
            sol = np.linalg.lstsq(gram, cross, rcond=None)[0]
        schur = diag - np.sum(cross * sol, axis=0)
    else:
        schur = diag
    out = np.full(rest.size, np.inf)
    ok = schur > 1e-9 * np.maximum(diag, 1e-300)
    out[ok] = sigma2 / schur[ok]
    return out


class RAPPORClient:
    """One client's RAPPOR state: a fixed cohort and a memoized PRR per value.

    The longitudinal guarantee (``epsilon`` for any number of reports) holds only if the
    PRR of a value is drawn once and reused, and the cohort never changes; this object
    does both in memory. A deployment must persist ``cohort`` and the memo (or a secret
    from which they are re-derived) across restarts, keep them on the device, and use an
    unpredictable generator (:func:`ldpkit.secure_generator`).

    Parameters
    ----------
    spec : RAPPOR
        The protocol configuration.
    cohort : int, optional
        The client's cohort; drawn uniformly from ``rng`` when omitted.
    rng : Generator, int, SeedSequence or None
        Source of the cohort, the PRR and the IRR draws.

    Examples
    --------
    >>> client = RAPPORClient(RAPPOR(epsilon=2.0, domain_size=10), rng=0)
    >>> a, b = client.report(3), client.report(3)
    >>> bool((a.bits == b.bits).all())  # no IRR: the memoized PRR is sent again
    True
    """

    def __init__(self, spec: RAPPOR, *, cohort: int | None = None, rng: RNGLike = None) -> None:
        if not isinstance(spec, RAPPOR):
            raise TypeError(f"spec must be a RAPPOR spec, got {type(spec).__name__}")
        self.spec = spec
        self._rng = as_generator(rng)
        if cohort is None:
            cohort = int(self._rng.integers(0, spec.num_cohorts))
        self.cohort = check_integer(cohort, "cohort", low=0, high=spec.num_cohorts - 1)
        self._memo: dict[int, np.ndarray] = {}

    def permanent_bits(self, value: int) -> np.ndarray:
        """Return the memoized PRR (packed, shape (1, ceil(k/8))) of ``value``."""
        item = int(self.spec.check_values(np.asarray([value]))[0])
        if item not in self._memo:
            bits = self.spec.permanent_response([item], [self.cohort], rng=self._rng)
            bits.flags.writeable = False
            self._memo[item] = bits
        return self._memo[item]

    def report(self, value: int) -> Reports:
        """One report (a single-row Reports) of ``value``: IRR applied to its memoized PRR."""
        return self.spec.instantaneous_response(
            self.permanent_bits(value), [self.cohort], rng=self._rng
        )
