"""Expectation maximization (EM) and EM with smoothing (EMS) on aggregated reports (SW20 5.5).

Both work on the output histogram (``Stats.counts``) and a bucket matrix of shape
``(n_inputs, n_outputs)``, ``matrix[i, j] = P[output bucket j | input bucket i]`` (rows sum
to 1, the orientation of every transition matrix in ldpkit; internally the iteration uses
its transpose ``M[j, i]``, SW20's notation), so reports aggregated on many machines are merged first and estimated once. Each
iteration costs two matrix-vector products, in float64, done by a compiled loop (numba,
single-threaded) that skips the constant part of the matrix: square-wave matrices are a
constant plus a band, so an iteration costs O(band) rather than O(d~ d). Measured on this
2-core machine shared with other jobs, OpenBLAS's threaded dense products slowed down up to
~80x under load (0.11 ms -> 9 ms per iteration at 1024 x 1024), the single-threaded band
loop does not.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from typing import Any, NamedTuple

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_array, check_integer, check_not_masked, check_real
from ..spec import Stats
from .distribution import Distribution

__all__ = ["BootstrapDraws", "EMInfo", "bootstrap", "em", "ems", "smooth"]

#: Floor for (M theta)_j: keeps divisions and logs finite if a fitted mass underflows.
_TINY = 1e-300


@dataclasses.dataclass(frozen=True)
class EMInfo:
    """Diagnostics of one EM/EMS run.

    Attributes
    ----------
    iterations : int
        Number of updates performed.
    converged : bool
        True when the stopping rule fired before the iteration cap.
    log_likelihood : ndarray
        ``L_t = sum_j n_j log (M theta_t)_j`` for t = 0 (the start) .. iterations.
    theta : ndarray
        The final bucket probabilities (also in the returned Distribution).
    smoothing : bool
        True for EMS.
    tol : float
        The tolerance used.
    """

    iterations: int
    converged: bool
    log_likelihood: np.ndarray
    theta: np.ndarray
    smoothing: bool
    tol: float


def smooth(theta: np.ndarray) -> np.ndarray:
    """One EMS smoothing step: binomial (1, 2, 1)/4 inside, (2, 1)/3 and (1, 2)/3 at the ends.

    The end weights are our choice (METHODS.md section 3): symmetric, and each end keeps
    the weight ratio 2:1 of the interior kernel. The result is renormalized to sum 1.
    """
    check_not_masked(theta, "theta")
    raw = np.asarray(theta)
    if raw.dtype.kind not in "iuf":
        raise TypeError(f"theta must be a 1-D array of weights >= 0, got dtype {raw.dtype}")
    t = raw.astype(np.float64)
    top = t.max() if t.ndim == 1 and t.size else 0.0
    if t.ndim != 1 or t.size == 0 or not np.all(np.isfinite(t)) or np.any(t < 0) or top <= 0:
        raise ValueError(
            "theta must be a non-empty 1-D array of finite weights >= 0 with a positive sum"
        )
    # Scale by the largest weight first: sums of weights near the float64 maximum would
    # overflow to inf, weights in [0, 1] cannot (the result is renormalized anyway).
    t = t / top
    if t.size < 2:
        return t / t.sum()
    out = np.empty_like(t)
    out[1:-1] = 0.5 * t[1:-1] + 0.25 * (t[:-2] + t[2:])
    out[0] = (2.0 * t[0] + t[1]) / 3.0
    out[-1] = (t[-2] + 2.0 * t[-1]) / 3.0
    return out / out.sum()


def _inputs(
    data: Any, matrix: Any, low: float | None, high: float | None
) -> tuple[np.ndarray, np.ndarray, float, float]:
    if isinstance(data, Stats):
        counts = np.asarray(data.counts)
        spec = data.spec
        if matrix is None:
            if not hasattr(spec, "bucket_matrix"):
                raise TypeError(f"matrix must be given for stats of {spec.name}")
            matrix = spec.bucket_matrix()
        low = getattr(spec, "low", 0.0) if low is None else low
        high = getattr(spec, "high", 1.0) if high is None else high
    else:
        check_not_masked(data, "data")
        counts = np.asarray(data)
        if matrix is None:
            raise TypeError("matrix must be given when data is an array of counts")
    if counts.dtype.kind not in "iuf":
        raise TypeError(f"data must be counts (non-negative numbers), got dtype {counts.dtype}")
    counts = counts.astype(np.float64)
    # Callers give inputs x outputs (the transition-matrix orientation of ldpkit); the
    # iteration works on the transpose (SW20's M[j, i], outputs x inputs).
    m = check_array(matrix, "matrix", ndim=(1, 2, 3)).T
    if counts.ndim != 1:
        raise ValueError(f"data must be a 1-D array of counts, got shape {counts.shape}")
    if m.ndim == 2 and m.shape[0] != counts.size:
        raise ValueError(
            f"data must hold one count per output of matrix ({m.shape[0]}), got {counts.size}"
        )
    if m.ndim != 2 or m.shape[0] != counts.size:
        raise ValueError(
            f"matrix must have shape (n_inputs, n_outputs={counts.size}), got {m.T.shape}"
        )
    # bounded: the iteration sums counts and counts x log-probabilities (no overflow)
    counts = check_array(counts, "data", low=0.0, bounded=True)
    if not np.all(np.isfinite(m)) or np.any(m < 0):
        raise ValueError("matrix must be finite and >= 0")
    col = m.sum(axis=0)
    if not np.allclose(col, 1.0, rtol=0, atol=1e-6):
        raise ValueError(
            "matrix rows (inputs) must each sum to 1 (matrix[i, j] = P[output j | input i]), "
            f"got sums in [{col.min():.6g}, {col.max():.6g}]"
        )
    lo = 0.0 if low is None else low
    hi = 1.0 if high is None else high
    return counts, m, float(lo), float(hi)


class _Banded:
    """``M = base 1^T + R`` with each row of R kept only between its first and last non-zero.

    Square-wave matrices are a constant (the low density) plus a band (the wave), so the
    two products of an EM iteration cost O(band) instead of O(d~ d); any other matrix is
    stored whole (the band is then every column) and the products stay exact.
    """

    def __init__(self, mk: np.ndarray) -> None:
        base = mk.min(axis=1)
        resid = mk - base[:, None]
        nz = resid > 0
        has = nz.any(axis=1)
        first = np.where(has, nz.argmax(axis=1), 0)
        last = np.where(has, mk.shape[1] - nz[:, ::-1].argmax(axis=1), 0)
        self.base = base
        self.cols = mk.shape[1]
        self.starts = first.astype(np.int64)
        self.lengths = (last - first).astype(np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int64)
        self.data = np.concatenate(
            [resid[j, first[j] : last[j]] for j in range(mk.shape[0])] or [np.zeros(0)]
        ).astype(np.float64)


#: Entries of a band row within this relative distance of its middle entry count as its
#: plateau (a Square Wave's plateau entries agree to rounding, about 1e-16).
_PLATEAU_RTOL = 1e-12


#: Edge entries kept in fixed slots per row (M theta) and per input bucket (M^T r); the rest
#: (a few % of them) in a spill list. 4 covers most rows and columns of a Square Wave.
_SLOTS = 4


class _Box(NamedTuple):
    """A box band (:func:`_box_rows`): each row = explicit head, constant plateau, explicit tail.

    ``heads``, ``tails``: edge entries at each end of a row; ``plateau``: its value (0 when
    the row is all edges); ``ps``, ``pe``: the plateau's input buckets ``[ps, pe)``, both
    nondecreasing in the row; ``cover_lo``, ``cover_hi``: for each input bucket i, the rows
    ``[cover_lo[i], cover_hi[i])`` whose plateau covers i. The edge entries twice, for each
    product: by row (``row_slots[k, j]``, ``row_weights[k, j]``: the column and value of row
    j's k-th entry, value 0 past its last; entries past the slots in ``row_spill_*``, in row
    order) and by input bucket (``col_slots``, ``col_weights``, ``col_spill_*``, each bucket's
    entries in row order). The kernels' inner loops then run over rows (or buckets) with no
    scatter, and every row's (bucket's) terms are added in the order of the row.
    """

    heads: np.ndarray
    tails: np.ndarray
    plateau: np.ndarray
    ps: np.ndarray
    pe: np.ndarray
    cover_lo: np.ndarray
    cover_hi: np.ndarray
    row_slots: np.ndarray
    row_weights: np.ndarray
    row_spill_rows: np.ndarray
    row_spill_cols: np.ndarray
    row_spill_values: np.ndarray
    col_slots: np.ndarray
    col_weights: np.ndarray
    col_spill_rows: np.ndarray
    col_spill_cols: np.ndarray
    col_spill_values: np.ndarray


def _slots(
    major: np.ndarray, minor: np.ndarray, values: np.ndarray, size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lay entries sorted by ``major`` out as ``_SLOTS`` slots per major index.

    ``slots[k, i]`` is the minor index of i's k-th entry, 0 with weight 0 past its last;
    also returns which entries spill.
    """
    start = np.searchsorted(major, np.arange(size))
    slot = np.arange(major.size) - start[major]
    fit = slot < _SLOTS
    slots = np.zeros((_SLOTS, size), dtype=np.int64)
    weights = np.zeros((_SLOTS, size))
    slots[slot[fit], major[fit]] = minor[fit]
    weights[slot[fit], major[fit]] = values[fit]
    return slots, weights, ~fit


def _box_rows(band: Any) -> _Box | None:
    """Return each band row as (head length, tail length, plateau value), or None.

    Applies when every row is explicit head entries, a constant plateau and explicit tail
    entries (a Square Wave's rows: the plateau is the wave's height, the few edge entries
    its partial overlaps); None when the plateaus would not make up at least half of the
    band (the band products are then as cheap), or when the plateaus do not move right with
    the row. Rows of at most 8 entries are kept whole in the head.
    """
    rows = band.lengths.size
    heads = np.empty(rows, dtype=np.int64)
    tails = np.zeros(rows, dtype=np.int64)
    plateau = np.zeros(rows)
    for j in range(rows):  # once per fit setup, O(total band); not a hot path
        length = int(band.lengths[j])
        row = band.data[band.offsets[j] : band.offsets[j] + length]
        if length <= 8:
            heads[j] = length
            continue
        c = row[length // 2]
        flat = np.flatnonzero(np.abs(row - c) <= _PLATEAU_RTOL * abs(c))
        h, t = int(flat[0]), length - 1 - int(flat[-1])
        if flat.size != length - h - t:  # not one plateau: this matrix is not a box band
            return None
        heads[j], tails[j], plateau[j] = h, t, c
    if 2 * int(heads.sum() + tails.sum()) > band.data.size:  # edges are most of the band
        return None
    starts, lengths, offsets = band.starts, band.lengths, band.offsets[:-1]
    ps = starts + heads
    pe = starts + lengths - tails
    # The plateaus' share of M^T r at input bucket i sums plateau_j r_j over the rows whose
    # plateau covers i; when plateaus start and end later on later rows (a wave moving right
    # with its output bucket) those rows are one run, a difference of two prefix sums over the
    # rows. A row without a plateau (value 0) takes its neighbours' bounds: it adds 0 anyway.
    has = np.flatnonzero(plateau != 0)
    if has.size:
        nxt = np.searchsorted(has, np.arange(rows))  # next row with a plateau, at or after j
        ps = np.where(nxt < has.size, ps[has[np.minimum(nxt, has.size - 1)]], pe[has[-1]])
        before = np.searchsorted(has, np.arange(rows), side="right") - 1
        pe = np.where(before >= 0, pe[has[np.maximum(before, 0)]], ps[has[0]])
    if np.any(np.diff(ps) < 0) or np.any(np.diff(pe) < 0):
        return None
    cols = np.arange(band.cols)
    cover_lo = np.searchsorted(pe, cols, side="right").astype(np.int64)
    cover_hi = np.searchsorted(ps, cols, side="right").astype(np.int64)
    # the edge entries, row by row, head then tail: (row, position in the row)
    count = heads + tails
    edge_rows = np.repeat(np.arange(rows, dtype=np.int64), count)
    within = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(
        np.cumsum(count) - count, count
    )
    in_tail = within >= heads[edge_rows]
    pos = np.where(in_tail, within - heads[edge_rows] + (lengths - tails)[edge_rows], within)
    edge_cols = starts[edge_rows] + pos
    edge_values = band.data[offsets[edge_rows] + pos].astype(np.float64)
    row_slots, row_weights, spill = _slots(edge_rows, edge_cols, edge_values, rows)
    by_col = np.lexsort((edge_rows, edge_cols))  # by input bucket, then row
    c_rows, c_cols, c_values = edge_rows[by_col], edge_cols[by_col], edge_values[by_col]
    col_slots, col_weights, c_spill = _slots(c_cols, c_rows, c_values, band.cols)
    return _Box(
        heads, tails, plateau, ps, pe, cover_lo, cover_hi,
        row_slots, row_weights, edge_rows[spill], edge_cols[spill], edge_values[spill],
        col_slots, col_weights, c_rows[c_spill], c_cols[c_spill], c_values[c_spill],
    )  # fmt: skip


@functools.lru_cache(maxsize=1)
def _empty_box() -> _Box:
    """Box arrays of the right kinds and no entries, for a matrix without a box band.

    The compiled loops take the band and the box both, and use one (one compiled kernel).
    """
    i1, f1 = np.zeros(0, dtype=np.int64), np.zeros(0)
    i2, f2 = np.zeros((0, 0), dtype=np.int64), np.zeros((0, 0))
    return _Box(
        heads=i1, tails=i1, plateau=f1, ps=i1, pe=i1, cover_lo=i1, cover_hi=i1,
        row_slots=i2, row_weights=f2, row_spill_rows=i1, row_spill_cols=i1,
        row_spill_values=f1, col_slots=i2, col_weights=f2, col_spill_rows=i1,
        col_spill_cols=i1, col_spill_values=f1,
    )  # fmt: skip


def _numpy_loop(
    mk: np.ndarray, nk: np.ndarray, theta: np.ndarray, smoothing: bool, tol: float, max_iter: int
) -> tuple[np.ndarray, list[float], int, bool]:
    """Run EM/EMS in numpy with dense BLAS products (the tests' reference implementation)."""
    mkt = np.ascontiguousarray(mk.T)
    mt = np.maximum(mk @ theta, _TINY)
    trace = [float(nk @ np.log(mt))]
    it, converged = 0, False
    while it < max_iter:
        it += 1
        theta = theta * (mkt @ (nk / mt))
        theta /= theta.sum()
        if smoothing:
            theta = smooth(theta)
        mt = np.maximum(mk @ theta, _TINY)
        trace.append(float(nk @ np.log(mt)))
        if abs(trace[-1] - trace[-2]) < tol:
            converged = True
            break
    return theta, trace, it, converged


def _fit_band(
    band: _Banded,
    box: _Box | None,
    nk: np.ndarray,
    theta: np.ndarray,
    smoothing: bool,
    tol: float,
    max_iter: int,
    trace: np.ndarray,
) -> tuple[int, bool]:
    """Run EM/EMS in place on theta with the compiled loop.

    Box products when ``box`` is given (from :func:`_box_rows`), band products otherwise.
    Returns (iterations, converged).
    """
    from ._kernels_em import _em_loop  # numba: loaded on first fit, not on import

    b = band
    return _em_loop(  # type: ignore[no-any-return]
        box is not None, b.base, b.data, b.offsets, b.starts, b.lengths,
        box if box is not None else _empty_box(),
        nk, theta, smoothing, tol, max_iter, _TINY, trace,
    )  # fmt: skip


#: Largest iteration cap of EM/EMS: the log-likelihood trace is kept (one float per step).
MAX_ITERATIONS = 10_000_000


def _run(
    data: Any,
    matrix: Any,
    *,
    smoothing: bool,
    tol: float,
    max_iter: int,
    init: Any,
    low: float | None,
    high: float | None,
    return_info: bool,
    engine: str = "band",
) -> Any:
    tol = check_real(tol, "tol", low=0.0)
    max_iter = check_integer(max_iter, "max_iter", low=0, high=MAX_ITERATIONS)
    counts, m, lo, hi = _inputs(data, matrix, low, high)
    d = m.shape[1]
    keep = counts > 0  # rows never observed do not enter the likelihood or the E-step
    nk = counts[keep]
    total = float(nk.sum())
    if total <= 0:
        raise ValueError("counts must hold at least one report")
    mk = np.ascontiguousarray(m[keep])
    if np.any(mk.sum(axis=1) <= 0):
        raise ValueError("counts must be 0 on outputs the matrix gives probability 0")
    if init is None:
        theta = np.full(d, 1.0 / d)
    else:
        theta = np.array(init, dtype=np.float64)
        if theta.shape != (d,) or not np.all(np.isfinite(theta)) or np.any(theta < 0):
            raise ValueError(f"init must be {d} non-negative finite probabilities")
        if theta.sum() <= 0:
            raise ValueError("init must have positive mass")
        theta /= theta.sum()
    if engine in ("band", "band-only"):
        band = _Banded(mk)
        # box products (Square Wave rows) unless the caller asks for the plain band loop
        box = _box_rows(band) if engine == "band" else None
        trace_arr = np.empty(max_iter + 1)
        it, converged = _fit_band(band, box, nk, theta, smoothing, tol, max_iter, trace_arr)
        trace_arr = trace_arr[: it + 1]
    elif engine == "numpy":
        theta, trace, it, converged = _numpy_loop(mk, nk, theta, smoothing, tol, max_iter)
        trace_arr = np.asarray(trace)
    else:
        raise ValueError(f"engine must be one of 'band', 'band-only', 'numpy', got {engine!r}")
    if isinstance(data, Stats):  # the estimate carries its n, spec, Stats and recipe
        fit: dict[str, Any] | None = {
            "method": "ems" if smoothing else "em",
            "tol": tol,
            "max_iter": max_iter,
        }
        if matrix is not None or init is not None:
            fit = None  # not the spec's own pipeline: no bootstrap intervals
        dist = Distribution(theta, lo, hi, n=data.n, spec=data.spec, stats=data, fit=fit)
    else:
        dist = Distribution(theta, lo, hi, n=round(total))
    if not return_info:
        return dist
    trace_arr.flags.writeable = False
    return dist, EMInfo(int(it), bool(converged), trace_arr, dist.probabilities, smoothing, tol)


def em(
    data: Any,
    matrix: Any = None,
    *,
    tol: float = 1e-3,
    max_iter: int = 10_000,
    init: Any = None,
    low: float | None = None,
    high: float | None = None,
    return_info: bool = False,
) -> Any:
    """Maximum-likelihood input histogram by EM (SW20 Algorithm 1).

    Parameters
    ----------
    data : Stats or array_like
        ``Stats`` of a mechanism with ``counts`` and ``bucket_matrix()`` (e.g.
        :class:`~ldpkit.numeric.SquareWave`; merge statistics from many machines first), or
        the output histogram ``n_j`` itself.
    matrix : array_like, shape (n_inputs, n_outputs), optional
        ``matrix[i, j] = P[output j | input i]``, rows summing to 1 (the orientation of
        every transition matrix in ldpkit). Default: the spec's ``bucket_matrix()``.
    tol : float
        Stop when ``|L_t - L_{t-1}| < tol``, ``L = sum_j n_j log (M theta)_j`` (SW20 5.5;
        1e-3 as in the authors' code; SW20 6.1 used ``1e-3 e^eps`` for plain EM).
    max_iter : int
        Iteration cap (default 10,000).
    init : array_like, optional
        Starting probabilities (default uniform ``1/d``).
    low, high : float, optional
        Interval of the returned Distribution (default: the spec's, else [0, 1]).
    return_info : bool
        Also return an :class:`EMInfo` (iterations, log-likelihood trace).

    Returns
    -------
    Distribution, or (Distribution, EMInfo)

    Notes
    -----
    Update: ``theta_i <- theta_i sum_j n_j M[j, i] / (M theta)_j / N``. EM never decreases
    ``L`` (the trace is non-decreasing up to rounding); outputs with ``n_j = 0`` drop out
    of both products. ``(M theta)_j`` is floored at 1e-300 so that logs stay finite.

    References
    ----------
    Z. Li et al. Estimating Numerical Distributions under Local Differential Privacy.
    SIGMOD 2020, section 5.5, Algorithm 1.
    """
    return _run(
        data,
        matrix,
        smoothing=False,
        tol=tol,
        max_iter=max_iter,
        init=init,
        low=low,
        high=high,
        return_info=return_info,
    )


def ems(
    data: Any,
    matrix: Any = None,
    *,
    tol: float = 1e-3,
    max_iter: int = 10_000,
    init: Any = None,
    low: float | None = None,
    high: float | None = None,
    return_info: bool = False,
) -> Any:
    """EM with a smoothing step after every M-step (SW20 section 5.5, "EMS").

    Same parameters and return value as :func:`em`. After each M-step the estimate is
    smoothed by :func:`smooth` (binomial kernel (1, 2, 1)/4; ends (2, 1)/3 and (1, 2)/3)
    and renormalized; the stopping rule uses the likelihood of the smoothed estimate.
    Smoothing acts as a roughness penalty, so unlike EM the likelihood need not rise
    monotonically; EMS converges to a smooth fixed point instead of over-fitting noise.

    References
    ----------
    Z. Li et al., SIGMOD 2020, section 5.5 ("EMS Algorithm"); B. W. Silverman et al.,
    A smoothed EM approach to indirect estimation problems, JRSS-B 1990.
    """
    return _run(
        data,
        matrix,
        smoothing=True,
        tol=tol,
        max_iter=max_iter,
        init=init,
        low=low,
        high=high,
        return_info=return_info,
    )


@dataclasses.dataclass(frozen=True)
class BootstrapDraws:
    """Parametric bootstrap of an EM/EMS estimate (see :func:`bootstrap`).

    Attributes
    ----------
    replicates : ndarray, shape (B, d)
        The estimator re-run on B output histograms drawn from the fitted law.
    fitted_mean : ndarray, shape (d,)
        The estimator run on the expected histogram ``n (M^T theta^)`` of the fit.
    replicate_means : ndarray, shape (B, d)
        The same for every replicate: ``EM(n M^T theta*_b)``.
    """

    replicates: np.ndarray
    fitted_mean: np.ndarray
    replicate_means: np.ndarray


def bootstrap(
    stats: Stats,
    theta: Any,
    *,
    method: str = "ems",
    tol: float = 1e-3,
    max_iter: int = 10_000,
    replicates: int = 200,
    rng: RNGLike = None,
    progress: bool | None = None,
) -> BootstrapDraws:
    """Parametric bootstrap of the whole EM/EMS pipeline from aggregated reports.

    Given the true input histogram theta, the output histogram of n reports is multinomial
    with probabilities ``M^T theta`` (``M = spec.bucket_matrix()``, users independent). The
    bootstrap draws B histograms from ``Multinomial(n, M^T theta^)`` with the estimate
    theta^ in place of theta and re-runs the same estimator on each (uniform start, same
    tolerance and cap), which gives the estimator's sampling spread at theta^ (Efron and
    Tibshirani 1993, ch. 6: the parametric bootstrap). The smoothing (and early-stopping)
    bias ``b(theta) = E[EM(counts)] - theta`` is approximated by the noise-free run
    ``EM(n M^T theta) - theta``, once at theta^ (``fitted_mean``) and once at every
    replicate (``replicate_means``), so that the spread of the bias-corrected estimator
    ``2 theta^ - EM(n M^T theta^)`` can be read off its replicates as well.

    Parameters
    ----------
    stats : Stats
        Aggregated reports of a spec with ``bucket_matrix()`` (Square Wave and relatives).
    theta : array_like, shape (d,)
        The estimate from ``stats`` (the bootstrap's true law).
    method : {"ems", "em"}
        The estimator to re-run.
    tol, max_iter : float, int
        Its stopping rule, as used for the estimate.
    replicates : int
        Number B of bootstrap histograms (>= 2).
    rng : Generator, int or None
        Randomness of the draws.
    progress : bool or None
        Show a progress bar on stderr; None shows one for long runs (many replicates of a
        fine grid) when stderr is a terminal.

    Returns
    -------
    BootstrapDraws

    Notes
    -----
    Cost: ``2 B + 1`` EM runs (each the cost of the estimate itself).

    References
    ----------
    B. Efron, R. Tibshirani. An Introduction to the Bootstrap. Chapman & Hall, 1993,
    sections 6.5 (parametric bootstrap) and 10.6 (bias correction ``2 theta^ - theta*``).
    """
    if method not in ("ems", "em"):
        raise ValueError(f"method must be one of 'ems', 'em', got {method!r}")
    replicates = check_integer(replicates, "replicates", low=2)
    tol = check_real(tol, "tol", low=0.0)
    max_iter = check_integer(max_iter, "max_iter", low=0, high=MAX_ITERATIONS)  # as em, ems
    if progress is not None and not isinstance(progress, bool):
        raise TypeError(f"progress must be True, False or None, got {type(progress).__name__}")
    gen = as_generator(rng)
    spec: Any = stats.spec
    if not hasattr(spec, "bucket_matrix"):
        raise TypeError(f"stats must come from a spec with bucket_matrix(), got {spec.name}")
    matrix = np.asarray(spec.bucket_matrix(), dtype=np.float64)  # (d, d~)
    d = matrix.shape[0]
    th = np.asarray(theta, dtype=np.float64)
    if th.shape != (d,) or not np.all(np.isfinite(th)) or np.any(th < 0) or th.sum() <= 0:
        raise ValueError(f"theta must be {d} non-negative finite probabilities")
    from .._parallel import row_blocks, run_blocks

    band = _Banded(np.ascontiguousarray(matrix.T))
    box = _box_rows(band)  # once for the 2B + 1 fits
    smoothing = method == "ems"

    def fit(counts: np.ndarray) -> np.ndarray:
        # rows with zero counts drop out of both products: the same iterates as em()/ems()
        t = np.full(d, 1.0 / d)
        trace = np.empty(max_iter + 1)  # one per call: fits run on several threads
        _fit_band(band, box, counts, t, smoothing, tol, max_iter, trace)
        return t

    def law(t: np.ndarray) -> np.ndarray:
        out = np.maximum(t @ matrix, 0.0)
        return out / out.sum()

    n = int(stats.n)
    draws = gen.multinomial(n, law(th / th.sum()), size=replicates).astype(np.float64)
    reps = np.empty((replicates, d))
    rep_means = np.empty((replicates, d))

    show = (
        progress
        if progress is not None
        else (replicates * d >= 50_000 and hasattr(sys.stderr, "isatty") and sys.stderr.isatty())
    )
    bar: Any = None
    if show:
        from rich.progress import Progress  # only for long runs shown to a person

        bar = Progress(transient=True)
        task = bar.add_task(f"EM bootstrap ({replicates} replicates)", total=replicates)

    def run(start: int, stop: int) -> None:
        for b in range(start, stop):  # B independent fits; each is one compiled loop
            reps[b] = fit(draws[b])
            rep_means[b] = fit(n * law(reps[b]))
            if bar is not None:
                bar.advance(task)  # rich's Progress is thread-safe

    # The draws are made above, so the result does not depend on how the fits are split.
    if bar is None:
        run_blocks(run, row_blocks(replicates, min_rows=1))
    else:
        with bar:
            run_blocks(run, row_blocks(replicates, min_rows=1))
    return BootstrapDraws(reps, fit(n * law(th / th.sum())), rep_means)
