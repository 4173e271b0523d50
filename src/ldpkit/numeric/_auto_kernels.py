"""Compiled EM iterations with a smoothing step of adjustable strength (see
:mod:`ldpkit.numeric.auto`).

Kept apart, like :mod:`ldpkit.numeric._em_kernels`, so that a client that only randomizes
never loads numba.
"""

from __future__ import annotations

import numba
import numpy as np

from ._em_kernels import _band_matvec, _em_step


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


# -- the same loop on a "box" band -------------------------------------------------------------
# A Square Wave's residual row (M - base, see em._Banded) is a constant plateau (the wave's
# height over the input buckets the wave covers whole) between a few partial-overlap entries at
# each end (at most 4 measured). Prefix sums then give both products of an EM iteration in
# O(d + rows + edges) instead of O(total band): about 40x fewer operations at d = 1024, eps = 1
# (mean band 348 entries a row).


@numba.njit(cache=True, fastmath=True)
def _box_matvec(
    base, data, offsets, starts, lengths, heads, tails, plateau, theta, prefix, out
):  # pragma: no cover - jit
    """``out = M theta`` with each band row = explicit head, constant plateau, explicit tail."""
    d = theta.size
    prefix[0] = 0.0
    for i in range(d):
        prefix[i + 1] = prefix[i] + theta[i]
    total = prefix[d]
    for j in range(base.size):
        s, length, off = starts[j], lengths[j], offsets[j]
        h, t = heads[j], tails[j]
        acc = plateau[j] * (prefix[s + length - t] - prefix[s + h])
        for k in range(h):
            acc += data[off + k] * theta[s + k]
        for k in range(length - t, length):
            acc += data[off + k] * theta[s + k]
        out[j] = base[j] * total + acc


@numba.njit(cache=True, fastmath=True)
def _box_em_step(
    base, data, offsets, starts, lengths, heads, tails, plateau, nk, mt, ratio, grad, diff, theta
):  # pragma: no cover - jit
    """:func:`_em_step` on the box band: the plateau's share of ``M^T (n / M theta)`` is
    added through a difference array (one +, one - per row) and a running sum."""
    rows, d = base.size, theta.size
    shared = 0.0
    for i in range(d + 1):
        diff[i] = 0.0
    for i in range(d):
        grad[i] = 0.0
    for j in range(rows):
        r = nk[j] / mt[j]
        ratio[j] = r
        shared += base[j] * r
        s, length, off = starts[j], lengths[j], offsets[j]
        h, t = heads[j], tails[j]
        if length - t > h:
            diff[s + h] += plateau[j] * r
            diff[s + length - t] -= plateau[j] * r
        for k in range(h):
            grad[s + k] += data[off + k] * r
        for k in range(length - t, length):
            grad[s + k] += data[off + k] * r
    run = 0.0
    total = 0.0
    for i in range(d):
        run += diff[i]
        theta[i] *= shared + run + grad[i]
        total += theta[i]
    for i in range(d):
        theta[i] /= total


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
    """:func:`_smoothed_em_loop` with the box-band products; same iterations, same stop."""
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
