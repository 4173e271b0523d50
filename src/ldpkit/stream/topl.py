"""ToPL: continuous release of a numerical stream under local DP (STR21 §5).

Threshold phase: the first m users report ``log(1 + v / s)`` (``s = B / d``; the paper:
``v / B``) with Square Wave; the server estimates their distribution by EM (or EMS), cuts its
spurious upper tail, maps it to ``f`` on d = 1024 equal buckets of ``[0, B]`` and picks the
clipping threshold ``theta`` that minimizes the expected squared error of a random range
query. Perturbation
phase: every later user clips its value to ``[0, theta]`` and reports it with the Hybrid
Mechanism on ``[0, theta]``; each report is an unbiased estimate of the clipped value, and a
range sum is the sum of those. The two phases hold disjoint users, so each user spends the
full epsilon once (event-level epsilon-LDP).

The threshold phase (objective, tail cut and continuation, log scale, estimator) is
documented and implemented in :mod:`ldpkit.stream.threshold`, which holds every threshold
selection of the stream family; its public names are re-exported here.

The perturber is the real HM: PM with probability ``1 - e^(-eps/2)`` when eps > 0.61, else
SR (the authors' code switches from SR to PM alone at 1.29 and its PM estimate is biased —
a loop variable overwrites the domain's lower bound; ldpkit does neither).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from .._rng import RNGLike
from .._validation import (
    check_bound,
    check_integer,
    check_real,
)
from ..numeric.distribution import Distribution
from ..numeric.mean import HybridMechanism, hybrid_worst_case_variance
from ..numeric.square_wave import SquareWave
from ..spec import Mechanism, Reports, Stats
from ._local import LocalStreamRelease
from .local_baselines import square_wave_mean_constants
from .threshold import (  # threshold selection, re-exported: its one home
    AUTHORS_TAIL_FLOOR,
    EM_METHODS,
    LOG_BUCKETS,
    LOG_CUT_QUANTILE,
    LOG_TAIL_QUANTILE,
    LOG_TEST_REACH,
    OBJECTIVES,
    TAIL_CUTS,
    TAIL_EVIDENCE,
    TAIL_EXTENSIONS,
    TAIL_QUANTILE,
    THRESHOLD_SCALES,
    ThresholdObjective,
    choose_topl_threshold,
    cut_tail,
    extend_tail,
    heldout_tail_test,
    square_wave_detection_floor,
    topl_threshold_objective,
)
from .threshold import TAIL_Z as TAIL_Z  # re-exported, unused here
from .threshold import TailTest as TailTest  # re-exported, unused here

__all__ = ["ToPL"]  # the threshold names above stay importable from here


class ToPL(LocalStreamRelease):
    """Threshold-Perturber continuous release of a numerical stream under local DP (STR21 §5).

    Users hold values in ``[0, bound]`` and arrive in order. The first ``threshold_size``
    users report with Square Wave (:meth:`client_spec` ``("threshold")``; on
    ``log(1 + v / s)`` by default); from their reports the server estimates the value
    distribution (EM, mapped to ``buckets`` equal buckets of ``[0, bound]``), cuts
    its spurious upper tail (:func:`cut_tail`), continues the real one (:func:`extend_tail`)
    and chooses ``theta`` (:func:`choose_topl_threshold`). Every later user clips its value to
    ``[0, theta]`` and reports with the Hybrid Mechanism on ``[0, theta]``
    (:meth:`client_spec` ``("perturb")``); its report ``x = (y + 1) theta / 2`` is an
    unbiased estimate of the clipped value. Range sums over released users are sums of
    those estimates.

    Parameters
    ----------
    epsilon : float
        Every user's budget (each user reports once, in one of the two phases).
    bound : float
        Public upper bound ``B`` of the values.
    threshold_size : int, optional
        ``m``, users spent on the threshold (default ``length // 16``, the authors' ratio:
        65,536 for their ``length = 2^20``; 0 with a fixed ``threshold``). Choose it from
        the traffic you expect: the first m users only choose theta, so with m larger than
        a day's users no user of the first day is released.
    length : int
        ``n``, the expected number of released users (authors: 2^20); it sets the balance
        of noise and bias in the objective. The stream may run longer.
    buckets : int
        ``d``, the number of candidates ``k B / d`` and of the equal buckets the objective
        uses (default 1024); also Square Wave's buckets with ``threshold_scale="linear"``
        (the log scale estimates on :data:`LOG_BUCKETS` and uses ``s = B / d``).
    method : {"em", "ems"}
        Distribution estimator of the threshold phase (plain EM by default; see the module
        notes for why not EMS).
    objective : {"corrected", "authors"}
        The threshold objective; ``"authors"`` over-weights the noise 16x as their code.
    tail_cut : {"tested", "detection", "authors", "none"}
        Post-processing of the estimated distribution before theta is chosen
        (:func:`cut_tail`): the detection floor :func:`square_wave_detection_floor`
        unless :func:`heldout_tail_test` finds a truncation of the raw estimate with a
        held-out likelihood ratio above :data:`TAIL_EVIDENCE` (then that truncation; on the
        log scale the shortest plausible one, at most :data:`LOG_TEST_REACH` buckets past
        the cut; default), the detection floor alone, the authors' fixed floor 1e-4, or no cut.
    tail_extension : {"exponential", "none"}
        After a cut (any ``tail_cut`` but ``"none"``): continue the cut estimate above its
        last bucket with the exponential tail fitted to its top 10% (:func:`extend_tail`,
        default), or leave it cut (the former default; theta then
        lands below the best threshold on POS and DNS at eps >= 2).
    threshold_scale : {"log", "linear"}
        How threshold-phase users report (default ``"log"``): Square Wave on
        ``log(1 + v / s)``, ``s = bound / buckets`` (``SquareWave(log_scale=s)``, estimated
        on :data:`LOG_BUCKETS` buckets and mapped back to the d linear buckets), or on
        ``v`` itself (``"linear"``, the paper's and the former default; it cannot resolve a
        bulk that sits in a few of the d buckets, as retail's at eps <= 1). Both are eps-LDP; see the module notes.
    threshold : float, optional
        A fixed public threshold in ``(0, bound]``: skips the threshold phase.
    block_size : int
        ``g`` users per stored block (default 1: exact per-user prefix sums, 8 bytes per
        user; see :mod:`ldpkit.stream._local` for the memory/accuracy trade-off).
    rng : Generator, int, SeedSequence or None
        Randomness of the *simulated* clients (:meth:`update`, :meth:`extend`); the
        server itself draws nothing. Kept and serialized for the life of the stream.

    Notes
    -----
    *Privacy*: Square Wave and HM are epsilon-LDP; a user reports once; the threshold is
    post-processing of phase-1 reports and public to phase-2 clients.

    *Answers*: ``range_sum(i, j)`` over released positions (0 = first user after the m
    threshold users) is unbiased for the sum of the **clipped** values ``min(v, theta)``;
    clipping bias is what the threshold trades against noise.

    *Standard errors*: ``sqrt((j - i) (theta/2)^2 Var)`` with Var HM's per-user variance
    on [-1, 1]. For eps > 0.61 HM's variance does not depend on the value (the t^2 terms of
    PM and SR cancel, see :func:`ldpkit.numeric.hybrid_variance`), so this is exact. For
    eps <= 0.61 HM is SR, whose variance ``C^2 - t^2`` depends on the unknown value and
    cannot be estimated from +-C reports; we use the worst case ``C^2`` (t = 0), which
    overstates the variance by at most ``C^2 / (C^2 - 1)`` (< 10% at eps = 0.61).

    *Throughput*: ingesting is a validation pass and a running sum over the batch
    (numpy, no per-user Python), well above 1e6 reports/s (``benchmarks/stream.py``).

    References
    ----------
    T. Wang, J. Q. Chen, Z. Zhang, D. Su, Y. Cheng, Z. Li, N. Li, S. Jha. Continuous
    Release of Data Streams under both Centralized and Local Differential Privacy.
    CCS 2021, §5 and Appendix E (eq. 14).
    Z. Li et al. Estimating Numerical Distributions under Local Differential Privacy.
    SIGMOD 2020 (Square Wave, EMS). T. Wang et al. Collecting and Analyzing
    Multidimensional Data with Local Differential Privacy. ICDE 2019 (PM, HM).

    Examples
    --------
    The server hands specs to clients and ingests their reports:

    >>> from ldpkit.stream import client_randomize
    >>> values = np.random.default_rng(1).poisson(5.0, 60_000).clip(0, 30).astype(float)
    >>> topl = ToPL(epsilon=2.0, bound=30, threshold_size=10_000, length=50_000, buckets=256)
    >>> device = np.random.default_rng(0)
    >>> _ = topl.ingest(client_randomize(topl.client_spec(), values[:10_000], rng=device))
    >>> topl.phase, round(topl.threshold, 2)
    ('perturb', 11.84)
    >>> _ = topl.ingest(client_randomize(topl.client_spec(), values[10_000:], rng=device))
    >>> est, se = topl.range_sum(0, 50_000)
    >>> clipped = np.minimum(values[10_000:], topl.threshold).sum()
    >>> bool(abs(est - clipped) < 6 * se)
    True
    """

    def __init__(
        self,
        epsilon: float,
        bound: float,
        *,
        threshold_size: int | None = None,
        length: int = 2**20,
        buckets: int = 1024,
        method: Literal["ems", "em"] = "em",
        objective: Literal["corrected", "authors"] = "corrected",
        tail_cut: Literal["tested", "detection", "authors", "none"] = "tested",
        tail_extension: Literal["exponential", "none"] = "exponential",
        threshold_scale: Literal["log", "linear"] = "log",
        threshold: float | None = None,
        block_size: int = 1,
        rng: RNGLike = None,
    ) -> None:
        self.length = check_integer(length, "length", low=1)
        self.buckets = check_integer(buckets, "buckets", low=2)
        if method not in EM_METHODS:
            raise ValueError(f"method must be one of {EM_METHODS}, got {method!r}")
        self.method = method
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        self.objective = objective
        if tail_cut not in TAIL_CUTS:
            raise ValueError(f"tail_cut must be one of {TAIL_CUTS}, got {tail_cut!r}")
        self.tail_cut = tail_cut
        if tail_extension not in TAIL_EXTENSIONS:
            raise ValueError(
                f"tail_extension must be one of {TAIL_EXTENSIONS}, got {tail_extension!r}"
            )
        self.tail_extension = tail_extension
        if threshold_scale not in THRESHOLD_SCALES:
            raise ValueError(
                f"threshold_scale must be one of {THRESHOLD_SCALES}, got {threshold_scale!r}"
            )
        self.threshold_scale = threshold_scale
        bound = check_bound(bound)
        if threshold is None:
            m = (
                max(1, self.length // 16)
                if threshold_size is None
                else check_integer(threshold_size, "threshold_size", low=1)
            )
        else:
            threshold = check_real(threshold, "threshold", low=0.0, high=bound, low_inclusive=False)
            m = (
                0
                if threshold_size is None
                else check_integer(
                    threshold_size, "threshold_size (with a fixed threshold)", low=0, high=0
                )
            )
        self._fixed_threshold = threshold
        super().__init__(epsilon, bound, threshold_size=m, block_size=block_size, rng=rng)
        if threshold_scale == "log":
            self._sw = SquareWave(
                epsilon=self.epsilon,
                low=0.0,
                high=self.bound,
                buckets=LOG_BUCKETS,
                log_scale=self.bound / self.buckets,
            )
        else:
            self._sw = SquareWave(
                epsilon=self.epsilon, low=0.0, high=self.bound, buckets=self.buckets
            )
        self._counts = np.zeros(self._sw.n_output_buckets, dtype=np.int64)
        self._count = 0
        self._probabilities: np.ndarray | None = None
        if threshold is not None:
            self._set_threshold(threshold)

    # ------------------------------------------------------------------ specs
    def client_spec(self, phase: str | None = None) -> Mechanism:
        """Return the spec users of ``phase`` randomize with (default: the current phase).

        ``"threshold"``: ``SquareWave(epsilon, low=0, high=B, buckets=LOG_BUCKETS,
        log_scale=B / d)`` (default; the spec maps the value to ``log(1 + v / s)`` on the
        device) or ``SquareWave(epsilon, low=0, high=B, buckets=d)`` with
        ``threshold_scale="linear"``; the client passes the raw value either way. ``"perturb"``: ``HybridMechanism(epsilon, low=0, high=theta)``, the
        value is clipped to ``[0, theta]`` first (:func:`ldpkit.stream.client_randomize`).
        """
        phase = self.phase if phase is None else phase
        if phase == "threshold":
            return self._sw
        if phase == "perturb":
            if self._spec is None:
                raise ValueError(
                    f"the perturbation spec is known once the threshold is chosen, after "
                    f"{self._m} threshold reports; {self._count} arrived so far"
                )
            return self._spec
        raise ValueError(f"phase must be one of 'threshold', 'perturb', got {phase!r}")

    def _perturb_spec(self, threshold: float) -> Mechanism:
        return HybridMechanism(epsilon=self.epsilon, low=0.0, high=threshold)

    @property
    def per_user_variance(self) -> float | None:
        """``(theta/2)^2`` times HM's worst-case per-user variance on [-1, 1] (eq. 14)."""
        if self._threshold is None:
            return None
        return (self._threshold / 2.0) ** 2 * hybrid_worst_case_variance(self.epsilon)

    # ------------------------------------------------------------------ threshold phase
    def _threshold_estimates(self, reports: Reports) -> np.ndarray:
        """Return unbiased per-user estimates ``(y - a) / c`` from Square Wave reports.

        In the original units (:func:`ldpkit.stream.square_wave_mean_constants`).
        """
        if self._sw.log_scale is not None:  # exact per-cell estimates of the value
            return self._sw.value_estimates()[0][self._sw.report_cells_of(reports)]
        a, c, _ = square_wave_mean_constants(self._sw)
        y = np.asarray(reports.values, dtype=np.float64)
        return (y - a * self.bound) / c

    @property
    def threshold_per_user_variance(self) -> float:
        """The worst-case variance of one threshold-phase user's estimate.

        ``B^2 v*`` (linear scale) or :meth:`ldpkit.numeric.SquareWave.value_estimates`'s
        (log scale).
        """
        if self._sw.log_scale is not None:
            return self._sw.value_estimates()[1]
        return self.bound**2 * square_wave_mean_constants(self._sw)[2]

    def _threshold_count(self) -> int:
        return self._count

    def _ingest_threshold_phase(self, data: Reports | Stats) -> None:
        remaining = self._m - self._count
        if isinstance(data, Stats):
            stats = self._sw.check_stats(data)
            n, counts = stats.n, np.asarray(stats.counts, dtype=np.int64)
        elif isinstance(data, Reports):
            if data.spec != self._sw:
                raise ValueError(
                    f"reports must come from the threshold phase's {self._sw!r} (fingerprint "
                    f"{self._sw.fingerprint}), got reports from {data.spec!r}"
                )
            idx = self._sw.bucket_index(data)
            n, counts = idx.size, np.bincount(idx, minlength=self._counts.size)
        else:
            raise TypeError(f"reports must be ldpkit.Reports or Stats, got {type(data).__name__}")
        if n > remaining:
            raise ValueError(
                f"reports must hold at most the {remaining} threshold-phase reports still "
                f"expected (of m = {self._m}), got {n}; later users report with "
                f"client_spec('perturb') once the threshold is set"
            )
        self._counts += counts
        self._count += n
        self._n_seen += n
        if self._count == self._m:
            self._set_threshold(self._select_threshold(self._counts, self._rng))

    def _estimate_distribution(self, counts: np.ndarray) -> Distribution:
        stats = Stats(self._sw, int(counts.sum()), counts=counts)
        dist: Distribution = self._sw.estimate(stats, method=self.method)
        return dist

    def _select_threshold(self, items: np.ndarray, rng: np.random.Generator) -> float:
        """Select theta from the phase-1 output histogram ``items`` (post-processing)."""
        f = self._estimate_distribution(items).probabilities
        log_scale = self._sw.log_scale is not None
        if self.tail_cut == "tested":
            start = LOG_CUT_QUANTILE if log_scale else None
            test = heldout_tail_test(self._sw, items, method=self.method, start=start)
            # the floor cut, unless the held-out reports give strong evidence for a longer
            # tail: then the best truncation (linear scale) or the shortest one they do not
            # strongly reject (log scale, where a spurious clump lies at huge values)
            keep = test.plausible if log_scale else test.keep
            floor = square_wave_detection_floor(self.epsilon, int(items.sum()))
            g = cut_tail(f, floor, start=start)
            last = int(np.flatnonzero(g)[-1]) + 1
            if log_scale:  # a real tail adjoins the cut; EM's spurious clumps lie far above it
                keep = min(keep, last + LOG_TEST_REACH)
            if test.log_ratio > math.log(TAIL_EVIDENCE) and keep > last:
                f = np.where(np.arange(f.size) < keep, f, 0.0)
                f = f / f.sum()
            else:
                f = g
        elif self.tail_cut == "detection":
            floor = square_wave_detection_floor(self.epsilon, int(items.sum()))
            f = cut_tail(f, floor, start=LOG_CUT_QUANTILE if log_scale else None)
        elif self.tail_cut == "authors":
            f = cut_tail(f, AUTHORS_TAIL_FLOOR, start=LOG_CUT_QUANTILE if log_scale else None)
        if log_scale:  # ToPL's candidates and objective live on d equal buckets of [0, B]
            f = self._sw.linear_histogram(f, self.buckets)
            f = f / f.sum()
        if self.tail_extension == "exponential" and self.tail_cut != "none":
            # the cut also zeroed the real thin tail above it: continue it (POT, shape 0)
            f = extend_tail(f, quantile=LOG_TAIL_QUANTILE if log_scale else TAIL_QUANTILE)
        self._probabilities = f.copy()
        return choose_topl_threshold(
            self._probabilities, self.bound, self.epsilon, self.length, objective=self.objective
        )

    @property
    def threshold_counts(self) -> Stats:
        """The threshold phase's aggregated Square Wave reports (mergeable Stats)."""
        return Stats(self._sw, self._count, counts=self._counts.copy())

    @property
    def threshold_distribution(self) -> Distribution | None:
        """The estimated value distribution theta was chosen from, after the tail cut.

        None with a fixed theta or before the threshold phase is complete.
        """
        if self._probabilities is None:
            return None
        return Distribution(self._probabilities, 0.0, self.bound)

    @property
    def threshold_objective(self) -> ThresholdObjective | None:
        """The objective theta minimized (None when there is no estimated distribution)."""
        if self._probabilities is None:
            return None
        return topl_threshold_objective(
            self._probabilities, self.bound, self.epsilon, self.length, objective=self.objective
        )

    # ------------------------------------------------------------------ perturbation phase
    def _estimates(self, reports: Reports) -> np.ndarray:
        spec = self._spec
        assert isinstance(spec, HybridMechanism)
        spec._unit_reports(reports)  # validates the range of every report
        # reports are already (y + 1) theta / 2: the unbiased estimate in original units
        return np.asarray(reports.values, dtype=np.float64)

    # ------------------------------------------------------------------ state
    def _state(self) -> dict[str, Any]:
        out = {
            "threshold_counts": self._counts.copy(),
            "threshold_n": int(self._count),
            "probabilities": np.zeros(0)
            if self._probabilities is None
            else self._probabilities.copy(),
        }
        if self._threshold is not None:
            out.update(self._store_state())
        return out

    def _load_state(self, state: dict[str, Any]) -> None:
        counts = np.asarray(state["threshold_counts"], dtype=np.int64).reshape(-1)
        if counts.shape != self._counts.shape:
            raise ValueError(
                f"state threshold_counts must have {self._counts.size} buckets, got {counts.size}"
            )
        self._counts = counts.copy()
        self._count = int(state["threshold_n"])
        probs = np.asarray(state["probabilities"], dtype=np.float64).reshape(-1)
        self._probabilities = probs.copy() if probs.size else None
        if self._threshold is not None:
            self._load_store(state)
