"""Apple's count-mean sketch (CMS) and its Hadamard variant (HCMS), for open domains.

Apple Differential Privacy Team, "Learning with Privacy at Scale", 2017, section 3
(client and server algorithms of CMS and HCMS). A public family of ``depth`` hash
functions ``h_j`` maps items into ``[width]`` (:mod:`._items`); each user draws one row
``j`` uniformly, independently of her item, and reports about ``h_j(item)`` only:

* **CMS**: the one-hot vector of ``h_j(item)`` over ``[width]``, each bit flipped with
  probability ``1 / (1 + e^(eps/2))`` (``width`` bits per report);
* **HCMS**: one uniformly drawn coordinate ``l`` of the Hadamard transform of that one-hot
  vector, the sign ``H[l, h_j(item)]`` flipped with probability ``1 / (1 + e^eps)`` (one
  bit, plus ``j`` and ``l``, per report).

The server keeps a ``depth x width`` integer sketch (independent of n) and estimates any
candidate v after the fact with the count-mean debiasing
``f~(v) = m / (m - 1) (S(v) / n - 1 / m)``, where ``S(v)`` sums every report's unbiased
estimate of the indicator ``[h_j(item) = h_j(v)]`` in its row. ``S(v) / n`` has mean
``f_v + (1 - f_v) / m`` over the draw of the hash family, so ``f~(v)`` is unbiased.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar

import numpy as np

from .. import _crmath, _parallel
from .._constraints import Alternatives, Size
from .._exact import RR_MAX_EPSILON, coin, ratio_loss, rr_probabilities, rr_weights
from .._rng import RNGLike, as_generator, derive_seeds, independent_streams, is_secure
from .._validation import check_memory
from ..spec import Reports, Stats, StatsField
from . import _bits
from ._base import MAX_DENSE_OUTPUTS, index_dtype
from ._cms_sampler import sample_cms_bits, start_cms_bits
from ._open import OpenDomainOracle
from ._unary_sampler import COMPILED_MIN_BITS, start_unary_bits_secure
from .grr import COMPILED_MIN_USERS
from .unary import MAX_ENUMERABLE_BITS, unary_integer_probabilities, unary_privacy_loss

__all__ = ["CMS", "HCMS"]

#: Largest sketch width (CMS sends ``width`` bits per report; HCMS transforms rows of it).
MAX_WIDTH = 1 << 20
#: Largest number of rows (hash functions) of a sketch.
MAX_DEPTH = 1 << 20

_SCALE = 1 << 64
#: Rows of a sketch row's block below which numpy's unpack-and-sum beats the compiled pass.
_SMALL_BLOCK = 2048
#: Batches of at least this many reports use the compiled per-row bit count.
_KERNEL_MIN = 4096
#: From this many users (a list or a 1-D array) CMS draws the coins while it hashes the
#: items (a thread pool's start is paid back many times).
_OVERLAP_MIN_USERS = 1 << 15


@functools.lru_cache(maxsize=256)
def _cms_thresholds(epsilon: float) -> tuple[int, int]:
    # Each bit is binary randomized response at eps/2 (two bits differ between two
    # one-hot vectors): SUE's 64-bit integer thresholds, p rounded down and q up.
    t = _crmath.exp(-epsilon / 2.0)
    return unary_integer_probabilities(1.0 / (1.0 + t), t / (1.0 + t), epsilon)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CMS(OpenDomainOracle):
    """Count-mean sketch (Apple 2017, section 3.1).

    One random hash row per user, ``width`` randomized bits per report, a ``depth x width``
    sketch on the server.

    Parameters
    ----------
    epsilon : float
        Privacy budget, in ``[1e-6, 50]``.
    width : int
        m, the range of each hash function (bits per report), in ``[2, 2^20]``.
        Default 1024 (Apple's choice for its deployments).
    depth : int
        k, the number of public hash functions (sketch rows), in ``[1, 2^20]``. Default 256.
    domain_size : int or None
        None: open domain of strings and integers (estimate needs candidates); d: the
        integers ``0 .. d - 1``.

    Notes
    -----
    **Client.** Item v, row j uniform in ``[k]``, one-hot ``e_{h_j(v)}`` over ``[m]``; each
    bit is 1 with probability p if it is the hashed item's, q otherwise, independently
    (nominally ``p = e^(eps/2) / (1 + e^(eps/2)) = 1 - q``; realized as 64-bit integer
    thresholds, p rounded down, q up, each bit an exact comparison of a uniform 64-bit
    integer with its threshold, drawn bit-sliced two words at a time by
    :mod:`._cms_sampler`; with ``rng=None`` every word is read from the AES-CTR generator,
    :func:`._unary_sampler.sample_unary_bits_secure`). Two one-hot vectors differ in two
    bits, so the loss is
    ``log(p (1 - q) / (q (1 - p))) <= eps`` (``privacy_loss()``, from the realized
    thresholds).

    **Server.** ``ones[j, b]`` counts the reports of row j with bit b set. For a candidate
    v, ``S(v) = (sum_j ones[j, h_j(v)] - q n) / (p - q)`` and
    ``f~(v) = m / (m - 1) (S(v) / n - 1 / m)`` (Apple 2017, Algorithm 3 and the debiasing
    of section 3.1; Apple's row scaling by k cancels in this sum).

    **Variance** (over the noise and the hash family, users' collisions independent):
    ``Var[f~(v)] = (m / (m - 1))^2 / n [f_v s_p + (1 - f_v) ((s_p / m + (1 - 1/m) s_q)
    + (m - 1) / m^2)]`` with ``s_p = p (1 - p) / (p - q)^2`` and ``s_q = q (1 - q) / (p -
    q)^2``; at ``p = 1 - q`` both equal ``(c_eps^2 - 1) / 4``, Apple's
    ``c_eps = (e^(eps/2) + 1) / (e^(eps/2) - 1)`` (section 3.1). The last term is the hash
    collisions' own variance. Items held by many users collide together under a fixed
    family: their share is a fixed offset of mean zero over families, of standard
    deviation about ``sqrt(sum_u f_u^2 / (k m))``, which ``depth`` keeps small.

    References
    ----------
    Apple Differential Privacy Team. Learning with Privacy at Scale. Apple Machine
    Learning Journal, 2017, section 3.1 (CMS).

    Examples
    --------
    >>> cms = CMS(epsilon=4.0, width=64, depth=16)
    >>> reports = cms.randomize(["cat", "dog", "cat", 10**30], rng=0)
    >>> reports.fields, reports.bits.shape
    (('rows', 'bits'), (4, 8))
    >>> est = cms.estimate(cms.aggregate(reports), candidates=["cat", "emu"])
    >>> est.labels, est.frequencies.shape
    (['cat', 'emu'], (2,))
    """

    width: int = 1024
    depth: int = 256
    max_epsilon: ClassVar[float] = 50.0
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "width": [Size(2, MAX_WIDTH)],
        "depth": [Size(1, MAX_DEPTH)],
    }

    def _validate(self) -> None:
        super()._validate()
        self._check_domain_work()
        _cms_thresholds(self.epsilon)  # raises for an epsilon too small to represent

    @property
    def _rows(self) -> int:
        return self.depth

    @property
    def _width(self) -> int:
        return self.width

    @property
    def p(self) -> float:
        """Realized P[bit = 1] for the hashed item's bit."""
        return _cms_thresholds(self.epsilon)[0] / _SCALE

    @property
    def q(self) -> float:
        """Realized P[bit = 1] for every other bit."""
        return _cms_thresholds(self.epsilon)[1] / _SCALE

    def privacy_loss(self) -> float:
        """``log(p (1 - q) / (q (1 - p)))`` at the realized integer thresholds."""
        return unary_privacy_loss(*_cms_thresholds(self.epsilon))

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Report one row index and ``width`` randomized bits per user.

        ``reports.rows``, and ``reports.bits`` packed as ``np.packbits(..., axis=1)``.

        The public row indices and the secret bit coins come from independent streams of
        ``rng``; with a secure generator (``rng=None``) every coin is read from it. From
        2^15 users the coins are drawn while the items are hashed, so a ``Generator``
        passed as ``rng`` has its streams split off even when ``values`` is then refused.
        """
        from ._items import batch_length

        n = batch_length(values)
        # draws beside the keys need a second thread: not where WORKERS allows one only
        if n is not None and n >= _OVERLAP_MIN_USERS and _parallel.workers() > 1:
            gen = as_generator(rng)
            if _parallel.use_compiled(n * self.width, COMPILED_MIN_BITS):  # seeded or secure
                return self._randomize_overlapped(values, n, gen)
            rng = gen
        return self._randomize_keys(self.item_keys(values), rng)

    def _randomize_overlapped(self, values: Any, n: int, gen: np.random.Generator) -> Reports:
        """:meth:`_randomize_keys`'s reports, the coins drawn while the items are hashed.

        A report's coins do not depend on its item (only the hashed item's bit, set last,
        does), so the compiled kernel draws them on threads while this thread computes the
        item keys: the same streams, draws and bytes as the sequential path. (A ``values``
        that item_keys refuses raises after the streams were split off ``gen``.)
        """
        return self._draw(n, lambda: self.item_keys(values), gen, overlap=True)

    def _randomize_keys(self, keys: np.ndarray, rng: RNGLike) -> Reports:
        """:meth:`randomize` of users whose item keys are known (uint64, one per user)."""
        return self._draw(keys.shape[0], lambda: keys, as_generator(rng), overlap=False)

    def _draw(self, n: int, keys_of: Any, gen: np.random.Generator, *, overlap: bool) -> Reports:
        """Draw ``n`` reports; ``keys_of()`` gives their item keys (called once).

        The row stream and the coin stream are split off ``gen`` first, so the bytes do not
        depend on when the keys are computed; with ``overlap`` the compiled coins start on
        threads before ``keys_of()`` runs.
        """
        width = _bits.packed_width(self.width)
        check_memory(
            float(n) * width, f"len(values)={n} at width={self.width}", f"{self.name}.randomize"
        )
        row_stream, coin_stream = independent_streams(gen, 2)
        rows = np.asarray(row_stream.integers(0, self.depth, size=n))
        big, small = _cms_thresholds(self.epsilon)
        out = np.empty((n, width), dtype=np.uint8)
        if is_secure(coin_stream):  # every coin read from the secure generator
            # the coins do not depend on the items: drawn (on threads when compiled)
            # while the items are hashed; each true-item bit is set last
            secure = start_unary_bits_secure(coin_stream, self.width, small, out)
            try:
                hashed = self._hash_users(rows, keys_of())
            except BaseException:  # refused items: the threads end before the error leaves
                secure.cancel()
                raise
            secure.finish(hashed, big)
        else:
            seeds = derive_seeds(coin_stream, n)
            pending = start_cms_bits(seeds, self.width, small, out) if overlap else None
            try:
                hashed = self._hash_users(rows, keys_of())
            except BaseException:  # refused items: the threads end before the error leaves
                if pending is not None:
                    pending.cancel()
                raise
            if pending is not None:
                pending.finish(hashed, big)
            elif n:  # numpy's twin, or no overlap: the coins once the items are known
                sample_cms_bits(hashed, seeds, self.width, big, small, out)
        return Reports(self, rows=rows.astype(index_dtype(self.depth)), bits=out)

    def _hash_users(self, rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
        from ._items import row_hash

        return row_hash(rows, keys, self.width)

    def stats_schema(self) -> dict[str, StatsField]:
        """``ones[j, b]``: reports of row j with bit b set (each in [0, n])."""
        return {"ones": StatsField((self.depth, self.width))}

    def empty_stats(self) -> Stats:
        """Return the Stats of no report (zero arrays): the neutral element of merge."""
        return Stats(self, 0, ones=np.zeros((self.depth, self.width), dtype=np.int64))

    def aggregate(self, reports: Reports) -> Stats:
        """Per-row counts of the bits (a compiled pass for large batches, numpy below)."""
        reports = self.check_reports(reports)
        arrays = reports.arrays
        if set(arrays) != {"rows", "bits"}:
            raise ValueError(f"reports must have fields ('rows', 'bits'), got {reports.fields}")
        rows = self._check_rows(arrays["rows"])
        packed = _bits.check_packed(arrays["bits"], self.width)
        if packed.shape[0] != rows.shape[0]:
            raise ValueError("reports.rows and reports.bits must have one row per user")
        if rows.size >= _KERNEL_MIN:  # one compiled pass over the bytes (numba: server side)
            from ._kernels_sketch import row_bit_counts

            return Stats(self, rows.shape[0], ones=row_bit_counts(rows, packed, *self._shape))
        return Stats(self, rows.shape[0], ones=self._row_counts_numpy(rows, packed))

    @property
    def _shape(self) -> tuple[int, int]:
        return self.depth, self.width

    def _row_counts_numpy(self, rows: np.ndarray, packed: np.ndarray) -> np.ndarray:
        """Per-row bit counts in numpy (small batches; the tests' reference for the kernel)."""
        ones = np.zeros((self.depth, self.width), dtype=np.int64)
        if rows.size:
            order = np.argsort(rows, kind="stable")
            sorted_bits = packed[order]
            bounds = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=self.depth))])
            for j in np.flatnonzero(np.diff(bounds)):  # a loop over used rows, not users
                block = sorted_bits[bounds[j] : bounds[j + 1]]
                if block.shape[0] < _SMALL_BLOCK:  # (the compiled pass has a fixed cost)
                    ones[j] = np.unpackbits(block, axis=1, count=self.width).sum(axis=0)
                else:
                    ones[j] = _bits.column_counts(block, self.width)
        return ones

    def _frequencies(self, stats: Stats, keys: np.ndarray) -> np.ndarray:
        m, n = self.width, stats.n
        p, q = self.p, self.q
        support = self._row_sums(stats.ones, keys)
        s = (support - q * n) / (p - q)
        return m / (m - 1.0) * (s / n - 1.0 / m)

    def variance(self, n: int, f: Any = None) -> Any:
        """Var[f~(v)] from n reports at true frequency f (class Notes; f=None: f = 0).

        Examples
        --------
        >>> import math
        >>> cms = CMS(epsilon=4.0, width=1024, depth=16)
        >>> c = (math.exp(2.0) + 1) / (math.exp(2.0) - 1)  # Apple's c_eps at eps = 4
        >>> apple = (c**2 - 1) / 4
        >>> round(cms.variance(1) / apple, 3)
        1.007
        """
        n, f = self._check_variance_args(n, f)
        m, p, q = self.width, self.p, self.q
        s_p = p * (1.0 - p) / (p - q) ** 2
        s_q = q * (1.0 - q) / (p - q) ** 2
        other = s_p / m + (1.0 - 1.0 / m) * s_q + (m - 1.0) / m**2
        return (m / (m - 1.0)) ** 2 * (f * s_p + (1.0 - f) * other) / n

    def transition_matrix(self, row: int | None = None) -> np.ndarray:
        """Return the exact ``P[bits | v, row]`` of a closed domain, shape (d, 2^width).

        The bits read as a width-bit integer, bit 0 most significant (``width <= 12``).

        ``P[(row, bits) | v] = P[bits | v, row] / depth``, the row being drawn
        independently of v; ``row=None`` raises NotImplementedError (like OLH's seed).
        """
        row = self._check_row_arg(row)
        m, d = self.width, int(self.domain_size or 0)
        if m > MAX_ENUMERABLE_BITS:
            raise NotImplementedError(
                f"{self.name} enumerates its 2^width outputs only for width <= "
                f"{MAX_ENUMERABLE_BITS}, got {m}"
            )
        outputs = np.arange(1 << m)
        bits = (outputs[:, None] >> (m - 1 - np.arange(m))[None, :]) & 1
        hashed = self._hash_users(np.full(d, row), self.item_keys(np.arange(d)))
        p, q = self.p, self.q
        matrix = np.empty((d, 1 << m))
        for v in range(d):  # d rows of a small matrix
            ones = np.full(m, q)
            ones[hashed[v]] = p
            matrix[v] = np.prod(np.where(bits == 1, ones, 1.0 - ones), axis=1)
        return matrix


@dataclasses.dataclass(frozen=True, kw_only=True)
class HCMS(OpenDomainOracle):
    """Hadamard count-mean sketch (Apple 2017, section 3.2).

    One random hash row and one random Hadamard coefficient per user, a single randomized
    sign per report.

    Parameters
    ----------
    epsilon : float
        Privacy budget, in ``[1e-6, 40]``.
    width : int
        m, a power of two in ``[2, 2^20]``: the range of each hash function and the size of
        the Hadamard transform. Default 1024.
    depth : int
        k, the number of public hash functions (sketch rows), in ``[1, 2^20]``. Default 256.
    domain_size : int or None
        None: open domain (estimate needs candidates); d: the integers ``0 .. d - 1``.

    Notes
    -----
    **Client.** Item v, row j and coefficient l uniform; the true sign is
    ``H[l, h_j(v)] = (-1)^popcount(l & h_j(v))`` (Sylvester order), kept with probability
    ``e^eps / (1 + e^eps)`` (exact integer weights of :func:`ldpkit._exact.rr_weights`)
    and flipped otherwise. The report is ``(rows, index, bits)`` with ``bits`` = 1 for a
    +1 sign. ``(j, l)`` do not depend on v, so the loss is that of binary randomized
    response: ``log(w_keep / w_other) <= eps`` (``privacy_loss()``).

    **Server.** ``sums[j, l]``: the sum of the reported signs at ``(j, l)``. With
    ``c = 1 / (2 p - 1)`` (Apple's ``c_eps = (e^eps + 1) / (e^eps - 1)``, at the realized
    keep probability p) and ``T = sums H`` (a fast Walsh-Hadamard transform per row),
    ``S(v) = c sum_j T[j, h_j(v)]`` and ``f~(v) = m / (m - 1) (S(v) / n - 1 / m)`` (Apple
    2017, Algorithms 4-5).

    **Variance** (over the noise and the hash family): every report adds ``c`` times a
    sign, so ``Var[f~(v)] = (m / (m - 1))^2 / n [c^2 - f_v - (1 - f_v) / m^2]``.

    References
    ----------
    Apple Differential Privacy Team. Learning with Privacy at Scale. Apple Machine
    Learning Journal, 2017, section 3.2 (HCMS).

    Examples
    --------
    >>> hcms = HCMS(epsilon=4.0, width=64, depth=16)
    >>> reports = hcms.randomize(["cat", "dog", "cat"], rng=0)
    >>> reports.fields
    ('rows', 'index', 'bits')
    >>> hcms.estimate(hcms.aggregate(reports), candidates=["cat"]).frequencies.shape
    (1,)
    """

    width: int = 1024
    depth: int = 256
    max_epsilon: ClassVar[float] = RR_MAX_EPSILON
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "width": [Size(2, MAX_WIDTH, power_of_two=True)],
        "depth": [Size(1, MAX_DEPTH)],
    }

    def _validate(self) -> None:
        super()._validate()
        self._check_domain_work()
        # aggregate holds about four int64 (depth, width) tables at once (two counts, their
        # difference, the result)
        check_memory(
            32.0 * self.depth * self.width,
            f"width={self.width} at depth={self.depth}",
            f"{self.name}.aggregate",
        )

    @property
    def _rows(self) -> int:
        return self.depth

    @property
    def _width(self) -> int:
        return self.width

    def _weights(self) -> tuple[int, int]:
        return rr_weights(self.epsilon, 1)

    @property
    def p(self) -> float:
        """Realized probability of keeping the true sign: ``w_keep / (w_keep + w_other)``."""
        return rr_probabilities(self.epsilon, 1)[0]

    @property
    def c(self) -> float:
        """``1 / (2 p - 1)``: the scale that makes a reported sign unbiased."""
        w_keep, w_other = self._weights()
        return (w_keep + w_other) / (w_keep - w_other)

    def privacy_loss(self) -> float:
        """``log(w_keep / w_other)`` of the realized binary randomized response."""
        w_keep, w_other = self._weights()
        return ratio_loss(w_other, w_keep)

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Report a row, a Hadamard coefficient and its randomized sign per user.

        ``rows``, ``index`` and ``bits`` (1 for +1); public indices and secret coins come
        from independent streams.
        """
        return self._randomize_keys(self.item_keys(values), rng)

    def _randomize_keys(self, keys: np.ndarray, rng: RNGLike) -> Reports:
        """:meth:`randomize` of users whose item keys are known (uint64, one per user)."""
        from ._items import row_hash

        n = keys.shape[0]
        row_stream, index_stream, coin_stream = independent_streams(as_generator(rng), 3)
        rows = np.asarray(row_stream.integers(0, self.depth, size=n))
        index = np.asarray(index_stream.integers(0, self.width, size=n))
        w_keep, w_other = self._weights()
        total = w_keep + w_other
        if _parallel.use_compiled(n, COMPILED_MIN_USERS):  # the same draws and bits
            from ._kernels_hashing import hadamard_signs

            u = np.asarray(coin_stream.integers(0, total, size=n, dtype=np.int64))
            bits = hadamard_signs(rows, keys, index, u, w_keep, self.width)
        else:
            hashed = row_hash(rows, keys, self.width)
            plus = (np.bitwise_count(index & hashed) & 1) == 0
            keep = coin(coin_stream, n, w_keep, total)
            bits = (plus == keep).astype(np.uint8)
        return Reports(
            self,
            rows=rows.astype(index_dtype(self.depth)),
            index=index.astype(index_dtype(self.width)),
            bits=bits,
        )

    def stats_schema(self) -> dict[str, StatsField]:
        """``sums[j, l]``: the sum of the +-1 signs reported at ``(j, l)`` (in [-n, n])."""
        return {"sums": StatsField((self.depth, self.width), low=-1.0)}

    def empty_stats(self) -> Stats:
        """Return the Stats of no report (zero arrays): the neutral element of merge."""
        return Stats(self, 0, sums=np.zeros((self.depth, self.width), dtype=np.int64))

    def aggregate(self, reports: Reports) -> Stats:
        """Reduce the reports to their mergeable Stats (fields: :meth:`stats_schema`)."""
        reports = self.check_reports(reports)
        arrays = reports.arrays
        if set(arrays) != {"rows", "index", "bits"}:
            raise ValueError(
                f"reports must have fields ('rows', 'index', 'bits'), got {reports.fields}"
            )
        rows = self._check_rows(arrays["rows"])
        index, bits = arrays["index"], arrays["bits"]
        m = self.width
        if index.ndim != 1 or (index.size and (int(index.min()) < 0 or int(index.max()) >= m)):
            raise ValueError(f"reports.index must be coefficients in [0, {m})")
        if bits.ndim != 1 or (bits.size and (int(bits.min()) < 0 or int(bits.max()) > 1)):
            raise ValueError("reports.bits must be signs encoded as 0 or 1")
        cell = rows * m + index.astype(np.int64)
        size = self.depth * m
        plus = np.bincount(cell[bits.astype(bool)], minlength=size)
        total = np.bincount(cell, minlength=size)
        sums = (2 * plus - total).reshape(self.depth, m)
        return Stats(self, rows.shape[0], sums=sums)

    def _frequencies(self, stats: Stats, keys: np.ndarray) -> np.ndarray:
        from .hadamard import fwht

        m, n = self.width, stats.n
        sums = stats.sums
        if n * m >= 1 << 62:  # |entries| <= n m: beyond int64, transform in float64
            sums = sums.astype(np.float64)
        transformed = fwht(sums, axis=1)  # exact in int64 below that
        s = self.c * self._row_sums(transformed, keys)
        return m / (m - 1.0) * (s / n - 1.0 / m)

    def variance(self, n: int, f: Any = None) -> Any:
        """``(m / (m - 1))^2 (c^2 - f - (1 - f) / m^2) / n`` (class Notes; f=None: f = 0).

        Examples
        --------
        >>> import math
        >>> h = HCMS(epsilon=1.0, width=1024)
        >>> round(h.variance(1) / ((math.e + 1) / (math.e - 1)) ** 2, 3)
        1.002
        """
        n, f = self._check_variance_args(n, f)
        m, c = self.width, self.c
        return (m / (m - 1.0)) ** 2 * (c * c - f - (1.0 - f) / m**2) / n

    def transition_matrix(self, row: int | None = None) -> np.ndarray:
        """Return the exact ``P[(index, bit) | v, row]`` of a closed domain, shape (d, 2 width).

        Column ``2 index + bit``. ``P[(row, index, bit) | v]`` is this over ``depth``.
        """
        from ._items import row_hash

        row = self._check_row_arg(row)
        m, d = self.width, int(self.domain_size or 0)
        if d * 2 * m > MAX_DENSE_OUTPUTS:
            raise ValueError(
                f"domain_size * 2 width must be <= {MAX_DENSE_OUTPUTS} for a dense matrix, "
                f"got {d} * {2 * m}"
            )
        hashed = row_hash(np.full(d, row), self.item_keys(np.arange(d)), m)
        index = np.arange(m)
        plus = (np.bitwise_count(index[None, :] & hashed[:, None]) & 1) == 0  # (d, m)
        p = self.p
        matrix = np.empty((d, m, 2))
        matrix[:, :, 1] = np.where(plus, p, 1.0 - p) / m
        matrix[:, :, 0] = np.where(plus, 1.0 - p, p) / m
        return matrix.reshape(d, 2 * m)
