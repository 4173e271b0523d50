"""Compiled EM iterations whose smoothing step leaves a set of buckets alone (the point masses
of :meth:`ldpkit.numeric.AutoDistribution.estimate`'s end-atom candidates).

Kept apart, like :mod:`ldpkit.numeric._auto_kernels`, so that a client that only randomizes
never loads numba. With no bucket marked, each loop runs exactly the iterations of its
:mod:`~ldpkit.numeric._auto_kernels` counterpart (tested).
"""

from __future__ import annotations

import numba
import numpy as np

from ._em_kernels import _band_matvec, _box_em_step, _box_matvec, _em_step


@numba.njit(cache=True, fastmath=True)
def _masked_smooth(theta, atom, passes, weight, smooth, tmp):  # pragma: no cover - jit
    """``passes`` smoothing passes on the part of theta outside the ``atom`` buckets.

    theta = a + s with a the mass on the atom buckets, s the rest; each pass is
    ``s <- (1 - weight) s + weight S(s)`` (S the EMS kernel), then theta = a + s renormalized.
    The smooth part still spreads into atom buckets (a density there is not ruled out);
    only the atoms' own mass is never smeared.
    """
    d = theta.size
    if d < 2:
        return
    for _ in range(passes):
        for i in range(d):
            smooth[i] = 0.0 if atom[i] else theta[i]
        tmp[0] = (2.0 * smooth[0] + smooth[1]) / 3.0
        tmp[d - 1] = (smooth[d - 2] + 2.0 * smooth[d - 1]) / 3.0
        for i in range(1, d - 1):
            tmp[i] = 0.5 * smooth[i] + 0.25 * (smooth[i - 1] + smooth[i + 1])
        total = 0.0
        for i in range(d):
            v = (1.0 - weight) * smooth[i] + weight * tmp[i]
            if atom[i]:
                v += theta[i]
            tmp[i] = v
            total += v
        for i in range(d):
            theta[i] = tmp[i] / total


@numba.njit(cache=True, fastmath=True)
def _masked_em_loop(
    base, data, offsets, starts, lengths, nk, theta, atom, passes, weight, tol, max_iter, tiny
):  # pragma: no cover - jit (tested against _smoothed_em_loop in the tests)
    """:func:`ldpkit.numeric._auto_kernels._smoothed_em_loop` with the smoothing applied to
    the buckets outside ``atom`` only. Returns (iterations, converged, log-likelihood)."""
    rows, d = base.size, theta.size
    mt = np.empty(rows)
    ratio = np.empty(rows)
    grad = np.empty(d)
    tmp = np.empty(d)
    smooth = np.empty(d)
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
        _masked_smooth(theta, atom, passes, weight, smooth, tmp)
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
def _masked_box_loop(
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
    atom,
    passes,
    weight,
    tol,
    max_iter,
    tiny,
):  # pragma: no cover - jit (tested against _masked_em_loop in the tests)
    """:func:`_masked_em_loop` with the box-band products (plateau + edges); same iterations."""
    rows, d = base.size, theta.size
    mt = np.empty(rows)
    ratio = np.empty(rows)
    grad = np.empty(d)
    diff = np.empty(d + 1)
    prefix = np.empty(d + 1)
    tmp = np.empty(d)
    smooth = np.empty(d)
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
        _masked_smooth(theta, atom, passes, weight, smooth, tmp)
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
