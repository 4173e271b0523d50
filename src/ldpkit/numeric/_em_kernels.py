"""Compiled EM/EMS iterations on a banded transition matrix (see :mod:`ldpkit.numeric.em`).

Kept apart so that importing ldpkit (e.g. on a client that only randomizes) does not load
numba; the server-side estimator imports this module on first use.
"""

from __future__ import annotations

import numba
import numpy as np


# fastmath lets the row dot products use SIMD partial sums (deterministic for a given build)
@numba.njit(cache=True, fastmath=True)
def _band_matvec(base, data, offsets, starts, lengths, theta, out):  # pragma: no cover - jit
    total = 0.0
    for i in range(theta.size):
        total += theta[i]
    for j in range(base.size):
        # slices (not offset arithmetic) let LLVM vectorize the dot product: ~6x faster
        length = lengths[j]
        row = data[offsets[j] : offsets[j] + length]
        x = theta[starts[j] : starts[j] + length]
        acc = 0.0
        for k in range(length):
            acc += row[k] * x[k]
        out[j] = base[j] * total + acc


@numba.njit(cache=True, fastmath=True)
def _em_step(
    base, data, offsets, starts, lengths, nk, mt, ratio, grad, theta
):  # pragma: no cover - jit
    """One E + M step in place on theta, from ``mt = M theta`` (SW20 section 5.2):
    ``theta_i <- theta_i sum_j n_j M[j, i] / (M theta)_j``, then normalized. Shared by the
    EM/EMS loop and AutoDistribution's smoothed loop."""
    rows, d = base.size, theta.size
    shared = 0.0
    for j in range(rows):
        ratio[j] = nk[j] / mt[j]
        shared += base[j] * ratio[j]
    for i in range(d):
        grad[i] = shared
    for j in range(rows):
        length, r = lengths[j], ratio[j]
        row = data[offsets[j] : offsets[j] + length]
        g = grad[starts[j] : starts[j] + length]
        for k in range(length):
            g[k] += row[k] * r
    total = 0.0
    for i in range(d):
        theta[i] *= grad[i]
        total += theta[i]
    for i in range(d):
        theta[i] /= total


# nogil: the bootstrap runs its B independent fits on plain threads (ldpkit._parallel).
@numba.njit(cache=True, fastmath=True, nogil=True)
def _em_loop(
    base, data, offsets, starts, lengths, nk, theta, smoothing, tol, max_iter, tiny, trace
):  # pragma: no cover - jit (tested against the numpy reference loop)
    """EM/EMS iterations in place on theta; returns (iterations, converged)."""
    rows, d = base.size, theta.size
    mt = np.empty(rows)
    ratio = np.empty(rows)
    grad = np.empty(d)
    tmp = np.empty(d)
    _band_matvec(base, data, offsets, starts, lengths, theta, mt)
    ll = 0.0
    for j in range(rows):
        if mt[j] < tiny:
            mt[j] = tiny
        ll += nk[j] * np.log(mt[j])
    trace[0] = ll
    it = 0
    converged = False
    while it < max_iter:
        it += 1
        _em_step(base, data, offsets, starts, lengths, nk, mt, ratio, grad, theta)
        if smoothing and d >= 2:
            tmp[0] = (2.0 * theta[0] + theta[1]) / 3.0
            tmp[d - 1] = (theta[d - 2] + 2.0 * theta[d - 1]) / 3.0
            for i in range(1, d - 1):
                tmp[i] = 0.5 * theta[i] + 0.25 * (theta[i - 1] + theta[i + 1])
            total = 0.0
            for i in range(d):
                total += tmp[i]
            for i in range(d):
                theta[i] = tmp[i] / total
        _band_matvec(base, data, offsets, starts, lengths, theta, mt)
        ll = 0.0
        for j in range(rows):
            if mt[j] < tiny:
                mt[j] = tiny
            ll += nk[j] * np.log(mt[j])
        trace[it] = ll
        if abs(trace[it] - trace[it - 1]) < tol:
            converged = True
            break
    return it, converged
