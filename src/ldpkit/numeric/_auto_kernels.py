"""Compiled EM iterations with a smoothing step of adjustable strength (see
:mod:`ldpkit.numeric.auto`).

Kept apart, like :mod:`ldpkit.numeric._em_kernels`, so that a client that only randomizes
never loads numba. The products, the E + M step and the smoothing step are the EM/EMS
loop's own (:mod:`ldpkit.numeric._em_kernels`); what differs is the stopping test, which
these loops evaluate without a logarithm in most iterations (:func:`_settled`), and the
smoothing's strength, and the end-atom variants' smoothing that leaves marked buckets alone
(:func:`_masked_smooth`).
"""

from __future__ import annotations

import numba
import numpy as np

from ._em_kernels import (
    _band_matvec,
    _box_em_step,
    _box_matvec,
    _em_step,
    _floor,
    _loglik,
    _pass,
    _ratios,
    _smooth,
)


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _masked_smooth(theta, atom, passes, weight, smooth, tmp):  # pragma: no cover - jit
    """``passes`` smoothing passes on the part of theta outside the ``atom`` buckets, then
    one renormalization, in place (the end-atom candidates of
    :meth:`ldpkit.numeric.AutoDistribution.estimate`).

    theta = a + s with a the mass on the atom buckets, s the rest; each pass is
    ``s <- (1 - weight) s + weight S(s)`` (S the EMS kernel,
    :func:`ldpkit.numeric._em_kernels._pass`) and theta = a + s. The smooth part still
    spreads into atom buckets (a density there is not ruled out); only the atoms' own mass
    is never smeared. With no bucket marked this is
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


#: Machine epsilon of float64 (twice the unit roundoff: the error bounds below are generous).
_EPS = 2.220446049250313e-16


@numba.njit(cache=True, fastmath=True, error_model="numpy")
def _change(nk, mt, old):  # pragma: no cover - jit
    """Third-order Taylor estimate of ``sum_j n_j log(mt_j / old_j)`` and what bounds its
    error: returns (estimate, sum n u^4, sum n |u|, number of observed rows with |u| > 1/2)
    with ``u = mt / old - 1``. No logarithm, and counts and sums only (no max): the loop
    vectorizes."""
    a = 0.0
    q = 0.0
    s1 = 0.0
    far = 0.0
    for j in range(nk.size):
        w = nk[j]
        u = mt[j] / old[j] - 1.0  # finite: old >= tiny and mt <= 1
        au = np.abs(u)
        far += 1.0 if (au > 0.5 and w > 0.0) else 0.0
        u = u if au <= 1.0 else 0.0  # bounded; the estimate is only used when far == 0
        u2 = u * u
        a += w * (u - 0.5 * u2 + u2 * u * (1.0 / 3.0))
        q += w * (u2 * u2)
        s1 += w * np.abs(u)
    return a, q, s1, far


@numba.njit(cache=True, fastmath=True, error_model="numpy")
def _settled(nk, total, mt, old, tol, s_old):  # pragma: no cover - jit
    """Whether ``|ll(mt) - ll(old)| >= tol`` is certain without computing either
    log-likelihood ``ll(x) = sum_j n_j log x_j`` (``total = sum_j n_j``); returns (certain, bound on sum_j n_j
    |log mt_j|).

    The change is ``sum_j n_j log(1 + u_j)``, ``u = mt / old - 1``. For ``|u| <= 1/2`` the
    series ``u - u^2/2 + u^3/3`` leaves at most ``u^4 / (4 (1 - |u|)) <= u^4 / 2``; the
    rounding of that sum is bounded by a few eps per term, and that of the two
    log-likelihoods the loop would compare by ``(rows + 4) eps sum_j n_j |log x_j|`` each
    (a float sum's worst case). When the estimate clears ``tol`` by twice all of that, the
    computed log-likelihoods would differ by at least tol too: not converged, as the
    log-evaluating loop would decide. Otherwise the caller evaluates both exactly.
    """
    a, q, s1, far = _change(nk, mt, old)
    return _decide(a, q, s1, far, nk.size, total, tol, s_old)


@numba.njit(cache=True, fastmath=True, error_model="numpy")
def _decide(a, q, s1, far, rows, total, tol, s_old):  # pragma: no cover - jit
    """:func:`_settled` from :func:`_change`'s sums."""
    if far > 0.0:
        return False, 0.0  # the caller evaluates exactly and resets the bound
    rem = 0.5 * q * (1.0 + 1e-6)
    rho_a = 6.0 * _EPS * (total + (rows + 8.0) * s1)
    s_new = s_old + abs(a) + rem + rho_a  # |ll(mt)| <= |ll(old)| + |change|
    rho_ll = (rows + 4.0) * _EPS * (s_old + s_new)
    margin = 2.0 * (rem + rho_a + rho_ll)
    return abs(a) > tol + margin, s_new


@numba.njit(cache=True, fastmath=True, error_model="numpy")
def _ratios_change(base, nk, mt, old, ratio, tiny):  # pragma: no cover - jit
    """:func:`ldpkit.numeric._em_kernels._ratios` and :func:`_change` in one pass over the
    rows: returns (shared, estimate, sum n u^4, sum n |u|, rows far)."""
    shared = 0.0
    a = 0.0
    q = 0.0
    s1 = 0.0
    far = 0.0
    for j in range(nk.size):
        m = mt[j] if mt[j] > tiny else tiny
        mt[j] = m
        w = nk[j]
        r = w / m
        ratio[j] = r
        shared += base[j] * r
        u = m / old[j] - 1.0
        au = np.abs(u)
        far += 1.0 if (au > 0.5 and w > 0.0) else 0.0
        u = u if au <= 1.0 else 0.0
        u2 = u * u
        a += w * (u - 0.5 * u2 + u2 * u * (1.0 / 3.0))
        q += w * (u2 * u2)
        s1 += w * np.abs(u)
    return shared, a, q, s1, far


@numba.njit(cache=True, fastmath=True, error_model="numpy")
def _magnitude(ll, total):  # pragma: no cover - jit
    """Bound on ``sum_j n_j |log mt_j|`` from ``ll`` (every ``mt_j <= 1`` up to rounding)."""
    return abs(ll) + 1e-12 * total + 1e-300


@numba.njit(cache=True, fastmath=True, error_model="numpy")
def _smoothed_em_loop(
    base,
    data,
    offsets,
    starts,
    lengths,
    nk,
    theta,
    atom,
    masked,
    passes,
    weight,
    tol,
    max_iter,
    tiny,
):  # pragma: no cover - jit (tested against the numpy reference in the tests)
    """EM updates in place on theta, each followed by ``passes`` smoothing passes.

    A pass is ``theta <- (1 - weight) theta + weight S(theta)`` with S the EMS kernel
    (:func:`ldpkit.numeric.em.smooth`), renormalized. ``passes = 1, weight = 1`` is EMS,
    ``passes = 0`` plain EM. With ``masked``, the passes leave the mass on the ``atom``
    buckets alone (:func:`_masked_smooth`). Stops when the log-likelihood changes by less than tol, tested
    as :func:`_settled` says. Returns (iterations, converged, final log-likelihood).
    """
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
        if masked:
            _masked_smooth(theta, atom, passes, weight, smooth, tmp)
        else:
            _smooth(theta, tmp, passes, weight)
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
def _smoothed_box_loop(
    base,
    plateau,
    ps,
    pe,
    cover_lo,
    cover_hi,
    row_slots,
    row_weights,
    row_spill_rows,
    row_spill_cols,
    row_spill_values,
    col_slots,
    col_weights,
    col_spill_rows,
    col_spill_cols,
    col_spill_values,
    nk,
    theta,
    atom,
    masked,
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
    old = np.empty(rows)
    ratio = np.empty(rows)
    grad = np.empty(d)
    plat = np.empty(rows)
    run = np.empty(rows + 1)
    prefix = np.empty(d + 1)
    tmp = np.empty(d)
    smooth = np.empty(d)
    total = 0.0
    for j in range(rows):
        total += nk[j]
    _box_matvec(
        base,
        plateau,
        ps,
        pe,
        row_slots,
        row_weights,
        row_spill_rows,
        row_spill_cols,
        row_spill_values,
        theta,
        prefix,
        mt,
    )
    shared = _ratios(base, nk, mt, ratio, tiny)
    ll = _loglik(nk, mt)
    known = True
    size = _magnitude(ll, total)
    it = 0
    converged = False
    while it < max_iter:
        it += 1
        _box_em_step(
            plateau,
            cover_lo,
            cover_hi,
            col_slots,
            col_weights,
            col_spill_rows,
            col_spill_cols,
            col_spill_values,
            ratio,
            shared,
            plat,
            run,
            grad,
            theta,
            passes == 0,
        )
        if masked:
            _masked_smooth(theta, atom, passes, weight, smooth, tmp)
        else:
            _smooth(theta, tmp, passes, weight)
        mt, old = old, mt
        _box_matvec(
            base,
            plateau,
            ps,
            pe,
            row_slots,
            row_weights,
            row_spill_rows,
            row_spill_cols,
            row_spill_values,
            theta,
            prefix,
            mt,
        )
        shared, a, q, s1, far = _ratios_change(base, nk, mt, old, ratio, tiny)
        certain, size = _decide(a, q, s1, far, rows, total, tol, size)
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
