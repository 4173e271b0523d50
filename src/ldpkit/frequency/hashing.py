"""Local hashing frequency oracles: binary (BLH) and optimized (OLH), FO17 sections 4.4-4.5.

Each user draws a fresh hash function ``h: [d] -> [g]`` (named by a 64-bit seed), hashes
her item and reports ``(seed, y)`` where ``y`` is generalized randomized response over
``[g]`` applied to ``h(item)``. A report supports every item that ``h`` maps to ``y``.

The hash family
---------------
A seed ``s`` names the pair ``a = mix(s + gamma) | 1``, ``b = mix(s + 2 gamma)``, where
``mix`` is the splitmix64 finalizer and ``gamma = 0x9E3779B97F4A7C15``. An item
``v < 2^32`` hashes to::

    x   = (a * v + b) mod 2^64          # multiply-add on 64-bit words
    h32 = x >> 32                       # Dietzfelbinger's strongly universal family
    h   = (h32 * g) >> 32               # range reduction onto [g]

* With ``(a, b)`` uniform over 64-bit words, ``h32`` is *strongly universal* (pairwise
  independent and uniform) on 32 bits for inputs below ``2^32`` (Dietzfelbinger 1996,
  multiply-add-shift with word size 64 >= 32 + 32 - 1). Forcing ``a`` odd keeps this:
  for ``0 < |v - v'| < 2^32`` the proof needs bits 32..63 of ``a (v - v') mod 2^64`` to be
  uniform and independent of bits 0..31, and those bits come from bits of ``a`` above
  bit 0, which stay independent and uniform.
* The range reduction gives each of the ``g`` buckets ``floor(2^32/g)`` or
  ``ceil(2^32/g)`` of the ``2^32`` values of ``h32``, so ``|P[h(v) = j] - 1/g| < 2^-32``,
  and ``(h(v), h(v'))`` is distributed as the product of these marginals. The collision
  probability is ``1/g + delta`` with ``delta = r (g - r) / (g 2^64) <= g / 2^66``, where
  ``r = 2^32 mod g``; ``delta = 0`` when ``g`` is a power of two (BLH in particular).
* ``(a, b)`` are a fixed bijective mix of a 64-bit seed, not 128 independent random bits,
  so the statements above hold in the usual pseudorandom sense; the tests check
  uniformity and pairwise independence empirically.

What this affects:

* **Privacy: nothing.** The seed is drawn independently of the item, and for *any* seed
  ``y`` is GRR over ``[g]`` of ``h(v)``, so ``P[(s, y) | v] / P[(s, y) | v'] <= e^eps``
  whatever the hash function is (FO17 Theorem 7).
* ``p* = P[y = h(v) | v]`` is exactly the GRR keep probability, for any hash.
* ``q* = P[y = h(v) | v' != v] = 1/g + delta (p - q')``. The estimator uses ``q* = 1/g``,
  so its bias is ``(1 - f_v) delta g / (g - 1) <= 2 delta``: zero for ``g`` a power of two,
  below ``3e-17`` for ``g <= 1000`` and below ``2^-33 < 1.2e-10`` for every allowed ``g``.

Mixed item keys (``OLH(mix_items=True)``)
-----------------------------------------
The family is pairwise independent but not 3-wise: for a user holding ``x``, the events
``h(u) = h(x)`` and ``h(v) = h(x)`` correlate when ``u - x`` and ``v - x`` are in a small
integer ratio, above all when ``u + v = 2 x`` (``a u + a v = 2 a x`` ties the three
hashes; measured correlation of the two events 0.43 at g = 8). The estimates of a set of
items that holds arithmetic progressions (a contiguous range, the cells of one marginal
cell in a product domain) then have positively correlated errors, and a sum of them varies
more than the sum of their variances. With ``mix_items=True`` an item ``v`` is hashed as
``k = fmix32(v)``, MurmurHash3's 32-bit finalizer (Appleby; xor-shifts and odd multipliers,
a bijection of 32-bit words), so every item keeps its own key below 2^32 (the pairwise
guarantees above hold unchanged) while the keys of nearby items are scattered: the
correlation of those events measured 0.005 at most (noise level, 400 000 seeds, 64 items),
and the summed variances are the variance of a sum. Privacy is unchanged (any hash).

A spec built now mixes by default; a spec dict without ``mix_items`` (every spec written
before, and every spec hashing plain items: ``params()`` omits a False) loads as False and
keeps hashing the items. The variance of a linear query over plain items adds the family's
triple term (:meth:`LocalHashing._support_variance`, :mod:`._hash_moments`).

Aggregation visits every (report, item) pair, ``O(n d)``; :mod:`._kernels_hashing` does it
with a compiled kernel whose inner loop over items steps ``x`` by adding ``a``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np

from .._constraints import Alternatives, Boolean, Size
from .._exact import RR_MAX_EPSILON, ratio_loss, rr_probabilities, rr_weights
from .._rng import RNGLike, as_generator, independent_streams
from .._validation import check_epsilon, check_integer, check_real
from ..spec import Reports, Stats
from ._base import (
    MAX_DENSE_OUTPUTS,
    PureFrequencyOracle,
    independent_support_variance,
    index_dtype,
)
from .grr import grr_sample

__all__ = [
    "LocalHashing",
    "BLH",
    "OLH",
    "MAX_HASH_RANGE",
    "MAX_DOMAIN_SIZE",
    "hash_parameters",
    "local_hash",
    "optimal_hash_range",
    "olh_variance",
]

#: Largest hash range g: buckets are cut from 32-bit hash values.
MAX_HASH_RANGE = 1 << 32
#: Largest domain: the family hashes items below 2^32.
MAX_DOMAIN_SIZE = 1 << 32

_U64_MAX = np.iinfo(np.uint64).max
_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_GAMMA2 = np.uint64((2 * 0x9E3779B97F4A7C15) % (1 << 64))
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)


def _mix64(z: np.ndarray) -> np.ndarray:
    # splitmix64 finalizer on a uint64 array (array arithmetic wraps modulo 2^64)
    z = (z ^ (z >> np.uint64(30))) * _MUL1
    z = (z ^ (z >> np.uint64(27))) * _MUL2
    return z ^ (z >> np.uint64(31))


_M32 = np.uint64(0xFFFFFFFF)
_FMIX1 = np.uint64(0x85EBCA6B)
_FMIX2 = np.uint64(0xC2B2AE35)


def mix_item_keys(items: Any) -> np.ndarray:
    """Return the mixed keys of items in ``[0, 2^32)``: MurmurHash3's ``fmix32``, as uint64.

    A bijection of 32-bit words (xor-shifts and multiplications by odd constants modulo
    2^32), so distinct items keep distinct keys below 2^32; what ``OLH(mix_items=True)``
    hashes instead of the item (module docstring, "Mixed item keys").

    Examples
    --------
    >>> mix_item_keys(np.arange(4)).tolist()
    [0, 1364076727, 821347078, 2247144487]
    """
    h = np.asarray(items).astype(np.uint64) & _M32
    h ^= h >> np.uint64(16)
    h = (h * _FMIX1) & _M32
    h ^= h >> np.uint64(13)
    h = (h * _FMIX2) & _M32
    h ^= h >> np.uint64(16)
    return h


# Cached: a collector aggregates many small groups of one spec (mixing 1024 keys costs
# ~3x the aggregate of 8 reports); bounded because a process may see many domain sizes.
@functools.lru_cache(maxsize=64)
def _mixed_keys(domain_size: int) -> np.ndarray:
    """Return the mixed keys of the items ``0..d-1`` (read-only, cached)."""
    keys = mix_item_keys(np.arange(domain_size, dtype=np.uint64))
    keys.flags.writeable = False
    return keys


def _check_seeds(seeds: Any, name: str = "seeds") -> np.ndarray:
    arr = np.asarray(seeds)
    if arr.dtype != np.uint64:
        raise TypeError(f"{name} must be an array of uint64, got an array of dtype {arr.dtype}")
    return arr


def hash_parameters(seeds: Any) -> tuple[np.ndarray, np.ndarray]:
    """Return the multiplier ``a`` (odd) and increment ``b`` that each 64-bit seed names.

    Parameters
    ----------
    seeds : array of uint64

    Returns
    -------
    a, b : arrays of uint64, shaped like ``seeds``
    """
    s = np.atleast_1d(_check_seeds(seeds))
    a = _mix64(s + _GAMMA) | np.uint64(1)
    b = _mix64(s + _GAMMA2)
    shape = np.shape(seeds)
    return a.reshape(shape), b.reshape(shape)


def local_hash(seeds: Any, items: Any, hash_range: int, *, mix_items: bool = False) -> np.ndarray:
    """Hash ``items`` into ``[hash_range]`` with the functions named by ``seeds``.

    ``seeds`` and ``items`` broadcast against each other (e.g. ``seeds[:, None]`` and
    ``items[None, :]`` give every item under every seed).

    Parameters
    ----------
    seeds : array of uint64
    items : array of int
        Items in ``[0, 2^32)``.
    hash_range : int
        g, in ``[2, 2^32]``.
    mix_items : bool
        Hash each item's mixed key (:func:`mix_item_keys`) instead of the item itself.

    Returns
    -------
    ndarray of int64
        ``h_seed(item)`` in ``[0, g)``, with the broadcast shape.

    Examples
    --------
    >>> seeds = np.array([1, 2, 3], dtype=np.uint64)
    >>> local_hash(seeds, 7, 4).tolist()
    [2, 3, 1]
    """
    g = check_integer(hash_range, "hash_range", low=2, high=MAX_HASH_RANGE)
    s = _check_seeds(seeds)
    v = np.asarray(items)
    if v.dtype.kind not in "iu":
        raise TypeError(f"items must be integers in [0, 2^32), got an array of dtype {v.dtype}")
    if v.size and (v.min() < 0 or v.max() >= MAX_DOMAIN_SIZE):
        raise ValueError("items must be integers in [0, 2^32), got values outside it")
    shape = np.broadcast_shapes(s.shape, v.shape)
    a, b = hash_parameters(np.atleast_1d(s))
    # 1-d arrays throughout: numpy scalar arithmetic would warn on the intended wrap-around
    keys = np.atleast_1d(v).astype(np.uint64)
    if mix_items:
        keys = mix_item_keys(keys)
    x = a * keys + b
    h = ((x >> np.uint64(32)) * np.uint64(g)) >> np.uint64(32)
    return h.astype(np.int64).reshape(shape)


def _support_counts_numpy(
    seeds: np.ndarray,
    values: np.ndarray,
    g: int,
    d: int,
    *,
    block_elements: int = 1 << 16,
    mix_items: bool = False,
) -> np.ndarray:
    """Return the reference support counts in plain numpy: hash blocks of reports against all items.

    Memory is bounded by ``block_elements`` 64-bit words per block. It evaluates the
    definition directly (no window trick), so tests use it to check the compiled kernel;
    per pair it costs ~30x the kernel's CPU time (benchmarks/hashing.py).
    """
    counts = np.zeros(d, dtype=np.int64)
    n = seeds.shape[0]
    if n == 0:
        return counts
    a, b = hash_parameters(seeds)
    items = np.arange(d, dtype=np.uint64)
    if mix_items:
        items = mix_item_keys(items)
    y = values.astype(np.uint64)
    rows = max(1, block_elements // d)
    for start in range(0, n, rows):  # a loop over blocks of reports, not over users
        block = slice(start, start + rows)
        x = np.multiply.outer(a[block], items)
        x += b[block, None]
        x >>= np.uint64(32)
        x *= np.uint64(g)
        x >>= np.uint64(32)
        counts += np.count_nonzero(x == y[block, None], axis=0)
    return counts


@functools.cache
def _support_kernel() -> Any:
    """Return the compiled support-count kernel, imported on first use.

    numba is server side only; an import statement in the hot function cost ~1 us per
    aggregate call.
    """
    from ._kernels_hashing import support_counts_kernel

    return support_counts_kernel


@functools.cache
def _keyed_support_kernel() -> Any:
    """Return the compiled support-count kernel over given item keys, imported on first use."""
    from ._kernels_hashing import keyed_support_counts_kernel

    return keyed_support_counts_kernel


def optimal_hash_range(epsilon: float) -> int:
    """OLH's hash range: the integer g >= 2 minimizing the variance (FO17 eq. 10).

    FO17 minimizes eq. 10 over real g at ``g = e^eps + 1`` and suggests rounding. Eq. 10 is
    convex in g, so the best integer is one of the two neighbours of ``e^eps + 1``; we
    compare both. This agrees with ``round(e^eps) + 1`` except where that rounding picks
    the worse neighbour (e.g. eps = 0.38: round gives g = 2, yet g = 3 has ~2% lower
    variance). For ``eps > 32 ln 2`` the range is capped at 2^32, where the variance is
    already below ``2^-32 / n``.

    Examples
    --------
    >>> [optimal_hash_range(e) for e in (0.5, 1.0, 2.0, 4.0)]
    [3, 4, 8, 56]
    """
    return _optimal_hash_range(check_epsilon(epsilon))


# Cached: OLH.range_size asks on every aggregate (every collector group); bounded because a
# long-lived process may see many epsilons.
@functools.lru_cache(maxsize=1024)
def _optimal_hash_range(eps: float) -> int:
    if eps >= 32.0 * math.log(2.0):
        return MAX_HASH_RANGE
    low = max(2, math.floor(math.exp(eps) + 1.0))
    best = min((low, low + 1), key=lambda g: olh_variance(eps, g))
    return int(min(best, MAX_HASH_RANGE))


def olh_variance(epsilon: float, hash_range: float | None = None) -> float:
    """Per-user variance ``n Var*`` of local hashing with a (possibly real) hash range g.

    ``(e^eps - 1 + g)^2 / ((e^eps - 1)^2 (g - 1))`` (FO17 eq. 10); with ``hash_range=None``
    g is the real optimum ``e^eps + 1``, which gives ``4 e^eps / (e^eps - 1)^2`` (eq. 11),
    the OLH column of FO17 Table 2. A real protocol needs an integer g
    (:func:`optimal_hash_range`); :meth:`OLH.variance` is this formula at that g.

    Examples
    --------
    >>> round(olh_variance(1.0), 2), round(olh_variance(1.0, 4), 2)
    (3.68, 3.69)
    """
    eps = check_epsilon(epsilon)
    # t = 1 / (e^eps - 1), computed without overflow for huge epsilon
    t = math.exp(-eps) / -math.expm1(-eps)
    if hash_range is None:
        return 4.0 * t * (1.0 + t)
    g = check_real(hash_range, "hash_range", low=1.0, low_inclusive=False)
    # (e - 1 + g)^2 / ((e - 1)^2 (g - 1)) = (1 + g t)^2 / (g - 1)
    return (1.0 + g * t) ** 2 / (g - 1.0)


def hashed_report_arrays(reports: Reports, g: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the checked ``(seeds, values)`` of local-hashing reports over ``[g]``.

    ``values`` as uint32. Shared by the local-hashing oracles and LOLOHA.
    """
    arrays = reports._arrays  # (attribute access to a field goes through __getattr__)
    seeds, y = arrays.get("seeds"), arrays.get("values")
    if seeds is None or y is None:
        raise ValueError(f"reports must have fields ('seeds', 'values'), got {reports.fields}")
    if seeds.ndim != 1 or seeds.dtype != np.uint64:
        raise ValueError(
            f"reports.seeds must be a 1-D array of uint64, got dtype {seeds.dtype} "
            f"and shape {seeds.shape}"
        )
    if y.ndim != 1 or y.dtype.kind not in "iu":
        raise ValueError(f"reports.values must be hashed values in [0, {g})")
    if y.size:
        # (a collector group holds a few reports: Python's min/max of the list is
        # ~4x cheaper than numpy's reductions there; an unsigned array has no low end)
        small = y.tolist() if y.size <= 32 else None
        low = 0 if y.dtype.kind == "u" else min(small) if small is not None else y.min()
        high = max(small) if small is not None else y.max()
        if low < 0 or high >= g:
            raise ValueError(f"reports.values must be hashed values in [0, {g})")
    return seeds, y.astype(np.uint32, copy=False)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LocalHashing(PureFrequencyOracle):
    """Local hashing over d items with hash range g (FO17 section 4.5, "LH").

    Reports are ``(seed, y)``: ``reports.seeds`` (uint64) names the user's hash function,
    ``reports.values`` (smallest unsigned dtype holding ``g - 1``) is GRR over ``[g]`` of
    the hashed item. Subclasses fix g: :class:`BLH` (g = 2) and :class:`OLH`.

    The GRR step is exact: integer weights ``w_keep`` (the hashed item) and
    ``w_other`` (each other bucket) with ratio ``<= e^eps`` and total below 2^62, one
    uniform integer per user (:func:`ldpkit.frequency.grr.grr_sample`); ``p``,
    ``other_probability`` and ``privacy_loss()`` are the realized values. Epsilon is
    accepted in ``[1e-6, 40]`` (``max_epsilon``).
    """

    max_epsilon: ClassVar[float] = RR_MAX_EPSILON
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "domain_size": [Size(2, MAX_DOMAIN_SIZE, small=6)]
    }

    @property
    @abstractmethod
    def range_size(self) -> int:
        """g, the size of the hash range ``[g]``."""

    def _weights(self) -> tuple[int, int]:
        return rr_weights(self.epsilon, self.range_size - 1)

    @property
    def p(self) -> float:
        """``p* = e^eps / (e^eps + g - 1)``.

        The GRR keep probability over ``[g]`` (realized: ``w_keep / T``).
        """
        return rr_probabilities(self.epsilon, self.range_size - 1)[0]

    @property
    def other_probability(self) -> float:
        """``q' = 1 / (e^eps + g - 1)``.

        P[y = j | h(v) = x] for each j != x (realized: ``w_other / T``).
        """
        return rr_probabilities(self.epsilon, self.range_size - 1)[1]

    @property
    def q(self) -> float:
        """``q* = 1/g``: P[v in Support(y)] for a user holding another item (FO17 4.5)."""
        return 1.0 / self.range_size

    @property
    def _mixes_items(self) -> bool:
        """Whether items are hashed by their mixed keys (:attr:`OLH.mix_items`)."""
        return bool(getattr(self, "mix_items", False))

    def hash_items(self, seeds: Any, items: Any) -> np.ndarray:
        """``h_seed(item)`` in ``[0, g)`` (broadcasting; see :func:`local_hash`)."""
        return local_hash(seeds, items, self.range_size, mix_items=self._mixes_items)

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Draw a hash function per user, hash her item, perturb it with GRR over ``[g]``.

        The seeds (sent in the clear) and the GRR coins (which must stay secret) come from
        two independent streams derived from ``rng``, so the published seeds reveal
        nothing about the coins even when the generator's raw output is predictable
        (docs/design/THREAT_MODEL.md).
        """
        v = self.check_values(values)
        seed_stream, coin_stream = independent_streams(as_generator(rng), 2)
        seeds = seed_stream.integers(0, _U64_MAX, size=v.shape[0], dtype=np.uint64, endpoint=True)
        hashed = self.hash_items(seeds, v)
        y = grr_sample(hashed, self.range_size, self._weights(), coin_stream)
        return Reports(self, seeds=seeds, values=y.astype(index_dtype(self.range_size)))

    def _report_arrays(self, reports: Reports) -> tuple[np.ndarray, np.ndarray]:
        return hashed_report_arrays(reports, self.range_size)

    def support_counts(self, reports: Reports) -> np.ndarray:
        """``C_v = #{i : h_{seed_i}(v) = y_i}`` for every item v (compiled, on all cores)."""
        seeds, y = self._report_arrays(self.check_reports(reports))
        return self._counts(seeds, y)

    def _counts(self, seeds: np.ndarray, y: np.ndarray) -> np.ndarray:
        # each report costs d steps: split once a block has >= ~2^20 (report, item) pairs
        # (a small batch, e.g. a collector group, skips the affinity syscall of workers())
        work = seeds.shape[0] * self.domain_size >> 20
        n_blocks = 1
        if work > 1:
            from .. import _parallel

            n_blocks = max(1, min(_parallel.workers(), work))
        if self._mixes_items:
            d = self.domain_size
            # (a large domain's aggregate dwarfs mixing its keys: not kept in memory)
            keys = _mixed_keys(d) if d <= 1 << 20 else mix_item_keys(np.arange(d, dtype=np.uint64))
            return _keyed_support_kernel()(seeds, y, self.range_size, keys, n_blocks)
        return _support_kernel()(seeds, y, self.range_size, self.domain_size, n_blocks)

    def _aggregate_decoded(self, arrays: dict[str, np.ndarray]) -> Stats:
        # A collector group of a few reports with the wire dtypes (uint64 seeds, unsigned
        # values): the checks of Reports and _report_arrays in one pass, no Reports built.
        # Anything else (including any bad report) takes the general path, which explains.
        seeds, y = arrays.get("seeds"), arrays.get("values")
        if (
            len(arrays) == 2
            and type(self).support_counts is LocalHashing.support_counts
            and type(seeds) is np.ndarray
            and type(y) is np.ndarray
            and seeds.dtype == np.uint64
            and seeds.ndim == 1
            and y.shape == seeds.shape
            and y.dtype.kind == "u"
            and 0 < y.shape[0] <= 32
            and max(y.tolist()) < self.range_size
        ):
            counts = self._counts(seeds, y.astype(np.uint32, copy=False))
            return Stats._exact(self, seeds.shape[0], {"counts": counts})
        return super()._aggregate_decoded(arrays)

    def transition_matrix(self, seed: int | None = None) -> np.ndarray:
        """Exact ``P[y | v, seed]``, shape (d, g), for one hash function.

        A report is ``(seed, y)`` with the seed uniform over 2^64 values and independent
        of the item, so the full output space is not enumerable and ``seed=None`` raises
        NotImplementedError. Given the seed, row v is GRR over ``[g]`` centred on
        ``h_seed(v)``; ``P[(seed, y) | v] = 2^-64 * matrix[v, y]``.
        """
        if seed is None:
            raise NotImplementedError(
                f"{self.name} outputs (seed, y) pairs over 2^64 * g values; pass a seed "
                "for the matrix of y given that hash function"
            )
        g, d = self.range_size, self.domain_size
        if d * g > MAX_DENSE_OUTPUTS:
            raise ValueError(
                f"domain_size * hash range must be <= {MAX_DENSE_OUTPUTS} for a dense "
                f"matrix, got {d} * {g}"
            )
        seed = check_integer(seed, "seed", low=0, high=int(_U64_MAX))
        hashed = self.hash_items(np.array([seed], dtype=np.uint64), np.arange(d))
        matrix = np.full((d, g), self.other_probability)
        matrix[np.arange(d), hashed] = self.p
        return matrix

    def _support_variance(self, u: np.ndarray) -> np.ndarray:
        """``Var[u[:, i] . s | v]`` for every true item v (rows), under this hash family.

        Mixed item keys: independent support bits (the ideal hash's law; the family's
        triple correlations measured at noise level, module docstring). Plain items: that
        plus ``(p - q') X(v)``, the family's triple collisions on the query's items
        (:mod:`._hash_moments`): a range of adjacent items varies more than the summed
        variances of its items (1.2-2.1x at eps 2-4; docs/design/METHODS.md, "Sums of
        plain local-hashing estimates").
        """
        out = independent_support_variance(float(self.p), float(self.q), u)
        if self._mixes_items:
            return out
        from ._hash_moments import plain_triple_excess  # server side

        excess = plain_triple_excess(u, self.range_size)
        if excess is None:  # over the work budget (d x queries > 2^15): the ideal hash's
            return out
        return out + (float(self.p) - float(self.other_probability)) * excess

    def privacy_loss(self) -> float:
        """``log(p' / q')`` of GRR over ``[g]``: the exact epsilon of the ``(seed, y)`` output.

        ``P[(s, y) | v] = P[s] P[y | h_s(v)]`` with P[s] free of v, so the loss is the
        largest over seeds of the loss of :meth:`transition_matrix` (seed); that is at
        most the loss of GRR over ``[g]``, whose every column holds p' once and q'
        elsewhere, and equal to it for any seed hashing two items apart.
        """
        w_keep, w_other = self._weights()
        return ratio_loss(w_other, w_keep)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BLH(LocalHashing):
    """Binary local hashing: hash each item to one bit, then binary randomized response.

    The user reports ``(seed, y)`` with ``y = h_seed(v)`` w.p. ``p = e^eps/(e^eps + 1)``
    and the other bit otherwise. A report supports the half of the domain that
    ``h_seed`` maps to ``y``.

    Parameters
    ----------
    epsilon : float
        Privacy budget, in [1e-6, ``max_epsilon``] (per class: docs/design/THREAT_MODEL.md).
    domain_size : int
        Number of items d, in ``[2, 2^32]``.

    Notes
    -----
    ``P[(s, y) | v] / P[(s, y) | v'] <= p / (1 - p) = e^eps`` (FO17 Theorem 7).
    ``p* = e^eps/(e^eps + 1)``, ``q* = 1/2``, so ``n Var* = (e^eps + 1)^2 / (e^eps - 1)^2``
    (FO17 section 4.4). The hash family (module docstring) has no residual bias at g = 2.
    BLH is logically the random-matrix protocol of Bassily and Smith (2015); OLH dominates
    it for every epsilon and is what to use in practice.

    References
    ----------
    T. Wang, J. Blocki, N. Li, S. Jha. Locally Differentially Private Protocols for
    Frequency Estimation. USENIX Security 2017, section 4.4.

    Examples
    --------
    >>> blh = BLH(epsilon=1.0, domain_size=100)
    >>> reports = blh.randomize([3, 14, 15, 92, 65], rng=0)
    >>> len(reports), reports.seeds.dtype, reports.values.dtype, blh.range_size
    (5, dtype('uint64'), dtype('uint8'), 2)
    """

    @property
    def range_size(self) -> int:
        """Hash range g: 2 (binary local hashing)."""
        return 2


@dataclasses.dataclass(frozen=True, kw_only=True)
class OLH(LocalHashing):
    """Optimized local hashing: hash each item into ``[g]``, then GRR over ``[g]``.

    Parameters
    ----------
    epsilon : float
        Privacy budget, in [1e-6, ``max_epsilon``] (per class: docs/design/THREAT_MODEL.md).
    domain_size : int
        Number of items d, in ``[2, 2^32]``.
    hash_range : int or None
        g, in ``[2, 2^32]``. None (default) picks the variance-optimal
        ``round(e^eps) + 1`` (:func:`optimal_hash_range`); the spec keeps None, so
        ``replace(epsilon=...)`` re-optimizes. :attr:`range_size` is the g in use.
    mix_items : bool
        Hash a fixed bijective mix of each item (MurmurHash3's ``fmix32``) instead of the
        item (module docstring, "Mixed item keys"): the estimates of different items are
        then uncorrelated up to noise, so a sum of them (a range, a marginal of a product
        domain) has the summed variances, and varies 1.2-2.3x less than over plain items
        on ranges (docs/design/METHODS.md, "Sums of plain local-hashing estimates"). True
        (default) for a spec built now. False: the item itself, the wire format of the
        earlier releases; ``params()`` omits it then, and a spec dict without
        ``mix_items`` loads as False, so earlier specs keep their fingerprint and their
        reports their meaning (the variance of a sum over plain items includes the hash
        family's triple term: :func:`ldpkit.queries.range_variances`).

    Notes
    -----
    ``P[(s, y) | v] / P[(s, y) | v'] <= p' / q' = e^eps`` with ``p' = e^eps/(e^eps + g - 1)``
    and ``q' = 1/(e^eps + g - 1)`` (FO17 Theorem 7). ``p* = p'``, ``q* = 1/g``, so
    ``n Var* = (e^eps - 1 + g)^2 / ((e^eps - 1)^2 (g - 1))`` (FO17 eq. 10), which is
    ``4 e^eps / (e^eps - 1)^2`` at the real optimum ``g = e^eps + 1`` (eq. 11): the same
    as OUE with ``O(log d)`` bits per report instead of d. Aggregation costs ``O(n d)``.

    References
    ----------
    T. Wang, J. Blocki, N. Li, S. Jha. Locally Differentially Private Protocols for
    Frequency Estimation. USENIX Security 2017, section 4.5.

    Examples
    --------
    >>> olh = OLH(epsilon=1.0, domain_size=1000)
    >>> olh.range_size
    4
    >>> reports = olh.randomize([3, 14, 15, 92, 65], rng=0)
    >>> reports.fields, reports.values.dtype
    (('seeds', 'values'), dtype('uint8'))
    >>> est = olh.estimate(olh.aggregate(reports))
    >>> est.frequencies.shape
    (1000,)
    """

    hash_range: int | None = None
    mix_items: bool = True
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "hash_range": [Size(2, MAX_HASH_RANGE), None],
        "mix_items": [Boolean()],
    }

    def params(self) -> dict[str, Any]:
        """Return the spec's fields as a plain dict (without ``mix_items`` when False).

        A spec hashing the items themselves keeps the wire identity (fingerprint) it had
        before ``mix_items`` existed; a missing ``mix_items`` is False when loading.
        """
        out = super().params()
        if not out["mix_items"]:
            del out["mix_items"]
        return out

    @classmethod
    def _from_params(cls, params: dict[str, Any]) -> OLH:
        """Build the spec from :meth:`params` output; a missing ``mix_items`` is False.

        Specs written before mixed keys were the default (and every spec hashing the items
        themselves) omit it: they keep hashing the items.
        """
        return cls(**{"mix_items": False, **params})

    @property
    def range_size(self) -> int:
        """Hash range g: ``hash_range``, or the optimal ``round(e^eps) + 1``."""
        if self.hash_range is None:
            # epsilon was checked at construction: skip check_epsilon (asked on every
            # aggregate, several times; ~3 us each, a visible share of a small batch's)
            return _optimal_hash_range(self.epsilon)
        return self.hash_range
