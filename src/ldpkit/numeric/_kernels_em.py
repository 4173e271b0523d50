"""Compiled EM/EMS iterations on a banded (or box-banded) transition matrix (see :mod:`ldpkit.numeric.em`).

Kept apart so that importing ldpkit (e.g. on a client that only randomizes) does not load
numba; the server-side estimator imports this module on first use.
"""

from __future__ import annotations

import numba
import numpy as np


# fastmath lets the row dot products use SIMD partial sums (deterministic for a given build)
@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
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


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _em_step(
    base, data, offsets, starts, lengths, nk, mt, ratio, grad, theta
):  # pragma: no cover - jit
    """Do one E + M step in place on theta, from ``mt = M theta`` (SW20 section 5.2).

    ``theta_i <- theta_i sum_j n_j M[j, i] / (M theta)_j``, then normalized. Shared by the
    EM/EMS loop and AutoDistribution's smoothed loop.
    """
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


# -- the smoothing step, shared by every loop ---------------------------------------------------


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _pass(src, dst, weight):  # pragma: no cover - jit
    """``dst = (1 - weight) src + weight S(src)``, unnormalized (S: EMS's kernel)."""
    d = src.size
    dst[0] = (2.0 * src[0] + src[1]) / 3.0
    dst[d - 1] = (src[d - 2] + 2.0 * src[d - 1]) / 3.0
    for i in range(1, d - 1):
        dst[i] = 0.5 * src[i] + 0.25 * (src[i - 1] + src[i + 1])
    if weight != 1.0:  # weight 1 (EMS, and every default strength) skips the mix
        for i in range(d):
            dst[i] = (1.0 - weight) * src[i] + weight * dst[i]


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _smooth(theta, tmp, passes, weight):  # pragma: no cover - jit
    """Smooth theta ``passes`` times, then renormalize, in place.

    Each pass is ``theta <- (1 - weight) theta + weight S(theta)``; S is EMS's kernel
    (:func:`ldpkit.numeric.em.smooth`: (1, 2, 1) / 4, boundary
    rows (2, 1) / 3). ``passes = 1, weight = 1`` is SW20's EMS step (section 5.5). The
    passes are linear, so one normalization at the end gives what normalizing after every
    pass gives (to rounding), in one sum instead of ``passes``.
    """
    d = theta.size
    if d < 2 or passes == 0:
        return
    for p in range(passes):  # theta -> tmp -> theta ...
        if p % 2 == 0:
            _pass(theta, tmp, weight)
        else:
            _pass(tmp, theta, weight)
    total = 0.0
    if passes % 2 == 1:  # the last pass wrote tmp
        for i in range(d):
            total += tmp[i]
        for i in range(d):
            theta[i] = tmp[i] / total
    else:
        for i in range(d):
            total += theta[i]
        for i in range(d):
            theta[i] /= total


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _floor(mt, tiny):  # pragma: no cover - jit
    """``mt <- max(mt, tiny)``: the log-likelihood's floor."""
    for j in range(mt.size):
        if mt[j] < tiny:
            mt[j] = tiny


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _loglik(nk, mt):  # pragma: no cover - jit
    """``sum_j n_j log (M theta)_j``."""
    ll = 0.0
    for j in range(nk.size):
        ll += nk[j] * np.log(mt[j])
    return ll


# -- the same products on a "box" band ---------------------------------------------------------
# A Square Wave's residual row (M - base, see em._Banded) is a constant plateau (the wave's
# height over the input buckets the wave covers whole) between a few partial-overlap entries at
# each end (at most 4 measured). Prefix sums then give both products of an EM iteration in
# O(d + rows + edges) instead of O(total band): about 40x fewer operations at d = 1024, eps = 1
# (mean band 348 entries a row). em._box_rows gives each row's plateau [ps, pe) and value,
# the rows covering each input bucket, and the edge entries in fixed slots per row and per
# input bucket (plus a short spill list): loops over them run without the mispredicted
# branches of per-row loops of 0 to 8 entries and without scatters, and the E-step gathers
# the plateaus' share from row prefix sums (together about 35 % faster per iteration than
# per-row loops, measured). Used by _em_loop below and by AutoDistribution's smoothed
# loop (numeric/_kernels_auto.py).


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _scan(x, out):  # pragma: no cover - jit
    """Compute ``out[i] = x[0] + ... + x[i - 1]`` (``out[0] = 0``).

    Four quarters are summed as independent chains, then offset: a single running sum waits
    on every add's latency, four interleaved ones take half the time (measured at 1024
    entries).
    """
    n = x.size
    q = n // 4
    out[0] = 0.0
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    a3 = 0.0
    for i in range(q):
        a0 += x[i]
        out[i + 1] = a0
        a1 += x[q + i]
        out[q + i + 1] = a1
        a2 += x[2 * q + i]
        out[2 * q + i + 1] = a2
        a3 += x[3 * q + i]
        out[3 * q + i + 1] = a3
    for i in range(4 * q, n):
        a3 += x[i]
        out[i + 1] = a3
    o1 = a0
    o2 = o1 + a1
    o3 = o2 + a2
    for i in range(q + 1, 2 * q + 1):
        out[i] += o1
    for i in range(2 * q + 1, 3 * q + 1):
        out[i] += o2
    for i in range(3 * q + 1, n + 1):
        out[i] += o3


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _box_matvec(base, box, theta, prefix, out):  # pragma: no cover - jit
    """Compute ``out = M theta`` on the box band ``box`` (an :class:`ldpkit.numeric.em._Box`).

    Per row ``base total + plateau (prefix[pe] - prefix[ps])``, then the edge entries, each
    row's in the order of the row (slots, then spill).
    """
    plateau, ps, pe = box.plateau, box.ps, box.pe
    row_slots, row_weights = box.row_slots, box.row_weights
    row_spill_rows, row_spill_cols = box.row_spill_rows, box.row_spill_cols
    row_spill_values = box.row_spill_values
    _scan(theta, prefix)
    total = prefix[theta.size]
    for j in range(base.size):
        out[j] = base[j] * total + plateau[j] * (prefix[pe[j]] - prefix[ps[j]])
    for k in range(row_slots.shape[0]):
        cols = row_slots[k]
        weights = row_weights[k]
        for j in range(base.size):
            out[j] += weights[j] * theta[cols[j]]
    for e in range(row_spill_rows.size):
        out[row_spill_rows[e]] += row_spill_values[e] * theta[row_spill_cols[e]]


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _matvec(
    use_box, base, data, offsets, starts, lengths, box, prefix, theta, out
):  # pragma: no cover - jit
    """Compute ``out = M theta``: the box products when ``use_box``, the band ones otherwise."""
    if use_box:
        _box_matvec(base, box, theta, prefix, out)
    else:
        _band_matvec(base, data, offsets, starts, lengths, theta, out)


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _ratios(base, nk, mt, ratio, tiny):  # pragma: no cover - jit
    """Compute the ratios in one pass over the rows after ``mt = M theta``.

    Floor ``mt`` at tiny (the log-likelihood's floor), ``ratio = n / mt`` for the next
    E-step; returns ``sum_j base_j ratio_j`` (the E-step's share of the constant part).
    """
    shared = 0.0
    for j in range(nk.size):
        m = max(mt[j], tiny)
        mt[j] = m
        r = nk[j] / m
        ratio[j] = r
        shared += base[j] * r
    return shared


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _predict(
    use_box, base, data, offsets, starts, lengths, box, prefix, nk, theta, mt, ratio, tiny
):  # pragma: no cover - jit
    """Compute ``mt = M theta`` floored at tiny, the head of every EM iteration.

    On the box band also the next E-step's ratios (:func:`_ratios`), returning their
    ``shared`` part; the band's :func:`_em_step` computes its ratios itself (returns 0).
    """
    if use_box:
        _box_matvec(base, box, theta, prefix, mt)
        return _ratios(base, nk, mt, ratio, tiny)
    _band_matvec(base, data, offsets, starts, lengths, theta, mt)
    _floor(mt, tiny)
    return 0.0


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _update(
    use_box, base, data, offsets, starts, lengths, box,
    nk, mt, ratio, shared, plat, run, grad, theta, normalize,
):  # fmt: skip  # pragma: no cover - jit
    """Do one E + M step in place on theta after :func:`_predict`: box or band products.

    ``normalize`` applies to the box step only (:func:`_box_em_step`); the band step
    always normalizes.
    """
    if use_box:
        _box_em_step(box, ratio, shared, plat, run, grad, theta, normalize)
    else:
        _em_step(base, data, offsets, starts, lengths, nk, mt, ratio, grad, theta)


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _box_em_step(box, ratio, shared, plat, run, grad, theta, normalize):  # pragma: no cover - jit
    """Do :func:`_em_step` on the box band, from ``ratio = n / M theta`` and ``shared``.

    See :func:`_ratios`. The plateaus' share of ``M^T ratio`` at input bucket i is a
    difference of prefix sums (``run``, rows + 1 entries, of ``plat = plateau ratio``) over
    the rows covering i: a gather, no scatter; the edges' share by slots (a gather) and
    spill list. ``normalize=False`` leaves theta unnormalized for a smoothing step that
    normalizes anyway (its passes are linear).
    """
    plateau, cover_lo, cover_hi = box.plateau, box.cover_lo, box.cover_hi
    col_slots, col_weights = box.col_slots, box.col_weights
    col_spill_rows, col_spill_cols = box.col_spill_rows, box.col_spill_cols
    col_spill_values = box.col_spill_values
    d = theta.size
    for j in range(ratio.size):
        plat[j] = plateau[j] * ratio[j]
    _scan(plat, run)
    for i in range(d):
        grad[i] = shared + (run[cover_hi[i]] - run[cover_lo[i]])
    for k in range(col_slots.shape[0]):
        rows = col_slots[k]
        weights = col_weights[k]
        for i in range(d):
            grad[i] += weights[i] * ratio[rows[i]]
    for e in range(col_spill_rows.size):
        grad[col_spill_cols[e]] += col_spill_values[e] * ratio[col_spill_rows[e]]
    total = 0.0
    for i in range(d):
        theta[i] *= grad[i]
        total += theta[i]
    if normalize:
        for i in range(d):
            theta[i] /= total


# nogil: the bootstrap runs its B independent fits on plain threads (ldpkit._parallel).
@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _em_loop(
    use_box, base, data, offsets, starts, lengths, box,
    nk, theta, smoothing, tol, max_iter, tiny, trace,
):  # fmt: skip  # pragma: no cover - jit (tested against the numpy reference loop)
    """EM/EMS iterations in place on theta; returns (iterations, converged).

    The products on the box band ``box`` (an :class:`ldpkit.numeric.em._Box`) when
    ``use_box``, else on the band ``base, data, offsets, starts, lengths``: same
    iterations, same stop, same trace.
    """
    rows, d = base.size, theta.size
    mt = np.empty(rows)
    ratio = np.empty(rows)
    grad = np.empty(d)
    plat = np.empty(rows)
    run = np.empty(rows + 1)
    prefix = np.empty(d + 1)
    tmp = np.empty(d)
    passes = 1 if smoothing else 0
    # :func:`_predict` and :func:`_update` written out on purpose: called here they made
    # EM over 256 buckets ~10 % slower (CPU 13.8 vs 12.4 ms for 3,100 iterations; still
    # ~5 % with numba's inline="always"). AutoDistribution's smoothed loop, heavier per
    # iteration, calls them.
    shared = 0.0  # the box E-step's constant part (:func:`_ratios`)
    if use_box:
        _box_matvec(base, box, theta, prefix, mt)
        shared = _ratios(base, nk, mt, ratio, tiny)
    else:
        _band_matvec(base, data, offsets, starts, lengths, theta, mt)
        _floor(mt, tiny)
    trace[0] = _loglik(nk, mt)
    it = 0
    converged = False
    while it < max_iter:
        it += 1
        if use_box:
            _box_em_step(box, ratio, shared, plat, run, grad, theta, passes == 0)
        else:
            _em_step(base, data, offsets, starts, lengths, nk, mt, ratio, grad, theta)
        _smooth(theta, tmp, passes, 1.0)
        if use_box:
            _box_matvec(base, box, theta, prefix, mt)
            shared = _ratios(base, nk, mt, ratio, tiny)
        else:
            _band_matvec(base, data, offsets, starts, lengths, theta, mt)
            _floor(mt, tiny)
        trace[it] = _loglik(nk, mt)
        if abs(trace[it] - trace[it - 1]) < tol:
            converged = True
            break
    return it, converged
