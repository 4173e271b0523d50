"""Third moments of the local-hashing family: the covariance of a sum of hashed estimates.

Server side (the variances of linear queries); the clients never import it.

Local hashing (:mod:`ldpkit.frequency.hashing`) hashes an item ``v`` with the
multiply-add-shift family ``h(v) = (((a v + b) mod 2^64) >> 32) * g >> 32``: pairwise
independent, not 3-wise. For a report of a user holding ``x`` and a weight vector ``u``
over the items, the support ``s_w = [h(w) = y]`` satisfies (``y`` is GRR over ``[g]`` of
``h(x)``, keep probability ``p``, other buckets ``q'``)::

    E[(u . s)^2 | x] = q' E[sum_j N(j)^2] + (p - q') E[N(h(x))^2]
    E[u . s | x]     = q' U1 + (p - q') E[N(h(x))]

with ``N(j) = sum_w u_w [h(w) = j]`` the weight hashed to bucket j. Every term but one
involves at most two distinct items, where the family is pairwise independent: it is the
ideal hash's value. The exception is in ``E[N(h(x))^2]``, the triples ``w != w'``, both
``!= x``, weighted by ``T(w, w', x) = P[h(w) = h(w') = h(x)]``, which an ideal hash puts
at ``1/g^2``. So::

    Var[u . s | x] = (independent support bits' variance) + (p - q') X(x),
    X(x) = sum_{w != w', w, w' != x} u_w u_w' (T(w, w', x) - 1/g^2).

``T`` depends on the family only through ``(w - x, w' - x)`` and is far above ``1/g^2``
when the two differences are in a small integer ratio (``w + w' = 2 x``: ``T`` is about
``1 / (2 g)`` for ``u + v = 2x`` in the continuous limit, against ``1/g^2``), as in a
range of adjacent items. :func:`triple_excess` evaluates ``X`` by averaging the
definition over a fixed, public set of hash functions of the family itself (stratified
multipliers ``a``, random increments ``b``: the excess is a smooth average over ``a``),
with the pairwise parts subtracted per function (a control variate: the estimate's noise
is that of the triple terms alone). The set is drawn from a fixed seed, so the variances
are deterministic; their Monte Carlo error measured 0.3-3 % of the sum's
variance (docs/design/METHODS.md, "Sums of plain local-hashing estimates").
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

__all__ = [
    "EXCESS_FUNCTIONS",
    "EXCESS_WORK",
    "excess_functions",
    "plain_triple_excess",
    "triple_excess",
]

#: Number of hash functions of the family the excess is averaged over.
EXCESS_FUNCTIONS = 1 << 14
#: Fewest functions worth averaging over (below, the Monte Carlo error of a sum's variance
#: exceeds ~5 % at d = 64).
MIN_EXCESS_FUNCTIONS = 1 << 11
#: Bound on ``functions * d * m`` (one step per function, item and query; ~0.1-0.2 s).
EXCESS_WORK = 1 << 26
# (elements per block of the numpy twin's (functions, items, items, queries) temporaries)
_BLOCK_ELEMENTS = 1 << 16
_SEED = 0x0C0FFEE5  # fixed: the variances are a function of the estimate only


@functools.cache
def _functions(count: int) -> tuple[np.ndarray, np.ndarray]:
    """Return ``count`` (power of two) multipliers ``a`` (odd, stratified) and increments ``b``.

    ``a`` takes one uniform value in each of ``count`` equal slices of the 64-bit words:
    the excess is an integral over ``a / 2^64`` of a function with many kinks, which
    stratification averages far better than independent draws.
    """
    gen = np.random.default_rng(_SEED)
    shift = np.uint64(64 - (count.bit_length() - 1))
    offset = gen.integers(0, 1 << 63, size=count, dtype=np.uint64, endpoint=True)
    a = (np.arange(count, dtype=np.uint64) << shift) | (offset >> np.uint64(count.bit_length() - 1))
    a |= np.uint64(1)
    b = gen.integers(0, np.iinfo(np.uint64).max, size=count, dtype=np.uint64, endpoint=True)
    return a, b


def excess_functions(items: int, queries: int) -> int:
    """Return how many functions :func:`triple_excess` averages over for d items, m queries.

    :data:`EXCESS_FUNCTIONS`, fewer (a power of two) when ``functions * d * m`` would exceed
    :data:`EXCESS_WORK`, and 0 when that leaves fewer than :data:`MIN_EXCESS_FUNCTIONS`
    (the caller then has no evaluation of the excess within the budget).
    """
    budget = EXCESS_WORK // max(1, items * queries)
    if budget < MIN_EXCESS_FUNCTIONS:
        return 0
    return min(EXCESS_FUNCTIONS, 1 << (budget.bit_length() - 1))


def triple_excess(
    u: np.ndarray, hash_range: int, keys: np.ndarray, *, functions: int = EXCESS_FUNCTIONS
) -> np.ndarray:
    """Return ``X(x)`` (module docstring) for every item x (rows) and weight column.

    Parameters
    ----------
    u : ndarray, shape (d, m)
        Weights of m linear queries over the d items.
    hash_range : int
        g.
    keys : ndarray of uint64, shape (d,)
        What each item hashes as (the item, or its mixed key).
    functions : int
        Number of hash functions of the family averaged over (a power of two).

    Returns
    -------
    ndarray, shape (d, m)
        ``sum_{w != w' != x} u_w u_w' (P[h(w) = h(w') = h(x)] - 1/g^2)``, averaged over
        ``functions`` functions of the family.
    """
    u = np.asarray(u, dtype=np.float64)
    g = int(hash_range)
    a, b = _functions(functions)
    total = _kernel()(a, b, np.ascontiguousarray(keys, dtype=np.uint64), g, np.ascontiguousarray(u))
    sq = u * u
    # the ideal hash's triple term, 1/g^2 ((U1 - u_x)^2 - (U2 - u_x^2))
    ideal = ((u.sum(axis=0) - u) ** 2 - (sq.sum(axis=0) - sq)) / float(g) ** 2
    return total / functions - ideal


def _triple_sums_numpy(
    u: np.ndarray, hash_range: int, keys: np.ndarray, functions: int
) -> np.ndarray:
    """Return the kernel's sums in plain numpy (tests check the kernel against it)."""
    d, m = u.shape
    g = int(hash_range)
    a_all, b_all = _functions(functions)
    sq = u * u
    total = np.zeros((d, m))
    rows = max(1, _BLOCK_ELEMENTS // (d * (d + m)))
    for start in range(0, functions, rows):  # blocks of hash functions, not users
        a, b = a_all[start : start + rows], b_all[start : start + rows]
        x = np.multiply.outer(a, keys)
        x += b[:, None]
        x >>= np.uint64(32)
        x *= np.uint64(g)
        x >>= np.uint64(32)
        same = x[:, :, None] == x[:, None, :]  # (functions, x, w): w in x's bucket
        n1 = np.einsum("fxw,wc->fxc", same, u) - u
        n2 = np.einsum("fxw,wc->fxc", same, sq) - sq
        total += (n1 * n1 - n2).sum(axis=0)
    return total


@functools.cache
def _kernel() -> Any:
    """Return the compiled kernel, imported on first use (numba is server side only)."""
    from ._kernels_moments import triple_sums_kernel

    return triple_sums_kernel


def plain_triple_excess(u: np.ndarray, hash_range: int) -> np.ndarray | None:
    """Return :func:`triple_excess` over the plain items ``0..d-1`` (None over the budget).

    Remembers the last few answers: a collector asks the same queries (a distribution's
    CDF at its edges) of every estimate of a collection, and the excess depends only on
    the weights and g, not on the estimate.
    """
    u = np.ascontiguousarray(u, dtype=np.float64)
    functions = excess_functions(u.shape[0], u.shape[1])
    if functions == 0:
        return None
    out = _cached_excess(u.tobytes(), u.shape, int(hash_range), functions)
    return out.copy()


@functools.lru_cache(maxsize=16)
def _cached_excess(data: bytes, shape: tuple[int, int], g: int, functions: int) -> np.ndarray:
    """Return :func:`triple_excess` of the weights stored in ``data`` (cached)."""
    u = np.frombuffer(data, dtype=np.float64).reshape(shape)
    keys = np.arange(shape[0], dtype=np.uint64)
    return triple_excess(u, g, keys, functions=functions)
