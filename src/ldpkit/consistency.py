"""Consistency post-processing of frequency estimates (CON20 section IV).

A frequency oracle's unbiased estimates ``f~`` can be negative and need not sum to 1.
CON20 compares ten ways of exploiting the two facts every true distribution satisfies
(non-negativity, sum to one); which one is best depends on the query (:mod:`ldpkit.queries`).

=========  ==========================================================  ========  ========
name       what it does                                                 >= 0      sum = 1
=========  ==========================================================  ========  ========
base_pos   negative estimates -> 0                                      yes       no
post_pos   clamp each *query answer* at 0 (query-time option)           answers   no
base_cut   estimates below ``T = Phi^-1(1 - alpha/d) sqrt(Var*)`` -> 0   yes       no
norm       add ``(1 - sum) / d`` to every estimate                       no        yes
norm_mul   negatives -> 0, then scale to sum 1                          yes       yes
norm_cut   keep the largest estimates whose total stays <= 1             yes       <= 1
norm_sub   ``max(f~ + delta, 0)`` summing to 1 (simplex projection)      yes       yes
mle_apx    constrained Gaussian-approximation MLE (CON20 eq. 12)        yes       yes
power      posterior mean under a fitted power-law prior (Jia & Gong)   yes       no
power_ns   power, then norm_sub                                         yes       yes
ibu        iterative Bayesian update (EM; Agrawal & Aggarwal 2001)      yes       yes
=========  ==========================================================  ========  ========

Every function takes a :class:`~ldpkit.FrequencyEstimate` and returns a *new* one whose
``postprocessing`` tuple ends with the method's name; the input is never modified.
``METHODS`` maps each name to its function.

.. warning::
   The returned estimate carries the input's ``variance`` unchanged, but a
   post-processed estimate is **no longer unbiased**, and that variance is neither its
   variance nor its mean squared error (CON20 Lemmas 1 and 4: the methods trade bias for
   variance). Treat ``std_error`` and ``confidence_interval`` of a post-processed
   estimate as a rough guide only; ``estimate.unbiased`` is False.

Post-Pos does not change the frequencies: :func:`post_pos` tags the estimate, and the
answer functions of :mod:`ldpkit.queries` then clamp each answer at 0 (for single items
this equals Base-Pos; for sets it clamps the *sum*). ``post_pos`` also clamps an array of
answers directly.

References
----------
T. Wang, M. Lopuhaä-Zwakenberg, Z. Li, B. Skoric, N. Li. Locally Differentially Private
Frequency Estimation with Consistency. NDSS 2020 (CON20), sections IV-A to IV-F.

J. Jia, N. Z. Gong. Calibrate: Frequency Estimation and Heavy Hitter Identification with
Local Differential Privacy via Incorporating Prior Knowledge. INFOCOM 2019.

Examples
--------
>>> import numpy as np
>>> from ldpkit import GRR
>>> from ldpkit.consistency import norm_sub, METHODS
>>> grr = GRR(epsilon=1.0, domain_size=8)
>>> values = np.repeat(np.arange(8), [400, 300, 200, 50, 30, 10, 5, 5])
>>> est = grr.estimate(grr.aggregate(grr.randomize(values, rng=0)))
>>> out = norm_sub(est)
>>> bool(out.frequencies.min() >= 0), round(float(out.frequencies.sum()), 12)
(True, 1.0)
>>> out.postprocessing, out.unbiased
(('norm_sub',), False)
>>> sorted(METHODS)[:3]
['base_cut', 'base_pos', 'ibu']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import optimize as _opt

from . import queries as _queries
from ._postprocess import (
    expected_false_positive_cutoff,
    simplex_projection,  # re-exported: shared with numeric/
)
from ._rng import RNGLike, as_generator
from ._validation import (
    check_array,
    check_integer,
    check_not_masked,
    check_real,
    check_sequence,
)
from .estimate import FrequencyEstimate

__all__ = [
    "METHODS",
    "base_pos",
    "post_pos",
    "base_cut",
    "norm",
    "norm_mul",
    "norm_cut",
    "norm_sub",
    "simplex_projection",
    "mle_apx",
    "power",
    "power_ns",
    "ibu",
    "fit_power_law",
    "compare",
    "DEFAULT_QUERIES",
]

#: CON20's choice for Base-Cut (sec. IV-A): about 2 false positives expected.
DEFAULT_CUT_ALPHA = 2.0


# --------------------------------------------------------------------------- helpers


def _check_estimate(estimate: Any) -> np.ndarray:
    """Return the estimate's frequencies after type and finiteness checks."""
    if not isinstance(estimate, FrequencyEstimate):
        raise TypeError(f"estimate must be a FrequencyEstimate, got {type(estimate).__name__}")
    # finite, and of magnitude <= MAX_MAGNITUDE: sums and squares of larger ones overflow to
    # inf in the projections (no estimate of a frequency comes near it)
    return _queries._frequencies(estimate)


def _null_variance(estimate: FrequencyEstimate) -> np.ndarray:
    var = np.asarray(estimate.variance_null, dtype=np.float64)
    if not np.all(np.isfinite(var)) or np.any(var < 0):
        raise ValueError("estimate.variance_null must be finite and >= 0")
    return var


# --------------------------------------------------------------------------- baselines


def base_pos(estimate: FrequencyEstimate) -> FrequencyEstimate:
    """Base-Pos: set negative estimates to 0 (CON20 sec. IV-A).

    Non-negative, does not sum to 1; every item gets a positive bias (CON20 Lemma 1). The
    carried ``variance`` is that of the unbiased input, not of the result.

    Examples
    --------
    >>> from ldpkit import FrequencyEstimate
    >>> base_pos(FrequencyEstimate([0.7, -0.2, 0.5], 0.01, n=100)).frequencies
    array([0.7, 0. , 0.5])
    """
    f = _check_estimate(estimate)
    return estimate.with_postprocessing(np.maximum(f, 0.0), "base_pos")


def post_pos(estimate: Any) -> Any:
    """Post-Pos: clamp each *query answer* at 0 (CON20 sec. IV-A), a query-time option.

    Two uses:

    * ``post_pos(estimate)`` returns a copy with the *same frequencies*, tagged
      ``"post_pos"``; the answer functions and :func:`ldpkit.queries.mse` clamp every
      answer computed from a tagged estimate at 0 (``clamp=None`` default).
    * ``post_pos(answers)`` with an array (or number) of query answers returns them
      clamped at 0.

    For single items Post-Pos equals Base-Pos; for set queries it clamps the sum, so its
    positive bias is much smaller. Answers to ``A`` and ``B`` need not add up to the answer
    to ``A | B``. The carried ``variance`` is that of the unbiased estimate.

    Examples
    --------
    >>> from ldpkit import FrequencyEstimate
    >>> from ldpkit.queries import set_answers, single_value_answers
    >>> est = post_pos(FrequencyEstimate([0.7, -0.2, 0.5], 0.01, n=100))
    >>> est.frequencies                      # unchanged
    array([ 0.7, -0.2,  0.5])
    >>> single_value_answers(est)            # clamped at query time
    array([0.7, 0. , 0.5])
    >>> set_answers(est, [[0, 1]])           # the *sum* is clamped, not its terms
    array([0.5])
    >>> post_pos(np.array([-0.1, 0.3]))
    array([0. , 0.3])
    """
    if isinstance(estimate, FrequencyEstimate):
        f = _check_estimate(estimate)
        return estimate.with_postprocessing(f.copy(), "post_pos")
    answers = np.asarray(estimate)
    if answers.dtype.kind not in "iuf" or answers.dtype == np.bool_:
        raise TypeError(
            "estimate must be a FrequencyEstimate or an array of query answers, "
            f"got {type(estimate).__name__}"
        )
    answers = answers.astype(np.float64)
    if not np.all(np.isfinite(answers)):
        raise ValueError("estimate (query answers) must be finite numbers, got NaN/inf")
    return np.maximum(answers, 0.0)


def base_cut(estimate: FrequencyEstimate, alpha: float = DEFAULT_CUT_ALPHA) -> FrequencyEstimate:
    """Base-Cut: set estimates below the significance cutoff to 0 (CON20 sec. IV-A).

    The cutoff is :func:`ldpkit.frequency.significance_cutoff`'s (CON20 eq. 9) with ``alpha``
    expected false positives; CON20 argues for ``alpha = 2`` (the default). Items above it
    keep their unbiased estimate, so the result is non-negative but does not sum to 1.
    CON20 recommends Base-Cut for single-value (full-domain) queries. The carried
    ``variance`` is that of the unbiased input, not of the result.

    Examples
    --------
    >>> from ldpkit import FrequencyEstimate
    >>> est = FrequencyEstimate([0.5, 0.3, 0.15, 0.05, -0.02], 0.0025, n=1000)
    >>> base_cut(est).frequencies   # T = Phi^-1(1 - 2/5) * 0.05 = 0.0127
    array([0.5 , 0.3 , 0.15, 0.05, 0.  ])
    """
    f = _check_estimate(estimate)
    cutoff = expected_false_positive_cutoff(estimate, alpha)
    return estimate.with_postprocessing(np.where(f >= cutoff, f, 0.0), "base_cut")


# --------------------------------------------------------------------------- normalization


def norm(estimate: FrequencyEstimate) -> FrequencyEstimate:
    """Norm: add ``delta = (1 - sum f~) / d`` to every estimate (CON20 sec. IV-B).

    Sums to 1, may stay negative; unbiased when the input is (CON20 Lemma 3), and a no-op
    for oracles whose estimates already sum to 1 (GRR, subset selection, Hadamard
    response). CON20 recommends Norm for the most frequent values. The carried ``variance``
    is the input's, which slightly overstates Norm's (CON20 Fig. 3).

    Examples
    --------
    >>> from ldpkit import FrequencyEstimate
    >>> norm(FrequencyEstimate([0.6, 0.3, -0.1, 0.0], 0.01, n=100)).frequencies
    array([ 0.65,  0.35, -0.05,  0.05])
    """
    f = _check_estimate(estimate)
    return estimate.with_postprocessing(f + (1.0 - f.sum()) / f.size, "norm")


def norm_mul(estimate: FrequencyEstimate) -> FrequencyEstimate:
    """Norm-Mul: negatives to 0, then scale to sum 1 (CON20 sec. IV-B).

    Equivalent to finding ``gamma`` with ``sum max(gamma f~, 0) = 1``. Shrinks large
    estimates the most, so CON20 finds it poor on skewed data. If no estimate is positive
    there is nothing to scale and the uniform distribution is returned. The carried
    ``variance`` is that of the unbiased input, not of the result.

    Examples
    --------
    >>> from ldpkit import FrequencyEstimate
    >>> norm_mul(FrequencyEstimate([0.6, 0.9, -0.1, 0.0], 0.01, n=100)).frequencies
    array([0.4, 0.6, 0. , 0. ])
    """
    f = _check_estimate(estimate)
    pos = np.maximum(f, 0.0)
    total = pos.sum()
    out = pos / total if total > 0 else np.full(f.size, 1.0 / f.size)
    return estimate.with_postprocessing(out, "norm_mul")


def norm_cut(estimate: FrequencyEstimate) -> FrequencyEstimate:
    """Norm-Cut: zero the negative and the small positive estimates (CON20 sec. IV-B).

    If the positive estimates total at most 1, negatives become 0. Otherwise the output
    keeps ``f~_v`` for ``f~_v >= theta`` and is 0 elsewhere, with ``theta`` the smallest
    threshold such that ``sum_{f~_v >= theta} f~_v <= 1`` (items tied at the threshold are
    kept or dropped together). Non-negative, sums to at most 1 (usually just under). The
    carried ``variance`` is that of the unbiased input, not of the result.

    Examples
    --------
    >>> from ldpkit import FrequencyEstimate
    >>> norm_cut(FrequencyEstimate([0.5, 0.3, 0.15, 0.1, -0.05], 0.01, n=100)).frequencies
    array([0.5 , 0.3 , 0.15, 0.  , 0.  ])
    """
    f = _check_estimate(estimate)
    pos = np.maximum(f, 0.0)
    # Rounding slack of a d-term sum, so an already consistent vector is left alone.
    one = 1.0 + 4.0 * f.size * np.finfo(np.float64).eps
    if pos.sum() <= one:
        return estimate.with_postprocessing(pos, "norm_cut")
    u = -np.sort(-f)  # descending
    css = np.cumsum(u)
    # k items can be kept iff their total is <= 1 and no tie crosses the boundary.
    boundary = np.empty(u.size, dtype=bool)
    boundary[:-1] = u[:-1] > u[1:]
    boundary[-1] = True
    # The running total over the positive estimates first exceeds 1 at index `stop`;
    # only prefixes before it qualify (later the negatives would pull the total back).
    stop = int(np.argmax(css > one))
    ok = np.flatnonzero(boundary[:stop])
    if ok.size == 0:
        out = np.zeros_like(f)  # even the largest estimate alone exceeds 1
    else:
        theta = u[ok[-1]]
        out = np.where(f >= theta, f, 0.0)
    return estimate.with_postprocessing(out, "norm_cut")


def norm_sub(estimate: FrequencyEstimate) -> FrequencyEstimate:
    """Norm-Sub: ``max(f~_v + delta, 0)`` with ``delta`` making the total 1 (CON20 sec. IV-B).

    This is the constrained-least-squares solution (CON20 sec. IV-C, Appendix A), i.e. the
    Euclidean projection onto the probability simplex, computed exactly by sorting
    (:func:`simplex_projection`, O(d log d)) rather than by the authors' iterative
    approximation. Non-negative and sums to 1; close to MLE-Apx; strong on every query type
    in CON20's experiments. The carried ``variance`` is that of the unbiased input, not of
    the result.

    Examples
    --------
    >>> from ldpkit import FrequencyEstimate
    >>> norm_sub(FrequencyEstimate([0.6, 0.5, -0.2, 0.1], 0.01, n=100)).frequencies
    array([0.53333333, 0.43333333, 0.        , 0.03333333])
    """
    f = _check_estimate(estimate)
    return estimate.with_postprocessing(simplex_projection(f), "norm_sub")


# --------------------------------------------------------------------------- MLE-Apx


def _pure_pq(estimate: FrequencyEstimate, method: str) -> tuple[float, float]:
    spec = estimate.spec
    if not getattr(type(spec), "_pure_oracle", False):  # a PureFrequencyOracle
        raise ValueError(
            f"{method} needs an estimate from a pure frequency oracle (with p and q, e.g. "
            f"GRR, OUE, OLH), got spec {spec!r}"
        )
    p, q = float(spec.p), float(spec.q)
    if not (0.0 <= q < p <= 1.0):
        raise ValueError(f"{method} needs 0 <= q < p <= 1, got p = {p!r}, q = {q!r}")
    return p, q


def mle_apx(estimate: FrequencyEstimate) -> FrequencyEstimate:
    """MLE-Apx: maximum likelihood under the consistency constraints (CON20 sec. IV-D).

    Treats ``f~_v`` as Gaussian with mean ``f_v`` and variance
    ``(q(1-q) + f_v (p-q)(1-p-q)) / (n (p-q)^2)`` (CON20 eq. 5 and 11) and minimizes
    ``sum_v (f_v - f~_v)^2 (p-q)^2 / (q(1-q) + f_v (p-q)(1-p-q))`` subject to ``f >= 0``,
    ``sum f = 1`` (Appendix B, dropping the slowly varying determinant as CON20 does).
    The KKT conditions give, on the active set ``P = {v : f_v > 0}`` (CON20 eq. 12/14),
    ``f_v = (q(1-q) x + f~_v (p-q)) / (p - q - (p-q)(1-p-q) x)`` with one common
    ``x = (p-q)(1 - S_P) / (|P| q(1-q) + (p-q)(1-p-q))``, ``S_P = sum_{v in P} f~_v``.

    The active set is found by iteration: start from all items, compute ``x``, drop the
    items that come out negative, repeat until none does. The problem is convex and
    ``f_v(x)`` is increasing in ``x``, so (as in Michelot's simplex algorithm) the true
    active set is contained in every iterate and the fixed point is the exact optimum;
    each pass is O(d) and few passes are needed.

    ``p`` and ``q`` come from ``estimate.spec``, which must be a pure frequency oracle.

    Notes
    -----
    CON20's Appendix B prints the denominator of ``x`` as ``(p-q)(1-p-q) - |P| q(1-q)``
    with the opposite sign of ``S_P - 1``; summing eq. 14 over ``P`` gives the form above
    (which is also what the authors' code computes, as ``y_v = q + f~_v (p - q)``).
    Items with ``f~_v <= -q(1-q) / ((p-q)(1-p-q))`` (impossible for real counts, which give
    ``f~_v >= -q / (p - q)``) can never be active and are set to 0 at once.

    The carried ``variance`` is that of the unbiased input, not of the result.

    Examples
    --------
    >>> from ldpkit import GRR, FrequencyEstimate
    >>> spec = GRR(epsilon=1.0, domain_size=4)
    >>> est = FrequencyEstimate([0.62, 0.45, -0.05, -0.02], 0.01, n=1000, spec=spec)
    >>> out = mle_apx(est).frequencies
    >>> out.round(4), round(float(out.sum()), 12)
    (array([0.5834, 0.4166, 0.    , 0.    ]), 1.0)
    """
    f = _check_estimate(estimate)
    p, q = _pure_pq(estimate, "mle_apx")
    a = q * (1.0 - q)  # variance term at f = 0 (times n (p-q)^2)
    b = (p - q) * (1.0 - p - q)  # its slope in f
    pq = p - q
    active = np.ones(f.size, dtype=bool)
    if b > 0:
        active &= f > -a / b
    if not active.any():
        raise ValueError(
            "estimate.frequencies are too negative for mle_apx: every item is below "
            f"-q(1-q)/((p-q)(1-p-q)) = {-a / b:.6g}"
        )
    out = np.zeros_like(f)
    for _ in range(f.size + 1):
        k = int(active.sum())
        s = float(f[active].sum())
        x = pq * (1.0 - s) / (k * a + b)
        den = pq - b * x
        if not den > 0:
            raise ValueError(
                "mle_apx found no feasible solution (denominator p - q - (p-q)(1-p-q) x "
                f"= {den:.3g} <= 0); are the estimates from this spec?"
            )
        vals = (a * x + f[active] * pq) / den
        negative = vals < 0
        if not negative.any():
            out[active] = vals
            break
        idx = np.flatnonzero(active)
        active[idx[negative]] = False
    else:  # pragma: no cover - the active set shrinks every pass
        raise RuntimeError("mle_apx did not converge")
    return estimate.with_postprocessing(out, "mle_apx")


# --------------------------------------------------------------------------- Power

#: Relative truncation error allowed in the posterior sums (log scale).
_POWER_LOG_TOL = 36.0
#: Windows up to this many integers are summed exactly; wider ones use quadrature.
_POWER_EXACT_MAX = 8192
#: Counts below this are always summed exactly (the power law bends fast there).
_POWER_SMALL = 256
#: Grid spacing of the interpolated posterior mean, in units of sigma.
_POWER_GRID_STEP = 1.0 / 32.0
#: Accepted interpolation error at a cell midpoint, in units of sigma.
_POWER_INTERP_TOL = 1e-7
#: Cell halvings before the remaining values are evaluated directly.
_POWER_MAX_LEVELS = 24
#: Upper end of the exponent search.
_POWER_ALPHA_MAX = 50.0
# 8-point Gauss-Legendre rule on [-1, 1].
_GL_T, _GL_W = np.polynomial.legendre.leggauss(8)


def _power_sum(s: float, n: int, kmax: int = 1000) -> float:
    """``sum_{x=1}^{n} x^(-s)``: exact up to ``kmax``, Euler-Maclaurin beyond (rel. err ~1e-16)."""
    m = min(n, kmax)
    head = float(np.sum(np.arange(1, m + 1, dtype=np.float64) ** (-s)))
    if n <= kmax:
        return head
    a, b = float(kmax + 1), float(n)
    log_ratio = math.log(b / a)
    z = (1.0 - s) * log_ratio
    integral = a ** (1.0 - s) * log_ratio * (math.expm1(z) / z if z != 0.0 else 1.0)

    def dk(x: float, order: int) -> float:
        # order-th derivative of x^-s: (-1)^order s (s+1) ... (s+order-1) x^(-s-order)
        c = 1.0
        for i in range(order):
            c *= -(s + i)
        return c * x ** (-s - order)

    tail = (
        integral
        + (a ** (-s) + b ** (-s)) / 2.0
        + (dk(b, 1) - dk(a, 1)) / 12.0
        - (dk(b, 3) - dk(a, 3)) / 720.0
        + (dk(b, 5) - dk(a, 5)) / 30240.0
    )
    return head + tail


def _power_prior_mean(alpha: float, n: int) -> float:
    """Mean of the prior ``P[x] ~ x^-alpha`` on ``x = 1..n``."""
    return _power_sum(alpha - 1.0, n) / _power_sum(alpha, n)


def fit_power_law(counts: Any, n: int) -> float:
    """Exponent ``alpha`` of the power law ``P[x] ~ x^-alpha`` on counts ``x = 1..n``.

    Fitted as in Jia & Gong's method (CON20 sec. IV-E; METHODS.md section 2): the
    exponent whose prior mean equals the mean of the (estimated) counts, found by
    bisection (Brent's method; the prior mean decreases in ``alpha``). A mean at or below 1
    gives the search's upper end (50); a mean at or above ``(n + 1) / 2`` gives 0.

    Parameters
    ----------
    counts : array_like
        Estimated counts ``n * f~_v`` (may be negative).
    n : int
        Number of users; the prior's support is ``1..n``.

    Examples
    --------
    >>> x = np.arange(1, 1001)
    >>> w = x ** -1.5
    >>> mean = float((x * w).sum() / w.sum())
    >>> round(fit_power_law(np.full(10, mean), 1000), 8)
    1.5
    """
    n = check_integer(n, "n", low=1)
    check_not_masked(counts, "counts")
    c = check_array(counts, "counts", ndim=(0, 1, 2))
    if c.size == 0 or not np.all(np.isfinite(c)):
        raise ValueError("counts must be a non-empty array of finite numbers")
    target = float(c.mean())
    if n == 1 or target >= _power_prior_mean(0.0, n):
        return 0.0
    if target <= _power_prior_mean(_POWER_ALPHA_MAX, n):
        return _POWER_ALPHA_MAX
    # Compare log means: the mean spans many orders of magnitude over the bracket.
    log_target = math.log(target)
    return float(
        _opt.brentq(
            lambda a: math.log(_power_prior_mean(a, n)) - log_target,
            0.0,
            _POWER_ALPHA_MAX,
            xtol=1e-12,
            rtol=4 * np.finfo(float).eps,
            maxiter=500,
        )
    )


def _posterior_moments(
    c: np.ndarray, sigma: float, alpha: float, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean of the count and its derivative in ``c``, at each point of ``c``.

    Prior ``P[x] ~ x^-alpha`` on integers ``x = 1..n``; likelihood ``N(c; x, sigma^2)``.
    The mean is ``sum x w(x) / sum w(x)`` with ``w(x) = x^-alpha exp(-(c - x)^2 / 2 sigma^2)``;
    its derivative in ``c`` is the posterior variance over ``sigma^2``.

    The sums run over a window ``|x - c| <= k sigma`` with ``k^2 / 2 = (alpha + 1) ln n + 36``,
    so the dropped terms weigh less than ``e^-36`` of the total. Windows of at most
    ``_POWER_EXACT_MAX`` integers are summed term by term. Wider windows (sigma in the
    hundreds or more) sum the 256 smallest and the 256 largest counts exactly and replace
    the integer sum in between by the integral over ``[256.5, n - 255.5]`` with its
    midpoint Euler-Maclaurin correction ``-[w']/24``, computed with 8-point Gauss-Legendre
    panels no wider than ``x / 4`` and ``sigma / 2``; the summand there varies slowly on
    the unit scale, and the two agree to about ``1e-10`` relative.
    """
    k = math.sqrt(2.0 * ((alpha + 1.0) * math.log(max(n, 2)) + _POWER_LOG_TOL))
    half = k * sigma
    width = min(n, 2 * math.ceil(half) + 2)
    inv2s2 = 0.5 / (sigma * sigma)
    g = np.empty(c.size)
    dg = np.empty(c.size)

    if width <= _POWER_EXACT_MAX or n <= _POWER_EXACT_MAX:
        width = min(n, max(width, 1))
        j = np.arange(width, dtype=np.float64)
        rows = max(1, (1 << 20) // width)
        for s0 in range(0, c.size, rows):
            cc = c[s0 : s0 + rows, None]
            start = np.clip(np.floor(cc - half), 1.0, float(n - width + 1))
            x = start + j
            e = x - cc
            logw = -alpha * np.log(x) - e * e * inv2s2
            w = np.exp(logw - logw.max(axis=1, keepdims=True))
            ref = np.clip(cc, 1.0, float(n))  # moments about a point inside [1, n]
            v = x - ref
            s0w = w.sum(axis=1)
            m1 = (w * v).sum(axis=1) / s0w
            m2 = (w * v * v).sum(axis=1) / s0w
            g[s0 : s0 + rows] = ref[:, 0] + m1
            dg[s0 : s0 + rows] = np.maximum(m2 - m1 * m1, 0.0) / sigma**2
        return g, dg

    # Hybrid: exact counts at both ends + Gauss-Legendre integral + midpoint correction.
    # The ends are where the summand can turn fast: x^-alpha near 1, and the Gaussian's
    # flank at n when c lies far beyond n.
    small = np.arange(1, _POWER_SMALL + 1, dtype=np.float64)
    large = np.arange(n - _POWER_SMALL + 1, n + 1, dtype=np.float64)
    lo_int, hi_int = _POWER_SMALL + 0.5, n - _POWER_SMALL + 0.5
    edges = [lo_int]
    while edges[-1] < min(2.0 * sigma, hi_int):  # geometric panels: width x / 4
        edges.append(min(edges[-1] * 1.25, hi_int))
    geo = np.asarray(edges)
    geo_mid, geo_half = (geo[1:] + geo[:-1]) / 2.0, (geo[1:] - geo[:-1]) / 2.0
    geo_x = (geo_mid[:, None] + geo_half[:, None] * _GL_T).ravel()
    geo_lw = np.log((geo_half[:, None] * _GL_W).ravel())
    u0 = geo[-1]
    pw = sigma / 2.0  # uniform panels of width sigma / 2 from u0 to hi_int
    n_uniform = max(0, math.ceil((hi_int - u0) / pw))
    slots = math.ceil(2.0 * half / pw) + 2
    fixed_x = np.concatenate([small, geo_x, large])
    fixed_lw = np.concatenate([np.zeros(small.size), geo_lw, np.zeros(large.size)])
    rows = max(1, (1 << 20) // (fixed_x.size + 8 * slots))
    for s0 in range(0, c.size, rows):
        cc = c[s0 : s0 + rows, None]
        # Uniform panels overlapping [c - half, c + half], the window slid inside
        # [u0, hi_int] when c lies beyond n (the mass then sits at the top counts).
        lo_w = np.clip(cc - half, u0, max(u0, hi_int - 2.0 * half))
        first = np.floor((lo_w - u0) / pw)
        pidx = first + np.arange(slots)
        valid = (pidx >= 0) & (pidx < n_uniform)
        left = u0 + np.clip(pidx, 0, max(n_uniform - 1, 0)) * pw
        right = np.minimum(left + pw, hi_int)
        mid, hw = (left + right) / 2.0, (right - left) / 2.0
        ux = (mid[:, :, None] + hw[:, :, None] * _GL_T).reshape(cc.shape[0], -1)
        with np.errstate(divide="ignore"):
            ulw = np.log(np.where(valid, hw, 0.0)[:, :, None] * _GL_W).reshape(cc.shape[0], -1)
        x = np.concatenate([np.broadcast_to(fixed_x, (cc.shape[0], fixed_x.size)), ux], axis=1)
        lw = np.concatenate([np.broadcast_to(fixed_lw, (cc.shape[0], fixed_lw.size)), ulw], axis=1)
        e = x - cc
        logw = lw - alpha * np.log(x) - e * e * inv2s2
        ends = [(z, -alpha * math.log(z) - (z - cc[:, 0]) ** 2 * inv2s2) for z in (lo_int, hi_int)]
        top = np.maximum(logw.max(axis=1), np.maximum(ends[0][1], ends[1][1]))
        w = np.exp(logw - top[:, None])
        ref = np.clip(cc[:, 0], 1.0, float(n))  # moments about a point inside [1, n]
        v = x - ref[:, None]
        s = [w.sum(axis=1), (w * v).sum(axis=1), (w * v * v).sum(axis=1)]
        # Midpoint Euler-Maclaurin: sum_{x=a}^{b} h(x) = int_{a-1/2}^{b+1/2} h - [h']/24,
        # for h_k(x) = x^-alpha (x - ref)^k exp(-(x - c)^2 / 2 sigma^2), k = 0, 1, 2.
        for (z, logz), sign in zip(ends, (1.0, -1.0)):
            vz = z - ref
            hz = np.exp(logz - top)
            dlog = -alpha / z - (z - cc[:, 0]) / sigma**2
            s[0] += sign * hz * dlog / 24.0
            s[1] += sign * hz * (vz * dlog + 1.0) / 24.0
            s[2] += sign * hz * (vz * vz * dlog + 2.0 * vz) / 24.0
        m1 = s[1] / s[0]
        m2 = s[2] / s[0]
        g[s0 : s0 + rows] = ref + m1
        dg[s0 : s0 + rows] = np.maximum(m2 - m1 * m1, 0.0) / sigma**2
    return g, dg


def _hermite(
    t: np.ndarray, h: float, g0: np.ndarray, d0: np.ndarray, g1: np.ndarray, d1: np.ndarray
) -> np.ndarray:
    """Cubic Hermite interpolant on a cell of width h at fraction t (values and slopes)."""
    t2, t3 = t * t, t * t * t
    return (
        (2 * t3 - 3 * t2 + 1) * g0
        + (t3 - 2 * t2 + t) * h * d0
        + (-2 * t3 + 3 * t2) * g1
        + (t3 - t2) * h * d1
    )


def _posterior_mean(
    c: np.ndarray, sigma: float, alpha: float, n: int, *, exact: bool = False
) -> np.ndarray:
    """Posterior mean count at every ``c``.

    Directly at the distinct values when there are few of them (or ``exact``); otherwise
    adaptively: the occupied cells of a grid of step ``sigma / 32`` are checked by
    evaluating the exact mean and slope at both ends and the midpoint, and a cell is
    accepted when the cubic Hermite interpolant through its ends predicts the midpoint to
    within ``1e-7 sigma``; values in accepted cells are interpolated on the half-cell they
    fall in (about 16 times more accurate than the test), and rejected cells are halved and
    tested again. Where cells would cost more than the values they hold, the values are
    evaluated directly. The posterior mean is analytic in ``c`` but can turn on a scale
    much finer than sigma (a steep prior makes the posterior wide), hence the adaptivity.
    """
    uniq, inverse = np.unique(c, return_inverse=True)
    result = np.empty(uniq.size)
    pending = np.arange(uniq.size)
    h = sigma * _POWER_GRID_STEP
    tol = _POWER_INTERP_TOL * sigma
    base = uniq[0]
    for _ in range(_POWER_MAX_LEVELS):
        if exact or pending.size <= 64:
            break
        v = uniq[pending]
        cell = np.floor((v - base) / h).astype(np.int64)
        cells, where = np.unique(cell, return_inverse=True)
        if 3 * cells.size >= pending.size:
            break
        left = base + cells * h
        g, dg = _posterior_moments(np.concatenate([left, left + h / 2, left + h]), sigma, alpha, n)
        m = cells.size
        gl, gm, gr = g[:m], g[m : 2 * m], g[2 * m :]
        dl, dm, dr = dg[:m], dg[m : 2 * m], dg[2 * m :]
        good = np.abs(_hermite(np.full(m, 0.5), h, gl, dl, gr, dr) - gm) <= tol
        accept = good[where]
        idx, w = pending[accept], where[accept]
        t = (uniq[idx] - left[w]) / h * 2.0  # fraction within the half-cell
        upper = t >= 1.0
        t = np.where(upper, t - 1.0, t)
        result[idx] = np.where(
            upper,
            _hermite(t, h / 2, gm[w], dm[w], gr[w], dr[w]),
            _hermite(t, h / 2, gl[w], dl[w], gm[w], dm[w]),
        )
        pending = pending[~accept]
        h /= 2.0
        if pending.size == 0:
            break
    if pending.size:
        result[pending], _ = _posterior_moments(uniq[pending], sigma, alpha, n)
    return result[inverse]


def power(
    estimate: FrequencyEstimate,
    *,
    alpha: float | None = None,
    variance: float | None = None,
) -> FrequencyEstimate:
    """Power: posterior mean under a fitted power-law prior (Jia & Gong; CON20 sec. IV-E).

    Works on counts ``c~_v = n f~_v``. The prior is ``P[x] ~ x^-alpha`` on the integer
    counts ``x = 1..n`` with ``alpha`` fitted by :func:`fit_power_law` (prior mean = mean
    estimated count); the noise is Gaussian with the oracle's variance of a zero-frequency
    item, ``sigma^2 = n^2 Var*`` on the count scale (``n`` times the per-user variance
    ``n Var*``, CON20 eq. 7-8). Each estimate becomes its posterior mean (CON20 eq. 13, with
    the integral over counts written as a sum over integers):
    ``f'_v = sum_x x P[x] phi((c~_v - x)/sigma) / (n sum_x P[x] phi((c~_v - x)/sigma))``.

    The output is positive (at least ``1/n``) and does not sum to 1; :func:`power_ns`
    normalizes it. The carried ``variance`` is that of the unbiased input, not of the
    result.

    Parameters
    ----------
    estimate : FrequencyEstimate
        Needs ``n >= 1`` and a single ``variance_null`` for all items (an estimate from a
        pure oracle has one), unless ``variance`` is given.
    alpha : float, optional
        Use this exponent (>= 0) instead of fitting one.
    variance : float, optional
        Noise variance of one frequency estimate (Var*), overriding
        ``estimate.variance_null``.

    Notes
    -----
    The sums only need the window ``|x - c~| <= k sigma`` (``k`` about 10-13, chosen so the
    rest weighs less than ``e^-36``), so the paper's cost is O(sqrt(n) d). Two devices make
    it independent of ``n`` and ``d`` instead:

    * the posterior mean depends on an item only through ``c~_v`` (the prior and sigma are
      shared), so it is computed exactly on a grid of step ``sigma / 32`` over the cells
      that contain estimates, together with its exact derivative (posterior variance over
      ``sigma^2``), and cubic Hermite interpolation fills in (error about ``1e-8 sigma``);
      when there are fewer distinct estimates than grid nodes they are evaluated directly;
    * windows wider than 8192 counts sum counts below 257 exactly and the rest as an
      integral with its Euler-Maclaurin correction, by Gauss-Legendre quadrature
      (relative error about 1e-10 of the sums).

    Examples
    --------
    >>> from ldpkit import GRR, FrequencyEstimate
    >>> spec = GRR(epsilon=2.0, domain_size=6)
    >>> est = FrequencyEstimate([0.55, 0.3, 0.12, 0.05, -0.01, -0.01], 0.0, n=10000, spec=spec)
    >>> out = power(est)
    >>> bool(np.all(out.frequencies > 0)), out.postprocessing
    (True, ('power',))
    """
    f = _check_estimate(estimate)
    n = estimate.n
    if n < 1:
        raise ValueError(f"estimate.n must be >= 1 for power, got {n}")
    if variance is None:
        var = _null_variance(estimate)
        if var.size and not np.allclose(var, var.flat[0], rtol=1e-9, atol=0.0):
            raise ValueError(
                "power needs one noise variance for all items (the oracle's Var*); "
                "estimate.variance_null varies across items: attach the oracle spec to the "
                "estimate or pass variance="
            )
        var0 = float(var.flat[0])
    else:
        var0 = check_real(variance, "variance", low=0.0)
    counts = f * n
    if alpha is None:
        alpha = fit_power_law(counts, n)
    else:
        alpha = check_real(alpha, "alpha", low=0.0)
    # Count-scale noise; floored so a noiseless oracle still gives a finite computation.
    sigma = max(math.sqrt(var0) * n, 1e-6)
    g = _posterior_mean(counts, sigma, alpha, n)
    return estimate.with_postprocessing(np.clip(g, 1.0, float(n)) / n, "power")


def power_ns(
    estimate: FrequencyEstimate,
    *,
    alpha: float | None = None,
    variance: float | None = None,
) -> FrequencyEstimate:
    """PowerNS: :func:`power`, then :func:`norm_sub` (CON20 sec. IV-E).

    Non-negative and sums to 1; CON20 recommends it for set-value queries. The result's
    ``postprocessing`` ends with the single step ``"power_ns"``. The carried ``variance``
    is that of the unbiased input, not of the result.

    Examples
    --------
    >>> from ldpkit import GRR, FrequencyEstimate
    >>> spec = GRR(epsilon=2.0, domain_size=6)
    >>> est = FrequencyEstimate([0.55, 0.3, 0.12, 0.05, -0.01, -0.01], 0.0, n=10000, spec=spec)
    >>> out = power_ns(est)
    >>> round(float(out.frequencies.sum()), 12), out.postprocessing
    (1.0, ('power_ns',))
    """
    powered = power(estimate, alpha=alpha, variance=variance)
    return estimate.with_postprocessing(simplex_projection(powered.frequencies), "power_ns")


# --------------------------------------------------------------------------- IBU

#: Default stopping rule of :func:`ibu`: largest change of a frequency in one iteration.
IBU_TOL = 1e-10
#: Default iteration cap of :func:`ibu`.
IBU_MAX_ITER = 10_000


def ibu(
    estimate: FrequencyEstimate, *, tol: float = IBU_TOL, max_iter: int = IBU_MAX_ITER
) -> FrequencyEstimate:
    """IBU: the iterative Bayesian update (EM) of Agrawal & Aggarwal (PODS 2001, sec. 3).

    With ``M[v, u] = P[u in Support(y) | v]`` (``p`` on the diagonal, ``q`` elsewhere)
    and the observed support shares ``w_u = C_u / sum C``, each iteration is Bayes' rule
    ``f_v <- f_v sum_u w_u M[v, u] / sum_v' f_v' M[v', u]`` started from the uniform
    distribution. Every iterate is non-negative and sums to 1. For GRR ``M`` is the
    transition matrix and the support counts are the output histogram, so IBU is EM on
    the exact multinomial likelihood and converges to the constrained maximum-likelihood
    estimate; for the other pure oracles (OUE, OLH, ...) it is the same update on the
    support counts, the form multi-freq-ldpy uses. Each iteration is O(d) (``M`` has
    two distinct values: it is never built).

    The support counts come back from the unbiased frequencies exactly
    (``C = n (q + (p - q) f~)``, clipped at 0 for foreign inputs); ``p`` and ``q`` come
    from ``estimate.spec``, which must be a pure frequency oracle.

    Parameters
    ----------
    estimate : FrequencyEstimate
        The plain estimate of a pure frequency oracle.
    tol : float
        Stop when no frequency moves by more than ``tol`` in one iteration (> 0).
    max_iter : int
        Iteration cap (>= 1); the last iterate is returned when it is reached (EM
        converges slowly for items whose maximum-likelihood frequency is 0).

    Returns
    -------
    FrequencyEstimate
        ``postprocessing`` ends with ``"ibu"``; the carried ``variance`` is that of the
        unbiased input, not of the result.

    References
    ----------
    D. Agrawal, C. C. Aggarwal. On the Design and Quantification of Privacy Preserving
    Data Mining Algorithms. PODS 2001, section 3 (the iterative Bayesian reconstruction).

    Examples
    --------
    >>> from ldpkit import GRR, FrequencyEstimate
    >>> spec = GRR(epsilon=1.0, domain_size=4)
    >>> est = FrequencyEstimate([0.62, 0.45, -0.05, -0.02], 0.01, n=1000, spec=spec)
    >>> out = ibu(est).frequencies
    >>> bool(out.min() >= 0), round(float(out.sum()), 12)
    (True, 1.0)
    """
    f_plain = _check_estimate(estimate)
    p, q = _pure_pq(estimate, "ibu")
    tol = check_real(tol, "tol", low=0.0, low_inclusive=False)
    max_iter = check_integer(max_iter, "max_iter", low=1, high=10**7)
    counts = np.maximum(q + (p - q) * f_plain, 0.0)
    total = float(counts.sum())
    if not total > 0:
        raise ValueError("estimate.frequencies must imply some positive support count, got none")
    w = counts / total
    pq = p - q
    f = np.full(f_plain.size, 1.0 / f_plain.size)
    for _ in range(max_iter):
        # sum_v f_v M[v, u] = q sum(f) + (p - q) f_u, and sum(f) = 1 throughout.
        ratio = w / (q + pq * f)
        new = f * (q * float(ratio.sum()) + pq * ratio)
        new /= new.sum()  # exact in theory; removes the rounding drift
        done = float(np.abs(new - f).max()) <= tol
        f = new
        if done:
            break
    return estimate.with_postprocessing(f, "ibu")


#: Every consistency method by name (CON20 Table I).
METHODS: Mapping[str, Callable[..., FrequencyEstimate]] = {
    "base_pos": base_pos,
    "post_pos": post_pos,
    "base_cut": base_cut,
    "norm": norm,
    "norm_mul": norm_mul,
    "norm_cut": norm_cut,
    "norm_sub": norm_sub,
    "mle_apx": mle_apx,
    "power": power,
    "power_ns": power_ns,
    "ibu": ibu,
}


# --------------------------------------------------------------------------- comparison

#: The query set of CON20's comparison: full domain, random sets of 10/50/90% of the
#: domain (sec. V-D), and the 10 most frequent items (sec. V-E).
DEFAULT_QUERIES: Mapping[str, Mapping[str, Any]] = {
    "full": {"query": "full"},
    "set_10": {"query": "set", "rho": 0.1},
    "set_50": {"query": "set", "rho": 0.5},
    "set_90": {"query": "set", "rho": 0.9},
    "top_10": {"query": "topk", "k": 10},
}


def _identity(estimate: FrequencyEstimate) -> FrequencyEstimate:
    return estimate


def compare(
    estimates: FrequencyEstimate | Sequence[FrequencyEstimate],
    truth: Any,
    *,
    methods: Sequence[str] | None = None,
    queries: Mapping[str, Mapping[str, Any]] | None = None,
    n_queries: int = 200,
    rng: RNGLike = None,
) -> dict[str, dict[str, float]]:
    """MSE of every method on every query type (CON20 sec. V), averaged over estimates.

    The random set and range queries are drawn once (with ``rng``) and shared by all
    methods and all estimates, so differences between methods are not query noise.

    Parameters
    ----------
    estimates : FrequencyEstimate or sequence of them
        Unbiased estimates (e.g. repeated trials of one oracle on one data set).
    truth : array_like
        True frequencies.
    methods : sequence of str, optional
        Names from :data:`METHODS`, plus ``"base"`` for no post-processing. Default: all.
    queries : mapping, optional
        Column name -> keyword arguments of :func:`ldpkit.queries.mse` (``query`` plus e.g.
        ``rho``, ``k``, ``length``). Default :data:`DEFAULT_QUERIES`.
    n_queries : int
        Number of random set / range queries per column.
    rng : Generator, SeedSequence, int or None
        Draws the random queries.

    Returns
    -------
    dict
        ``result[method][query_name]`` = mean MSE over the estimates.

    Examples
    --------
    >>> from ldpkit import GRR
    >>> grr = GRR(epsilon=1.0, domain_size=16)
    >>> truth = np.r_[0.4, 0.2, 0.1, 0.1, np.full(12, 0.2 / 12)]
    >>> values = np.repeat(np.arange(16), (truth * 2000).round().astype(int))
    >>> est = grr.estimate(grr.aggregate(grr.randomize(values, rng=0)))
    >>> res = compare(est, truth, methods=["base", "norm_sub"], rng=0)
    >>> sorted(res), sorted(res["base"])
    (['base', 'norm_sub'], ['full', 'set_10', 'set_50', 'set_90', 'top_10'])
    """
    ests = (
        [estimates]
        if isinstance(estimates, FrequencyEstimate)
        else check_sequence(estimates, "estimates", "FrequencyEstimate")
    )
    if not ests:
        raise ValueError("estimates must hold at least one FrequencyEstimate")
    for e in ests:
        if not isinstance(e, FrequencyEstimate):  # (name the parameter the caller passed)
            raise TypeError(
                f"estimates must be FrequencyEstimates, got an item of type {type(e).__name__}"
            )
        _check_estimate(e)
    d = ests[0].domain_size
    if any(e.domain_size != d for e in ests):
        raise ValueError("estimates must all have the same domain size")
    names = ["base", *METHODS] if methods is None else check_sequence(methods, "methods", "names")
    if not all(isinstance(name, str) for name in names):
        raise TypeError(f"methods must be a sequence of names (str), got {names!r:.60}")
    table: dict[str, Callable[[FrequencyEstimate], FrequencyEstimate]] = {"base": _identity}
    table.update(METHODS)
    for name in names:
        if name not in table:
            raise ValueError(f"methods must be names from {sorted(table)}, got {name!r}")
    qspec = dict(DEFAULT_QUERIES if queries is None else queries)
    n_queries = check_integer(n_queries, "n_queries", low=1)
    gen = as_generator(rng)
    prepared: dict[str, dict[str, Any]] = {}
    for qname, params in qspec.items():
        kw = dict(params)
        kind = kw.get("query", "full")
        if kind == "set" and "subsets" not in kw:
            kw["subsets"] = _queries.random_subsets(
                d, kw.pop("rho", 0.1), kw.pop("n_queries", n_queries), rng=gen
            )
        elif kind == "range" and "ranges" not in kw:
            kw["ranges"] = _queries.random_ranges(
                d, kw.pop("n_queries", n_queries), length=kw.pop("length", None), rng=gen
            )
        prepared[qname] = kw
    check_not_masked(truth, "truth")
    truth_arr = check_array(truth, "truth", bounded=True)
    out = {name: dict.fromkeys(prepared, 0.0) for name in names}
    for est in ests:
        for name in names:
            processed = table[name](est)
            for qname, kw in prepared.items():
                out[name][qname] += _queries.mse(processed, truth_arr, **kw) / len(ests)
    return out
