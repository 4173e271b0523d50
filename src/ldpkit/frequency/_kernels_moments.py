"""Compiled kernel of the local-hashing triple term (server side: variances of sums).

:func:`ldpkit.frequency._hash_moments.triple_excess` averages, over a fixed set of
functions ``(a, b)`` of the multiply-add-shift family, the weight of the other items in
each item's bucket, squared, minus their squares. In numpy each function costs several
passes over a (functions, items, queries) block (a gather, a product, a sum); here each
function hashes the d items, sorts them by bucket and visits each bucket's items once
per query: ~20x less time at d = 64, which keeps a collector's CDF band of a histogram
with OLH levels interactive.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_S32 = np.uint64(32)


@nb.njit(cache=True)
def triple_sums_kernel(
    a: np.ndarray, b: np.ndarray, keys: np.ndarray, g: int, u: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    """Return ``sum_f [(N_f(h_f(x)) - u_x)^2 - (N2_f(h_f(x)) - u_x^2)]`` per item x, query.

    ``N_f(j)`` / ``N2_f(j)``: the weights / squared weights of the items function f puts in
    bucket j. ``a``, ``b``: the functions' multipliers and increments (uint64); ``keys``:
    what each item hashes as (uint64); ``u``: (d, m) float64 weights.
    """
    d, m = u.shape
    gg = np.uint64(g)
    total = np.zeros((d, m))
    h = np.empty(d, dtype=np.int64)
    s1 = np.empty(m)
    s2 = np.empty(m)
    # items grouped by bucket: a counting sort when g is small against d, else a sort
    counting = g <= 4 * d + 64
    fill = np.zeros(g + 1 if counting else 1, dtype=np.int64)
    order = np.empty(d, dtype=np.int64)
    for f in range(a.shape[0]):
        af, bf = a[f], b[f]
        for w in range(d):
            x = af * keys[w] + bf  # wraps modulo 2^64
            h[w] = np.int64(((x >> _S32) * gg) >> _S32)
        if counting:
            fill[:] = 0
            for w in range(d):
                fill[h[w] + 1] += 1
            for j in range(g):
                fill[j + 1] += fill[j]
            for w in range(d):
                order[fill[h[w]]] = w
                fill[h[w]] += 1
        else:
            order = np.argsort(h)
        start = 0
        while start < d:
            stop = start + 1
            bucket = h[order[start]]
            while stop < d and h[order[stop]] == bucket:
                stop += 1
            if stop - start > 1:  # a lone item has no other item in its bucket
                for c in range(m):
                    s1[c] = 0.0
                    s2[c] = 0.0
                for i in range(start, stop):
                    w = order[i]
                    for c in range(m):
                        s1[c] += u[w, c]
                        s2[c] += u[w, c] * u[w, c]
                for i in range(start, stop):
                    w = order[i]
                    for c in range(m):
                        other = s1[c] - u[w, c]
                        total[w, c] += other * other - (s2[c] - u[w, c] * u[w, c])
            start = stop
    return total
