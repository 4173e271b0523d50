"""A numerical distribution whose smoothing adapts to the data.

Square Wave reports, EM with smoothing strengths weighted by the held-out likelihood of the
reports themselves.

SW + EMS (SW20) is the best estimator we measured on smooth data, but its fixed smoothing
smears point masses; plain EM keeps them but over-fits smooth data. Which one a data set
needs cannot be asked of a user collecting under LDP, so :class:`AutoDistribution` asks the
reports: it splits the output histogram into folds by binomial thinning, fits EM with each
candidate smoothing strength on the other folds, scores the held-out fold's likelihood,
and averages the strengths' fits on all reports with weights ``exp(score)``. Values clipped
at either end of the domain (0 weeks worked) are point masses that every smoothed fit
smears; variants that keep the two end buckets out of the smoothing join the choice when
the held-out reports favour them clearly, and so does plain EM stopped early (continued
for 10 to 300 iterations from the best smoothed fit), which keeps heaps that smoothing
smears without following the noise as far as EM run to its stop. A peak of the result (a
point mass that every fit splits between neighbouring buckets) goes whole into the bucket
that the HH leaf reports' likelihood prefers, or without leaf reports (eps >= 3.5) into the
bucket of its centroid (``interior_atoms``). Choosing uses only the aggregated reports, so it
costs no privacy (post-processing of an eps-LDP output).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from .._constraints import FINITE_BOUND, Alternatives, Real, Size
from .._rng import RNGLike, as_generator
from .._validation import check_integer, check_real
from ..spec import Mechanism, Reports, Stats, StatsField
from .distribution import Distribution, check_bounds
from .hierarchy import _REPORT_FIELDS, HierarchicalHistogram
from .square_wave import MAX_EPSILON as SW_MAX_EPSILON
from .square_wave import SquareWave

__all__ = [
    "AutoDistribution",
    "AutoInfo",
    "DEFAULT_BUDGETS",
    "DEFAULT_STRENGTHS",
    "HH_BRANCHING",
    "default_buckets",
    "default_hh_share",
    "hh_top_level",
    "HH_MAX_NODES",
]

#: Candidate smoothing strengths: the variance, in squared buckets, of the kernel applied
#: after each EM update. 0 is plain EM, 0.5 is one EMS pass (binomial (1, 2, 1)/4), and each
#: further step multiplies the kernel's width by 2 (8: EMS at 1/4 of the resolution).
#: Why 32 was dropped: METHODS.md §3, "AutoDistribution's constants".
DEFAULT_STRENGTHS: tuple[float, ...] = (0.0, 0.5, 2.0, 8.0)

#: Candidate iteration budgets: plain EM continued from the best smoothed fit for this
#: many iterations (a geometric set). Early stopping of EM regularizes too (it stops before
#: the fit follows the noise), and how far to go is a second knob next to the smoothing
#: strength: on point masses the longer budgets keep the atoms that smoothing smears, on
#: smooth data the held-out reports stop the path after the first budgets.
DEFAULT_BUDGETS: tuple[int, ...] = (10, 30, 100, 300)

#: Iteration cap of the fold fits that only rank the candidates.
_FOLD_MAX_ITER = 1000

#: A candidate this many standard errors below the best one so far ends the path.
_STOP_SE = 3.0

#: Relative weight (to the best candidate's) below which a candidate is left out of the
#: average and not refit: 3 nats behind the best. Refitting plain EM for a 0.3 % share cost
#: more than all other fits together at n = 1e6.
_MIN_WEIGHT = 0.05

#: The end-atom candidates (:meth:`AutoDistribution.estimate`, ``end_atoms``) enter the
#: choice only when the variant of the best smoothed strength beats the best plain
#: candidate on the held-out reports by more than this many standard errors (measured:
#: METHODS.md §3, "AutoDistribution's constants").
_END_Z = 3.0

#: ... and only while plain EM's final fit holds less than this share of the mass that the
#: end-atom fits put on the two end buckets (measured: METHODS.md §3, "AutoDistribution's
#: constants").
_END_RESOLVED = 0.9

#: Interior point masses (``estimate(interior_atoms=True)``, :func:`_snap_atoms`): plain EM
#: continued for _ATOM_SHARP_ITER iterations from the final estimate is the sharp fit; a
#: bucket of it holding more than _ATOM_RATIO times the median of its +-_ATOM_HALF
#: neighbours and more than _ATOM_EXCESS / d above it marks a point mass; its run (it and
#: the neighbours downhill from it still above _ATOM_RATIO times the median) gives the
#: estimate's excess over that median to the bucket of the run's centroid. From eps
#: _ATOM_MIN_EPS on only, and only when no HH report reaches the leaves (Square Wave alone, or
#: d > HH_MAX_NODES): leaf reports place each atom in its bucket themselves, and the centroid
#: rule then merges atoms in neighbouring buckets (held-out tuning set with the leaves: 103
#: of 144 cells within 10 % with the rule, 104 without; worst KS 4.20 with, mixture 7's two
#: atoms in buckets 664 and 665, against 1.97). How they were chosen: METHODS.md §3,
#: "AutoDistribution's constants".
_ATOM_RATIO = 3.0
_ATOM_HALF = 8
_ATOM_EXCESS = 32.0
_ATOM_MIN_EPS = 3.5
_ATOM_SHARP_ITER = 1000

#: Interior point masses placed by the HH reports (``estimate(interior_atoms=True)`` when HH
#: users report at the leaves, :func:`_place_atoms`): a bucket of the estimate above
#: _LEAF_ATOM_RATIO times the median of its +-_ATOM_HALF neighbours and _LEAF_ATOM_EXCESS / d
#: above it marks a peak, grown downhill into a run as in :func:`_snap_atoms`; the run keeps
#: its fitted shape unless moving its excess whole into one of its buckets raises the HH
#: reports' likelihood. The HH likelihood decides, so the thresholds only bound which runs
#: are looked at: measured on the held-out protocol's tuning set (METHODS.md §3,
#: "AutoDistribution's constants").
_LEAF_ATOM_RATIO = 2.0
_LEAF_ATOM_EXCESS = 8.0

#: End windows as runs (:func:`_place_atoms`, with HH reports at the leaves and eps <
#: :data:`_END_WINDOW_MAX_EPS`): each end window's excess over the median of the
#: 2 _ATOM_HALF + 1 buckets just inside it moves whole into the end bucket when that bucket
#: already holds at least _END_MAJORITY of the excess, else into the window's bucket that
#: the HH reports' likelihood prefers, if any beats the window as fitted; windows whose
#: excess is at most _LEAF_ATOM_EXCESS / d are left alone. EM alone fits the windows, and at eps <= 2
#: the Square Wave reports hardly tell where inside the window the mass sits: a value
#: clipped at an end (47 % of weeks worked at 0) spills over the window's 16 buckets, and
#: the CDF at the end bucket is off by the spill; the leaf reports at eps 0.5 are too few
#: to call it alone. Measured on the held-out protocol's tuning set (30 runs per cell):
#: METHODS.md §3, "AutoDistribution's constants".
_END_WINDOW_ATOMS = True
_END_MAJORITY = 0.5

#: The majority rule's veto (:func:`_place_atoms`): the end window's excess is not moved
#: whole into the end bucket when the HH composite log-likelihood of the window as fitted
#: beats that of the move by more than this many nats. A column whose mass sits in the first
#: percent of the domain as a steep density (a Pareto body) and not as one atom also gives
#: the end bucket more than half of the window's excess, but its leaf counts then reject
#: the atom: by 5-490 nats at eps 1-2 and 2.5-50 at eps 0.5 on the tuning set's
#: Pareto-bodied heavy tails. A clipped end (weeks worked; an atom at 0 under a lognormal
#: body) scored the fit at most 3.5 nats above the atom (-1.7 to 3.5 over 90 windows, 6 runs
#: per cell at eps 0.5-2). Measured on the held-out protocol's tuning set: METHODS.md §3,
#: "AutoDistribution's constants".
_END_VETO_NATS = 5.0

#: End-bucket refit (:func:`_refit_end_windows`, with HH reports at the leaves, from eps
#: _END_WINDOW_MAX_EPS on, where there are no end windows): each end bucket's mass is
#: refitted to the HH nodes of its ``d / 64``-bucket window (the window's total kept) when
#: that gains more than _END_REFIT_NATS nats of the HH composite log-likelihood (4.5: three
#: standard errors of a one-parameter fit); the candidates are _END_REFIT_GRID + 1 equally
#: spaced shares of the window's total. None: off. At eps 4 the Square Wave reports put 3-4 %
#: too much into bucket 0 of a column whose mass sits in the first percent of the domain
#: (the tuning set's Pareto-bodied heavy tails, 0.66 against 0.62), which the leaf counts
#: measure to about +-0.004. Measured on the held-out protocol's tuning set: METHODS.md §3,
#: "AutoDistribution's constants".
_END_REFIT_NATS: float | None = 4.5
_END_REFIT_GRID = 400
#: The refit runs from this eps on (where the end windows stop, see _END_WINDOW_MAX_EPS).
_END_REFIT_MIN_EPS = 3.0

#: How the HH node counts are scored where a decision compares fits on them (the end-bucket
#: refit, :func:`_refit_end_windows`; the peak placement and the end-window veto of
#: :func:`_place_atoms` keep the Poisson terms, the exact ones moved cells both ways). True: each node's support count C_v as a normal
#: with its exact mean and variance given the fit, ``N_k (q + (p - q) a_v)`` and
#: ``N_k (a_v p (1 - p) + (1 - a_v) q (1 - q))`` (:func:`_node_terms`; a user's report
#: supports her own node with probability p and any other with q, independently across
#: users, FO17 section 3). False: the Poisson composite terms of the joint fit, whose
#: variance ``N_k pi_v / (1 - q)`` is right for small nodes but about twice the true one for a
#: node holding 60 % of the users (OLH at eps 4: p = 1/2), so a likelihood-ratio threshold in
#: nats asks big nodes for about twice the evidence. Measured on the held-out protocol's
#: tuning set: METHODS.md §3, "AutoDistribution's constants".
_HH_EXACT_REFIT = True

#: Sharpening (``estimate(sharpen=True)``): when the held-out reports pick a budget k (plain
#: EM stopped after k iterations from the best smoothed fit), the estimate is the average
#: continued for (_SHARPEN - 1) k more iterations of plain EM. The held-out likelihood
#: scores the density (a KL loss), while KS is the CDF's largest gap, which sits at a heap's
#: edge, where the longer run puts the mass that early stopping leaves in the neighbouring
#: buckets. Chosen on the held-out protocol's tuning set (5 runs per cell: 125, 126, 127,
#: 128, 129, 128 of 144 cells within 10 % at 2, 3, 4, 6, 10, 20; worst 1.63, 1.57, 1.52,
#: 1.43, 1.44, 1.42); from eps _SHARPEN_MAX_EPS on it is _SHARPEN_AT_HIGH_EPS (the former 2):
#: there the longer run lost W1 in all 18 tuning cells at eps 4 (by 0.02-0.11) and KS in
#: most, the reports resolving the heaps by themselves. Measured: METHODS.md §3,
#: "AutoDistribution's constants".
_SHARPEN = 10.0
_SHARPEN_MAX_EPS = 3.0
_SHARPEN_AT_HIGH_EPS = 2.0

#: Floor for (M theta)_j in log-likelihoods (as in :mod:`ldpkit.numeric.em`).
_TINY = 1e-300
#: Nearly empty stretches (:func:`_trim_empty`): None turns the step off; else the z above
#: which the fit's excess of Square Wave reports over a stretch is cut. Runs of at least
#: ``_EMPTY_BLOCKS`` blocks of d / 64 buckets, each below ``_EMPTY_LEVEL`` times the uniform
#: block mass, from eps ``_EMPTY_MIN_EPS`` on. Screened on the tuning set's heavy-tailed
#: columns at eps 2 and 4 (METHODS.md): z = 0 also cut the noise of smooth low tails (W1 up
#: to 1.3x at eps 2), z = 2 seldom fired; at eps <= 1 the wave is too wide for the check to
#: see a stretch (no gain measured).
_EMPTY_Z: float | None = 1.0
_EMPTY_LEVEL = 0.1
_EMPTY_BLOCKS = 4
_EMPTY_MIN_EPS = 1.5

#: End windows of the joint fits: with HH reports in the fit and eps <
#: :data:`_END_WINDOW_MAX_EPS`, the first and last ``round(_END_WINDOW * d)`` buckets (16 of
#: 1024) are left out of every smoothing pass without atoms (they keep their value and
#: receive nothing), so EM alone places the mass there, against a kernel smoother's boundary
#: bias (Jones 1993). Why and measured: METHODS.md §3, "AutoDistribution's constants".
_END_WINDOW = 1 / 64
_END_WINDOW_MAX_EPS = 3.0

#: Whether the end-atom candidates (``estimate(end_atoms=True)``) are fitted where the end
#: windows are on (HH reports in the fit, eps < :data:`_END_WINDOW_MAX_EPS`). Off: the
#: windows already leave the end buckets' mass to EM, and the end-atom fits (each a
#: smoothed fit whose end masses move a little per update: 900 updates at n = 1e6, eps 2)
#: were half of the estimate's time at eps 1-2.5, where cross-validation doubles them.
#: Measured: METHODS.md §3, "AutoDistribution's constants".
_END_ATOMS_WITH_WINDOWS = False

#: Cross-validation by default (``estimate(cross_validate=None)``) in the joint fits only:
#: holding out both folds in turn halves the noise of the held-out scores (measured, and why
#: not with Square Wave reports alone: METHODS.md §3, "AutoDistribution's constants"), from
#: eps _CV_MIN_EPS on: below it (HH reports there since they are sent at every eps) the
#: held-out protocol's tuning set gained nothing from it (59 and 60 of 72 cells within 10 %
#: at eps 0.5-1 with and without, worst 1.58 both) while it cost the pipeline 1.8-2.2x
#: SW + EMS's time at eps 1, n = 1e6.
_CV_HYBRID = True
_CV_MIN_EPS = 1.5


def default_buckets(expected_n: int | None) -> int:
    """Resolution d for about ``expected_n`` users: ``2^clip(ceil(log2(n) / 2) + 2, 6, 10)``.

    1024 buckets (SW20's choice for real data) from n = 2^15 on, fewer below (64 at least):
    finer buckets than about 4 sqrt(n) hold too few reports each to be told apart.

    Examples
    --------
    >>> [default_buckets(n) for n in (None, 1_000, 10_000, 100_000, 1_000_000)]
    [1024, 128, 512, 1024, 1024]
    """
    if expected_n is None:
        return 1024
    n = check_integer(expected_n, "expected_n", low=1)
    level = math.ceil(math.log2(n) / 2) + 2 if n > 1 else 0
    return 1 << min(10, max(6, level))


#: Branching factor B of the hybrid design's hierarchical histogram (SW20 section 4.2 after
#: Kulkarni et al.; the prototype studies/auto_hybrid.py measured B = 4).
HH_BRANCHING = 4


#: The default rule's share r of HH users, at every epsilon since the leaves report again
#: (:func:`default_hh_share`).
DEFAULT_HH_SHARE = 0.25


def default_hh_share(epsilon: float, expected_n: int | None = None) -> float:
    """Return the share r of users who send a hierarchical-histogram report.

    The rest send Square Wave. For ``hh_share=None``: 0.25 at every eps.

    Why below eps 1.5 too (it was 0 there, Square Wave alone): since the HH users report at
    the leaves again (:func:`hh_top_level`), their reports are what places a point mass in
    its bucket, which Square Wave reports at eps <= 1 hardly do. Measured on the held-out
    protocol's tuning set (benchmarks/auto_distribution.py --heldout --set tuning, n = 1e5,
    3 runs per cell, the 72 cells at eps 0.5 and 1): within 10 % of the best competitor in
    59 of 72 with r = 0.25 against 55 with r = 0, worst ratio 1.58 against 2.31 (mixture 0:
    eps 1 KS 2.11 -> 0.86, eps 0.5 W1 2.31 -> 1.24; salaries KS 1.48-1.55 -> 1.29-1.32;
    weeks worked eps 0.5 KS 1.79 -> 0.79); r = 0.15 there: 53 of 72, worst 1.68; r = 0.4:
    54, worst 1.52. The cost is on smooth data at eps 0.5 (mixture 1 W1 0.93 -> 1.27,
    CPSSW8 earnings W1 1.09 -> 1.22: a quarter fewer Square Wave reports). At n = 1e6, eps
    1: mixture 0 KS 5.52 -> 1.08, weeks worked KS 1.39 -> 1.17 (one run).

    The rule before (0.25 from eps 1.5 on, with the leaves' share at level 4), measured with
    benchmarks/auto_distribution.py (the 80 WAV25 cells: Beta(5, 2),
    flights, salaries, weeks worked, earnings at n = 26k-329k, eps 0.5-4; 20 runs per cell
    and seed, seeds 0 and 1; ratio of Auto's mean error to the best of SW-EMS, SW-EM, HH
    with the CDF fit and the wavelet J-2; "within" = at most 1.10; "pooled" = both seeds'
    40 runs): this rule 68 and 66 of 80 within, worst 1.37 and 1.39, pooled 72/80, worst
    1.38; the former rule (0.25 from eps 3) 66 and 64, worst 1.60 and 1.57 (weeks worked
    KS, eps 1.5-2.5), pooled 69/80, worst 1.58; r = 0.25 everywhere 67 and 65 (pooled
    72/80: at eps 0.5-1 r = 0 and 0.25 tie); r = 0.15 from eps 1.5 on and 0.25 from 3: 70
    and 63, pooled 72/80, worst 1.31; r = 0.15 everywhere 67 and 56, worst 1.54. The
    pooled misses of this rule: salaries KS at eps 0.5-2 (1.14-1.38, the HH estimate's
    cells), flights KS at eps 1, 2, 2.5 (1.11-1.20), Beta(5, 2) W1 at eps 2 (1.12).

    The cost on smooth data that earlier 20-run grids showed at eps 1.5-2 with r = 0.25
    (Beta(5, 2) W1 1.19 and 1.23) was mostly the grid's pairing: with r = 0 AutoDistribution
    randomizes with SW-EMS's seed, so it gets SW-EMS's very reports and its ratio to SW-EMS
    is nearly free of noise, while with r > 0 its reports differ and its 20-run mean
    carries its own noise (seed 1: W1 1.01 and 1.08 at the same cells). Measured with
    independent reports (30 data sets of n = 100,000 from Beta(5, 2), W1 of the joint fit
    over that of r = 0 on the same values): 0.94 +- 0.04 at eps 1.5, 1.00 +- 0.05 at eps 2
    (KS 0.93 and 0.97), while the 75 % Square Wave users alone lose 3-8 % in W1 and 11-16 %
    in KS: the HH reports do add information, and their 1 / (1 - q_k) weights are about
    right (halving or doubling them: W1 1.02 and 1.06 of theirs at eps 2, 8 runs).
    Speed at n = 1e6 with r = 0.25 (whole pipeline, CPU, over SW + EMS): 1.29-1.57x at eps
    0.5-4. ``expected_n`` is accepted for a rule that may use it (no n-dependent rule was
    measured).

    Examples
    --------
    >>> default_hh_share(0.5, 100_000), default_hh_share(2.0, 100_000)
    (0.25, 0.25)
    """
    check_real(epsilon, "epsilon", low=0.0, low_inclusive=False)  # the same share at every eps
    if expected_n is not None:
        check_integer(expected_n, "expected_n", low=1)
    return DEFAULT_HH_SHARE


#: The hybrid's HH users report at levels of at most this many nodes (:func:`hh_top_level`):
#: 1024, so that at the default resolutions (d <= 1024) every level, leaves included, gets
#: its 1/h share (why the leaves came back: :func:`hh_top_level`).
HH_MAX_NODES = 1024


def hh_top_level(height: int, branching: int = HH_BRANCHING) -> int:
    """Return the finest level an HH user of the hybrid reports at.

    The finest of the tree's ``height`` levels with at most :data:`HH_MAX_NODES` (256) nodes
    (at least level 1). Her level is uniform over 1..h with the shares of the finer levels
    moved to that one. With ``HH_MAX_NODES = 1024`` every tree of the default resolutions
    (d <= 1024) keeps uniform levels, the leaves included; only d = 2048 or more moves the
    finer levels' shares up.

    Why the leaves (level 5 at d = 1024) are back. The leaf nodes are the only reports that
    tell which bucket holds a point mass: a Square Wave report locates a value to about a
    bucket at eps 2 and n = 1e5 (its profile likelihood over positions inside two
    neighbouring buckets varies by 0.1-1.4 nats), level 4's nodes are four buckets wide,
    and a point mass that the fit puts one bucket off moves the CDF at that edge by its
    whole weight (KS). Measured on the held-out protocol's tuning set
    (benchmarks/auto_distribution.py --heldout --set tuning, n = 1e5, 2 runs per cell, 144
    cells, the same branch and level coins): within 10 % of the best competitor in 104 of
    144 cells with the leaves (and ``interior_atoms`` off, see :data:`_ATOM_MIN_EPS`), 95
    with the leaves' share at level 4; worst KS ratio 1.97 against 4.73 (mixture 0 eps 2
    KS 3.93 -> 0.82, mixture 7 eps 2 2.39 -> 0.88, CPSSW8 earnings eps 4 2.71 -> 1.35,
    salaries eps 4 1.80 -> 1.11). What it costs on the WAV25 grid (native sizes, the
    256-point grid, eps 1.5-4): METHODS.md §3, "AutoDistribution's constants".

    The former rule (HH_MAX_NODES = 256, decided on the WAV25 grid alone) moved level 5's
    share to level 4, for this reason:

    At d = 1024, level 5's nodes are single buckets of average mass 1/1024. Its oracle is
    OLH (for eps < 5.8), whose variance per node does not depend on the number of nodes
    (FO17 eq. 3): a report there tells its parent's mass (the sum of B children) with B
    times the variance of a report at level 4, and the bucket-scale detail it adds the
    smoothing and the Square Wave reports fit anyway. Measured (20 runs per cell
    and seed, seeds 0 and 1, the same branch coins and Square Wave reports; error with the
    levels (1, 1, 1, 2, 0)/5 over that with uniform levels): salaries KS 0.88-0.93 at eps
    2-3 (0.99-1.03 at 1.5 and 3.5), flights KS 0.90-0.97 at eps 1.5-4, Beta(5, 2) W1
    0.98-1.01 and KS 0.92-1.06, earnings 0.96-1.02, weeks worked 0.93-0.99. On the whole
    grid (benchmarks/auto_distribution.py against the best competitor, 20 runs): within
    10 % in 71 and 67 of 80 cells (seeds 0 and 1) against 68 and 66, worst ratio 1.24 and
    1.24 against 1.37 and 1.39. Also measured: (1, 1, 1, 1, 0) (Beta W1 -3 %, salaries KS
    +3 to +12 % at eps 2-3), (1, 1, 1, 3, 0) and (1, 1, 2, 2, 0) (about as good, less
    even), and only the coarse GRR levels (1, 1, 0, 0, 0): Beta W1 -4 to -9 %, salaries
    KS +20 to +35 % (the HH reports are what finds its steep lower edge). Not "always drop
    the finest level": at d = 256 (point masses mid-bucket, n = 1e5, 8 runs) moving the
    256-node level's users up raised Auto's KS from 0.38 to 0.91 of SW + EMS's at eps 2
    and from 0.20 to 0.55 at eps 3 (tests/numeric/test_auto.py's point-mass test). The
    estimate does not depend on the allocation (a node's likelihood term holds for any
    number of users at its level), so reports of clients with the former uniform levels
    still estimate correctly.

    Examples
    --------
    >>> [hh_top_level(h) for h in (1, 2, 3, 4, 5, 6)]
    [1, 2, 3, 4, 5, 5]
    >>> hh_top_level(8, branching=2)
    8
    """
    h = check_integer(height, "height", low=1)
    b = check_integer(branching, "branching", low=2)
    top = 1
    while top < h and b ** (top + 1) <= HH_MAX_NODES:
        top += 1
    return top


@dataclasses.dataclass(frozen=True)
class AutoInfo:
    """How :meth:`AutoDistribution.estimate` chose its smoothing.

    Attributes
    ----------
    strengths : tuple of float
        The candidate strengths (kernel variance in squared buckets; 0 is plain EM).
    scores : ndarray
        Held-out log-likelihood of each candidate, summed over the held-out folds (higher
        is better); -inf for candidates skipped once the path had clearly passed the peak;
        NaN when no selection ran (fewer than two reports).
    weights : ndarray
        Weight of each candidate's fit in the returned average (one 1 with
        ``combine="best"``).
    strength : float
        The strength with the highest score.
    folds : int
        Number of folds the reports were split into.
    cross_validate : bool
        Whether every fold was held out in turn (else only the first).
    iterations : int
        EM iterations of the final fits on all reports (summed).
    end_scores : ndarray
        Held-out log-likelihood of each strength's end-atom variant (point masses at the
        two end buckets, left out of the smoothing); NaN where no such fit ran (strength 0,
        skipped strengths, and all but the best smoothed strength when the test failed).
    end_weights : ndarray
        Weight of each end-atom variant in the average (all 0 unless ``end_atoms``).
    end_z : float
        Held-out score of the best end-atom variant minus the best plain candidate's, in
        standard errors (NaN when not computed).
    end_atoms : bool
        Whether the end-atom variants were admitted (``end_z`` > 3 and plain EM's own fit
        did not gather the end masses).
    budgets : tuple of int
        The candidate iteration budgets: plain EM continued for that many iterations from
        the best-scoring smoothed strength's fit (empty when none ran).
    budget_scores : ndarray
        Held-out log-likelihood of each budget candidate (as ``scores``).
    budget_weights : ndarray
        Weight of each budget candidate's fit in the average.
    budget : int or None
        The budget of the highest-scoring candidate when that is a budget candidate (then
        ``strength`` is 0.0), else None.
    atoms : int
        Interior point masses the estimate moved into one bucket each
        (``estimate(interior_atoms=True)``; 0 when none was found or the rule is off).
    """

    strengths: tuple[float, ...]
    scores: np.ndarray
    weights: np.ndarray
    strength: float
    folds: int
    cross_validate: bool
    iterations: int
    end_scores: np.ndarray
    end_weights: np.ndarray
    end_z: float
    end_atoms: bool
    budgets: tuple[int, ...] = ()
    budget_scores: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    budget_weights: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    budget: int | None = None
    atoms: int = 0


def _split(counts: np.ndarray, folds: int, gen: np.random.Generator) -> np.ndarray:
    """Assign every report to one of ``folds`` equally likely folds, from the histogram alone.

    Sequential binomial thinning, vectorized over buckets: fold f takes
    ``Binomial(remaining, 1 / (folds - f))`` of each bucket's remaining count. Each report
    lands in each fold with probability 1 / folds independently, so every fold is an i.i.d.
    sample of the same report distribution, independent of which reports fell elsewhere.
    """
    parts = np.empty((folds, counts.size), dtype=np.int64)
    remaining = counts.copy()
    for f in range(folds - 1):
        parts[f] = gen.binomial(remaining, 1.0 / (folds - f))
        remaining -= parts[f]
    parts[-1] = remaining
    return parts


#: Banded forms of the last few read-only matrices fitted, by identity (the spec's matrix
#: is cached per spec, so its band is built once, not twice per estimate).
_PREPARED: list[tuple[np.ndarray, Any, Any]] = []


def _prepared(matrix: np.ndarray) -> tuple[Any, Any]:
    """``(em._Banded, em._Box or None)`` of ``matrix``, reused for a read-only matrix."""
    from .em import _Banded, _box_rows  # server side: only when estimating

    for m, band, box in _PREPARED:
        if m is matrix:
            return band, box
    band = _Banded(np.ascontiguousarray(matrix, dtype=np.float64))
    box = _box_rows(band)
    if not matrix.flags.writeable:  # a writable array could change under the same identity
        _PREPARED[:] = [(matrix, band, box), *_PREPARED[:3]]
    return band, box


class _Fitter:
    """EM with smoothing on one output histogram; the banded matrix is built once.

    The final smoothed fits are accelerated (``fit(accelerate=True)``).
    """

    def __init__(self, matrix: np.ndarray, counts: np.ndarray) -> None:
        # Every output row is kept: an unobserved one (count 0) adds exactly 0 to the E-step
        # and to the log-likelihood, and the band is then the same for every histogram.
        self.nk = np.asarray(counts, dtype=np.float64)
        self.band, self.box = _prepared(matrix)
        self.d = matrix.shape[1]
        self._no_atoms = np.zeros(self.d, dtype=np.bool_)

    def fit(
        self,
        strength: float,
        tol: float,
        max_iter: int,
        init: np.ndarray | None,
        atoms: np.ndarray | None = None,
        accelerate: bool = False,
    ) -> tuple[np.ndarray, int]:
        """Run EM with ``strength`` smoothing from ``init`` (uniform if None).

        ``atoms``: a boolean mask of buckets whose own mass the smoothing leaves alone
        (point masses).

        ``accelerate`` (the final fits on all reports): a smoothed fit (strength > 0, no
        atoms) run to its stop (tol > 0) uses SQUAREM (Varadhan and Roland 2008,
        :func:`ldpkit.numeric._kernels_auto._hybrid_squarem` without HH rows) with EM's own
        stop test. Such a fit converges to a fixed point of the smoothed-EM map, which
        SQUAREM reaches in about a tenth of the updates (n = 1e6, eps 0.5-2: 70-190
        updates for 430-2,600 EM iterations, CDF within 1.4e-3 of EM's stop). Plain EM is
        never accelerated: its early stop is its regularization, and SQUAREM's stop lands
        further along (CDF gaps up to 1.5e-2 at eps 0.5; the end-atom test then saw plain
        EM resolve the ends: weeks worked's KS at eps 0.5 went from 0.81 to 2.2 of the
        best competitor's). The end-atom fits' slow atom mass and the fold fits' 1000
        iteration cap (alike for every candidate) also keep plain EM: accelerated, they
        changed the 20-run grid's choices (weeks worked eps 0.5 KS 0.81 -> 0.96).
        """
        from ._kernels_auto import _hybrid_squarem, _smoothed_loop  # numba, on first use
        from .em import _empty_box

        theta, atom, masked, passes, weight = _fit_start(
            self.d, strength, init, atoms, self._no_atoms
        )
        b = self.band
        if accelerate and tol > 0 and passes > 0 and not masked and _ACCELERATE:
            # a final smoothed fit run to its stop: SQUAREM with EM's own stop test, the
            # joint kernel without HH rows
            counts, consts, parent = _no_hh()
            it = _joint_fit(
                _hybrid_squarem, self, counts, consts, consts, parent, 0,
                theta, atom, masked, passes, weight, tol, max_iter,
            )  # fmt: skip
            return theta, it
        x = self.box
        it, _, _ = _smoothed_loop(
            x is not None, b.base, b.data, b.offsets, b.starts, b.lengths,
            x if x is not None else _empty_box(), self.nk, theta, atom, masked,
            passes, weight, tol, max_iter, _TINY,
        )  # fmt: skip
        return theta, int(it)

    def predict(self, theta: np.ndarray) -> np.ndarray:
        """Return ``M theta`` over every output bucket, with the fits' compiled products.

        A dense BLAS product is slower, and far slower on a loaded machine.
        """
        from ._kernels_em import _band_matvec, _box_matvec  # numba, on first use

        b, x = self.band, self.box
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        out = np.empty(b.base.size)
        if x is not None:
            prefix = np.empty(theta.size + 1)
            _box_matvec(b.base, x, theta, prefix, out)
        else:
            _band_matvec(b.base, b.data, b.offsets, b.starts, b.lengths, theta, out)
        return out


@dataclasses.dataclass(frozen=True, eq=False)
class _HybridModel:
    """The joint model's constant parts (:meth:`AutoDistribution._model`)."""

    matrix: np.ndarray  # SW: M[j, i] = P[output bucket j | input bucket i]
    offsets: np.ndarray  # first row of each HH level among the HH rows
    sizes: np.ndarray  # nodes per level, B^k
    reps: np.ndarray  # leaves per node, B^(h - k)
    p: np.ndarray  # P[report of level k supports i's node | i]
    q: np.ndarray  # P[... supports another node | i]
    weights: np.ndarray  # every row's weight: 1 (SW), w_k (HH level k)
    # the kernels' flat per-HH-row constants (:func:`._kernels_auto._hybrid_loop`)
    row_q: np.ndarray  # q_k of the row's level
    row_gain: np.ndarray  # p_k - q_k
    parent: np.ndarray  # row of the node's parent among the HH rows; the row count for level 1
    window: int  # buckets at each end that the smoothing leaves to EM (_END_WINDOW)


@functools.lru_cache(maxsize=8)
def _hybrid_model(spec: AutoDistribution) -> _HybridModel:
    tree = spec.tree
    h = tree.height
    sizes = np.array([tree.level_size(k) for k in range(1, h + 1)], dtype=np.int64)
    reps = np.array([HH_BRANCHING ** (h - k) for k in range(1, h + 1)], dtype=np.int64)
    from ..frequency._base import PureFrequencyOracle

    oracles = [tree.level_oracle(k) for k in range(1, h + 1)]
    # the tree's default oracles (GRR, OLH) are pure: support probabilities p and q
    assert all(isinstance(o, PureFrequencyOracle) for o in oracles)
    p = np.array([o.p for o in oracles if isinstance(o, PureFrequencyOracle)])
    q = np.array([o.q for o in oracles if isinstance(o, PureFrequencyOracle)])
    # GRR: the support counts are the multinomial's own counts (weight 1, exact). A hashing
    # oracle's report supports p + (B^k - 1) q nodes: each node's count is binomial with
    # variance n pi (1 - pi), pi ~ q; its Poisson term (mean = variance) gets 1 / (1 - q).
    exact = np.array([o.name == "GRR" for o in oracles])
    w = np.where(exact, 1.0, 1.0 / (1.0 - q))
    m = _em_matrix(spec)
    weights = np.concatenate([np.ones(m.shape[0]), np.repeat(w, sizes)])
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    row_q, row_gain = np.repeat(q, sizes), np.repeat(p - q, sizes)
    hrows = int(sizes.sum())
    parent = np.full(hrows, hrows, dtype=np.int64)  # level 1: the sentinel slot (0)
    for k in range(1, h):
        parent[offsets[k] : offsets[k] + sizes[k]] = offsets[k - 1] + np.arange(sizes[k]) // (
            HH_BRANCHING
        )
    # the kernels take the deepest level's node i as bucket i
    assert reps[-1] == 1 and sizes[-1] >= m.shape[1]
    for arr in (sizes, reps, p, q, weights, offsets, row_q, row_gain, parent):
        arr.flags.writeable = False
    d = m.shape[1]
    window = 0
    if d >= 3 and spec.epsilon < _END_WINDOW_MAX_EPS:
        window = min(max(1, round(_END_WINDOW * d)), (d - 1) // 2)
    return _HybridModel(m, offsets, sizes, reps, p, q, weights, row_q, row_gain, parent, window)


class _JointFitter:
    """Fit EM with smoothing over SW output counts and HH support counts on one theta.

    (:func:`ldpkit.numeric._kernels_auto._hybrid_loop`); the same interface as
    :class:`_Fitter`, on weighted counts (SW rows first, then the HH nodes).

    Fits run to their stop (tol > 0) are accelerated by SQUAREM (Varadhan and Roland
    2008; :func:`ldpkit.numeric._kernels_auto._hybrid_squarem`). The joint EM converges
    slowly along the directions that only the HH levels inform: per iteration it moves
    about ``(p_k - q_k) a_v / q_k`` of the way there (the known background dominates an
    OLH node's count), so plain EM did not meet SW20's stop within 10^4 iterations at
    n = 1e6, eps = 0.5-1 (0.15 s, where Square Wave alone stops after 2,800-4,300; it did
    after 8,900-17,000). SQUAREM reaches about the same point in 300-800 updates (W1 and KS
    to the data within 2-10 % of EM run to its stop, measured at n = 1e6, eps 0.5 and 1,
    Beta(5, 2) and weeks worked); a smoothed fit converges to the same fixed point of
    the smoothed-EM map. Fits of a fixed number of iterations (the budget candidates,
    whose early stop is the point) are plain EM.
    """

    def __init__(self, model: _HybridModel, counts: np.ndarray) -> None:
        c = np.asarray(counts, dtype=np.float64)
        rows = model.matrix.shape[0]
        self.model = model
        self.sw = _Fitter(model.matrix, c[:rows])
        self.hk = np.ascontiguousarray(c[rows:])
        self.d = model.matrix.shape[1]
        self._no_atoms = np.zeros(self.d, dtype=np.bool_)
        # the end windows (_END_WINDOW): frozen buckets of every smoothed fit without atoms
        self._window: np.ndarray | None = None
        if model.window > 0:
            self._window = np.zeros(self.d, dtype=np.bool_)
            self._window[: model.window] = True
            self._window[self.d - model.window :] = True

    def fit(
        self,
        strength: float,
        tol: float,
        max_iter: int,
        init: np.ndarray | None,
        atoms: np.ndarray | None = None,
        accelerate: bool = False,
    ) -> tuple[np.ndarray, int]:
        """Run the joint EM with ``strength`` smoothing from ``init`` (uniform if None).

        ``atoms`` as for :meth:`_Fitter.fit`. Every fit run to its stop is accelerated, whatever
        ``accelerate`` says (see the class docstring: unaccelerated, the joint fits did not
        reach their stop).
        """
        from ._kernels_auto import _hybrid_loop, _hybrid_squarem  # numba, on first use

        theta, atom, masked, passes, weight = _fit_start(
            self.d, strength, init, atoms, self._no_atoms
        )
        if not masked and passes > 0 and self._window is not None:
            atom, masked = self._window, 2  # the end windows (see _END_WINDOW)
        md = self.model
        # A fit run to its stop is accelerated (see the class docstring); a fixed number of
        # iterations (tol <= 0: the budget candidates, early-stopped EM) is not.
        loop = _hybrid_squarem if (tol > 0 and _ACCELERATE) else _hybrid_loop
        it = _joint_fit(
            loop, self.sw, self.hk, md.row_q, md.row_gain, md.parent, int(md.offsets[-1]),
            theta, atom, masked, passes, weight, tol, max_iter,
        )  # fmt: skip
        return theta, it

    def predict(self, theta: np.ndarray) -> np.ndarray:
        """Return the model probability of every row.

        ``M theta``, then ``q_k + (p_k - q_k) a_v`` for every HH node.
        """
        md = self.model
        prefix = np.concatenate([[0.0], np.cumsum(theta)])
        parts = [self.sw.predict(theta)]
        for size, rep, p, q in zip(md.sizes, md.reps, md.p, md.q, strict=True):
            lo = np.minimum(np.arange(size) * rep, self.d)
            hi = np.minimum(lo + rep, self.d)
            parts.append(q + (p - q) * (prefix[hi] - prefix[lo]))
        return np.concatenate(parts)


#: Whether fits run to their stop use SQUAREM (see _Fitter and _JointFitter).
_ACCELERATE = True


def _fit_start(
    d: int,
    strength: float,
    init: np.ndarray | None,
    atoms: np.ndarray | None,
    no_atoms: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int, int, float]:
    """Return what every smoothed fit starts from.

    Theta (uniform if ``init`` is None), the atom mask and whether it applies (1; 0 not),
    and the smoothing as ``passes`` binomial (1, 2, 1)/4 passes of ``weight`` each (variance
    ``strength`` in squared buckets).
    """
    passes = math.ceil(2.0 * strength) if strength > 0 else 0
    weight = 2.0 * strength / passes if passes else 0.0
    theta = np.full(d, 1.0 / d) if init is None else init / init.sum()
    masked = 1 if atoms is not None and passes > 0 else 0  # 2: end windows (_JointFitter)
    atom = np.ascontiguousarray(atoms if masked else no_atoms, dtype=np.bool_)
    return theta, atom, masked, passes, weight


def _joint_fit(
    loop: Any,
    sw: _Fitter,
    hk: np.ndarray,
    row_q: np.ndarray,
    row_gain: np.ndarray,
    parent: np.ndarray,
    n_hh: int,
    theta: np.ndarray,
    atom: np.ndarray,
    masked: int,
    passes: int,
    weight: float,
    tol: float,
    max_iter: int,
) -> int:
    """Run a joint kernel (``_hybrid_loop`` or ``_hybrid_squarem``), updating ``theta``.

    On ``sw``'s Square Wave band and box and the given HH rows, in place; returns the update
    count.
    """
    from .em import _empty_box

    b, x = sw.band, sw.box
    box = x if x is not None else _empty_box()
    it, _, _ = loop(
        x is not None, b.base, b.data, b.offsets, b.starts, b.lengths, box, sw.nk, hk, row_q, row_gain, parent, n_hh,
        HH_BRANCHING, theta, atom, masked, passes, weight, tol, max_iter, _TINY,
    )  # fmt: skip
    return int(it)


@functools.lru_cache(maxsize=1)
def _no_hh() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return empty HH rows for the joint kernels on Square Wave alone.

    The counts, the per-row constants and the parents, with the joint model's flags (one
    compiled kernel).
    """
    consts, parent = np.zeros(0), np.zeros(0, dtype=np.int64)
    consts.flags.writeable = parent.flags.writeable = False
    return np.zeros(0), consts, parent


@functools.lru_cache(maxsize=64)
def _tree_of(spec: AutoDistribution) -> HierarchicalHistogram:
    """Return the hybrid's tree, built (and its level oracles validated) once per spec."""
    assert spec.buckets is not None
    return HierarchicalHistogram(
        epsilon=spec.epsilon,
        low=spec.low,
        high=spec.high,
        buckets=spec.buckets,
        branching=HH_BRANCHING,
    )


@functools.lru_cache(maxsize=64)
def _tree_fields_of(spec: AutoDistribution) -> tuple[str, ...]:
    tree = _tree_of(spec)
    names = {
        f for k in range(1, tree.height + 1) for f in _REPORT_FIELDS[tree.level_oracle(k).name]
    }
    return tuple(sorted(names, key=lambda f: (f != "values", f)))


@functools.lru_cache(maxsize=4)  # 8 MB each at d = 1024
def _em_matrix(spec: AutoDistribution) -> np.ndarray:
    m = np.ascontiguousarray(spec.bucket_matrix().T, dtype=np.float64)
    m.flags.writeable = False
    return m


@dataclasses.dataclass(frozen=True, kw_only=True)
class AutoDistribution(Mechanism):
    """Distribution of a numerical value from Square Wave reports, with data-driven smoothing.

    With ``hh_share = 0`` the client is exactly :class:`SquareWave` (same reports, same
    eps-LDP guarantee); with ``hh_share > 0`` a share of the users sends hierarchical-
    histogram reports instead (the hybrid design, see Notes). The
    server fits EM (SW20 Algorithm 1) followed, after every update, by a smoothing step of
    strength ``s`` (the variance of the smoothing kernel in squared buckets: 0 is plain EM,
    0.5 is SW20's EMS) for several ``strengths``, and averages the fits with weights from
    the held-out likelihood of the reports (see :meth:`estimate`).

    Parameters
    ----------
    epsilon : float
        Privacy budget of each report.
    low, high : float
        The value domain (default [0, 1]).
    expected_n : int, optional
        Expected number of users; sets the default resolution (:func:`default_buckets`).
    buckets : int, optional
        Number d of histogram buckets of the estimate (and of the output histogram);
        default :func:`default_buckets` of ``expected_n`` (1024 when it is not given).
    hh_share : float, optional
        Share r in [0, 1] of the users who send a hierarchical-histogram report instead of
        a Square Wave one (the hybrid design); default :func:`default_hh_share` of
        ``(epsilon, expected_n)``. 0 is Square Wave alone (the reports and Stats of
        :class:`SquareWave`).

    Notes
    -----
    Why held-out likelihood: too little smoothing fits noise that a new sample does not
    share; too much smooths point masses away and mis-predicts the reports near them. Both
    show as a lower likelihood of reports the fit has not seen, which is observable from
    the reports alone. A fold made by binomial thinning of the output histogram is an
    i.i.d. sample of the report distribution, exactly as if each report had been assigned
    to a fold by a coin (the split every cross-validation makes).

    Hybrid design (``hh_share = r > 0``). Each user draws HH with probability r,
    independently of her value, and sends ONE report with the full epsilon: a Square Wave
    report (SW20 section 5) or a hierarchical-histogram report (:attr:`tree`: B = 4 over the
    same d buckets, a uniformly drawn level k and her node's report through that level's
    oracle, GRR or OLH by SW20's rule; Kulkarni, Cormode, Srivastava 2019). Both branches
    are eps-LDP and the coin ignores the value, so the report (branch included) is eps-LDP
    (its exact loss is the larger of the two branches' losses). The Stats are O(d): the SW
    output histogram, the HH support counts of every node, the users per branch. The
    estimate runs ONE EM over both report sets on a common theta: the SW rows as above, an
    HH node v of level k with model probability ``q_k + (p_k - q_k) a_v`` of being
    supported (FO17's support probabilities; ``a_v`` the node's mass). For GRR this is the
    exact multinomial likelihood of the counts; for OLH the support counts are not
    sufficient, and the node terms form a composite (marginal) likelihood (Lindsay 1988)
    with weight ``1 / (1 - q_k)``, which gives each node the Fisher information of OLH's
    own estimate (``Var* = q (1 - q) / (n (p - q)^2)``, FO17 eq. 3). The EM update is
    Dempster-Laird-Rubin's for the SW reports plus, per node, only the *signal* hits
    (rate ``p_k - q_k``; the background rate ``q_k`` is known), the EM of a Poisson
    intensity with known background (Shepp and Vardi 1982): assigning the background to
    theta too slowed EM by the hits per report (~hundreds). Smoothing, held-out choice
    (the support counts thinned like the SW counts) and end atoms are as for SW alone.
    Measured against the exact per-report E-step (studies/auto_hybrid_collapsed.py, r =
    0.25, same reports, same strength and stop): error ratios collapsed / exact 0.91-1.13
    on 22 of 24 (cell, s, metric) values, 1.31 at worst (weeks worked, eps 4, s = 0, KS).

    References
    ----------
    Z. Li, T. Wang, M. Lopuhaä-Zwakenberg, N. Li, B. Škorić. Estimating Numerical
    Distributions under Local Differential Privacy. SIGMOD 2020, sections 5.2-5.5 (SW, EM,
    EMS). B. W. Silverman, M. C. Jones, J. D. Wilson, D. W. Nychka. A smoothed EM approach
    to indirect estimation problems. JRSS-B 52(2), 1990 (smoothing strength of EMS).
    M. Stone. Cross-validatory choice and assessment of statistical predictions. JRSS-B
    36(2), 1974 (choosing a smoothing parameter by held-out likelihood). S. Geisser,
    W. F. Eddy. A predictive approach to model selection. JASA 74(365), 1979, and Y. Yao,
    A. Vehtari, D. Simpson, A. Gelman. Using stacking to average Bayesian predictive
    distributions. Bayesian Analysis 13(3), 2018, section 3.1 (weights proportional to the
    exponentiated held-out log-likelihood, "pseudo-BMA"). Hybrid design: T. Kulkarni,
    G. Cormode, D. Srivastava. Answering Range Queries Under Local Differential Privacy.
    PVLDB 12(10), 2019 (HH); T. Wang, J. Blocki, N. Li, S. Jha. Locally Differentially
    Private Protocols for Frequency Estimation. USENIX Security 2017 (FO17: GRR, OLH,
    support probabilities p and q); A. P. Dempster, N. M. Laird, D. B. Rubin. Maximum
    likelihood from incomplete data via the EM algorithm. JRSS-B 39(1), 1977; L. A. Shepp,
    Y. Vardi. Maximum likelihood reconstruction for emission tomography. IEEE TMI 1(2),
    1982; B. G. Lindsay. Composite likelihood methods. Contemporary Mathematics 80, 1988.
    METHODS.md, section "AutoDistribution".

    Examples
    --------
    >>> auto = AutoDistribution(epsilon=2.0, expected_n=50_000)
    >>> auto.buckets
    1024
    >>> values = np.random.default_rng(0).beta(5, 2, size=50_000)
    >>> dist = auto.run(values, rng=0)
    >>> bool(abs(dist.mean() - values.mean()) < 0.01)
    True
    """

    low: float = 0.0
    high: float = 1.0
    expected_n: int | None = None
    #: Its reports are SquareWave's and HierarchicalHistogram's (exact laws up to e^40).
    max_epsilon: ClassVar[float] = SW_MAX_EPSILON
    #: Report fields sent as real numbers (float64); every other field holds integers.
    float_report_fields: ClassVar[frozenset[str]] = frozenset({"values"})
    buckets: int | None = None
    hh_share: float | None = None
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "low": [FINITE_BOUND],
        "high": [FINITE_BOUND],
        "expected_n": [Size(1), None],
        "buckets": [Size(2, small=16), None],
        "hh_share": [Real(0.0, 1.0), None],
    }

    def _validate(self) -> None:
        # low and high as floats (SquareWave's rule): a spec rebuilt from JSON that wrote
        # 0.0 as 0 (a browser client's body) has the same fingerprint
        lo, hi = check_bounds(self.low, self.high)
        self._set("low", lo)
        self._set("high", hi)
        if self.buckets is None:
            self._set("buckets", default_buckets(self.expected_n))
        self.wave  # validates epsilon, low and high the way SquareWave does  # noqa: B018
        if self.hh_share is None:
            self._set("hh_share", default_hh_share(self.epsilon, self.expected_n))
        if self.hybrid:
            self.tree  # validates the levels' oracles at this epsilon  # noqa: B018

    # -- the randomizer: SquareWave's, or per user SW or HH by a coin ------------------------
    @property
    def wave(self) -> SquareWave:
        """The :class:`SquareWave` spec whose reports this spec sends."""
        assert self.buckets is not None
        return SquareWave(epsilon=self.epsilon, low=self.low, high=self.high, buckets=self.buckets)

    @property
    def hybrid(self) -> bool:
        """Whether some users send hierarchical-histogram reports (``hh_share > 0``)."""
        return bool(self.hh_share)

    @property
    def tree(self) -> HierarchicalHistogram:
        """The :class:`HierarchicalHistogram` whose reports the HH users send.

        B = 4, the same ``buckets`` equal buckets of [low, high] as the wave's; each level's
        oracle by SW20's rule, GRR or OLH.
        """
        return _tree_of(self)

    def hh_level_shares(self) -> np.ndarray:
        """Return ``P[level k | HH report]`` for k = 1..h (the tree's levels).

        1/h each, with the shares of the levels above :data:`HH_MAX_NODES` nodes moved to
        the finest below (:func:`hh_top_level`).
        """
        h = self.tree.height
        shares = np.zeros(h)
        np.add.at(shares, np.minimum(np.arange(1, h + 1), hh_top_level(h)) - 1, 1.0 / h)
        return shares

    def _tree_fields(self) -> tuple[str, ...]:
        """Return the HH report fields besides ``levels`` (``values`` sent as ``items``)."""
        return _tree_fields_of(self)

    def check_values(self, values: Any) -> np.ndarray:
        """Return the validated values (the Square Wave's check)."""
        return self.wave.check_values(values)

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Randomize by Square Wave (:meth:`SquareWave.randomize`), labelled with this spec.

        With ``hh_share = r > 0`` each user first draws, independently of her value, HH with
        probability r and then sends ONE report with the full epsilon: a Square Wave report,
        or a :class:`HierarchicalHistogram` report (her level and her node's oracle report
        at that level).

        Fields with ``r > 0``: ``levels`` (0 for a Square Wave report, else the HH level
        1..h), ``values`` (the Square Wave report; 0 for HH users), ``items`` (the HH
        oracle's report; 0 for SW users) and, when some level uses a hashing oracle,
        ``seeds`` (0 for the others).
        """
        if not self.hybrid:
            return Reports(self, **self.wave.randomize(values, rng=rng).arrays)
        v = self.check_values(values)
        gen = as_generator(rng)
        n = v.shape[0]
        # The branch coin never looks at the value: each branch's report is eps-LDP, so the
        # pair (branch, report) is too (the HH spec's own argument for its level draw).
        to_hh = gen.random(n) < float(self.hh_share or 0.0)
        # index arrays: each is used several times, cheaper than boolean masks
        i_hh, i_sw = np.flatnonzero(to_hh), np.flatnonzero(~to_hh)
        sw = self.wave.randomize(v[i_sw], rng=gen)
        tree = self.tree
        # the level: uniform over 1..h, the finest level's share moved up one level
        # (:func:`hh_top_level`), drawn apart from the value like the branch
        drawn = gen.integers(1, tree.height + 1, size=i_hh.size)
        levels_hh = np.minimum(drawn, hh_top_level(tree.height)).astype(np.uint8)
        hh = tree._reports_at(tree.leaf_index(v[i_hh]), levels_hh, gen)
        levels = np.zeros(n, dtype=np.uint8)
        levels[i_hh] = hh.levels
        out = np.zeros(n, dtype=np.float64)
        out[i_sw] = sw.values
        fields: dict[str, np.ndarray] = {"levels": levels, "values": out}
        for name in self._tree_fields():
            src = hh.arrays[name]
            dtype = np.uint64 if name == "seeds" else np.int64
            full = np.zeros(n, dtype=dtype)
            full[i_hh] = src
            fields["items" if name == "values" else name] = full
        return Reports(self, **fields)

    def aggregate(self, reports: Reports) -> Stats:
        """Count the Square Wave reports per output bucket (``Stats.counts``).

        With ``hh_share > 0`` also the HH support counts of every node, levels 1..h
        concatenated (``Stats.hh_counts``, :meth:`HierarchicalHistogram.aggregate`), and the
        users per branch (``Stats.level_n``: SW users, then HH users per level).
        """
        reports = self.check_reports(reports)
        wave = self.wave
        if not self.hybrid:
            stats = wave.aggregate(Reports(wave, **reports.arrays))
            return Stats(self, stats.n, **stats.arrays)
        tree = self.tree
        names = (
            "levels",
            "values",
            *["items" if f == "values" else f for f in self._tree_fields()],
        )
        missing = [f for f in names if f not in reports.fields]
        if missing:
            raise ValueError(f"reports must have fields {names}, missing {missing}")
        lv = reports.levels
        if lv.ndim != 1 or lv.dtype.kind not in "iu" or (lv.size and int(lv.max()) > tree.height):
            raise ValueError(
                f"reports.levels must be a 1-D integer array of levels in [0, {tree.height}]"
            )
        is_sw = lv == 0
        i_sw, i_hh = np.flatnonzero(is_sw), np.flatnonzero(~is_sw)
        sw_stats = wave.aggregate(Reports(wave, values=reports.values[i_sw]))
        hh_arrays = {
            f: reports.arrays["items" if f == "values" else f][i_hh] for f in self._tree_fields()
        }
        hh_stats = tree.aggregate(Reports(tree, levels=lv[i_hh], **hh_arrays))
        level_n = np.concatenate([[sw_stats.n], np.asarray(hh_stats.level_n)]).astype(np.int64)
        return Stats(
            self,
            len(reports),
            counts=sw_stats.counts,
            hh_counts=hh_stats.counts,
            level_n=level_n,
        )

    def stats_schema(self) -> Mapping[str, StatsField] | None:
        """Return the Stats fields of the Square Wave (and HH) reports.

        Histogram ``counts`` of the output buckets; with ``hh_share > 0`` those of the SW
        users only, plus ``hh_counts`` (the tree's support counts) and ``level_n`` (SW
        users, then HH users per level; sum n).
        """
        if not self.hybrid:
            return self.wave.stats_schema()
        tree = self.tree
        return {
            "counts": StatsField((self.wave.n_output_buckets,)),
            "hh_counts": tree.stats_schema()["counts"],
            "level_n": StatsField((tree.height + 1,), total=1),
        }

    def empty_stats(self) -> Stats:
        """Return the Stats of no report (zero arrays): the neutral element of merge."""
        if not self.hybrid:
            return Stats(self, 0, **self.wave.empty_stats().arrays)
        tree = self.tree
        return Stats(
            self,
            0,
            counts=np.zeros(self.wave.n_output_buckets, dtype=np.int64),
            hh_counts=np.zeros_like(tree.empty_stats().counts),
            level_n=np.zeros(tree.height + 1, dtype=np.int64),
        )

    def _em_bootstrap(self, stats: Stats, theta: np.ndarray, **options: Any) -> Any:
        """Parametric bootstrap of this spec's EM/EMS pipeline (:func:`.em.bootstrap`)."""
        from .em import bootstrap  # server side: loaded when intervals are asked for

        return bootstrap(stats, theta, **options)

    def bucket_matrix(self) -> np.ndarray:
        """Return ``P[output bucket | input uniform in input bucket]`` (rows sum to 1).

        The Square Wave's bucketized channel that the estimate inverts (that of the SW
        branch when ``hh_share > 0``).
        """
        return np.asarray(self.wave.bucket_matrix())

    def privacy_loss(self) -> float:
        """Return the exact epsilon of the reports.

        The Square Wave's (:meth:`SquareWave.privacy_loss`); with ``hh_share > 0`` the
        larger of it and the tree's (the branch is drawn independently of the value, so each
        output's probability ratio is one branch's ratio).
        """
        loss = self.wave.privacy_loss()
        return max(loss, self.tree.privacy_loss()) if self.hybrid else loss

    def bucketized_privacy_loss(self) -> float:
        """Epsilon of the bucketized channel (:meth:`SquareWave.bucketized_privacy_loss`)."""
        return self.wave.bucketized_privacy_loss()

    def _outputs_by_inputs(self) -> np.ndarray:
        """Return ``M[j, i] = P[output bucket j | input bucket i]`` (the EM orientation).

        Read-only, cached per spec.
        """
        return _em_matrix(self)

    def _model(self, stats: Stats) -> tuple[np.ndarray, np.ndarray, Any]:
        """Return the estimate's model.

        Integer counts of every row (SW output buckets, then the HH nodes), each row's
        weight, and a factory of fitters on weighted counts.

        An HH row is a node v of level k; its count is v's support count C_v (reports of
        level k whose support holds v) and its model probability ``q_k + (p_k - q_k) a_v``
        (``p_k``, ``q_k``: the level oracle's support probabilities, FO17 section 3;
        ``a_v``: the node's mass). Support counts are mergeable where per-report
        likelihoods are not; with GRR they are the exact multinomial likelihood's sufficient
        statistic (weight 1). With OLH they are not: each node's count enters as its own
        Poisson term with weight ``w_k = 1 / (1 - q_k)`` (a composite likelihood, the hits
        of one report treated as independent), which gives each node the Fisher information
        of OLH's own estimate of it (:func:`_hybrid_model`).
        """
        m = self._outputs_by_inputs()
        counts = np.asarray(stats.counts, dtype=np.int64)
        if not self.hybrid:
            return counts, np.ones(counts.size), lambda c: _Fitter(m, c)
        model = _hybrid_model(self)
        counts = np.concatenate([counts, np.asarray(stats.hh_counts, dtype=np.int64)])
        return counts, model.weights, lambda c: _JointFitter(model, c)

    # -- the estimator ------------------------------------------------------------------------
    def estimate(
        self,
        stats: Stats,
        *,
        strengths: Sequence[float] | None = None,
        folds: int = 2,
        cross_validate: bool | None = None,
        combine: str = "average",
        end_atoms: bool = True,
        budgets: Sequence[int] | None = None,
        rng: RNGLike = 0,
        interior_atoms: bool = True,
        sharpen: bool = True,
        max_iter: int = 10_000,
        return_info: bool = False,
    ) -> Any:
        """Estimate the histogram of the inputs, smoothed as much as the reports support.

        Parameters
        ----------
        stats : Stats
            Aggregated (and possibly merged) reports of this spec.
        strengths : sequence of float
            Candidate smoothing strengths (kernel variance in squared buckets, >= 0; 0 is
            plain EM, 0.5 EMS). Default (None) :data:`DEFAULT_STRENGTHS`.
        folds : int
            Number K >= 2 of folds the reports are split into.
        cross_validate : bool or None
            False: hold out one fold and fit on the other K - 1 (one fit per candidate);
            True: hold out every fold in turn (K-fold cross-validation, K times the fold
            fits' cost, less noise in the choice). None (default): True with HH reports in
            the fit (``hybrid``, the default) from eps 1.5 on, else False (see
            ``_CV_HYBRID``).
        combine : {"average", "best"}
            "average" (default): average the candidates' fits on all reports with weights
            proportional to ``exp(held-out score)`` (pseudo-Bayesian model averaging; a
            candidate far behind gets weight 0 and is not refit); "best": the fit of the
            highest score alone.
        end_atoms : bool
            True (default): also consider, for every smoothing strength > 0, the model with
            point masses at the two end buckets (values clipped or censored at ``low`` or
            ``high``, such as 0 weeks worked), whose mass the smoothing leaves alone; they
            enter the choice only when the best of them beats the best plain fit on the
            held-out reports by more than 3 standard errors.
        budgets : sequence of int
            Iteration budgets k (>= 1): candidates "plain EM continued for k iterations from
            the best-scoring smoothed strength's fit" (early-stopped EM, which keeps point masses
            that smoothing smears without following the noise as far as EM run to its stop).
            Default (None) :data:`DEFAULT_BUDGETS`; ``()`` for none. Ignored without a
            strength > 0.
        rng : Generator, int or None
            Randomness of the split into folds (default 0: the estimate is a fixed function
            of the statistics).
        interior_atoms : bool
            True (default): a point mass that the fits split between neighbouring buckets
            goes whole into one bucket where the reports say so. When HH users report at
            the leaves (the default hybrid at d <= 1024), each peak of the estimate moves
            into the bucket of its run that the HH reports' likelihood prefers, or stays
            as fitted (see :func:`_place_atoms`); else from eps 3.5 on each clear peak goes
            into the bucket of its centroid (see :func:`_snap_atoms` and
            ``_ATOM_EXCESS``).
        sharpen : bool
            True (default): when the best-scoring candidate is a budget k (early-stopped
            plain EM), continue plain EM from the average for ``9 k`` more iterations
            (``k`` from eps 3 on; see ``_SHARPEN``): sharper heaps, a CDF closer at their
            edges.
        max_iter : int
            Iteration cap of every EM run.
        return_info : bool
            Also return an :class:`AutoInfo`.

        Returns
        -------
        Distribution, or (Distribution, AutoInfo)

        Notes
        -----
        1. Split the output histogram into K folds by binomial thinning.
        2. For the held-out fold k (every fold with ``cross_validate``), fit EM with
           smoothing on the other folds for every strength, strongest first, each fit
           starting from the previous one's result; score ``sum_j n_kj log (M theta)_j``,
           the log-likelihood of fold k's reports. Stop early once a strength scores 3
           standard errors below the best so far (the rest, weaker still, are skipped).
           The path is: the strengths > 0, then plain EM continued from the best
           smoothed fit, scored after each of the ``budgets`` (shortest first; one run of
           the longest budget's iterations), then plain EM run to its stop from the
           weakest smoothed fit.
        3. End atoms (``end_atoms=True``): for the best-scoring strength > 0, also fit the
           same smoothing with the first and last buckets left out of it (their own mass is
           never smeared; the smooth part still spreads into them), from the plain fit, and
           score it. If it beats the best plain candidate by more than 3 standard errors of
           the score difference (held-out folds added), the other strengths' end-atom
           variants are fitted too and all of them join the pool; else none. A clipped end
           is a point mass that smoothing smears (47 % of weeks worked are 0), while on data
           without one the extra candidates would only add selection noise (measured on the
           80 WAV25 cells: z > 3 only on weeks worked, eps <= 2). After the final fits the
           variants are dropped again (plain weights) if plain EM's own final fit holds at
           least 0.9 of the mass they put on the two end buckets: it has then resolved the
           end masses itself, and its sharper interior wins.
        4. Weight each candidate by ``exp(score - best score)`` (weights below 0.05 are
           dropped, the rest renormalized), refit the candidates with weight on all reports,
           strongest first, a plain fit before its end-atom variant (plain EM from the uniform start, as SW20's EM starts; a smoothed
           fit from the previous, stronger fit; alone, strength 0 is exactly SW + EM and 0.5
           SW + EMS to its stopping error (final smoothed fits use SQUAREM); a budget candidate continues the best smoothed strength's
           final fit for its k iterations), and average the fits with those weights. The
           held-out scores of neighbouring strengths on smooth data often differ by a few
           nats, less than their noise; averaging removes the arbitrary pick among them.

        With HH reports (``hh_share > 0``) below eps 3, every smoothed fit without end atoms
        leaves the first and last ``d / 64`` buckets out of its smoothing (end windows, see
        ``_END_WINDOW``): near an end the Square Wave reports hardly tell where the mass
        sits and a smoothed fit extrapolates the interior into it, while the HH levels'
        fine nodes place a steep edge there.

        5. Sharpening (``sharpen=True``): if the best-scoring candidate is a budget k, the
           average is continued for 9 k (from eps 3 on: k) more iterations of plain EM. The
           held-out score measures the density; the KS is decided at the heaps' edges,
           where the longer run puts the mass that the early stop leaves in neighbouring
           buckets.
        6. Interior atoms (``interior_atoms=True``). With HH reports at the leaves: runs
           of buckets above 2 times their neighbourhood's median and 8 / d above it; a
           run's excess over that median goes into the one bucket of the run whose
           placement the HH support counts' likelihood prefers, if any beats the run as
           fitted. The Square Wave likelihood cannot decide this (its model is uniform
           within a bucket, so it prefers the split); the leaf counts measure the buckets'
           masses themselves. Without leaf reports (eps >= 3.5 only): plain EM continued
           for 1000 iterations from the result marks the peaks
           (above 3 times their neighbourhood's median and 32 / d above it); each peak's
           excess in the result goes to the bucket of its centroid. Chosen on a tuning set
           of data sets and mixtures, not by the held-out likelihood, which prefers the
           split (its model is uniform within a bucket).
        7. Nearly empty stretches (from eps 1.5 on, see :func:`_trim_empty`): a fit
           constrained to non-negative masses keeps the positive part of the reports' noise
           over a stretch the data leave empty (a long tail of delays). Where the Square Wave
           counts there fall short of the fit's prediction by more than one Poisson standard
           error, the stretch's mass is cut until they agree.
        8. End buckets (with HH reports at the leaves, from eps 3 on, see
           :func:`_refit_end_windows`): each end bucket's mass is refitted to the HH nodes
           of its ``d / 64``-bucket window, the window's total kept, when that raises their
           composite log-likelihood by more than 4.5 nats. Below eps 3 the end windows of
           step 6 gather an end's excess into its end bucket unless the leaf counts reject
           that atom by more than 5 nats (a steep density against the end, not an atom).

        EM stops when the log-likelihood changes by less than SW20's tolerances (1e-3 for
        smoothed fits, ``1e-3 e^eps`` for plain EM; scaled by the share of reports a fold
        fit sees; fold fits stop after at most 1000 iterations). With fewer than two reports
        nothing can be held out: EMS's strength 0.5 is used. The result is a post-processing of the reports: no privacy cost.
        """
        stats = self.check_stats(stats)
        if stats.n == 0:
            raise ValueError("stats must summarize at least one report, got n = 0")
        if strengths is None:
            strengths = DEFAULT_STRENGTHS
        cand = _check_strengths(strengths)
        if budgets is None:
            budgets = DEFAULT_BUDGETS
        bud_in = _check_budgets(budgets)
        folds = check_integer(folds, "folds", low=2, high=1000)
        if cross_validate is None:
            cross_validate = self.hybrid and _CV_HYBRID and self.epsilon >= _CV_MIN_EPS
        if not isinstance(cross_validate, (bool, np.bool_)):
            raise TypeError(f"cross_validate must be True, False or None, got {cross_validate!r}")
        if not isinstance(end_atoms, (bool, np.bool_)):
            raise TypeError(f"end_atoms must be True or False, got {end_atoms!r}")
        if not isinstance(interior_atoms, (bool, np.bool_)):
            raise TypeError(f"interior_atoms must be True or False, got {interior_atoms!r}")
        if not isinstance(sharpen, (bool, np.bool_)):
            raise TypeError(f"sharpen must be True or False, got {sharpen!r}")
        if combine not in ("average", "best"):
            raise ValueError(f"combine must be one of 'average', 'best', got {combine!r}")
        max_iter = check_integer(max_iter, "max_iter", low=1, high=10_000_000)
        gen = as_generator(rng)
        # counts: every row's reports (SW output buckets; with hh_share > 0 also the HH
        # nodes' support counts), wts: each row's weight (1 for SW rows), make: the fitter
        counts, wts, make = self._model(stats)
        wcounts = counts * wts
        wtotal = float(wcounts.sum())
        total = int(counts.sum())
        d = self._outputs_by_inputs().shape[1]
        nc = len(cand)
        # Budget candidates continue a smoothed fit (none without one); a budget
        # above max_iter is max_iter.
        smin = min((s for s in cand if s > 0), default=None)
        bud = tuple(sorted({min(b, max_iter) for b in bud_in})) if smin is not None else ()
        nu = nc + len(bud)  # candidate u: strength cand[u] for u < nc, else budget bud[u - nc]
        order = sorted(range(nc), key=lambda k: -cand[k])  # strongest first
        # the path of the held-out fits: smoothed strengths strongest first, then plain EM
        # from the best smoothed fit, the budgets shortest first, then run to its stop
        # (from the weakest smoothed fit, as before the budgets)
        path = [k for k in order if cand[k] > 0] + list(range(nc, nu))
        path += [k for k in order if cand[k] == 0]
        ends = np.zeros(d, dtype=np.bool_)
        ends[[0, d - 1]] = True
        # End atoms only change smoothed fits (plain EM smooths nothing), and need a bucket
        # between the ends to smooth.
        with_ends = bool(end_atoms) and d >= 3 and any(s > 0 for s in cand)
        if with_ends and not _END_ATOMS_WITH_WINDOWS and self.hybrid:
            # the end windows already leave the end buckets to EM (see _END_ATOMS_WITH_WINDOWS)
            with_ends = _hybrid_model(self).window == 0

        def tol(strength: float, share: float) -> float:
            base = 1e-3 * math.exp(min(self.epsilon, 700.0)) if strength == 0 else 1e-3
            return base * share

        # Fold fits only rank the candidates: a cap bounds plain EM's slow tail (it can take
        # 10^4 iterations at n = 1e6) and acts on every candidate alike.
        fold_iter = min(max_iter, _FOLD_MAX_ITER)
        scores = np.full(nu, np.nan)
        end_scores = np.full(nc, np.nan)
        end_z = math.nan
        admitted = False

        def weigh(pool: np.ndarray) -> np.ndarray:
            """Pseudo-BMA weights of the candidates' scores (-inf: not a candidate)."""
            top = int(np.argmax(pool))
            if combine == "average":
                w = np.exp(pool - pool[top])
                w[w < _MIN_WEIGHT] = 0.0
            else:
                w = np.zeros(pool.size)
                w[top] = 1.0
            return w / w.sum()

        if total >= 2 and nu > 1:
            scores[:] = 0.0
            # per held-out fold: its histogram, the fitter on the other folds, the plain
            # fits and the log-probabilities of every output under each fit
            held: list[tuple[np.ndarray, _Fitter, dict[int, np.ndarray], dict[int, np.ndarray]]]
            held = []
            parts = _split(counts, folds, gen)
            for ipart in parts if cross_validate else parts[:1]:
                if int(ipart.sum()) == total:
                    continue
                part = ipart * wts
                train = wcounts - part
                fitter = make(train)
                share = float(train.sum()) / wtotal
                theta: np.ndarray | None = None  # the last smoothed fit
                on: np.ndarray | None = None  # plain EM along the budgets
                done = 0
                fits: dict[int, np.ndarray] = {}
                lp: dict[int, np.ndarray] = {}
                fold_best: int | None = None
                smooth_best: int | None = None  # the fold's best smoothed candidate
                for pos, u in enumerate(path):
                    if u < nc:
                        fit, _ = fitter.fit(cand[u], tol(cand[u], share), fold_iter, theta)
                        if cand[u] > 0:
                            theta = fit
                    else:
                        # exactly bud[u - nc] iterations of plain EM (tolerance 0: no stop)
                        # from the fold's best smoothed fit
                        assert smooth_best is not None  # the path has a strength > 0 first
                        start = on if done else fits[smooth_best]
                        on, _ = fitter.fit(0.0, 0.0, bud[u - nc] - done, start)
                        done, fit = bud[u - nc], on
                    fits[u] = fit
                    lp[u] = np.log(np.maximum(fitter.predict(fit), _TINY))
                    score = float(part @ lp[u])
                    scores[u] += score
                    if (
                        u < nc
                        and cand[u] > 0
                        and (smooth_best is None or score > float(part @ lp[smooth_best]))
                    ):
                        smooth_best = u
                    if fold_best is None or score > float(part @ lp[fold_best]):
                        fold_best = u
                    elif float(part @ lp[fold_best]) - score > _STOP_SE * _se(
                        part, lp[fold_best], lp[u]
                    ):
                        # Clearly past the peak: weaker smoothing or longer plain EM would
                        # fit noise even more (held-out likelihood is unimodal along the
                        # path); skip the rest.
                        scores[path[pos + 1 :]] = -np.inf
                        break
                held.append((part, fitter, fits, lp))
            best = int(np.argmax(scores))
            smoothed = [k for k in range(nc) if cand[k] > 0 and np.isfinite(scores[k])]
            if with_ends and held and smoothed:
                # The end-atom variant of the best smoothed strength first (one more fit per
                # fold); the other strengths' only once that one passes the test.
                lp_end: list[dict[int, np.ndarray]] = [{} for _ in held]

                def score_ends(k: int) -> None:
                    end_scores[k] = 0.0
                    for (part, fitter, fits, _), le in zip(held, lp_end, strict=True):
                        share = float(wtotal - part.sum()) / wtotal
                        fit_e, _ = fitter.fit(
                            cand[k], tol(cand[k], share), fold_iter, fits[k], ends
                        )
                        le[k] = np.log(np.maximum(fitter.predict(fit_e), _TINY))
                        end_scores[k] += float(part @ le[k])

                first = max(smoothed, key=lambda k: scores[k])
                score_ends(first)
                # z of the end-atom model against the best plain one: the held-out folds'
                # score differences and variances added
                gain = sum(float(h[0] @ (le[first] - h[3][best])) for h, le in zip(held, lp_end))
                var = sum(_se(h[0], le[first], h[3][best]) ** 2 for h, le in zip(held, lp_end))
                end_z = gain / math.sqrt(var) if var > 0 else (math.inf if gain > 0 else 0.0)
                admitted = end_z > _END_Z
                if admitted:
                    for k in smoothed:
                        if k != first:
                            score_ends(k)
            pool = np.concatenate([scores, end_scores if admitted else np.full(nc, -np.inf)])
            pool = np.where(np.isnan(pool), -np.inf, pool)
            top = int(np.argmax(pool))
            both = weigh(pool)
            weights, bud_weights, end_weights = both[:nc], both[nc:nu], both[nu:]
        else:
            top = min(range(nc), key=lambda k: abs(cand[k] - 0.5))
            weights = np.zeros(nc)
            weights[top] = 1.0
            bud_weights, end_weights = np.zeros(len(bud)), np.zeros(nc)
        # Final fits, strongest first (a plain fit before its end-atom variant). Plain EM
        # starts from the uniform distribution, as SW20's EM does (its early stop is what
        # regularizes it; a warm start would run it further); a smoothed fit starts from the
        # previous, stronger one, which it reaches from the uniform start anyway, in fewer
        # iterations. Alone, strength 0 is thus exactly SW + EM and 0.5 SW + EMS (to the
        # stopping error: the final smoothed fits use SQUAREM, see _Fitter.fit).
        # The budget candidates continue the best smoothed strength's final fit.
        fitter = make(wcounts)
        # the budgets' start: the final fit of the best-scoring smoothed strength
        sstart = smin
        scored = [k for k in range(nc) if cand[k] > 0 and np.isfinite(scores[k])]
        if scored:
            sstart = cand[max(scored, key=lambda k: scores[k])]
        em_cache: dict[int, tuple[np.ndarray, int]] = {}  # plain EM: same fit in any order

        def final(
            w: np.ndarray, w_bud: np.ndarray, w_end: np.ndarray
        ) -> tuple[np.ndarray, int, np.ndarray]:
            """Return the weighted average of the final fits and their iterations.

            Also the end-atom variants' own weighted average (zeros without them).
            """
            out, out_end, its = np.zeros(d), np.zeros(d), 0
            previous: np.ndarray | None = None
            last_plain: np.ndarray | None = None  # the last smoothed fit without end atoms
            start_fit: np.ndarray | None = None  # the final fit of strength sstart
            jobs = [(k, False) for k in np.flatnonzero(w).tolist()]
            jobs += [(k, True) for k in np.flatnonzero(w_end).tolist()]
            for k, at_ends in sorted(jobs, key=lambda job: (-cand[job[0]], job[1])):
                if cand[k] == 0 and k in em_cache:
                    fit, it = em_cache[k][0], 0  # already run (and counted)
                else:
                    start = previous if cand[k] > 0 else None
                    mask = ends if at_ends else None
                    fit, it = fitter.fit(
                        cand[k], tol(cand[k], 1.0), max_iter, start, mask, accelerate=True
                    )
                    if cand[k] == 0:
                        em_cache[k] = (fit, it)
                out += (w_end[k] if at_ends else w[k]) * fit
                if at_ends:
                    out_end += w_end[k] * fit
                elif cand[k] > 0:
                    last_plain = fit
                    if cand[k] == sstart:
                        start_fit = fit
                its += it
                previous = fit
            if w_bud.any():
                if start_fit is None:
                    start_fit, it = fitter.fit(
                        sstart or 0.0,
                        tol(sstart or 0.0, 1.0),
                        max_iter,
                        last_plain,
                        accelerate=True,
                    )
                    its += it
                on, done = start_fit, 0
                for j in np.flatnonzero(w_bud).tolist():  # shortest first
                    on, it = fitter.fit(0.0, 0.0, bud[j] - done, on)
                    done = bud[j]
                    out += w_bud[j] * on
                    its += it
            return out, its, out_end

        theta, iterations, theta_end = final(weights, bud_weights, end_weights)
        if admitted and 0.0 in cand:
            # Plain EM, run to its own stop on all reports, may have gathered the end masses
            # by itself (at large eps or n it does, and then its sharper interior wins): keep
            # the end atoms only if it holds less than _END_RESOLVED of what they hold.
            k0 = cand.index(0.0)
            if k0 not in em_cache:
                em_cache[k0] = fitter.fit(0.0, tol(0.0, 1.0), max_iter, None)
                iterations += em_cache[k0][1]
            em_fit = em_cache[k0][0]
            held_ends = float(theta_end[0] + theta_end[-1]) / float(end_weights.sum())
            if float(em_fit[0] + em_fit[-1]) >= _END_RESOLVED * held_ends:
                admitted = False
                pool = np.where(np.isfinite(scores), scores, -np.inf)
                top = int(np.argmax(pool))
                both = weigh(pool)
                weights, bud_weights = both[:nc], both[nc:]
                end_weights = np.zeros(nc)
                theta, its, _ = final(weights, bud_weights, end_weights)
                iterations += its
        sharpening = _SHARPEN if self.epsilon < _SHARPEN_MAX_EPS else _SHARPEN_AT_HIGH_EPS
        if sharpen and nc <= top < nu and sharpening > 1:
            # The held-out likelihood chose early-stopped plain EM (a budget): the data have
            # heaps. Continue it as far again: the CDF at the heaps' edges (the KS) gains
            # more than the density between them loses (see _SHARPEN).
            theta, it = fitter.fit(0.0, 0.0, round((sharpening - 1) * bud[top - nc]), theta)
            iterations += it
        atoms = 0
        if interior_atoms and _leaf_reports(self):
            # The HH leaf counts measure bucket masses directly (no within-bucket model):
            # they decide where each peak's mass sits.
            theta, atoms = _place_atoms(
                theta,
                _hybrid_model(self),
                np.asarray(stats.hh_counts, dtype=np.float64),
            )
        elif interior_atoms and _ATOM_MIN_EPS <= self.epsilon:
            sharp, it = fitter.fit(0.0, 0.0, _ATOM_SHARP_ITER, theta)
            iterations += it
            theta, atoms = _snap_atoms(theta, sharp)
        if _EMPTY_Z is not None and self.epsilon >= _EMPTY_MIN_EPS:
            sw_counts = counts[: np.asarray(stats.counts).size]
            theta = _trim_empty(theta, self._outputs_by_inputs(), sw_counts, _EMPTY_Z)
        if (
            _END_REFIT_NATS is not None
            and self.epsilon >= _END_REFIT_MIN_EPS
            and _leaf_reports(self)
        ):
            theta = _refit_end_windows(
                theta,
                _hybrid_model(self),
                np.asarray(stats.hh_counts, dtype=np.float64),
                np.asarray(stats.level_n, dtype=np.float64)[1:] if _HH_EXACT_REFIT else None,
            )
        dist = Distribution(theta, self.low, self.high, n=stats.n, spec=self)
        if not return_info:
            return dist
        # the top candidate: a strength, a budget (strength 0.0) or an end-atom variant
        budget = bud[top - nc] if nc <= top < nu else None
        strength = cand[top] if top < nc else (0.0 if budget is not None else cand[top - nu])
        plain_scores, bud_scores = scores[:nc].copy(), scores[nc:].copy()
        for arr in (plain_scores, weights, end_scores, end_weights, bud_scores, bud_weights):
            arr.flags.writeable = False
        return dist, AutoInfo(
            strengths=cand,
            scores=plain_scores,
            weights=weights,
            strength=strength,
            folds=folds,
            cross_validate=bool(cross_validate),
            iterations=iterations,
            end_scores=end_scores,
            end_weights=end_weights,
            end_z=end_z,
            end_atoms=admitted,
            budgets=bud,
            budget_scores=bud_scores,
            budget_weights=bud_weights,
            budget=budget,
            atoms=atoms,
        )


def _se(part: np.ndarray, lp_a: np.ndarray, lp_b: np.ndarray) -> float:
    """Return the standard error of the held-out score difference of two fits.

    The difference is ``sum_y log P_a(y) - log P_b(y)`` over the fold's reports (``part``:
    their histogram); the error comes from the reports' own spread.
    """
    size = float(part.sum())
    if size == 0:
        return 0.0
    diff = lp_a - lp_b
    mean = float(part @ diff) / size
    return math.sqrt(float(part @ (diff - mean) ** 2))


def _leaf_reports(spec: AutoDistribution) -> bool:
    """Return whether some HH users of ``spec`` report at the leaves (single buckets)."""
    if not spec.hybrid:
        return False
    h = spec.tree.height
    return hh_top_level(h) == h


def _snap_atoms(theta: np.ndarray, sharp: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Move the mass of each interior peak of ``theta`` into one bucket.

    Returns the new theta and the number of such peaks.

    A point mass at a fraction f of bucket i's width is a mixture of the uniform-in-bucket
    columns of the buckets whose centres enclose it, so even EM run to its stop splits it
    between i - 1 and i (f < 1/2; or i and i + 1) in the ratio 1/2 - f : 1/2 + f (measured
    on Square Wave reports of one value at eps 4, n = 1e5: f = 0.12 -> 0.42 / 0.57), and
    the CDF at the edge between them is off by up to half of the mass. The heavier bucket
    of the split is the one holding the atom, so the peak's excess over the local level
    goes there: the likelihood of the reports prefers the split (the model is uniform
    within a bucket), the CDF at the bucket edges prefers the atom, which is why this is a
    fixed rule (chosen on a tuning set of data sets and mixtures) and not a held-out candidate. Peaks: runs
    of buckets above :data:`_ATOM_RATIO` times the median of their +-:data:`_ATOM_HALF`
    neighbours and :data:`_ATOM_EXCESS` / d above it, grown downhill over neighbours still
    above that ratio; the peaks are found on ``sharp`` (default ``theta``), the mass moved
    is ``theta``'s, into the bucket of the centroid of ``sharp``'s excess; the two end
    buckets are left to the end atoms.
    """
    if sharp is None:
        sharp = theta
    found = _peak_runs(sharp, _ATOM_RATIO, _ATOM_EXCESS)
    if found is None:
        return theta, 0
    med, edges = found
    out = theta.copy()
    for lo, hi in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True):
        seg = theta[lo:hi]
        base = np.minimum(seg, med[lo:hi])
        out[lo:hi] = base
        excess = float((seg - base).sum())
        sseg = sharp[lo:hi]
        sex = sseg - np.minimum(sseg, med[lo:hi])
        # the atom's position: the centroid of the run's excess (bucket j's centre at
        # j + 1/2; a split between two centres puts it where the atom lies); its bucket
        # takes the whole excess
        pos = float(sex @ (np.arange(lo, hi) + 0.5)) / float(sex.sum()) if sex.sum() > 0 else lo
        out[min(hi - 1, max(lo, int(pos)))] += excess
    return out, edges.size // 2


def _peak_runs(
    theta: np.ndarray, ratio: float, excess: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """Return the local medians and the runs of peaks of ``theta`` (None without a peak).

    A peak is a bucket above ``ratio`` times the median of its +-:data:`_ATOM_HALF`
    neighbours and ``excess`` / d above it (the two end buckets are left to the end atoms).
    Its run holds it and its neighbours still above ``ratio`` times the median, grown only
    downhill, so that two atoms a few buckets apart stay two runs. The runs are returned
    as the flat edges ``lo0, hi0, lo1, hi1, ...`` (half-open).
    """
    d = theta.size
    h = _ATOM_HALF
    if d < 2 * h + 3:
        return None
    pad = np.pad(theta, h, mode="edge")
    med = np.median(np.lib.stride_tricks.sliding_window_view(pad, 2 * h + 1), axis=1)
    above = theta > ratio * med
    peak = above & (theta - med > excess / d)
    peak[[0, d - 1]] = False
    if not peak.any():
        return None
    run = peak.copy()
    for _ in range(h):
        grow = run.copy()
        grow[1:] |= run[:-1] & above[1:] & (theta[1:] <= theta[:-1])
        grow[:-1] |= run[1:] & above[:-1] & (theta[:-1] <= theta[1:])
        grow[[0, d - 1]] = False
        if np.array_equal(grow, run):
            break
        run = grow
    edges = np.flatnonzero(np.diff(np.concatenate([[0], run.astype(np.int8), [0]])))
    return med, edges


def _place_atoms(
    theta: np.ndarray,
    model: _HybridModel,
    hh_counts: np.ndarray,
) -> tuple[np.ndarray, int]:
    """Move each peak's mass into the bucket of its run that the HH reports prefer.

    Returns the new theta and the number of runs moved.

    A point mass inside a bucket is, for the Square Wave model (uniform within a bucket),
    best fitted split between the two buckets whose centres enclose it (see
    :func:`_snap_atoms`), while the CDF at the edge between them is off by up to half of
    the mass (the KS). The HH support counts measure node masses directly, the leaves'
    the buckets' own. For each run of :func:`_peak_runs` (thresholds
    :data:`_LEAF_ATOM_RATIO`, :data:`_LEAF_ATOM_EXCESS`), the candidates are the run as
    fitted and, for each bucket j of the run, the run's excess over its local median moved
    whole into j; the one with the highest HH composite log-likelihood
    ``sum_k w_k sum_v C_v log(q_k + (p_k - q_k) a_v)`` over the nodes holding the run wins
    (the ``- N_k pi_v`` terms of the Poisson form sum to the same constant for every
    candidate, whose total mass is equal). Ties keep the run as fitted. Then the two end
    windows, as runs (see :data:`_END_WINDOW_ATOMS`). (Scoring the nodes by their exact
    variance here, as the end-bucket refit does, moved tuning cells both ways and was left
    out: METHODS.md §3, "AutoDistribution's constants".)
    """
    out = theta.copy()
    moved = 0
    found = _peak_runs(theta, _LEAF_ATOM_RATIO, _LEAF_ATOM_EXCESS)
    if found is not None:
        med, edges = found
        for lo, hi in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True):
            if hi - lo >= 2:
                moved += _place_run(
                    out, lo, hi, np.minimum(out[lo:hi], med[lo:hi]), model, hh_counts
                )
    w, d = model.window, theta.size
    if _END_WINDOW_ATOMS and w >= 2 and d >= 2 * w + 2 * _ATOM_HALF + 2:
        # The end windows as runs: EM alone fits them (no smoothing), and the Square Wave
        # reports hardly tell where inside a window its mass sits (a value clipped at an
        # end, 0 weeks worked, comes out spread over the window's buckets); the level is
        # the median of the buckets just inside the window.
        span = 2 * _ATOM_HALF + 1
        for lo, hi, inner, end in (
            (0, w, out[w : w + span], 0),
            (d - w, d, out[d - w - span : d - w], d - 1),
        ):
            level = float(np.median(inner))
            base = np.minimum(out[lo:hi], level)
            excess = float((out[lo:hi] - base).sum())
            if excess <= _LEAF_ATOM_EXCESS / d:
                continue  # no mass to gather (smooth data: the fit's noise)
            if out[end] - base[end - lo] >= _END_MAJORITY * excess:
                # the end bucket already holds most of the window's excess: a value clipped
                # at the end of the domain, whose spill EM alone cannot pull back, unless
                # the leaf counts clearly say the mass is spread over the window (a steep
                # density against the end, see _END_VETO_NATS)
                atom = out.copy()
                atom[lo:hi] = base
                atom[end] += excess
                veto = _hh_loglik(out, lo, hi, model, hh_counts) - _hh_loglik(
                    atom, lo, hi, model, hh_counts
                )
                if veto <= _END_VETO_NATS:
                    out[:] = atom
                    moved += 1
                    continue
            moved += _place_run(out, lo, hi, base, model, hh_counts)
    return out, moved


def _place_run(
    out: np.ndarray,
    lo: int,
    hi: int,
    base: np.ndarray,
    model: _HybridModel,
    hh_counts: np.ndarray,
) -> int:
    """Move the excess of ``out[lo:hi]`` over ``base`` into the bucket the HH reports prefer.

    In place; returns 1 if moved, else 0 (the run as fitted wins, ties included). The
    composite log-likelihood is :func:`_place_atoms`'.
    """
    d = out.size
    excess = float((out[lo:hi] - base).sum())
    if excess <= 0:
        return 0
    flat = out.copy()
    flat[lo:hi] = base
    fitted = np.zeros(hi - lo + 1)  # [0]: the run as fitted, [1 + j]: all at lo + j
    for starts, ends, terms in _node_terms(model, hh_counts, None, lo, hi, d):
        a_fit = _node_mass(out, starts, ends)
        a_flat = _node_mass(flat, starts, ends)
        ll_flat = terms(a_flat)
        fitted[0] += float(terms(a_fit).sum())
        # bucket j's node gains the excess; the others keep their flat masses
        node_of = np.searchsorted(ends, np.arange(lo, hi), side="right")
        gained = np.zeros((hi - lo, a_flat.size))
        gained[:] = a_flat
        gained[np.arange(hi - lo), node_of] += excess
        fitted[1:] += (
            float(ll_flat.sum()) + terms(gained)[np.arange(hi - lo), node_of] - (ll_flat[node_of])
        )
    best = int(np.argmax(fitted))
    if best > 0 and fitted[best] > fitted[0]:
        out[lo:hi] = base
        out[lo + best - 1] += excess
        return 1
    return 0


def _node_terms(
    model: _HybridModel,
    hh_counts: np.ndarray,
    level_n: np.ndarray | None,
    lo: int,
    hi: int,
    d: int,
) -> Iterator[tuple[np.ndarray, np.ndarray, Any]]:
    """Yield, per HH level, the nodes over buckets ``lo..hi - 1`` and their log-likelihood.

    Each item is ``(starts, ends, terms)``: the nodes' bucket spans (cut at ``d``) and a
    function of their masses ``a`` (any leading axes: one row per candidate fit) returning
    each node's term. Without ``level_n`` (the HH users per level, ``Stats.level_n[1:]``)
    the terms are the Poisson composite ``w_k C_v log(q_k + (p_k - q_k) a_v)`` of the joint
    fit (``w_k``: the level's row weight, :func:`_hybrid_model`); with it, the normal
    log-density of the support count C_v at its exact mean ``N_k (q + (p - q) a)`` and
    variance ``N_k (a p (1 - p) + (1 - a) q (1 - q))`` (:func:`_exact_terms`; see
    ``_HH_EXACT_REFIT``). Levels without users give no terms.
    """
    rows = model.matrix.shape[0]
    for k in range(model.sizes.size):
        rep = int(model.reps[k])
        nodes = np.arange(lo // rep, (hi - 1) // rep + 1)
        starts = np.minimum(nodes * rep, d)
        ends = np.minimum(starts + rep, d)
        raw = hh_counts[model.offsets[k] + nodes]
        p, q = float(model.p[k]), float(model.q[k])
        terms: Callable[[np.ndarray], Any]
        if level_n is None:
            c = raw * model.weights[rows + model.offsets[k]]
            terms = functools.partial(_poisson_terms, c=c, p=p, q=q)
        else:
            n_k = float(level_n[k])
            if n_k <= 0:
                continue
            terms = functools.partial(_exact_terms, c=raw, n_k=n_k, p=p, q=q)
        yield starts, ends, terms


def _poisson_terms(a: np.ndarray, *, c: np.ndarray, p: float, q: float) -> Any:
    """Return the Poisson composite terms ``c log(q + (p - q) a)`` (``c``: weighted counts)."""
    return c * np.log(np.maximum(q + (p - q) * a, _TINY))


def _exact_terms(a: np.ndarray, *, c: np.ndarray, n_k: float, p: float, q: float) -> Any:
    """Return the normal log-densities of support counts ``c`` of ``n_k`` users' reports.

    Mean ``n_k (q + (p - q) a)`` and variance ``n_k (a p (1 - p) + (1 - a) q (1 - q))``
    (each of the ``n_k`` reports supports a node holding its user's value with probability
    p and any other node with q, independently), up to the constant ``-log(2 pi) / 2``.
    """
    a = np.clip(a, 0.0, 1.0)
    var = np.maximum(n_k * (a * p * (1.0 - p) + (1.0 - a) * q * (1.0 - q)), _TINY)
    return -0.5 * (c - n_k * (q + (p - q) * a)) ** 2 / var - 0.5 * np.log(var)


def _hh_loglik(
    theta: np.ndarray,
    lo: int,
    hi: int,
    model: _HybridModel,
    hh_counts: np.ndarray,
    level_n: np.ndarray | None = None,
) -> float:
    """Return the HH composite log-likelihood of ``theta`` over the nodes that hold ``[lo, hi)``.

    The terms ``sum_k w_k sum_v C_v log(q_k + (p_k - q_k) a_v)`` of :func:`_place_atoms`,
    over every level's nodes that overlap the buckets ``lo..hi - 1``; two fits with the same
    mass outside ``[lo, hi)`` and the same total differ only there. With ``level_n`` (HH
    users per level) the normal terms of :func:`_exact_terms` instead (all terms kept).
    """
    total = 0.0
    for starts, ends, terms in _node_terms(model, hh_counts, level_n, lo, hi, theta.size):
        total += float(terms(_node_mass(theta, starts, ends)).sum())
    return total


def _refit_end_windows(
    theta: np.ndarray,
    model: _HybridModel,
    hh_counts: np.ndarray,
    level_n: np.ndarray | None = None,
) -> np.ndarray:
    """Return ``theta`` with each end bucket's mass refitted to the HH nodes of its window.

    The window (``round(_END_WINDOW * d)`` buckets at each end) keeps its total; the end
    bucket's mass m is the maximum of the HH composite log-likelihood
    ``sum_k w_k sum_v C_v log(q_k + (p_k - q_k) a_v)`` over the nodes of the window (the
    other buckets of the window scaled to keep the total; m on a grid of
    ``_END_REFIT_GRID + 1`` shares of the total), and replaces the fit's only when it gains
    more than ``_END_REFIT_NATS`` nats (a one-parameter fit: twice the gain is about
    chi-squared with one degree of freedom when the fit is right). The Square Wave model is
    uniform within a bucket, so its reports hardly tell a bucket at the end from its
    neighbours; the leaf counts measure the bucket's own mass (Kulkarni, Cormode,
    Srivastava 2019; FO17's support probabilities p and q). With ``level_n`` (HH users per
    level) the nodes are scored by their exact variance instead (:func:`_node_terms`).
    """
    assert _END_REFIT_NATS is not None
    d = theta.size
    w = min(max(1, round(_END_WINDOW * d)), (d - 1) // 2)
    if w < 2:
        return theta
    out = theta.copy()
    grid = np.linspace(0.0, 1.0, _END_REFIT_GRID + 1)
    for lo, end in ((0, 0), (d - w, d - 1)):
        hi = lo + w
        seg = out[lo:hi]
        total = float(seg.sum())
        rest = total - float(out[end])
        if rest <= 0.0:
            continue  # all of the window is in the end bucket: no split to refit
        # every candidate's window at once (one row per share m of the total)
        m = grid * total
        cand = seg[None, :] * ((total - m) / rest)[:, None]
        cand[:, end - lo] = m
        csum = np.concatenate([np.zeros((m.size, 1)), np.cumsum(cand, axis=1)], axis=1)
        seg_sum = np.concatenate([[0.0], np.cumsum(seg)])
        ll = np.zeros(m.size)
        start_ll = 0.0
        # the nodes of _hh_loglik: their mass outside the window is the fit's
        for starts, ends, terms in _node_terms(model, hh_counts, level_n, lo, hi, d):
            a, b = np.clip(starts, lo, hi) - lo, np.clip(ends, lo, hi) - lo
            outside = _node_mass(out, starts, ends) - (seg_sum[b] - seg_sum[a])
            nodes_mass = outside[None, :] + csum[:, b] - csum[:, a]
            ll += terms(nodes_mass).sum(axis=1)
            start_ll += float(terms(_node_mass(out, starts, ends)).sum())
        best = int(np.argmax(ll))
        if ll[best] - start_ll > _END_REFIT_NATS:
            out[lo:hi] = cand[best]
    return out


def _trim_empty(
    theta: np.ndarray, matrix: np.ndarray, sw_counts: np.ndarray, z: float = 1.0
) -> np.ndarray:
    """Return ``theta`` with the mass of its nearly empty stretches cut to what the reports hold.

    A fit constrained to non-negative masses cannot follow the reports' noise below zero
    over a stretch the data leave (almost) empty, so it leaves mass there on average (its
    bias is the positive part of the noise, summed over the stretch). For each run of at
    least :data:`_EMPTY_BLOCKS` blocks (``d / 64`` buckets each) whose masses are below
    :data:`_EMPTY_LEVEL` times the uniform block mass, the Square Wave output buckets R that
    the run's inputs favour (``mean_{i in S} M[j, i]`` above the mean over all inputs) give
    a linear, unbiased check: the fit predicts ``N sum_i theta_i P[R | i]`` reports there,
    and when that exceeds the observed count by more than ``z`` Poisson standard errors, the run's mass is scaled down (the rest scaled up) until prediction and count
    agree, never below zero.
    """
    d = theta.size
    block = max(1, d // 64)
    if d % block or sw_counts.size != matrix.shape[0]:
        return theta
    nb = d // block
    low = theta.reshape(nb, block).sum(axis=1) < _EMPTY_LEVEL * block / d
    edges = np.flatnonzero(np.diff(np.concatenate([[0], low.astype(np.int8), [0]])))
    out = theta.copy()
    n = float(sw_counts.sum())
    mean_all = matrix.mean(axis=1)
    for a, b in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True):
        if b - a < _EMPTY_BLOCKS:
            continue
        lo, hi = a * block, b * block
        rows = matrix[:, lo:hi].mean(axis=1) > mean_all
        c = matrix[rows].sum(axis=0)  # P[output in R | input bucket i]
        inside = np.zeros(d, dtype=np.bool_)
        inside[lo:hi] = True
        m_in = float(out[inside].sum())
        if m_in <= 0.0 or m_in >= 1.0:
            continue
        c_in = float(out[inside] @ c[inside]) / m_in
        c_out = float(out[~inside] @ c[~inside]) / (1.0 - m_in)
        observed = float(sw_counts[rows].sum())
        gap = n * float(out @ c) - observed
        if c_in <= c_out or gap <= z * math.sqrt(max(observed, 1.0)):
            continue
        cut = min(m_in, gap / (n * (c_in - c_out)))
        out[inside] *= (m_in - cut) / m_in
        out[~inside] *= (1.0 - m_in + cut) / (1.0 - m_in)
    return out


def _node_mass(theta: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Return the mass of ``theta`` in each bucket range ``[starts, ends)``."""
    prefix = np.concatenate([[0.0], np.cumsum(theta[: int(ends[-1])])])
    return prefix[ends] - prefix[starts]


def _check_strengths(strengths: Any) -> tuple[float, ...]:
    if isinstance(strengths, (str, bytes)) or not hasattr(strengths, "__iter__"):
        raise TypeError(f"strengths must be a sequence of numbers >= 0, got {strengths!r}")
    # above ~d^2 squared buckets every strength is the flat fit; 1e6 bounds the passes
    out = tuple(check_real(s, "strengths", low=0.0, high=1e6) for s in strengths)
    if not out:
        raise ValueError("strengths must hold at least one number >= 0, got an empty sequence")
    return out


def _check_budgets(budgets: Any) -> tuple[int, ...]:
    if isinstance(budgets, (str, bytes)) or not hasattr(budgets, "__iter__"):
        raise TypeError(f"budgets must be a sequence of integers >= 1, got {budgets!r}")
    return tuple(check_integer(b, "budgets", low=1, high=10_000_000) for b in budgets)
