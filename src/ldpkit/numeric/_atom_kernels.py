"""Compiled EM iterations whose smoothing step leaves a set of buckets alone (the point masses
of :meth:`ldpkit.numeric.AutoDistribution.estimate`'s end-atom candidates).

Kept apart, like :mod:`ldpkit.numeric._auto_kernels`, so that a client that only randomizes
never loads numba. The loops are :mod:`~ldpkit.numeric._auto_kernels`'s with the smoothing
step replaced by :func:`_masked_smooth`; with no bucket marked they run exactly the same
iterates (tested).
"""

from __future__ import annotations

import numba
import numpy as np

from ._auto_kernels import _decide, _magnitude, _ratios_change, _settled
from ._em_kernels import (
    _band_matvec,
    _box_em_step,
    _box_matvec,
    _em_step,
    _floor,
    _loglik,
    _pass,
    _ratios,
)


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _masked_smooth(theta, atom, passes, weight, smooth, tmp):  # pragma: no cover - jit
    """``passes`` smoothing passes on the part of theta outside the ``atom`` buckets, then
    one renormalization, in place.

    theta = a + s with a the mass on the atom buckets, s the rest; each pass is
    ``s <- (1 - weight) s + weight S(s)`` (S the EMS kernel, :func:`_pass`) and theta = a + s.
    The smooth part still spreads into atom buckets (a density there is not ruled out);
    only the atoms' own mass is never smeared. With no bucket marked this is
    :func:`ldpkit.numeric._em_kernels._smooth` to the bit.
    """
    d = theta.size
    if d < 2 or passes == 0:
        return
    for _ in range(passes):
        for i in range(d):
            smooth[i] = 0.0 if atom[i] else theta[i]
        _pass(smooth, tmp, weight)
        for i in range(d):
            theta[i] = tmp[i] + theta[i] if atom[i] else tmp[i]
    total = 0.0
    for i in range(d):
        total += theta[i]
    for i in range(d):
        theta[i] /= total


@numba.njit(cache=True, fastmath=True, error_model="numpy")
def _masked_em_loop(
    base, data, offsets, starts, lengths, nk, theta, atom, passes, weight, tol, max_iter, tiny
):  # pragma: no cover - jit (tested against the unmasked loop in the tests)
    """:func:`ldpkit.numeric._auto_kernels._smoothed_em_loop` with the smoothing applied to
    the buckets outside ``atom`` only (:func:`_masked_smooth`); with no bucket marked, the
    same iterates to the bit. Returns (iterations, converged, log-likelihood)."""
    rows, d = base.size, theta.size
    mt = np.empty(rows)
    old = np.empty(rows)
    ratio = np.empty(rows)
    grad = np.empty(d)
    tmp = np.empty(d)
    smooth = np.empty(d)
    total = 0.0
    for j in range(rows):
        total += nk[j]
    _band_matvec(base, data, offsets, starts, lengths, theta, mt)
    _floor(mt, tiny)
    ll = _loglik(nk, mt)
    known = True  # ll is the log-likelihood of mt
    size = _magnitude(ll, total)
    it = 0
    converged = False
    while it < max_iter:
        it += 1
        _em_step(base, data, offsets, starts, lengths, nk, mt, ratio, grad, theta)
        _masked_smooth(theta, atom, passes, weight, smooth, tmp)
        mt, old = old, mt
        _band_matvec(base, data, offsets, starts, lengths, theta, mt)
        _floor(mt, tiny)
        certain, size = _settled(nk, total, mt, old, tol, size)
        if certain:
            known = False
            continue
        prev = ll if known else _loglik(nk, old)
        ll = _loglik(nk, mt)
        known = True
        size = _magnitude(ll, total)
        if abs(ll - prev) < tol:
            converged = True
            break
    if not known:
        ll = _loglik(nk, mt)
    return it, converged, ll


@numba.njit(cache=True, fastmath=True, error_model="numpy")
def _masked_box_loop(
    base,
    plateau,
    ps,
    pe,
    cover_lo,
    cover_hi,
    edge_rows,
    edge_cols,
    edge_values,
    nk,
    theta,
    atom,
    passes,
    weight,
    tol,
    max_iter,
    tiny,
):  # pragma: no cover - jit (tested against the unmasked loop in the tests)
    """:func:`_masked_em_loop` with the box-band products
    (:func:`ldpkit.numeric._auto_kernels._smoothed_box_loop`'s); same iterations."""
    rows, d = base.size, theta.size
    mt = np.empty(rows)
    old = np.empty(rows)
    ratio = np.empty(rows)
    grad = np.empty(d)
    run = np.empty(rows + 1)
    prefix = np.empty(d + 1)
    tmp = np.empty(d)
    smooth = np.empty(d)
    total = 0.0
    for j in range(rows):
        total += nk[j]
    _box_matvec(base, plateau, ps, pe, edge_rows, edge_cols, edge_values, theta, prefix, mt)
    shared = _ratios(base, nk, mt, ratio, tiny)
    ll = _loglik(nk, mt)
    known = True
    size = _magnitude(ll, total)
    it = 0
    converged = False
    while it < max_iter:
        it += 1
        _box_em_step(
            plateau, cover_lo, cover_hi, edge_rows, edge_cols, edge_values,
            ratio, shared, run, grad, theta, passes == 0,
        )  # fmt: skip
        _masked_smooth(theta, atom, passes, weight, smooth, tmp)
        mt, old = old, mt
        _box_matvec(base, plateau, ps, pe, edge_rows, edge_cols, edge_values, theta, prefix, mt)
        shared, a, q, s1, umax = _ratios_change(base, nk, mt, old, ratio, tiny)
        certain, size = _decide(a, q, s1, umax, rows, total, tol, size)
        if certain:
            known = False
            continue
        prev = ll if known else _loglik(nk, old)
        ll = _loglik(nk, mt)
        known = True
        size = _magnitude(ll, total)
        if abs(ll - prev) < tol:
            converged = True
            break
    if not known:
        ll = _loglik(nk, mt)
    return it, converged, ll
