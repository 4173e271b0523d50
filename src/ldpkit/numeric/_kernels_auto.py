"""Compiled EM iterations with a smoothing step of adjustable strength.

See :mod:`ldpkit.numeric.auto`.

Kept apart, like :mod:`ldpkit.numeric._kernels_em`, so that a client that only randomizes
never loads numba. The products, the E + M step and the smoothing step are the EM/EMS
loop's own (:mod:`ldpkit.numeric._kernels_em`); what differs is the stopping test, which
these loops evaluate without a logarithm in most iterations (:func:`_settled`), and the
smoothing's strength, and the end-atom variants' smoothing that leaves marked buckets alone
(:func:`_masked_smooth`).
"""

from __future__ import annotations

import numba
import numpy as np

from ._kernels_em import (
    _band_matvec,
    _box_em_step,
    _box_matvec,
    _floor,
    _loglik,
    _matvec,
    _pass,
    _predict,
    _ratios,
    _smooth,
    _update,
)


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _renormalize(theta):  # pragma: no cover - jit
    """Divide ``theta`` by its sum, in place.

    Used after the masked and windowed smoothing passes, which move mass between buckets
    but do not exactly preserve the total at the edges.
    """
    total = 0.0
    for i in range(theta.size):
        total += theta[i]
    for i in range(theta.size):
        theta[i] /= total


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _masked_smooth(theta, atom, passes, weight, smooth, tmp):  # pragma: no cover - jit
    """Smooth theta outside the ``atom`` buckets ``passes`` times, then renormalize.

    In place; the end-atom candidates of :meth:`ldpkit.numeric.AutoDistribution.estimate`.

    theta = a + s with a the mass on the atom buckets, s the rest; each pass is
    ``s <- (1 - weight) s + weight S(s)`` (S the EMS kernel,
    :func:`ldpkit.numeric._kernels_em._pass`) and theta = a + s. The smooth part still
    spreads into atom buckets (a density there is not ruled out); only the atoms' own mass
    is never smeared. With no bucket marked this is
    :func:`ldpkit.numeric._kernels_em._smooth` to the bit.
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
    _renormalize(theta)


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _window_smooth(theta, frozen, passes, weight, smooth, tmp):  # pragma: no cover - jit
    """Smooth the buckets outside ``frozen`` ``passes`` times, then renormalize.

    In place; the joint fits' end windows of
    :meth:`ldpkit.numeric.AutoDistribution.estimate`.

    A frozen bucket keeps its value and receives nothing: the passes act on a copy of theta
    in which every frozen bucket holds the value of the nearest free bucket on its left (the
    first free bucket for frozen ones before it), so at a window's edge the kernel sees a
    flat continuation (a reflecting edge, to first order) and neither sends mass into the
    window nor draws mass from it. EM alone moves the frozen buckets' mass.
    """
    d = theta.size
    if d < 2 or passes == 0:
        return
    first = 0
    while first < d - 1 and frozen[first]:
        first += 1
    for _ in range(passes):
        last = theta[first]
        for i in range(d):
            if frozen[i]:
                smooth[i] = last
            else:
                smooth[i] = theta[i]
                last = theta[i]
        _pass(smooth, tmp, weight)
        for i in range(d):
            if not frozen[i]:
                theta[i] = tmp[i]
    _renormalize(theta)


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _smooth_step(theta, atom, masked, passes, weight, smooth, tmp):  # pragma: no cover - jit
    """Apply the smoothing after an EM update.

    ``masked`` 0 plain (:func:`_smooth`), 1 end atoms (:func:`_masked_smooth` on ``atom``),
    2 end windows (:func:`_window_smooth` with ``atom`` the frozen buckets).
    """
    if masked == 2:
        _window_smooth(theta, atom, passes, weight, smooth, tmp)
    elif masked == 1:
        _masked_smooth(theta, atom, passes, weight, smooth, tmp)
    else:
        _smooth(theta, tmp, passes, weight)


#: Machine epsilon of float64 (twice the unit roundoff: the error bounds below are generous).
_EPS = 2.220446049250313e-16


@numba.njit(inline="always", fastmath=True, error_model="numpy")
def _change_terms(w, m, o):  # pragma: no cover - jit
    """Return one row's terms of :func:`_change`'s four sums, for weight w, ``u = m / o - 1``.

    Inlined into each loop that sums them (the loops still vectorize).
    """
    u = m / o - 1.0  # finite: o >= tiny and m <= 1
    au = np.abs(u)
    far = 1.0 if (au > 0.5 and w > 0.0) else 0.0
    u = u if au <= 1.0 else 0.0  # bounded; the estimate is only used when far == 0
    u2 = u * u
    return w * (u - 0.5 * u2 + u2 * u * (1.0 / 3.0)), w * (u2 * u2), w * np.abs(u), far


@numba.njit(cache=True, fastmath=True, error_model="numpy")
def _change(nk, mt, old):  # pragma: no cover - jit
    """Estimate ``sum_j n_j log(mt_j / old_j)`` to third order, with a bound on its error.

    Returns (estimate, sum n u^4, sum n |u|, number of observed rows with |u| > 1/2) with
    ``u = mt / old - 1``. No logarithm, and counts and sums only (no max): the loop
    vectorizes.
    """
    a = 0.0
    q = 0.0
    s1 = 0.0
    far = 0.0
    for j in range(nk.size):
        da, dq, ds, df = _change_terms(nk[j], mt[j], old[j])
        a += da
        q += dq
        s1 += ds
        far += df
    return a, q, s1, far


@numba.njit(cache=True, fastmath=True, error_model="numpy")
def _settled(nk, total, mt, old, tol, s_old):  # pragma: no cover - jit
    """Tell whether ``|ll(mt) - ll(old)| >= tol`` is certain without either log-likelihood.

    ``ll(x) = sum_j n_j log x_j`` (``total = sum_j n_j``); returns (certain, bound on
    sum_j n_j |log mt_j|).

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
    """Compute the EM ratios and the change test in one pass over the rows.

    :func:`ldpkit.numeric._kernels_em._ratios` and :func:`_change` together; returns
    (shared, estimate, sum n u^4, sum n |u|, rows far).
    """
    shared = 0.0
    a = 0.0
    q = 0.0
    s1 = 0.0
    far = 0.0
    for j in range(nk.size):
        m = mt[j] if mt[j] > tiny else tiny
        mt[j] = m
        r = nk[j] / m
        ratio[j] = r
        shared += base[j] * r
        da, dq, ds, df = _change_terms(nk[j], m, old[j])
        a += da
        q += dq
        s1 += ds
        far += df
    return shared, a, q, s1, far


@numba.njit(cache=True, fastmath=True, error_model="numpy")
def _magnitude(ll, total):  # pragma: no cover - jit
    """Bound on ``sum_j n_j |log mt_j|`` from ``ll`` (every ``mt_j <= 1`` up to rounding)."""
    return abs(ll) + 1e-12 * total + 1e-300


@numba.njit(cache=True, fastmath=True, error_model="numpy")
def _smoothed_loop(
    use_box, base, data, offsets, starts, lengths, box,
    nk, theta, atom, masked, passes, weight, tol, max_iter, tiny,
):  # fmt: skip  # pragma: no cover - jit (tested against the numpy reference in the tests)
    """EM updates in place on theta, each followed by ``passes`` smoothing passes.

    A pass is ``theta <- (1 - weight) theta + weight S(theta)`` with S the EMS kernel
    (:func:`ldpkit.numeric.em.smooth`), renormalized. ``passes = 1, weight = 1`` is EMS,
    ``passes = 0`` plain EM. With ``masked``, the passes leave the mass on the ``atom``
    buckets alone (:func:`_masked_smooth`). The products on the box band ``box`` (an
    :class:`ldpkit.numeric.em._Box`) when ``use_box``, else on the band ``base, data,
    offsets, starts, lengths``. Stops when the log-likelihood changes by less than tol,
    tested as :func:`_settled` says. Returns (iterations, converged, final log-likelihood).
    """
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
    # shared: the box E-step's constant part (:func:`ldpkit.numeric._kernels_em._ratios`)
    shared = _predict(
        use_box, base, data, offsets, starts, lengths, box, prefix, nk, theta, mt, ratio, tiny
    )
    ll = _loglik(nk, mt)
    known = True  # ll is the log-likelihood of mt
    size = _magnitude(ll, total)
    it = 0
    converged = False
    while it < max_iter:
        it += 1
        _update(use_box, base, data, offsets, starts, lengths, box,
                nk, mt, ratio, shared, plat, run, grad, theta, passes == 0)  # fmt: skip
        _smooth_step(theta, atom, masked, passes, weight, smooth, tmp)
        mt, old = old, mt
        if use_box:
            _box_matvec(base, box, theta, prefix, mt)
            shared, a, q, s1, far = _ratios_change(base, nk, mt, old, ratio, tiny)
            certain, size = _decide(a, q, s1, far, rows, total, tol, size)
        else:
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


# -- the hybrid design: Square Wave reports plus hierarchical-histogram level counts ----------
# AutoDistribution(hh_share > 0). Rows of the joint model are the SW output buckets followed by
# the nodes of every HH level, coarsest first (level k: B^k nodes, node v holding the leaves
# [v B^(h-k), (v + 1) B^(h-k)) of the d buckets; the deepest level's node i is bucket i, and
# its padding nodes past d hold no mass). An HH row's "prediction" is the probability that a
# report of that level supports the node, q_k + (p_k - q_k) a_v with a_v the node's mass, and
# its weight (nk) the node's support count times w_k (see AutoDistribution._hybrid_model).
# The kernels run over the HH rows as one flat array with per-row constants (row_q = q_k,
# row_gain = p_k - q_k, parent: the row of the node's parent, hrows for level 1), so that
# every pass is one loop over 4^1 + ... + 4^h rows, not a loop per level.


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _hh_masses(theta, leaf, branching, mass):  # pragma: no cover - jit
    """Compute ``mass[j] = a_v``, the mass of every HH node.

    The deepest level (rows ``leaf`` on) is theta itself (0 on padding), every coarser node
    the sum of its B children (the rows ``leaf`` - 1 down to 0, children before parents:
    levels are stored coarsest first and a node's children are consecutive rows of the next
    level).
    """
    d = theta.size
    hrows = mass.size
    for i in range(d):
        mass[leaf + i] = theta[i]
    for j in range(leaf + d, hrows):
        mass[j] = 0.0
    # node v of a level at offset o has its children at o' + B v, o' the next level's offset
    hi = hrows
    lo = leaf
    while lo > 0:
        size = (hi - lo) // branching  # nodes of the coarser level
        up = lo - size
        for v in range(size):
            c = lo + branching * v
            total = 0.0
            for t in range(branching):
                total += mass[c + t]
            mass[up + v] = total
        hi, lo = lo, up


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _hh_ratios_change(hk, mass, row_q, row_gain, hmt, hold, hratio, tiny):  # pragma: no cover
    """Compute the HH rows' ratios and change sums from the node masses.

    ``hmt = max(q_k + (p_k - q_k) a_v, tiny)``, ``hratio = hk / hmt``, and :func:`_change`'s
    sums of ``hk`` between ``hold`` and ``hmt``, in one pass over the HH rows.
    """
    a = 0.0
    q4 = 0.0
    s1 = 0.0
    far = 0.0
    for j in range(hk.size):
        m = row_q[j] + row_gain[j] * mass[j]
        m = m if m > tiny else tiny
        hmt[j] = m
        hratio[j] = hk[j] / m
        da, dq, ds, df = _change_terms(hk[j], m, hold[j])
        a += da
        q4 += dq
        s1 += ds
        far += df
    return a, q4, s1, far


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _hh_first(hk, mass, row_q, row_gain, hmt, hratio, tiny):  # pragma: no cover - jit
    """:func:`_hh_ratios_change` without a previous prediction (the loop's start)."""
    for j in range(hk.size):
        m = row_q[j] + row_gain[j] * mass[j]
        m = m if m > tiny else tiny
        hmt[j] = m
        hratio[j] = hk[j] / m


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _hh_grad(ratio, row_gain, parent, acc):  # pragma: no cover - jit
    """Compute ``acc[j] = sum over j and its ancestors a of (p_a - q_a) ratio[a]``.

    At the deepest level (bucket i) this is the HH levels' share of the E-step,
    ``sum_k (p_k - q_k) ratio[node_k(i)]``: the expected number of *signal* hits of i's
    nodes per unit of theta_i. One pass down the tree (a node's sum is its parent's plus its
    own term; ``acc`` has one more slot, 0, the parent of level 1), O(nodes) instead of
    O(levels d).

    A node's support count is background hits (rate q_k, whatever the value) plus signal
    hits (rate p_k - q_k from the node's own users); the complete data of this EM are the
    signal hits' buckets, the background is known (EM for a Poisson intensity with a known
    background, Shepp and Vardi 1982 with Lange and Carson 1984's additive term). Assigning
    the background to theta too (the full channel ``q_k + (p_k - q_k) [v = node(i)]``)
    would add the same term to every bucket and slow EM down by about the hits per report
    over ``p_k - q_k`` (hundreds for OLH at 1024 nodes; measured: no convergence in 1000
    iterations).
    """
    hrows = ratio.size
    acc[hrows] = 0.0
    for j in range(hrows):
        acc[j] = acc[parent[j]] + row_gain[j] * ratio[j]


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _band_grad(base, data, offsets, starts, lengths, ratio, grad):  # pragma: no cover - jit
    """Compute ``grad = M^T ratio`` on the band.

    :func:`ldpkit.numeric._kernels_em._em_step`'s gather, without its update of theta.
    """
    shared = 0.0
    for j in range(base.size):
        shared += base[j] * ratio[j]
    for i in range(grad.size):
        grad[i] = shared
    for j in range(base.size):
        length, r = lengths[j], ratio[j]
        row = data[offsets[j] : offsets[j] + length]
        g = grad[starts[j] : starts[j] + length]
        for k in range(length):
            g[k] += row[k] * r


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _em_gather(
    use_box, base, data, offsets, starts, lengths, box, ratio, shared, plat, run, grad, theta
):  # pragma: no cover - jit
    """Multiply ``theta`` by ``M^T ratio`` (the EM step's gather): box or band products."""
    if use_box:
        _box_em_step(box, ratio, shared, plat, run, grad, theta, False)
    else:
        _band_grad(base, data, offsets, starts, lengths, ratio, grad)
        for i in range(theta.size):
            theta[i] *= grad[i]


@numba.njit(cache=True, fastmath=True, nogil=True, error_model="numpy")
def _hybrid_finish(
    theta, th0, acc, leaf, atom, masked, passes, weight, smooth, tmp
):  # pragma: no cover
    """Finish a joint update: add the HH gather, normalize, smooth.

    ``theta += th0 * acc[leaf:]`` (theta holding th0 times the SW gather, acc the HH gather
    of :func:`_hh_grad`). Without HH rows (``acc`` of size 1: Square Wave alone) the first
    step is skipped: the SW E + M step, then the smoothing.
    """
    total = 0.0
    if acc.size > 1:
        for i in range(theta.size):
            theta[i] += th0[i] * acc[leaf + i]
    for i in range(theta.size):
        total += theta[i]
    for i in range(theta.size):
        theta[i] /= total
    _smooth_step(theta, atom, masked, passes, weight, smooth, tmp)


@numba.njit(cache=True, fastmath=True, error_model="numpy")
def _hybrid_loop(
    use_box,
    base,
    data,
    offsets,
    starts,
    lengths,
    box,
    nk,
    hk,
    row_q,
    row_gain,
    parent,
    leaf,
    branching,
    theta,
    atom,
    masked,
    passes,
    weight,
    tol,
    max_iter,
    tiny,
):  # pragma: no cover - jit (tested against a numpy reference in the tests)
    """Run joint EM with smoothing over SW output counts and HH node rows, in place.

    ``nk`` are the SW counts, ``hk`` the HH node rows (weighted support counts; per-row
    constants as in the section's comment, ``leaf``: the first row
    of the deepest level), in place on theta; the SW products on the box band when
    ``use_box``, else on the band. Stops when the joint log-likelihood changes by less than
    tol. Returns (iterations, converged, final log-likelihood).
    """
    rows, d, hrows = base.size, theta.size, hk.size
    mt = np.empty(rows)
    old = np.empty(rows)
    ratio = np.empty(rows)
    hmt = np.empty(hrows)
    hold = np.empty(hrows)
    hratio = np.empty(hrows)
    grad = np.empty(d)
    acc = np.empty(hrows + 1)  # node masses, then the E-step's sums down the tree
    th0 = np.empty(d)
    plat = np.empty(rows)
    run = np.empty(rows + 1)
    prefix = np.empty(d + 1)
    tmp = np.empty(d)
    smooth = np.empty(d)
    total = 0.0
    for j in range(rows):
        total += nk[j]
    for j in range(hrows):
        total += hk[j]
    _matvec(use_box, base, data, offsets, starts, lengths, box, prefix, theta, mt)
    shared = _ratios(base, nk, mt, ratio, tiny)
    _hh_masses(theta, leaf, branching, acc[:hrows])
    _hh_first(hk, acc, row_q, row_gain, hmt, hratio, tiny)
    ll = _loglik(nk, mt) + _loglik(hk, hmt)
    known = True  # ll is the log-likelihood of (mt, hmt)
    size = _magnitude(ll, total)
    it = 0
    converged = False
    while it < max_iter:
        it += 1
        for i in range(d):
            th0[i] = theta[i]
        _em_gather(
            use_box,
            base,
            data,
            offsets,
            starts,
            lengths,
            box,
            ratio,
            shared,
            plat,
            run,
            grad,
            theta,
        )
        _hh_grad(hratio, row_gain, parent, acc)
        _hybrid_finish(theta, th0, acc, leaf, atom, masked, passes, weight, smooth, tmp)
        mt, old = old, mt
        hmt, hold = hold, hmt
        # SW20's stop on the joint log-likelihood, tested without logarithms while the
        # change clearly exceeds tol (:func:`_settled`, both row sets' sums added); the
        # ratios of the next E-step and the change's sums in one pass per row set
        _matvec(use_box, base, data, offsets, starts, lengths, box, prefix, theta, mt)
        shared, a1, q1, s1, far1 = _ratios_change(base, nk, mt, old, ratio, tiny)
        _hh_masses(theta, leaf, branching, acc[:hrows])
        a2, q2, s2, far2 = _hh_ratios_change(hk, acc, row_q, row_gain, hmt, hold, hratio, tiny)
        certain, size = _decide(a1 + a2, q1 + q2, s1 + s2, far1 + far2, rows + hrows, total,
                                tol, size)  # fmt: skip
        if certain:
            known = False
            continue
        prev = ll if known else _loglik(nk, old) + _loglik(hk, hold)
        ll = _loglik(nk, mt) + _loglik(hk, hmt)
        known = True
        size = _magnitude(ll, total)
        if abs(ll - prev) < tol:
            converged = True
            break
    if not known:
        ll = _loglik(nk, mt) + _loglik(hk, hmt)
    return it, converged, ll


@numba.njit(cache=True, fastmath=True, error_model="numpy")
def _hybrid_map(fixed, src, dst, work):  # pragma: no cover - jit
    """Do one update of :func:`_hybrid_loop` from ``src`` into ``dst``.

    ``fixed``: the loop's arguments that no update changes (see :func:`_hybrid_squarem`),
    ``work``: its scratch arrays, each a tuple so that the accelerated loop's five calls
    stay one line each.

    Returns the joint log-likelihood of ``src``. With no HH rows (``hk`` empty) this is one
    update of :func:`_smoothed_loop` (Square Wave alone;
    same products, to rounding: the normalization comes after the gather instead of inside
    it).
    """
    use_box, base, data, offsets, starts, lengths, box, nk, hk = fixed[:9]
    row_q, row_gain, parent, leaf, branching, atom, masked, passes, weight, tiny = fixed[9:]
    mt, ratio, hmt, hratio, grad, acc, plat, run, prefix, tmp, smooth = work
    d, hrows = src.size, hk.size
    _matvec(use_box, base, data, offsets, starts, lengths, box, prefix, src, mt)
    shared = _ratios(base, nk, mt, ratio, tiny)
    ll = _loglik(nk, mt)
    if hrows > 0:  # none: Square Wave alone (_Fitter's accelerated fits)
        _hh_masses(src, leaf, branching, acc[:hrows])
        _hh_first(hk, acc, row_q, row_gain, hmt, hratio, tiny)
        ll += _loglik(hk, hmt)
    for i in range(d):
        dst[i] = src[i]
    _em_gather(
        use_box, base, data, offsets, starts, lengths, box, ratio, shared, plat, run, grad, dst
    )
    _hh_grad(hratio, row_gain, parent, acc)
    _hybrid_finish(dst, src, acc, leaf, atom, masked, passes, weight, smooth, tmp)
    return ll


#: Halvings of the SQUAREM step length towards the plain double step before taking it.
_SQUAREM_TRIES = 30


@numba.njit(cache=True, fastmath=True, error_model="numpy")
def _hybrid_squarem(
    use_box, base, data, offsets, starts, lengths, box,
    nk, hk, row_q, row_gain, parent, leaf, branching, theta, atom, masked, passes, weight,
    tol, max_iter, tiny,
):  # fmt: skip  # pragma: no cover - jit (tested against _hybrid_loop in the tests)
    """Run :func:`_hybrid_loop` accelerated by SQUAREM, in place on theta.

    SQUAREM: Varadhan and Roland 2008, scheme S3 with the step length bounded by -1 and a
    monotonicity safeguard.

    A cycle takes two updates F from theta_0 (r = F(theta_0) - theta_0, v = F(F(theta_0))
    - 2 F(theta_0) + theta_0), steps to ``theta_0 - 2 alpha r + alpha^2 v`` with alpha =
    -|r| / |v| (at most -1; alpha = -1 is F(F(theta_0)) itself), halving alpha's excess
    over -1 while the step leaves the positive orthant, and applies F once more. If the
    log-likelihood fell, the cycle keeps F(F(theta_0)) instead (plain EM never lowers it).
    The stop is EM's own test at every cycle's start: when the update F(theta_0) changes
    the joint log-likelihood by less than tol, F(theta_0) is returned, as EM would stop
    there (so the accelerated fit ends about where EM's early stop ends, not at the
    limit); or once fewer than the 4 updates of a cycle are left of ``max_iter``, with
    F(theta_0). Returns (updates, converged, the log-likelihood of theta_0: the caller's
    fits ignore it). With no HH rows (``hk`` empty) it accelerates Square Wave alone
    (:meth:`ldpkit.numeric.auto._Fitter.fit`'s final smoothed fits).
    """
    rows, d, hrows = base.size, theta.size, hk.size
    mt = np.empty(rows)
    ratio = np.empty(rows)
    hmt = np.empty(hrows)
    hratio = np.empty(hrows)
    grad = np.empty(d)
    acc = np.empty(hrows + 1)
    plat = np.empty(rows)
    run = np.empty(rows + 1)
    prefix = np.empty(d + 1)
    tmp = np.empty(d)
    smooth = np.empty(d)
    t1 = np.empty(d)
    t2 = np.empty(d)
    tp = np.empty(d)
    tn = np.empty(d)
    th0 = theta.copy()
    fixed = (use_box, base, data, offsets, starts, lengths, box, nk, hk,
             row_q, row_gain, parent, leaf, branching, atom, masked, passes, weight, tiny)  # fmt: skip
    work = (mt, ratio, hmt, hratio, grad, acc, plat, run, prefix, tmp, smooth)
    ll0 = _hybrid_map(fixed, th0, t1, work)
    it = 1
    converged = False
    while it + 4 <= max_iter:  # a cycle takes at most 4 more updates
        ll1 = _hybrid_map(fixed, t1, t2, work)
        it += 1
        if abs(ll1 - ll0) < tol:
            # EM's own test: one update from theta_0 changed the log-likelihood by less
            # than tol; EM stops at that update, F(theta_0)
            converged = True
            for i in range(d):
                th0[i] = t1[i]
            ll0 = ll1
            break
        rr = 0.0
        vv = 0.0
        for i in range(d):
            r = t1[i] - th0[i]
            v = t2[i] - 2.0 * t1[i] + th0[i]
            rr += r * r
            vv += v * v
        alpha = -np.sqrt(rr / vv) if vv > 0.0 else -1.0
        alpha = min(alpha, -1.0)
        for _ in range(_SQUAREM_TRIES):
            ok = True
            total = 0.0
            for i in range(d):
                r = t1[i] - th0[i]
                v = t2[i] - 2.0 * t1[i] + th0[i]
                x = th0[i] - 2.0 * alpha * r + alpha * alpha * v
                if x < 0.0:
                    ok = False
                    break
                tp[i] = x
                total += x
            if ok and total > 0.0:
                break
            alpha = 0.5 * (alpha - 1.0)
        else:
            alpha = -1.0
        if alpha == -1.0 or not ok or total <= 0.0:
            for i in range(d):
                tp[i] = t2[i]
        else:
            for i in range(d):
                tp[i] /= total
        _hybrid_map(fixed, tp, tn, work)
        # ll of tn, and the next cycle's first update (into t1)
        ll = _hybrid_map(fixed, tn, t1, work)
        it += 2
        if ll < ll0:  # the extrapolation overshot: keep the double EM step
            for i in range(d):
                tn[i] = t2[i]
            ll = _hybrid_map(fixed, tn, t1, work)
            it += 1
        for i in range(d):
            th0[i] = tn[i]
        ll0 = ll
    if converged:
        for i in range(d):
            theta[i] = th0[i]
    else:  # out of updates: the last one, F(theta_0), already computed and counted
        for i in range(d):
            theta[i] = t1[i]
    return it, converged, ll0
