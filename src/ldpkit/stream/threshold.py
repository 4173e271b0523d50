"""Threshold selection of the stream releases: ToPS (central DP, STR21 §4) and ToPL (local DP, §5).

ToPS's threshold optimizer: the exponential mechanism over a sensitivity-1 score (STR21 §4)
=========================================================================================

The first ``m`` values of the stream are spent on choosing a clipping threshold ``theta``
from the candidates ``0, step, 2 step, ..., bound``. Each candidate is scored by

    q(theta) = -#{v > theta among the m values} - lambda * theta,
    lambda = (3 m / (n c)) * sqrt(2 (b - 1) h^3) / epsilon,

the (scaled, negated) sum of the clipping bias of an average range query (n/3 values, each
clipped value assumed to exceed theta by ``c``) and the noise standard deviation of the
b-ary hierarchy with ``h`` noisy levels that will release the stream.

Privacy (the factor 2)
----------------------
The exponential mechanism samples ``theta`` with probability proportional to
``exp(epsilon q / (2 Delta))`` in general. Here ``Delta = 1`` and the score is *monotone*:
changing one of the m values from ``a`` to ``a'`` changes ``#{v > theta}`` by +1 for every
theta in ``[min, max)`` of the two and by 0 elsewhere, so all scores move in the same
direction. For monotone scores ``exp(epsilon q / Delta)`` is already epsilon-DP
(McSherry & Talwar 2007; Dwork & Roth 2014, Thm. 3.10 remark): the ratio of the unnormalized
weights is within ``[e^-eps, 1]`` and so is the ratio of the normalizers, in opposite
directions. METHODS.md §5 and the authors' code use this factor (``coeff = eps / sensitivity``
for monotone scores), and so do we. ``monotone=False`` gives the general ``eps/(2 Delta)``.

Two samplers are offered, both epsilon-DP:

* ``"gumbel"`` (default): ``argmax(epsilon q / Delta + Gumbel(0, 1))`` samples *exactly* from
  the exponential mechanism's distribution (the Gumbel-max trick).
* ``"noisy_max"``: report-noisy-max with ``Laplace(Delta / epsilon)`` noise, as in the
  authors' code. It is epsilon-DP for monotone scores (Dwork & Roth 2014, Claim 3.9) but its
  selection law is not the exponential mechanism's.

ToPL's threshold phase (STR21 §5)
=================================
The first m users of :class:`ldpkit.stream.ToPL` report with Square Wave; from their
reports the server estimates the value distribution and picks the clipping threshold with
the functions below.

The threshold objective (METHODS.md §5)
---------------------------------------
With the candidates ``theta_k = k B / d``, ``k = 0..d`` (the edges of the d buckets on which
the distribution ``f`` is estimated),

    MSE(theta) = (n/3) (theta^2 / 4) Var_HM(eps) + (n^2 / 6) delta(theta)^2,
    delta(theta) = E_f[(X - theta)^+] = (B/d) sum_{i >= k} f_i (i + 1/2 - k)  at theta = theta_k,

the noise of an average-length range (``n/3`` users, each reporting on ``[0, theta]``, i.e.
``(theta/2)^2`` times HM's worst-case variance on [-1, 1], STR21 eq. 14) plus its squared
clipping bias (``delta`` per user, ``E[len^2] = n^2/6`` for two uniform endpoints). The
authors' code uses ``theta^2`` for ``theta^2/4`` and ``n^2/24`` for ``n^2/6``: it weighs the
noise 16 times too much relative to the bias (their objective at n equals 64 times ours at
n/16), which picks smaller thresholds; ``objective="authors"`` reproduces it.
``theta_0 = 0`` would clip every value to 0 and release nothing, so the minimum is taken
over ``k >= 1`` (ties: the smallest theta).

``delta`` treats bucket ``i`` as the histogram density does, its mass spread evenly over
``[i B/d, (i+1) B/d)``: the expected clipping loss of a value in it, above an edge ``k``, is
``(i + 1/2 - k) B/d``. Putting the mass on one point per bucket instead (earlier versions:
``x_i = i B/(d-1)``, the left edge) understates every loss by half a bucket, which matters
when the data sit in a few buckets (retail: bucket width 16.1, 99% of the values below 39):
on the *true* histogram of retail's threshold part, the point placement picks theta = 32.2
where the best threshold is 48.3, an MSE 7.9x the best's at eps = 4; with the mass spread
over its bucket the objective on the true histogram lands within one bucket of the best
threshold on every stream and epsilon of ``studies/topl_threshold.py`` (MSE <= 1.2x the
best's).

The tail cut (post-processing of the threshold phase)
----------------------------------------------------
The SW estimate of ``f`` leaves spurious mass far above the data: thin (1e-5 per bucket) but
spread over hundreds of buckets, so it sums to ~1% and dominates ``delta(theta)``; the
objective then pushes theta 5-200x above the best threshold. Before minimizing, ToPL removes
that tail (:func:`cut_tail`): every bucket whose estimated mass is below a *detection floor*
is zeroed, the estimate is cut at the first run of ``run = 5`` zeroed buckets above the mode,
and the removed mass is given back to the rest (renormalization). The detection floor
(:func:`square_wave_detection_floor`) is ``z`` standard deviations of the smallest point mass
the m threshold reports can tell apart from no mass: a point mass ``w`` at ``x`` raises SW's
report density on ``[x - b, x + b]`` by ``w (p - q)``, i.e. the expected count of the m
reports in that window by ``m w (p - q) 2b``, against a count of standard deviation at most
``sqrt(m q 2b)``, so ``w_min = z sqrt(q 2b / m) / ((p - q) 2b)`` (unit scale, SW20 §5.2's
``p``, ``q``, ``b``). ``z = 1/4`` (:data:`TAIL_Z`) was chosen on the POS, retail and DNS
streams (``studies/topl_threshold.py``). ``tail_cut="authors"`` uses the authors' code's
fixed floor 1e-4 with the same run rule, ``tail_cut="none"`` the raw estimate. The cut uses
only the estimate, i.e. the reports: post-processing, no privacy budget.

A real, long, thin upper tail falls below the floor too, bucket by bucket: on the NYC flight
delays (a stream the floor was not chosen on) the floor cut alone drops the delays' tail and
theta falls to 0.4-0.6x the best threshold (MSE 22-33x the best's). So the default
(``tail_cut="tested"``) checks the cut against the reports: :func:`heldout_tail_test` splits
the threshold reports into two random halves (seeded by the counts, so a deterministic
function of the reports), fits EM on each half and scores, by the other half's log likelihood
under the exact bucket matrix, the floor-cut estimate and the raw estimate truncated at every
bucket above the cut (two-fold cross-validated likelihood, Stone 1974). A spurious tail only fits the noise
of the half it came from; a real one predicts the other half. When the best truncation beats
the floor cut by a likelihood ratio above 32 (:data:`TAIL_EVIDENCE`, Royall 1997's "strong
evidence"), theta is chosen from the full-data raw estimate truncated there; otherwise from
the floor cut. Post-processing, no budget. Numbers in
``docs/results/tops21/topl_threshold.md``. Two tests that did not separate the streams: the
total estimated mass above the cut (see there), and an exact one-sided test of "no mass above
the cut" on the reports beyond the bulk's windows (under that null their count is at most
Binomial(m, q (1 - c)); on the flights its z was 0.8-3.7 at eps = 1-4, on retail up to 1.8:
SW's window is too wide for that region to carry the evidence).

The tail continuation
---------------------
Any cut also zeroes the *real* thin tail above it, and the best threshold sits where the
tail is about as thin as m reports can detect (its optimality condition
``theta Var / 2 = n delta(theta) P(X > theta)`` with m = n/16), so the cut tends to land
near or below it. With no mass above the cut the clipping term is too small and theta
lands 20-30% below the best on POS and DNS at eps >= 2, where the MSE is steep (2.2-2.4x
at 0.75 of the best threshold, 22-30x at half of it, against ~3x at twice it): even the
*true* histogram, truncated where the cut falls, gives theta 0.63-0.9x the best there.
So after the cut (default ``tail_extension="exponential"``) :func:`extend_tail` continues
the estimate above its last bucket with the exponential tail fitted to its own top 10%
(peaks over threshold with shape 0: Pickands 1975; Davison and Smith 1990; scale = the mean
excess over the 0.9-quantile, measured on the cut estimate and so biased low). Post-processing,
no budget. It puts back the *shape* of the bulk's decay, not the estimate's mass above the
cut (that mass is mostly spurious: 0.01-0.10 on retail, whose true mass there is 0; a
variant that gave it back at the cut point lost retail at eps = 4). Measured on 5 seeds
(``studies/topl_threshold.py``): MSE within 3x of the best's in 64 of 80 (stream, eps,
seed) cells, against 57 without it (theta within 2x: 65 both); on 15 other seeds 180 of
240 against 173 (theta 191 against 193). The fitted exceedance level was chosen among
0.8-0.98 on those 15 seeds, not on the 5 of the table.

The log-scale threshold phase (default, ``threshold_scale="log"``)
-----------------------------------------------------------------
On the paper's linear scale the m Square Wave reports cannot resolve a bulk that sits in a
few of the d buckets: retail's values (99% below 39 of B = 16,470) fall in 3 buckets of
width 16.1 while SW's window is 2b = 0.51 B wide at eps = 1; EM spreads them over ~10
buckets and theta lands 3-6x above the best threshold at eps <= 1 (MSE 8-32x), whatever the
cut. A two-point (Le Cam) bound (``studies/topl_threshold.py``, ``two_point_bound``) shows
that at eps = 0.5 no rule on *linear* reports can meet the 3x target with probability above
0.76 on both retail and retail x 2.5 (TV of their 16,384-report laws <= 0.52): the linear
reports carry too little information about where in [0, 160] the bulk lies. So by default the
threshold users report ``u = log(1 + v / s) / log(1 + B / s)`` instead
(:class:`ldpkit.numeric.SquareWave` with ``log_scale = s = B / d``): a monotone transform on
the device before the same wave, so each user is eps-LDP exactly as before (SW20 Thm. 5.2
holds for any input in [0, 1]); the resolution becomes relative above ``s`` (a factor 2.5 on
retail moves ``u`` by 0.13 of the domain instead of 0.006). Geometric bucket grids for
heavy-tailed data are standard (e.g. HDR histograms); the transform is pre-processing of the
value, not a new mechanism. The server runs EM on :data:`LOG_BUCKETS` = 96 buckets of ``u``,
applies the same tail cut and held-out test with two changes, maps the cut estimate to the d
linear buckets (each log bucket's mass spread evenly over its interval of ``u``,
:meth:`ldpkit.numeric.SquareWave.linear_histogram`), continues it with :func:`extend_tail`
fitted to its top 20% (:data:`LOG_TAIL_QUANTILE`) and minimizes the same objective. The two
changes: the cut's scan starts at the median (:data:`LOG_CUT_QUANTILE`; an integer-valued
stream's small values 0, 1, 2, ... leave real gaps of several log buckets just above the
mode), and when the held-out test fires it keeps the *shortest* truncation whose held-out
likelihood is within a factor 32 of the best one (``TailTest.plausible``), not the best one,
and at most :data:`LOG_TEST_REACH` = 12 log buckets past the floor cut (below):
on the log scale spurious EM mass sits at enormous values (up to B), so a truncation that keeps
it is catastrophic (with the best truncation, in a prototype on 128 log buckets: MSE 20x
to 8e4x the best's in 4 of 70 seed-cells of POS, retail and DNS on seeds 1005-1009), while one that stops a little short only loses a thin tail that the
continuation restores. The reach limit: in ``ldpkit reproduce tops21`` (50 repetitions) the
shortest plausible truncation still kept spurious clumps 13-45 log buckets above the cut in
three repetitions (POS eps = 3: theta 2.6x the oracle's; retail eps = 3: 3.3x and 23.7x, the
latter alone making that cell's mean MSE 3.7x the oracle's), and on the 5 seeds below (POS
eps = 2: 3.7x); on seeds 1000-1019 the truncations that help (flight delays, DNS) reach 5-12
buckets past the cut. Capped at 12 those strays land at 1.3-1.7x; 10 already costs a held-out cell (flight
delays eps = 0.5: MSE 1.3x -> 2.9x), 16 leaves retail at 2.3x: a narrow margin, so the cap is
a guard against far clumps, not a tuned optimum. Threshold-phase users still count in window sums: the rounding to
the wave's grid is unbiased in the value's units and every report cell has an exact
unbiased value estimate (:meth:`ldpkit.numeric.SquareWave.value_estimates`; worst-case
standard deviation ~2x the linear wave's). Chosen on seeds 1005-1019 (96 log buckets and
0.8 among 64-1024 and 0.8-0.95; the median start among mode, 0.25, 0.5, 0.75): theta within
2x of the best in 240 of 240 (stream, eps, seed) cells and MSE within 3x in 233, against 191
and 180 on the linear scale. On the 5 seeds of ``docs/results/tops21/topl_threshold.md``: theta within 2x
in 80 of 80 cells (linear scale 65), MSE within 3x in 77 (64); retail at eps = 0.5 and 1 goes
from 0 of 5 to 5 of 5 on theta; the reach limit brings POS at eps = 2, seed 1003, from theta
3.7x (MSE 10.5x) to 1.03x. Still missed there: the flight delays at eps = 0.5 in 2 seeds (theta 0.55-0.6x, MSE 4.9-6.8x) and retail at eps = 0.5 in 1
(theta 2x, MSE 3.2x). The two-point bound above is a bound on *linear* reports; the log
reports of retail and retail x 2.5 are far apart (it does not apply to them).

The threshold phase's estimator is plain EM by default: with the cut, EMS's smoothing blurs
the bulk of skewed streams to the right (retail at eps = 1: 76% of the EMS mass above the
best threshold 32.2, against 2.3% of the values) and loses to EM in most (stream, eps) cells
(``studies/topl_threshold.py``; SW20 recommends EMS for the *shape* of a distribution, not
for its upper tail).

References
----------
T. Wang, J. Q. Chen, Z. Zhang, D. Su, Y. Cheng, Z. Li, N. Li, S. Jha. Continuous Release of
Data Streams under both Centralized and Local Differential Privacy. CCS 2021, §4 (ToPS).
F. McSherry, K. Talwar. Mechanism Design via Differential Privacy. FOCS 2007.
"""

from __future__ import annotations

import math
from typing import Any, Literal, NamedTuple

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import (
    MAX_STREAM_EPSILON,
    check_array,
    check_bound,
    check_epsilon,
    check_integer,
    check_real,
)
from ..numeric.distribution import Distribution
from ..numeric.mean import hybrid_worst_case_variance
from ..numeric.square_wave import SquareWave, square_wave_bandwidth
from ..spec import Stats

__all__ = [
    "OBJECTIVES",
    "TAIL_CUTS",
    "TAIL_Z",
    "TAIL_EVIDENCE",
    "TAIL_QUANTILE",
    "TAIL_EXTENSIONS",
    "THRESHOLD_SCALES",
    "LOG_BUCKETS",
    "LOG_CUT_QUANTILE",
    "LOG_TAIL_QUANTILE",
    "LOG_TEST_REACH",
    "square_wave_detection_floor",
    "cut_tail",
    "extend_tail",
    "heldout_tail_test",
    "TailTest",
    "ThresholdObjective",
    "topl_threshold_objective",
    "choose_topl_threshold",
    "THRESHOLD_METHODS",
    "threshold_candidates",
    "exceed_counts",
    "tops_lambda",
    "tops_threshold_scores",
    "exponential_mechanism",
    "exponential_mechanism_probabilities",
    "choose_threshold",
]

THRESHOLD_METHODS = ("gumbel", "noisy_max")


def threshold_candidates(bound: float, step: float = 1.0) -> np.ndarray:
    """Candidate thresholds ``0, step, 2 step, ...`` below ``bound``, and ``bound`` itself."""
    bound = check_bound(bound)
    step = check_real(step, "step", low=0.0, low_inclusive=False)
    count = math.ceil(bound / step - 1e-12)
    if count > 10_000_000:
        raise ValueError(f"step must give at most 1e7 candidates, got {count} (bound/step)")
    grid = np.arange(count, dtype=np.float64) * step
    grid = grid[grid < bound]
    return np.append(grid, bound)


def exceed_counts(values: Any, candidates: np.ndarray) -> np.ndarray:
    """``#{v > theta}`` for every candidate ``theta`` (candidates sorted ascending)."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    # bin[v] = number of candidates strictly below v, so v > candidates[k] <=> bin[v] > k
    bins = np.searchsorted(candidates, v, side="left")
    hist = np.bincount(bins, minlength=candidates.size + 1)
    above = v.size - np.cumsum(hist)[: candidates.size]
    return above.astype(np.int64)


def tops_lambda(
    threshold_size: int,
    length: int,
    branching: int,
    levels: int,
    epsilon: float,
    excess: float = 60.0,
) -> float:
    """``lambda = (3 m / (n c)) sqrt(2 (b - 1) h^3) / epsilon`` (STR21 §4.2, METHODS.md §5).

    ``m = threshold_size``, ``n = length``, ``b = branching``, ``h = levels`` of the hierarchy
    that releases the stream, ``c = excess``. ``epsilon`` is the perturber's budget.
    """
    m = check_integer(threshold_size, "threshold_size", low=1)
    n = check_integer(length, "length", low=1)
    b = check_integer(branching, "branching", low=2)
    h = check_integer(levels, "levels", low=1)
    eps = check_epsilon(epsilon)
    c = check_real(excess, "excess", low=0.0, low_inclusive=False)
    return 3.0 * m / (n * c) * math.sqrt(2.0 * (b - 1) * h**3) / eps


def tops_threshold_scores(values: Any, candidates: np.ndarray, lam: float) -> np.ndarray:
    """Return the sensitivity-1 quality ``q(theta) = -#{v > theta} - lambda theta`` per candidate."""
    return -exceed_counts(values, candidates).astype(np.float64) - float(lam) * candidates


def _coefficient(epsilon: float, sensitivity: float, monotone: bool) -> float:
    eps = check_epsilon(epsilon, high=MAX_STREAM_EPSILON)
    delta = check_real(sensitivity, "sensitivity", low=0.0, low_inclusive=False)
    return eps / delta if monotone else eps / (2.0 * delta)


def exponential_mechanism_probabilities(
    scores: Any, epsilon: float, *, sensitivity: float = 1.0, monotone: bool = True
) -> np.ndarray:
    """Exact selection probabilities ``∝ exp(epsilon q / Delta)`` (``/(2 Delta)`` if not monotone)."""
    q = check_array(scores, "scores", nonempty=True)
    logits = _coefficient(epsilon, sensitivity, monotone) * (q - q.max())
    w = np.exp(logits)
    return w / w.sum()


def exponential_mechanism(
    scores: Any,
    epsilon: float,
    *,
    sensitivity: float = 1.0,
    monotone: bool = True,
    method: Literal["gumbel", "noisy_max"] = "gumbel",
    rng: RNGLike = None,
) -> int:
    """Index of the selected candidate (epsilon-DP; see the module notes for the factor 2).

    Parameters
    ----------
    scores : array_like of float
        Quality of each candidate; higher is better. Must be finite.
    epsilon : float
        Privacy budget of the selection.
    sensitivity : float
        ``Delta``, the most any score changes between neighbouring inputs.
    monotone : bool
        True when every neighbour moves all scores in the same direction (then the weights
        are ``exp(eps q / Delta)``); False uses ``exp(eps q / (2 Delta))``.
    method : {"gumbel", "noisy_max"}
        Exact exponential mechanism by the Gumbel-max trick, or Laplace report-noisy-max
        (the authors' code), with noise ``Laplace(1 / coefficient)``.
    rng : Generator, int, SeedSequence or None

    Examples
    --------
    >>> exponential_mechanism([0.0, -5.0, -50.0], epsilon=1.0, rng=0)
    0
    """
    q = check_array(scores, "scores", nonempty=True)
    coef = _coefficient(epsilon, sensitivity, monotone)
    gen = as_generator(rng)
    if method == "gumbel":
        return int(np.argmax(coef * q + gen.gumbel(size=q.size)))
    if method == "noisy_max":
        return int(np.argmax(q + gen.laplace(0.0, 1.0 / coef, size=q.size)))
    raise ValueError(f"method must be one of {THRESHOLD_METHODS}, got {method!r}")


def choose_threshold(
    values: Any,
    epsilon: float,
    bound: float,
    *,
    length: int,
    branching: int,
    levels: int,
    range_epsilon: float | None = None,
    excess: float = 60.0,
    step: float = 1.0,
    method: Literal["gumbel", "noisy_max"] = "gumbel",
    rng: RNGLike = None,
) -> float:
    """ToPS's threshold from the first ``m = len(values)`` values (epsilon-DP in those values).

    Parameters
    ----------
    values : array_like of float
        The m values in ``[0, bound]`` spent on the threshold.
    epsilon : float
        Budget of the selection.
    bound : float
        The public upper bound ``B`` of the values.
    length, branching, levels : int
        ``n``, ``b`` and ``h`` of the hierarchy that will release the stream (for lambda).
    range_epsilon : float, optional
        The hierarchy's budget in lambda (default: ``epsilon``; the two parts of the
        stream are disjoint, so both use the full budget).
    excess : float
        ``c``, the assumed excess of a clipped value over theta (authors: 60).
    step : float
        Spacing of the candidate grid (authors: 1).
    method : {"gumbel", "noisy_max"}

    Examples
    --------
    With a huge selection budget the optimum of ``q`` is selected: here lambda = 0.175, so
    keeping the outlier 50 unclipped (theta = 50) costs more than clipping it at 4.

    >>> v = [1, 2, 2, 3, 3, 3, 4, 50]
    >>> choose_threshold(v, 1e6, 60, length=100, branching=16, levels=4, range_epsilon=1.0, rng=0)
    4.0
    """
    bound = check_bound(bound)
    v = check_array(values, "values", low=0.0, high=bound, nonempty=True)
    candidates = threshold_candidates(bound, step)
    lam = tops_lambda(
        v.size,
        length,
        branching,
        levels,
        epsilon if range_epsilon is None else range_epsilon,
        excess,
    )
    scores = tops_threshold_scores(v, candidates, lam)
    return float(candidates[exponential_mechanism(scores, epsilon, method=method, rng=rng)])


# ----------------------------------------------------------- ToPL (local DP, STR21 §5)

OBJECTIVES = ("corrected", "authors")
EM_METHODS = ("ems", "em")
TAIL_CUTS = ("tested", "detection", "authors", "none")
#: Standard deviations of the detection floor of the default tail cut (see the module notes).
TAIL_Z = 0.25
#: Held-out likelihood ratio (uncut over cut) from which the tail counts as real: Royall's
#: "strong evidence" benchmark, 32 (Statistical Evidence: A Likelihood Paradigm, 1997, §1.5).
TAIL_EVIDENCE = 32.0
#: Exceedance level of the exponential tail continuation (:func:`extend_tail`): the tail is
#: fitted to the cut estimate's mass above its 0.9-quantile (the top 10%).
TAIL_QUANTILE = 0.9
TAIL_EXTENSIONS = ("exponential", "none")
THRESHOLD_SCALES = ("log", "linear")
#: On the log scale the held-out test may lengthen the floor cut by at most this many of the
#: :data:`LOG_BUCKETS` buckets (1/8 of the log domain, a factor ``(1 + d)^(1/8)`` ~ 2.4 in
#: ``1 + v / s`` at d = 1024); the exponential continuation carries the tail beyond. Chosen
#: on the grid's stray repetitions and checked on seeds 1000-1019 (module notes).
LOG_TEST_REACH = 12
#: Square Wave buckets of the log-scale threshold phase (``threshold_scale="log"``): the
#: estimate of ``log(1 + v / s)``, ``s = B / d``, before it is mapped to ToPL's d linear
#: buckets; chosen with :data:`LOG_TAIL_QUANTILE` among 64-1024 and 0.8-0.95 on seeds
#: 1005-1019, not the 5 of ``docs/results/tops21/topl_threshold.md``.
LOG_BUCKETS = 96
#: Exceedance level of :func:`extend_tail` on the log scale (0.9 on the linear scale).
LOG_TAIL_QUANTILE = 0.8
#: On the log scale the tail cut scans from the bucket of this quantile of the floored
#: estimate (not from the mode; :func:`cut_tail`'s ``start``), chosen on held-out seeds.
LOG_CUT_QUANTILE = 0.5
#: The authors' code's fixed floor on a bucket's estimated mass.
AUTHORS_TAIL_FLOOR = 1e-4


class ThresholdObjective(NamedTuple):
    """ToPL's threshold objective at every candidate ``theta_k = k B / d``, ``k = 0..d``."""

    candidates: np.ndarray
    noise: np.ndarray
    bias: np.ndarray

    @property
    def total(self) -> np.ndarray:
        """``noise + bias`` (the expected squared error of a random range)."""
        return self.noise + self.bias


def _probabilities(distribution: Any) -> np.ndarray:
    f = distribution.probabilities if isinstance(distribution, Distribution) else distribution
    f = check_array(f, "probabilities")
    if f.ndim != 1 or f.size < 2:
        raise ValueError(
            f"probabilities must be a 1-D array of >= 2 bucket masses, got shape {f.shape}"
        )
    if not np.all(np.isfinite(f)) or np.any(f < 0) or not f.sum() > 0:
        raise ValueError("probabilities must be finite, >= 0 and have positive total mass")
    return f / f.sum()


def square_wave_detection_floor(epsilon: float, reports: int, z: float = TAIL_Z) -> float:
    """``z`` standard deviations of the smallest point mass ``reports`` SW reports can detect.

    ``w_min = z sqrt(q 2b / m) / ((p - q) 2b)`` with SW20's (§5.2-5.3) optimal ``b`` and
    densities ``p = e^eps q``, ``q = 1 / (2 b e^eps + 1)`` on the unit scale and
    ``m = reports`` (derivation in the module notes). Independent of the domain's units.

    Examples
    --------
    >>> round(square_wave_detection_floor(1.0, 65_536, z=1.0), 5)
    0.0049
    """
    from ..numeric.square_wave import MAX_EPSILON as SW_MAX_EPSILON

    eps = check_epsilon(epsilon, high=SW_MAX_EPSILON)  # the Square Wave's own range
    m = check_integer(reports, "reports", low=1)
    z = check_real(z, "z", low=0.0, low_inclusive=False)
    b = square_wave_bandwidth(eps)
    q = 1.0 / (2.0 * b * math.exp(min(eps, 700.0)) + 1.0)
    excess = 1.0 - q * (1.0 + 2.0 * b)  # (p - q) 2b, without forming p
    return float(z * math.sqrt(q * 2.0 * b / m) / excess)


def cut_tail(
    probabilities: Any, floor: float, *, run: int = 5, start: float | None = None
) -> np.ndarray:
    """Remove the spurious upper tail of an estimated histogram (post-processing).

    Buckets with mass below ``floor`` are zeroed; above the mode, the histogram is cut at
    the first run of ``run`` zeroed buckets (everything from there up is zeroed); the
    removed mass goes back to the rest by renormalization. The rule follows the authors'
    code of STR21 (floor 1e-4, run 5); ToPL's default floor is
    :func:`square_wave_detection_floor`.

    Parameters
    ----------
    probabilities : array_like or Distribution
        Bucket masses (normalized here).
    floor : float
        Bucket masses below it count as empty (>= 0).
    run : int
        Empty buckets in a row that end the bulk (>= 1).
    start : float, optional
        Scan for the run from the bucket holding this quantile of the floored mass when it
        lies above the mode (default None: from the mode). ToPL's log scale uses
        :data:`LOG_CUT_QUANTILE`: there an integer-valued stream's small values leave real
        gaps of several buckets between 0, 1, 2, ... just above the mode.

    Returns
    -------
    ndarray
        The cut histogram, summing to 1.

    Examples
    --------
    >>> cut_tail([0.5, 0.3, 0.1, 0.0, 0.001, 0.0, 0.099], 0.01, run=2).round(3).tolist()
    [0.556, 0.333, 0.111, 0.0, 0.0, 0.0, 0.0]
    """
    f = _probabilities(probabilities)
    floor = check_real(floor, "floor", low=0.0)
    run = check_integer(run, "run", low=1, high=max(f.size, 1 << 20))
    g = np.where(f < floor, 0.0, f)
    if not g.sum() > 0:  # everything under the floor: keep the mode alone
        g = np.zeros_like(f)
        g[int(np.argmax(f))] = 1.0
        return g
    mode = int(np.argmax(g))
    if start is not None:  # scan from the start-quantile's bucket when it lies above the mode
        mode = max(mode, int(np.searchsorted(np.cumsum(g), start * g.sum())))
    empty = np.concatenate(((g[mode + 1 :] == 0).astype(np.int64), np.ones(run, np.int64)))
    window = np.convolve(empty, np.ones(run, np.int64), mode="valid")  # empties in a run
    g[mode + 1 + int(np.flatnonzero(window == run)[0]) :] = 0.0
    return g / g.sum()


def extend_tail(probabilities: Any, *, quantile: float = TAIL_QUANTILE) -> np.ndarray:
    """Continue a cut histogram past its last non-empty bucket with an exponential tail.

    A tail cut zeroes the estimate from some bucket ``c`` up, the real thin tail above ``c``
    included; the clipping term of the threshold objective then sees no mass above ``c`` and
    theta lands below the best threshold, where the range MSE rises steeply. This replaces
    the zeros by the tail a peaks-over-threshold fit of the estimate's own upper part
    implies (post-processing, no budget): with ``u`` the bucket holding the ``quantile`` of
    the mass, ``S = sum_{u <= i < c} f_i`` the mass from ``u`` up and ``lam`` its mean excess
    over ``u``'s left edge (each bucket's mass spread over it, in buckets:
    ``lam = sum_{u <= i < c} f_i (i + 1/2 - u) / S``), the exponential excess law (the
    generalized Pareto law with shape 0; Pickands, Ann. Statist. 3, 1975, §2; Davison and
    Smith, J. R. Stat. Soc. B 52, 1990, §2-3, whose maximum-likelihood scale of exponential
    exceedances is their mean) gives ``P(X >= c) = S exp(-(c - u) / lam)``; bucket ``k >= c``
    receives ``S (exp(-(k - u) / lam) - exp(-(k + 1 - u) / lam))`` (mass above the last
    bucket is dropped: values lie in ``[0, B]``) and the result is renormalized. ``lam`` is
    measured on the cut estimate, whose mass stops at ``c``, so it is biased low: the
    continuation is, if anything, too thin.

    Parameters
    ----------
    probabilities : array_like or Distribution
        Bucket masses, typically :func:`cut_tail`'s output (normalized here).
    quantile : float
        Exceedance level in ``(0, 1)``: the fit uses the mass above this quantile
        (default :data:`TAIL_QUANTILE`).

    Returns
    -------
    ndarray
        The histogram with the exponential tail above its last non-empty bucket, summing to
        1 (unchanged if that bucket is the last one).

    Examples
    --------
    Mass 1/2, 1/4, 1/4 on the first three of six buckets: the 0.9-quantile lies in bucket
    u = 2, S = 1/4, lam = 1/2 bucket, so P(X >= 3) = e^-2 / 4 and bucket k >= 3 gets
    (e^(-2 (k - 2)) - e^(-2 (k - 1))) / 4 before renormalization.

    >>> extend_tail([0.5, 0.25, 0.25, 0, 0, 0]).round(4).tolist()
    [0.4837, 0.2418, 0.2418, 0.0283, 0.0038, 0.0005]
    """
    f = _probabilities(probabilities)
    q = check_real(
        quantile, "quantile", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False
    )
    last = int(np.flatnonzero(f)[-1])
    c = last + 1
    if c >= f.size:
        return f
    cdf = np.cumsum(f)
    u = min(int(np.searchsorted(cdf, q * cdf[-1])), last)
    i = np.arange(u, c, dtype=np.float64)
    upper = f[u:c]
    s = float(upper.sum())
    lam = float(upper @ (i + 0.5 - u)) / s  # >= 1/2 bucket: never a degenerate scale
    # P(X >= k) = s exp(-(k - u) / lam) for k >= c; differences give the bucket masses
    survival = s * np.exp(-(np.arange(c, f.size + 1, dtype=np.float64) - u) / lam)
    g = f.copy()
    g[c:] = survival[:-1] - survival[1:]
    return g / g.sum()


class TailTest(NamedTuple):
    """Result of :func:`heldout_tail_test`."""

    #: Held-out log-likelihood ratio (natural log) of the best truncation over the floor cut.
    log_ratio: float
    #: Buckets the best truncation keeps (the raw estimate is zeroed from this bucket up).
    keep: int
    #: The shortest truncation (buckets kept, at least as long as the cut) whose held-out
    #: log likelihood is within ``log(TAIL_EVIDENCE)`` of the best one's: the shortest tail
    #: the held-out reports do not strongly reject (ToPL's log-scale rule).
    plausible: int


def heldout_tail_test(
    sw: Any,
    counts: Any,
    *,
    method: Literal["ems", "em"] = "em",
    z: float = TAIL_Z,
    start: float | None = None,
) -> TailTest:
    """Two-fold held-out likelihood of truncating the raw SW estimate against the floor cut.

    The ``counts`` (Square Wave output histogram of the threshold reports) are split into two
    halves by a multivariate hypergeometric draw (the same as dividing the users at random),
    seeded by the counts themselves, so the result is a deterministic function of the reports:
    post-processing. On each half, ``f`` = the EM (or EMS) estimate, ``g`` = :func:`cut_tail`
    of ``f`` at :func:`square_wave_detection_floor`, and ``f_c`` = ``f`` truncated to its
    first ``c`` buckets and renormalized, for every ``c`` at least as long as both halves'
    cuts (the test only lengthens the cut); each is scored by the *other*
    half's log likelihood ``sum_j n_j log (h M)_j`` (``M`` the exact bucket matrix). A spurious
    tail fits only the noise of the half it was fitted on and lowers the other half's
    likelihood; a real tail raises it. Two-fold cross-validated likelihood (Stone, J. R. Stat.
    Soc. B 36, 1974, §2) applied to where the estimate ends.

    Parameters
    ----------
    sw : SquareWave
        The threshold phase's mechanism.
    counts : array_like of int
        Its output histogram (``n_output_buckets`` counts, >= 2 reports).
    method : {"em", "ems"}
        Distribution estimator.
    z : float
        Standard deviations of the detection floor.
    start : float, optional
        :func:`cut_tail`'s ``start`` (the quantile the cut's scan starts from).

    Returns
    -------
    TailTest
        ``log_ratio`` = held-out log likelihood of the best ``f_c`` minus that of ``g``
        (summed over both folds; > 0 favours ``f_c``), ``keep`` = that ``c``, and
        ``plausible`` = the smallest ``c`` whose held-out log likelihood is within
        ``log(TAIL_EVIDENCE)`` of the best's.
    """
    if not isinstance(sw, SquareWave):
        raise TypeError(f"sw must be a SquareWave, got {type(sw).__name__}")
    if method not in ("em", "ems"):
        raise ValueError(f"method must be one of 'em', 'ems', got {method!r}")
    n = check_array(counts, "counts", integer=True, low=0, size=sw.n_output_buckets)
    total = int(n.sum())
    if not 2 <= total < 10**9:  # numpy's hypergeometric split takes fewer than 1e9 draws
        raise ValueError(f"counts must hold at least 2 and fewer than 1e9 reports, got {total}")
    split = np.random.default_rng(n.astype(np.uint64)).multivariate_hypergeometric(n, total // 2)
    matrix = np.asarray(sw.bucket_matrix())
    truncated = np.zeros(matrix.shape[0])
    cut = 0.0
    shortest = 0
    for fit, held in ((split, n - split), (n - split, split)):
        f = sw.estimate(Stats(sw, int(fit.sum()), counts=fit), method=method).probabilities
        g = cut_tail(f, square_wave_detection_floor(sw.epsilon, int(fit.sum()), z), start=start)
        shortest = max(shortest, int(np.flatnonzero(g)[-1]))  # never shorter than the cut
        seen = held > 0  # every SW output has density >= q > 0 under any input
        cut += float(held[seen] @ np.log((g @ matrix)[seen]))
        # (f_c M)_j = sum_{i < c} f_i M_ij / F_c for every c at once: cumulative rows
        rows = np.cumsum(f[:, None] * matrix[:, seen], axis=0)
        mass = np.cumsum(f)
        with np.errstate(divide="ignore", invalid="ignore"):
            ll = np.log(rows) @ held[seen] - float(held.sum()) * np.log(mass)
        truncated += np.where(mass > 0, ll, -np.inf)
    keep = shortest + int(np.argmax(truncated[shortest:]))
    near = truncated[shortest:] >= truncated[keep] - math.log(TAIL_EVIDENCE)
    plausible = shortest + int(np.flatnonzero(near)[0])
    return TailTest(float(truncated[keep] - cut), keep + 1, plausible + 1)


def topl_threshold_objective(
    probabilities: Any,
    bound: float,
    epsilon: float,
    length: int,
    *,
    objective: Literal["corrected", "authors"] = "corrected",
) -> ThresholdObjective:
    """ToPL's expected range-query error at every candidate threshold (STR21 §5, corrected).

    Parameters
    ----------
    probabilities : array_like or Distribution
        ``f``: masses of the d equal buckets of ``[0, B]`` (normalized here), each spread
        evenly over its bucket.
    bound : float
        ``B``, the public upper bound of the values.
    epsilon : float
        The perturbation phase's budget (enters HM's variance).
    length : int
        ``n``, the number of released users the queries range over.
    objective : {"corrected", "authors"}
        ``(n/3)(theta^2/4) Var + (n^2/6) delta^2`` (default) or the authors' code's
        ``(n/3) theta^2 Var + (n^2/24) delta^2``.

    Returns
    -------
    ThresholdObjective
        ``candidates`` ``theta_k = k B / d``, ``noise``, ``bias`` (and ``total``) for
        k = 0..d.

    Examples
    --------
    >>> obj = topl_threshold_objective([0.5, 0.3, 0.2], bound=3.0, epsilon=1.0, length=100)
    >>> obj.candidates.tolist()
    [0.0, 1.0, 2.0, 3.0]
    >>> obj.bias.round(2).tolist()  # (100^2 / 6) delta^2 with delta = 1.2, 0.45, 0.1, 0
    [2400.0, 337.5, 16.67, 0.0]
    """
    f = _probabilities(probabilities)
    # bounded: the objective holds n^2 B^2 terms, which must not overflow to inf
    bound = check_bound(bound)
    eps = check_epsilon(epsilon)
    n = float(check_integer(length, "length", low=1, high=2**62))
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    d = f.size
    width = bound / d
    k = np.arange(d + 1, dtype=np.float64)
    x = k * width
    # bucket i holds its mass uniformly on [i w, (i+1) w) (the histogram density SW's EM
    # estimates), so clipping at the edge k w costs f_i (i + 1/2 - k) w for every i >= k:
    # delta_k = w (S1_k - k S0_k) with suffix sums S0_k = sum_{i>=k} f_i and
    # S1_k = sum_{i>=k} f_i (i + 1/2), accumulated from the top so that thin tails keep their
    # relative precision
    i = np.arange(d, dtype=np.float64)
    s0 = np.concatenate((np.cumsum(f[::-1])[::-1], [0.0]))
    s1 = np.concatenate((np.cumsum((f * (i + 0.5))[::-1])[::-1], [0.0]))
    delta = width * np.maximum(s1 - k * s0, 0.0)
    var = hybrid_worst_case_variance(eps)
    if objective == "corrected":
        noise = (n / 3.0) * (x * x / 4.0) * var
        bias = (n * n / 6.0) * delta * delta
    else:
        noise = (n / 3.0) * (x * x) * var
        bias = (n * n / 24.0) * delta * delta
    return ThresholdObjective(x, noise, bias)


def choose_topl_threshold(
    probabilities: Any,
    bound: float,
    epsilon: float,
    length: int,
    *,
    objective: Literal["corrected", "authors"] = "corrected",
) -> float:
    """Return the candidate ``theta_k``, ``k >= 1``, minimizing :func:`topl_threshold_objective`.

    Post-processing of the (already private) distribution estimate: no extra budget.

    Examples
    --------
    99% of the mass evenly on [0, 60) and 1% on [100, 110) (d = 11 buckets of [0, 110]): the
    bias of clipping the 1% grows with the stream length n faster than the noise it saves.

    >>> f = np.zeros(11); f[:6] = 0.99 / 6; f[10] = 0.01
    >>> choose_topl_threshold(f, 110.0, 1.0, 100), choose_topl_threshold(f, 110.0, 1.0, 1_000_000)
    (40.0, 100.0)
    """
    obj = topl_threshold_objective(probabilities, bound, epsilon, length, objective=objective)
    k = 1 + int(np.argmin(obj.total[1:]))
    return float(obj.candidates[k])
