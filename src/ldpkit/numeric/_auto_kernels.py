"""Compiled EM iterations with a smoothing step of adjustable strength (see
:mod:`ldpkit.numeric.auto`).

Kept apart, like :mod:`ldpkit.numeric._em_kernels`, so that a client that only randomizes
never loads numba.
"""

from __future__ import annotations

import numba
import numpy as np

from ._em_kernels import _band_matvec, _box_em_step, _box_matvec, _em_step


@numba.njit(cache=True, fastmath=True)
def _smoothed_em_loop(
    base, data, offsets, starts, lengths, nk, theta, passes, weight, tol, max_iter, tiny
):  # pragma: no cover - jit (tested against the numpy reference in the tests)
    """EM updates in place on theta, each followed by ``passes`` smoothing passes.

    A pass is ``theta <- (1 - weight) theta + weight S(theta)`` with S the EMS kernel
    (:func:`ldpkit.numeric.em.smooth`), renormalized. ``passes = 1, weight = 1`` is EMS,
    ``passes = 0`` plain EM. Returns (iterations, converged, final log-likelihood).
    """
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
    it = 0
    converged = False
    while it < max_iter:
        it += 1
        _em_step(base, data, offsets, starts, lengths, nk, mt, ratio, grad, theta)
        if d >= 2:
            for _ in range(passes):
                tmp[0] = (2.0 * theta[0] + theta[1]) / 3.0
                tmp[d - 1] = (theta[d - 2] + 2.0 * theta[d - 1]) / 3.0
                for i in range(1, d - 1):
                    tmp[i] = 0.5 * theta[i] + 0.25 * (theta[i - 1] + theta[i + 1])
                total = 0.0
                for i in range(d):
                    tmp[i] = (1.0 - weight) * theta[i] + weight * tmp[i]
                    total += tmp[i]
                for i in range(d):
                    theta[i] = tmp[i] / total
        _band_matvec(base, data, offsets, starts, lengths, theta, mt)
        prev = ll
        ll = 0.0
        for j in range(rows):
            if mt[j] < tiny:
                mt[j] = tiny
            ll += nk[j] * np.log(mt[j])
        if abs(ll - prev) < tol:
            converged = True
            break
    return it, converged, ll


@numba.njit(cache=True, fastmath=True)
def _smoothed_box_loop(
    base,
    data,
    offsets,
    starts,
    lengths,
    heads,
    tails,
    plateau,
    nk,
    theta,
    passes,
    weight,
    tol,
    max_iter,
    tiny,
):  # pragma: no cover - jit (tested against _smoothed_em_loop in the tests)
    """:func:`_smoothed_em_loop` with the box-band products (:func:`ldpkit.numeric.em._box_rows`,
    kernels shared with the EM/EMS loop); same iterations, same stop."""
    rows, d = base.size, theta.size
    mt = np.empty(rows)
    ratio = np.empty(rows)
    grad = np.empty(d)
    diff = np.empty(d + 1)
    prefix = np.empty(d + 1)
    tmp = np.empty(d)
    _box_matvec(base, data, offsets, starts, lengths, heads, tails, plateau, theta, prefix, mt)
    ll = 0.0
    for j in range(rows):
        if mt[j] < tiny:
            mt[j] = tiny
        ll += nk[j] * np.log(mt[j])
    it = 0
    converged = False
    while it < max_iter:
        it += 1
        _box_em_step(
            base,
            data,
            offsets,
            starts,
            lengths,
            heads,
            tails,
            plateau,
            nk,
            mt,
            ratio,
            grad,
            diff,
            theta,
        )
        if d >= 2:
            for _ in range(passes):
                tmp[0] = (2.0 * theta[0] + theta[1]) / 3.0
                tmp[d - 1] = (theta[d - 2] + 2.0 * theta[d - 1]) / 3.0
                for i in range(1, d - 1):
                    tmp[i] = 0.5 * theta[i] + 0.25 * (theta[i - 1] + theta[i + 1])
                total = 0.0
                for i in range(d):
                    tmp[i] = (1.0 - weight) * theta[i] + weight * tmp[i]
                    total += tmp[i]
                for i in range(d):
                    theta[i] = tmp[i] / total
        _box_matvec(base, data, offsets, starts, lengths, heads, tails, plateau, theta, prefix, mt)
        prev = ll
        ll = 0.0
        for j in range(rows):
            if mt[j] < tiny:
                mt[j] = tiny
            ll += nk[j] * np.log(mt[j])
        if abs(ll - prev) < tol:
            converged = True
            break
    return it, converged, ll
