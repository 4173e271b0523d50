"""Hierarchy-based numerical distributions (SW20 sections 4.2-4.3, Appendix B).

Three competitors of the Square Wave, all built on a tree over ``d`` equal buckets of
[low, high]:

* :class:`HierarchicalHistogram` (HH, Kulkarni et al.): a B-ary tree; every user reports
  the node holding her value at one random level through a frequency oracle with the full
  budget; the server estimates every level, then makes the tree consistent by
  constrained inference (Hay et al. 2010).
* :class:`HHADMM` (SW20 section 4.3): the same reports, post-processed by ADMM into the
  closest tree (least squares) that is consistent, non-negative and sums to 1 per level.
* :class:`HaarHRR` (Kulkarni et al.): a binary tree; every user reports one Haar
  coefficient of her one-hot bucket vector at one random level through Hadamard randomized
  response; the server inverts the Haar transform.

Tree layout used throughout: ``levels[k]`` holds the ``B^k`` nodes at depth k (``levels[0]``
is the root, ``levels[h]`` the leaves); the children of node i at depth k are nodes
``i B .. i B + B - 1`` at depth k + 1, so leaf j lies under node ``j // B^(h - k)``.
When ``buckets`` is not a power of B the tree is padded: it has ``B^h`` leaves,
``h = ceil(log_B buckets)``, of which the first ``buckets`` are the equal buckets of
[low, high] and the rest are never reported (their true frequency is 0).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from .._exact import RR_MAX_EPSILON
from .._postprocess import (  # re-exported: shared with consistency and the numeric family
    POSTPROCESSINGS,  # noqa: F401 (re-exported)
    isotonic_regression,
    leaves_to_probabilities,
    simplex_projection,
)
from .._rng import RNGLike, as_generator
from .._validation import (
    check_array,
    check_integer,
    check_not_masked,
    check_numeric_values,
    check_real,
    check_sequence,
)
from ..frequency import FrequencyOracle
from ..frequency._base import index_dtype
from ..frequency.hadamard import (
    _check_signs,
    _coin_loss,
    _keep_flip,
    fwht,
    hadamard_sign,
    hrr_perturb_signs,
)
from ..spec import Mechanism, Reports, Stats, StatsField
from .binning import cfo_oracle, check_oracle_name
from .distribution import Distribution, bucket_index, check_bounds
from .haar import haar_transform, inverse_haar_transform  # re-exported: one Haar home

__all__ = [
    "HierarchicalHistogram",
    "HHADMM",
    "HaarHRR",
    "ADMMInfo",
    "constrained_inference",
    "hh_admm",
    "tree_consistency_error",
    "haar_transform",
    "inverse_haar_transform",
    "isotonic_regression",
    "leaves_to_probabilities",
]

#: Largest number of leaves of a (padded) tree.
MAX_LEAVES = 1 << 24

#: Largest number of leaves of an HHADMM tree: its estimate runs up to 500 ADMM iterations
#: over every node (~4 s of CPU at 2^16 leaves).
MAX_ADMM_LEAVES = 1 << 16

#: Oracles whose reports are 1-D arrays (one scalar per field and user), so that users of
#: different levels can share one Reports object; with their report fields.
_REPORT_FIELDS: dict[str, tuple[str, ...]] = {
    "GRR": ("values",),
    "BLH": ("seeds", "values"),
    "OLH": ("seeds", "values"),
    "HadamardResponse": ("values",),
    "HRR": ("values", "signs"),
}


def _tree_height(buckets: int, branching: int) -> int:
    """Smallest h with ``branching^h >= buckets`` (exact integer arithmetic)."""
    h, size = 0, 1
    while size < buckets:
        size *= branching
        h += 1
    return h


def _check_levels(levels: Sequence[Any], branching: int) -> list[np.ndarray]:
    items = check_sequence(levels, "levels", "arrays (one per level)")
    if len(items) > 64:
        raise ValueError(f"levels must hold at most 64 levels, got {len(items)}")
    out = [check_array(x, f"levels[{k}]") for k, x in enumerate(items)]
    for k, x in enumerate(out):
        if x.shape != (branching**k,):
            raise ValueError(
                f"levels[{k}] must have shape ({branching**k},) for branching {branching}, "
                f"got {x.shape}"
            )
        if not np.all(np.isfinite(x)):
            raise ValueError(f"levels[{k}] must be finite numbers")
    if not out:
        raise ValueError("levels must hold at least the root level")
    return out


# ---------------------------------------------------------------------------------------
# Constrained inference (Hay et al. 2010), generalized to one noise variance per level
# ---------------------------------------------------------------------------------------
def constrained_inference(
    levels: Sequence[Any],
    branching: int,
    *,
    variances: Any = None,
    root: float | None = None,
) -> list[np.ndarray]:
    """Return the least-squares consistent tree closest to noisy node estimates (Hay et al. 2010).

    Given noisy estimates ``levels[k]`` of every node (depth k, ``B^k`` nodes) with
    independent noise of variance ``variances[k]`` (the same for all nodes of a level),
    returns the consistent tree (every parent equals the sum of its children) minimizing
    ``sum_k sum_nodes (x - levels[k])^2 / variances[k]``, i.e. the generalized least-squares
    estimate of the leaves. Two vectorized passes, O(number of nodes):

    * bottom-up, ``z`` = best estimate of a node from its own subtree:
      ``z = (x / var_k + s / V_s) / (1 / var_k + 1 / V_s)`` with ``s`` the sum of the
      children's ``z`` and ``V_s = B V_{k+1}`` its variance, ``1 / V_k = 1 / var_k + 1 / V_s``
      (at the leaves ``z = x``, ``V = var``);
    * top-down, mean consistency: ``xbar(root) = z(root)``,
      ``xbar(c) = z(c) + (xbar(parent) - sum_{siblings} z) / B``.

    With equal variances this is exactly Hay et al.'s weighted averaging
    ``z = a_l x + c_l s``, ``a_l = (B^l - B^(l-1)) / (B^l - 1)`` (l = 1 at the leaves).

    Parameters
    ----------
    levels : sequence of array_like
        ``levels[k]`` has ``branching^k`` entries; ``levels[0]`` is the root.
    branching : int
        B >= 2.
    variances : array_like, optional
        One noise variance per level (> 0; ``inf`` for a level without information).
        Default: all equal, which makes the result the Euclidean projection of the tree onto
        the consistent trees.
    root : float, optional
        A known root value (variance 0): the result then has exactly this root, whatever
        ``levels[0]`` holds.

    Returns
    -------
    list of ndarray
        The consistent tree in the same layout.

    References
    ----------
    M. Hay, V. Rastogi, G. Miklau, D. Suciu. Boosting the Accuracy of Differentially
    Private Histograms Through Consistency. PVLDB 2010, section 4 (Theorem 3).

    Examples
    --------
    >>> noisy = [[1.0], [0.7, 0.2], [0.3, 0.3, 0.1, 0.2]]
    >>> [np.round(level, 4).tolist() for level in constrained_inference(noisy, 2)]
    [[0.9571], [0.6952, 0.2619], [0.3476, 0.3476, 0.081, 0.181]]
    >>> [np.round(level, 4).tolist() for level in constrained_inference(noisy, 2, root=1.0)]
    [[1.0], [0.7167, 0.2833], [0.3583, 0.3583, 0.0917, 0.1917]]
    """
    branching = check_integer(branching, "branching", low=2)
    x = _check_levels(levels, branching)
    h = len(x) - 1
    if variances is None:
        var = np.ones(h + 1)
    else:
        check_not_masked(variances, "variances")
        var = np.asarray(variances)
        if var.dtype.kind not in "iuf":  # +inf is allowed: a level without information
            raise TypeError(f"variances must be numbers >= 0 (inf allowed), got {var.dtype}")
        var = var.astype(np.float64)
        if var.shape != (h + 1,) or np.any(np.isnan(var)) or np.any(var <= 0):
            raise ValueError(
                f"variances must hold {h + 1} numbers > 0 (inf allowed), got {variances!r}"
            )
    prec = np.where(np.isinf(var), 0.0, 1.0 / var)
    # bottom-up: z[k] and the precision of z at level k
    z: list[np.ndarray] = [np.empty(0)] * (h + 1)
    z[h] = x[h].copy()
    p_below = prec[h]
    for k in range(h - 1, -1, -1):
        s = z[k + 1].reshape(-1, branching).sum(axis=1)
        p_sum = p_below / branching  # variance of a sum of B independent children
        total = prec[k] + p_sum
        if total > 0:
            z[k] = (prec[k] * x[k] + p_sum * s) / total
        else:  # no information at or below this level: any value; keep the child sum
            z[k] = s
        p_below = total
    if root is not None:
        z[0] = np.array([check_real(root, "root")])
    # top-down: share each parent's surplus equally among its children
    out = [z[0]]
    for k in range(1, h + 1):
        s = z[k].reshape(-1, branching).sum(axis=1)
        out.append(z[k] + np.repeat((out[k - 1] - s) / branching, branching))
    return out


def tree_consistency_error(levels: Sequence[Any], branching: int) -> float:
    """Largest ``|parent - sum of its children|`` over the tree (0 for a consistent tree)."""
    x = _check_levels(levels, branching)
    errors = [
        float(np.max(np.abs(x[k] - x[k + 1].reshape(-1, branching).sum(axis=1))))
        for k in range(len(x) - 1)
    ]
    return max(errors, default=0.0)


# ---------------------------------------------------------------------------------------
# HH-ADMM (SW20 section 4.3, Appendix B)
# ---------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ADMMInfo:
    """Diagnostics of :func:`hh_admm`.

    Attributes
    ----------
    iterations : int
        Iterations run.
    converged : bool
        True when the stopping rule was met before ``max_iter``.
    constraint_violation : float
        Largest violation by the output of tree consistency, non-negativity and the
        level sums (the stopping rule wants it <= tol).
    step : float
        Largest change of the projections z, w in the last iteration (dual residual).
    objective : float
        ``0.5 ||x - x~||^2`` of the output.
    """

    iterations: int
    converged: bool
    constraint_violation: float
    step: float
    objective: float


def _violation(levels: list[np.ndarray], branching: int) -> float:
    neg = max(float(np.max(-lv)) for lv in levels)
    sums = max(abs(float(lv.sum()) - 1.0) for lv in levels)
    return max(tree_consistency_error(levels, branching), neg, sums, 0.0)


def hh_admm(
    levels: Sequence[Any],
    branching: int,
    *,
    max_iter: int = 500,
    tol: float = 1e-4,
    return_info: bool = False,
) -> Any:
    """SW20's HH-ADMM: the closest consistent, non-negative, normalized tree (least squares).

    Solves ``min 0.5 ||x - x~||^2`` subject to ``A x = 0`` (every parent equals the sum of
    its children), ``x >= 0`` and every level summing to 1 (so the root is 1) with ADMM at
    ``rho = 1`` (SW20 Algorithm 2): starting from ``x = x~`` and zero ``y, z, w, mu, nu,
    eta``, repeat

    * ``y = (x - x~ + mu) / 2``,
    * ``z = Proj_C(x + nu)``: the Euclidean projection onto consistent trees, i.e.
      :func:`constrained_inference` with equal variances and a free root,
    * ``w = Proj_N+(x + eta)``: Norm-Sub of every level (exact simplex projection),
    * ``x = ((y + x~ - mu) + (z - nu) + (w - eta)) / 3``,
    * ``mu += x - x~ - y``, ``nu += x - z``, ``eta += x - w``,

    until the output ``x`` violates no constraint by more than ``tol`` and ``z``, ``w``
    moved by at most ``tol`` (max norm), or ``max_iter`` iterations (SW20's code: 500, 1e-4).

    Parameters
    ----------
    levels : sequence of array_like
        The noisy tree ``x~`` (``levels[k]`` has ``branching^k`` entries; root first).
    branching : int
        B >= 2.
    max_iter : int
        Iteration cap (default 500).
    tol : float
        Tolerance of the stopping rule (default 1e-4).
    return_info : bool
        Also return an :class:`ADMMInfo`.

    Returns
    -------
    list of ndarray, or (list of ndarray, ADMMInfo)
        The post-processed tree ``x``.

    References
    ----------
    Z. Li et al. Estimating Numerical Distributions under Local Differential Privacy.
    SIGMOD 2020, section 4.3 and Appendix B (Algorithm 2); S. Boyd et al. Distributed
    Optimization and Statistical Learning via ADMM. 2011.

    Examples
    --------
    >>> tree = hh_admm([[1.0], [0.9, -0.1], [0.5, 0.5, -0.2, 0.1]], 2)
    >>> [np.round(level, 3).tolist() for level in tree]
    [[1.0], [1.0, 0.0], [0.5, 0.5, 0.0, 0.0]]
    """
    branching = check_integer(branching, "branching", low=2)
    max_iter = check_integer(max_iter, "max_iter", low=1, high=10_000_000)
    tol = check_real(tol, "tol", low=0.0, low_inclusive=False)
    xt = _check_levels(levels, branching)
    sizes = [lv.size for lv in xt]
    cuts = np.cumsum(sizes)[:-1]
    x_tilde = np.concatenate(xt)

    def split(v: np.ndarray) -> list[np.ndarray]:
        return np.split(v, cuts)

    x = x_tilde.copy()
    mu = np.zeros_like(x)
    nu = np.zeros_like(x)
    eta = np.zeros_like(x)
    z = np.zeros_like(x)
    w = np.zeros_like(x)
    converged, step, violation, iterations = False, math.inf, math.inf, 0
    while iterations < max_iter:
        iterations += 1
        y = 0.5 * (x - x_tilde + mu)
        z_new = np.concatenate(constrained_inference(split(x + nu), branching))
        w_new = np.concatenate([simplex_projection(lv) for lv in split(x + eta)])
        step = float(max(np.max(np.abs(z_new - z)), np.max(np.abs(w_new - w))))
        z, w = z_new, w_new
        x = ((y + x_tilde - mu) + (z - nu) + (w - eta)) / 3.0
        mu += x - x_tilde - y
        nu += x - z
        eta += x - w
        violation = _violation(split(x), branching)
        if violation <= tol and step <= tol:
            converged = True
            break
    out = split(x)
    if not return_info:
        return out
    objective = 0.5 * float(np.sum((x - x_tilde) ** 2))
    return out, ADMMInfo(iterations, converged, violation, step, objective)


# ---------------------------------------------------------------------------------------
# Shared spec machinery
# ---------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class _TreeMechanism(Mechanism):
    low: float = 0.0
    high: float = 1.0
    buckets: int = 1024

    def _validate(self) -> None:
        lo, hi = check_bounds(self.low, self.high)
        self._set("low", lo)
        self._set("high", hi)
        self._set("buckets", check_integer(self.buckets, "buckets", low=2, high=MAX_LEAVES))

    @property
    def _branching(self) -> int:
        raise NotImplementedError

    @property
    def height(self) -> int:
        """Number h of non-root levels: ``ceil(log_B buckets)``."""
        return _tree_height(self.buckets, self._branching)

    @property
    def leaves(self) -> int:
        """Number of leaves ``B^h`` (>= buckets; the extra leaves are padding)."""
        return self._branching**self.height

    def leaf_index(self, values: Any) -> np.ndarray:
        """Bucket (= leaf) of each value: one of ``buckets`` equal buckets of [low, high]."""
        v = check_numeric_values(values, self.low, self.high, "values")
        return bucket_index(v, self.low, self.high, self.buckets)

    def _check_level_field(self, reports: Reports, low: int, high: int) -> np.ndarray:
        if "levels" not in reports.fields:
            raise ValueError(f"reports must have a 'levels' field, got fields {reports.fields}")
        lv = reports.levels
        if (
            lv.ndim != 1
            or lv.dtype.kind not in "iu"
            or (lv.size and (int(lv.min()) < low or int(lv.max()) > high))
        ):
            raise ValueError(
                f"reports.levels must be a 1-D integer array of levels in [{low}, {high}]"
            )
        return lv

    def _distribution(
        self, leaves: np.ndarray, stats: Stats, postprocess: str | None
    ) -> Distribution:
        """Return the plain estimate: the real (non-padding) leaves as a signed Distribution.

        The mass the tree puts outside the real leaves (padding leaves, whose true mass is
        0, or the last rounding of a fit) is spread evenly over the real ones: a zero-mean
        correction, so the leaves stay unbiased and sum to 1. ``postprocess`` (None, or a
        method of :meth:`Distribution.postprocess`) is applied last.
        """
        dist = Distribution.from_estimate(
            leaves[: self.buckets], self.low, self.high, n=stats.n, spec=self, stats=stats
        )
        return dist if postprocess is None else dist.postprocess(postprocess)


# ---------------------------------------------------------------------------------------
# Hierarchical histogram
# ---------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class HierarchicalHistogram(_TreeMechanism):
    """Hierarchical histogram (HH) with constrained inference (SW20 section 4.2).

    A B-ary tree over ``buckets`` equal buckets of [low, high] (padded to ``B^h`` leaves,
    ``h = ceil(log_B buckets)``). Each user draws a level k uniformly from the h non-root
    levels and reports the node holding her value at that level through the frequency
    oracle of that level (``B^k`` items) with the **full** epsilon: the population is
    divided among the levels, not the budget (SW20 section 4.2, "Difference from the
    centralized setting").

    The server estimates each level's frequencies from that level's ``n_k`` users
    (unbiased oracle estimates, which sum to about 1: in count units this is the scaling
    by ``n / n_k``), takes the root as exactly 1, and runs constrained inference
    (:func:`constrained_inference`) with each level weighted by its oracle's variance
    ``Var*(n_k)``, giving the least-squares consistent tree.

    Parameters
    ----------
    epsilon : float
        Privacy budget of every report (> 0).
    low, high : float
        The value domain (default [0, 1]).
    buckets : int
        Number d of leaves that are buckets of [low, high] (default 1024 = 4^5).
    branching : int
        Branching factor B (default 4, SW20's choice after Kulkarni et al.).
    oracle : str, optional
        One oracle for every level, among GRR, BLH, OLH, HadamardResponse, HRR (oracles
        with compact scalar reports). Default: per level SW20's rule, GRR when
        ``B^k < 3 e^eps + 2``, else OLH (:func:`~ldpkit.numeric.binning.cfo_oracle`).

    Notes
    -----
    eps-LDP: the level is drawn independently of the value and the report is an eps-LDP
    oracle report of a function of the value. ``reports.levels`` holds k (1..h); the other
    fields are the union of the level oracles' fields (zero where a level's oracle has no
    such field, e.g. ``seeds`` of GRR users). ``Stats.counts`` concatenates the support
    counts of levels 1..h; ``Stats.level_n`` holds n_k.

    Estimate: SW20 evaluates HH only on range queries because its consistent leaves can be
    negative. :meth:`estimate` returns those consistent leaves as a *signed*
    :class:`Distribution` (the plain, unbiased estimate: ``cdf``, ``range`` and ``mean``
    work on it). ``estimate(stats, postprocess=...)`` makes it a proper distribution:
    ``"cdf"`` fits a monotone CDF (our recommendation), ``"norm_sub"`` projects the
    leaves onto the simplex. Norm-Sub keeps the positive noise of the many near-empty
    leaves, which costs a lot in W1: measured on Beta(5, 2), n = 1e5, eps = 1, 256
    buckets, 30 seeds: W1 0.115 with Norm-Sub, 0.009 with the CDF fit. Levels without
    any report get weight 0.

    With equal level variances the inference is exactly Hay et al.'s; weighting by
    ``Var*`` matters only where the oracle changes (GRR at the coarse levels is more
    accurate than OLH). The frequency-dependent part of the oracle variance is ignored.

    References
    ----------
    T. Kulkarni, G. Cormode, D. Srivastava. Answering Range Queries Under Local
    Differential Privacy. PVLDB 2019; M. Hay et al. PVLDB 2010 (constrained inference);
    Z. Li et al. SIGMOD 2020, section 4.2.

    Examples
    --------
    >>> hh = HierarchicalHistogram(epsilon=1.0, buckets=64)
    >>> hh.height, [hh.level_oracle(k).name for k in (1, 2, 3)]
    (3, ['GRR', 'OLH', 'OLH'])
    >>> values = np.random.default_rng(0).beta(5, 2, size=20_000)
    >>> dist = hh.run(values, rng=0)
    >>> dist.buckets, dist.n, dist.postprocessing, bool(abs(dist.mean() - values.mean()) < 0.1)
    (64, 20000, (), True)
    >>> float(dist.postprocess("cdf").quantile(0.5)) > 0.5
    True
    """

    branching: int = 4
    oracle: str | None = None

    def _interval_unsupported_reason(self) -> str | None:
        """Why the plain estimate has no analytic interval (None: it has one)."""
        from ._intervals import oracles_reason

        return oracles_reason(self.level_oracle(k) for k in range(1, self.height + 1))

    def _linear_query_variances(self, stats: Stats, masses: np.ndarray, w: np.ndarray) -> Any:
        """Variances of the linear queries ``w[:, i] . p`` of the plain estimate."""
        from ._intervals import tree_query_variances

        return tree_query_variances(self, stats, masses, w)

    def _validate(self) -> None:
        super()._validate()
        self._set("branching", check_integer(self.branching, "branching", low=2))
        if self._branching ** _tree_height(self.buckets, self._branching) > MAX_LEAVES:
            raise ValueError(
                f"buckets must give at most {MAX_LEAVES} (padded) leaves for branching "
                f"{self.branching}, got {self.buckets}"
            )
        self._set("oracle", check_oracle_name(self.oracle, tuple(_REPORT_FIELDS)))
        # Build the level oracles now: an epsilon above one's max_epsilon is refused here,
        # with its message, not at the first randomize.
        for level in range(1, self.height + 1):
            self.level_oracle(level)

    @property
    def _branching(self) -> int:
        return self.branching

    def level_size(self, level: int) -> int:
        """Return the number of nodes ``B^k`` at depth k."""
        return int(self.branching ** check_integer(level, "level", low=0, high=self.height))

    def privacy_loss(self) -> float:
        """Return the largest loss of the level oracles.

        The level is drawn independently of the value, and the user reports once, at that
        level, through its oracle.
        """
        return max(self.level_oracle(k).privacy_loss() for k in range(1, self.height + 1))

    def level_oracle(self, level: int) -> FrequencyOracle:
        """Return the frequency oracle of depth k = 1..h (``B^k`` items, full epsilon)."""
        level = check_integer(level, "level", low=1, high=self.height)
        return cfo_oracle(self.epsilon, self.level_size(level), self.oracle)

    # -- client ---------------------------------------------------------------------------
    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Each user's level (``reports.levels``) and her oracle report at that level."""
        leaf = self.leaf_index(values)
        gen = as_generator(rng)
        levels = np.asarray(gen.integers(1, self.height + 1, size=leaf.shape[0]), dtype=np.uint8)
        return self._reports_at(leaf, levels, gen)

    def _reports_at(
        self, leaf: np.ndarray, levels: np.ndarray, gen: np.random.Generator
    ) -> Reports:
        """Return the reports of users with leaves ``leaf`` at the given ``levels`` (uint8, 1..h).

        Each user's node at her level through that level's oracle.
        """
        h = self.height
        n = leaf.shape[0]
        parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        for k in range(1, h + 1):
            idx = np.flatnonzero(levels == k)
            node = leaf[idx] // self.branching ** (h - k)
            inner = self.level_oracle(k).randomize(node, rng=gen)
            for name, arr in inner.arrays.items():
                parts.setdefault(name, []).append((idx, arr))
        fields: dict[str, np.ndarray] = {}
        for name, chunks in parts.items():
            dtype = np.result_type(*[arr.dtype for _, arr in chunks])
            full = np.zeros(n, dtype=dtype)
            for idx, arr in chunks:
                full[idx] = arr
            fields[name] = full
        return Reports(self, levels=levels, **fields)

    # -- server ---------------------------------------------------------------------------
    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields: ``counts`` (levels 1..h, each in [0, n]), ``level_n``."""
        total = sum(self.level_size(k) for k in range(1, self.height + 1))
        return {"counts": StatsField((total,)), "level_n": StatsField((self.height,), total=1)}

    def empty_stats(self) -> Stats:
        """Return the Stats of no report (zero arrays): the neutral element of merge."""
        total = sum(self.level_size(k) for k in range(1, self.height + 1))
        return Stats(
            self,
            0,
            counts=np.zeros(total, dtype=np.int64),
            level_n=np.zeros(self.height, dtype=np.int64),
        )

    def aggregate(self, reports: Reports) -> Stats:
        """Support counts of every node (levels 1..h concatenated) and users per level."""
        reports = self.check_reports(reports)
        h = self.height
        levels = self._check_level_field(reports, 1, h)
        counts = []
        level_n = np.bincount(levels, minlength=h + 1)[1:].astype(np.int64)
        # One stable sort by level (a radix sort for these small integers), each field
        # gathered once, a slice per level: not a boolean mask and gather per level and
        # field. Stable: every level's reports keep their order, so the oracles see the
        # same reports as with masks.
        order = np.argsort(levels, kind="stable")
        ends = np.cumsum(level_n)
        sorted_fields: dict[str, np.ndarray] = {}
        for k in range(1, h + 1):
            oracle = self.level_oracle(k)
            if level_n[k - 1] == 0:
                counts.append(np.zeros(oracle.domain_size, dtype=np.int64))
                continue
            names = _REPORT_FIELDS[oracle.name]
            missing = [f for f in names if f not in reports.fields]
            if missing:
                raise ValueError(
                    f"reports must have fields {names} for level {k}, missing {missing}"
                )
            for f in names:
                if f not in sorted_fields:
                    sorted_fields[f] = reports.arrays[f][order]
            lo, hi = int(ends[k - 1] - level_n[k - 1]), int(ends[k - 1])
            inner = Reports(oracle, **{f: sorted_fields[f][lo:hi] for f in names})
            counts.append(np.asarray(oracle.aggregate(inner).counts, dtype=np.int64))
        return Stats(self, len(reports), counts=np.concatenate(counts), level_n=level_n)

    def _level_counts(self, stats: Stats) -> list[np.ndarray]:
        cuts = np.cumsum([self.level_size(k) for k in range(1, self.height + 1)])[:-1]
        return np.split(np.asarray(stats.counts), cuts)

    def level_estimates(self, stats: Stats) -> list[np.ndarray]:
        """Return the noisy tree: root ``[1.0]``, then each level's unbiased frequencies.

        Level k's frequencies come from its own ``n_k`` users (oracle estimate with
        ``n = n_k``). A level without reports gets the uniform ``1 / B^k`` (and weight 0 in
        :meth:`tree`).
        """
        stats = self.check_stats(stats, nonempty=True)
        out = [np.ones(1)]
        for k, counts in enumerate(self._level_counts(stats), start=1):
            n_k = int(stats.level_n[k - 1])
            if n_k == 0:
                out.append(np.full(self.level_size(k), 1.0 / self.level_size(k)))
                continue
            oracle = self.level_oracle(k)
            out.append(np.asarray(oracle.estimate(Stats(oracle, n_k, counts=counts)).frequencies))
        return out

    def level_variances(self, stats: Stats) -> np.ndarray:
        """Return the per-level noise variance ``Var*(n_k)`` of :meth:`level_estimates`.

        Root 0, ``inf`` for a level without reports; the others at least 1e-300.
        """
        stats = self.check_stats(stats)
        var = np.zeros(self.height + 1)
        for k in range(1, self.height + 1):
            n_k = int(stats.level_n[k - 1])
            var[k] = float(self.level_oracle(k).variance(n_k)) if n_k > 0 else math.inf
        # GRR at a huge epsilon is exact (variance 0): keep the weights finite
        var[1:] = np.maximum(var[1:], 1e-300)
        return var

    def tree(self, stats: Stats) -> list[np.ndarray]:
        """Return the consistent tree by constrained inference (root exactly 1; may be negative)."""
        var = self.level_variances(stats)
        var[0] = 1.0  # unused: the root is fixed to 1
        return constrained_inference(
            self.level_estimates(stats), self.branching, variances=var, root=1.0
        )

    def leaf_estimates(self, stats: Stats) -> np.ndarray:
        """Return the consistent leaves on the ``buckets`` buckets, before Norm-Sub.

        What SW20 uses for range queries; may hold negative values.
        """
        return self.tree(stats)[-1][: self.buckets]

    def estimate(self, stats: Stats, *, postprocess: str | None = None) -> Distribution:
        """Constrained inference; the consistent leaves as a Distribution.

        Parameters
        ----------
        stats : Stats
            Aggregated (and possibly merged) reports of this spec.
        postprocess : {None, "cdf", "norm_sub", "norm_mul"}
            None (default): the plain estimate, the consistent leaves (unbiased, signed:
            some masses may be negative). Otherwise :meth:`Distribution.postprocess`.

        Notes
        -----
        SW20 scores HH through range queries and CDFs built from the consistent leaves and
        never says how to make them a distribution. Norm-Sub on the leaves keeps the
        positive noise of the many near-empty leaves and moves mass onto them: measured on
        Beta(5,2) (n = 1e5, eps = 1, 256 buckets, 30 seeds) W1 is 0.115 with Norm-Sub and
        0.009 with the monotone CDF fit (``postprocess="cdf"``), which is the projection
        of the leaves' own CDF onto valid CDFs; we recommend it.
        """
        return self._distribution(self.tree(stats)[-1], stats, postprocess)


@dataclasses.dataclass(frozen=True, kw_only=True)
class HHADMM(HierarchicalHistogram):
    """HH-ADMM (SW20 section 4.3): HH's reports, post-processed by ADMM.

    Same protocol, reports and Stats layout as :class:`HierarchicalHistogram` (a separate
    spec, so its Stats do not mix with HH's). The estimate solves
    ``min ||x - x~||^2`` over trees that are consistent, non-negative and sum to 1 on every
    level (:func:`hh_admm`, rho = 1, at most 500 iterations, tolerance 1e-4), with ``x~``
    the noisy tree of :meth:`level_estimates` (root 1). Unlike HH's constrained inference,
    this uses that counts are non-negative and that the total is known.

    Parameters
    ----------
    epsilon, low, high, buckets, branching, oracle
        As for :class:`HierarchicalHistogram`.

    Notes
    -----
    The plain estimate is the ADMM leaves (SW20's estimator). They satisfy the constraints
    up to ``tol``, so the Distribution may hold tiny negative masses (~1e-4);
    ``postprocess="norm_sub"`` removes them.

    References
    ----------
    Z. Li et al. SIGMOD 2020, section 4.3 and Appendix B.

    Examples
    --------
    >>> hh = HHADMM(epsilon=1.0, buckets=64)
    >>> values = np.random.default_rng(0).beta(5, 2, size=20_000)
    >>> dist = hh.run(values, rng=0)
    >>> dist.buckets, bool(abs(dist.mean() - values.mean()) < 0.1)
    (64, True)
    """

    def _interval_unsupported_reason(self) -> str | None:
        """HH-ADMM's estimate is not linear in the reports: no analytic interval."""
        return "HH-ADMM is a non-linear (biased) post-processing"

    def _validate(self) -> None:
        super()._validate()
        # ADMM costs ~ 500 iterations x the tree's nodes: ~1 s of CPU at 2^14 leaves, about
        # a minute at 2^20 (accepted there, then hung). Refused up front instead.
        if self.leaves > MAX_ADMM_LEAVES:
            raise ValueError(
                f"buckets and branching must give at most {MAX_ADMM_LEAVES} leaves for HHADMM "
                f"(its ADMM estimate takes minutes beyond), got {self.buckets} buckets, "
                f"branching={self.branching}: {self.leaves} leaves; use HierarchicalHistogram "
                "(constrained inference) for finer trees"
            )

    def admm_tree(
        self, stats: Stats, *, max_iter: int = 500, tol: float = 1e-4
    ) -> tuple[list[np.ndarray], ADMMInfo]:
        """Return the ADMM tree and its diagnostics."""
        return hh_admm(  # type: ignore[no-any-return]
            self.level_estimates(stats),
            self.branching,
            max_iter=max_iter,
            tol=tol,
            return_info=True,
        )

    def estimate(
        self,
        stats: Stats,
        *,
        postprocess: str | None = None,
        max_iter: int = 500,
        tol: float = 1e-4,
    ) -> Distribution:
        """ADMM on the noisy tree (SW20 section 4.3); its leaves as a Distribution.

        The ADMM leaves satisfy the constraints up to ``tol``; ``postprocess``
        (None by default, or a method of :meth:`Distribution.postprocess`, e.g.
        ``"norm_sub"``) removes what is left.
        """
        tree, _ = self.admm_tree(stats, max_iter=max_iter, tol=tol)
        return self._distribution(tree[-1], stats, postprocess)


# ---------------------------------------------------------------------------------------
# Haar wavelet + HRR
# ---------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class HaarHRR(_TreeMechanism):
    """HaarHRR: Haar coefficients of a binary tree through Hadamard randomized response.

    A binary tree over ``buckets`` equal buckets of [low, high] (padded to ``2^h`` leaves).
    A user with leaf v draws a depth t uniformly from 0..h-1 (SW20's layer ``h - t``).
    At that depth her one-hot vector's Haar coefficients vanish except at the node a above
    v: ``c_a = s / 2^((h-t)/2)``, ``s = +1`` if v is under a's left child, else -1. The
    magnitude is known, so she reports the signed one-hot vector ``s e_a`` of length
    ``K = 2^t`` through HRR: a uniform column j in [K] and the sign ``s H[a, j]`` kept with
    probability ``e^eps / (e^eps + 1)``, flipped otherwise
    (:func:`~ldpkit.frequency.hadamard.hrr_perturb_signs`).

    The server sums signs per (depth, column) (``Stats.sums``, heap layout: depth t's
    columns at offsets ``2^t - 1 .. 2^(t+1) - 2``), and for each depth recovers
    ``D~ = fwht(sums_t) / (n_t (2p - 1))``, an unbiased estimate of the vector of child
    differences ``(F_left - F_right)`` (fractions of users) at that depth. This uses only
    the level's ``n_t`` users; in count units it is the rescaling by ``n / n_t``. The Haar
    coefficients are ``D~ / 2^((h-t)/2)``; the leaves follow by the inverse Haar transform
    with the scaling coefficient known (the total is 1).

    Parameters
    ----------
    epsilon : float
        Privacy budget, in [1e-6, ``max_epsilon``] (per class: docs/design/THREAT_MODEL.md).
    low, high : float
        The value domain (default [0, 1]).
    buckets : int
        Number d of buckets (default 1024 = 2^10).

    Notes
    -----
    eps-LDP: depth and column are independent of the value; the sign is binary randomized
    response, ``P[s' | v] / P[s' | v'] <= e^eps`` (Cormode et al. 2018). ``reports.levels``
    holds t, ``reports.values`` j, ``reports.signs`` the noisy sign.
    Each report contributes ``H[a, j] s' / (2p - 1) = +-1/(2p - 1)``, so
    ``Var[D~_a] = (1/(2p-1)^2 - m_a) / n_t`` with ``m_a`` the fraction of level-t users
    under a.

    Estimate: the reconstructed leaves sum to 1 but can be negative; SW20 evaluates
    HaarHRR only on range queries. :meth:`estimate` returns them as a signed
    Distribution (the plain, unbiased estimate); ``postprocess="cdf"`` fits a monotone
    CDF, far more accurate in W1/KS than ``"norm_sub"`` (as for
    :class:`HierarchicalHistogram`: 0.008 vs 0.118 on Beta(5, 2), n = 1e5, eps = 1, 256
    buckets). Depths without reports contribute zero coefficients.

    References
    ----------
    T. Kulkarni, G. Cormode, D. Srivastava. Answering Range Queries Under Local
    Differential Privacy. PVLDB 2019 (HaarHRR); G. Cormode, T. Kulkarni, D. Srivastava.
    Marginal Release Under LDP. SIGMOD 2018 (HRR); Z. Li et al. SIGMOD 2020, section 4.2.

    Examples
    --------
    >>> haar = HaarHRR(epsilon=1.0, buckets=64)
    >>> haar.height
    6
    >>> values = np.random.default_rng(0).beta(5, 2, size=20_000)
    >>> dist = haar.run(values, rng=0)
    >>> dist.buckets, bool(abs(dist.mean() - values.mean()) < 0.1)
    (64, True)
    """

    #: The sign's exact integer coin holds up to e^40 (ldpkit._exact.RR_MAX_EPSILON).
    max_epsilon: ClassVar[float] = RR_MAX_EPSILON

    def _interval_unsupported_reason(self) -> str | None:
        """None: the plain estimate is linear in the reports (analytic intervals)."""
        return None

    def _linear_query_variances(self, stats: Stats, masses: np.ndarray, w: np.ndarray) -> Any:
        """Variances of the linear queries ``w[:, i] . p`` of the plain estimate."""
        from ._intervals import haar_query_variances

        return haar_query_variances(self, stats, masses, w)

    @property
    def _branching(self) -> int:
        return 2

    @property
    def keep_probability(self) -> float:
        """P ~ e^eps / (e^eps + 1), the probability that the sign is kept.

        Realized by :func:`~ldpkit.frequency.hadamard.hrr_perturb_signs`' exact integer coin.
        """
        return _keep_flip(self.epsilon)[0]

    def privacy_loss(self) -> float:
        """Return the loss of the binary randomized response on the sign.

        Log(p / (1 - p)), from the integer weights
        :func:`~ldpkit.frequency.hadamard.hrr_perturb_signs` draws with; the depth and the
        column are drawn independently of the value.
        """
        return _coin_loss(self.epsilon)

    @property
    def signal(self) -> float:
        """``2p - 1`` (~ ``tanh(eps / 2)``): E[reported sign x true sign], realized."""
        keep, flip = _keep_flip(self.epsilon)
        return keep - flip

    # -- client ---------------------------------------------------------------------------
    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Each user's depth t (``levels``), column j (``values``) and noisy sign (``signs``)."""
        leaf = self.leaf_index(values)
        gen = as_generator(rng)
        h = self.height
        depth = gen.integers(0, h, size=leaf.shape[0])
        shift = h - depth  # leaves under one node of depth t: 2^(h - t)
        node = leaf >> shift
        sign = 1 - 2 * ((leaf >> (shift - 1)) & 1)  # left child: +1, right child: -1
        column = gen.integers(0, np.left_shift(1, depth))
        true = sign * hadamard_sign(node, column)
        noisy = hrr_perturb_signs(true, self.epsilon, rng=gen)
        return Reports(
            self,
            levels=depth.astype(np.uint8),
            values=column.astype(index_dtype(1 << (h - 1))),
            signs=noisy,
        )

    # -- server ---------------------------------------------------------------------------
    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields: ``sums`` (signed, heap layout), ``level_n`` (sum n)."""
        h = self.height
        return {
            "sums": StatsField(((1 << h) - 1,), low=-1.0),
            "level_n": StatsField((h,), total=1),
        }

    def empty_stats(self) -> Stats:
        """Return the Stats of no report (zero arrays): the neutral element of merge."""
        h = self.height
        return Stats(
            self,
            0,
            sums=np.zeros((1 << h) - 1, dtype=np.int64),
            level_n=np.zeros(h, dtype=np.int64),
        )

    def aggregate(self, reports: Reports) -> Stats:
        """Signed sums per (depth, column) in heap layout, and users per depth."""
        reports = self.check_reports(reports)
        h = self.height
        depth = self._check_level_field(reports, 0, h - 1).astype(np.int64)
        column = reports.values
        if column.ndim != 1 or column.dtype.kind not in "iu":
            raise ValueError("reports.values must be a 1-D integer array of Hadamard columns")
        column = column.astype(np.int64)
        if column.size and (int(column.min()) < 0 or np.any(column >> depth)):
            raise ValueError("reports.values must be columns in [0, 2^t) for the user's depth t")
        signs = _check_signs(reports.signs, "reports.signs")
        heap = (np.left_shift(1, depth) - 1) + column
        size = (1 << h) - 1
        both = np.bincount(2 * heap + (signs > 0), minlength=2 * size).reshape(size, 2)
        level_n = np.bincount(depth, minlength=h).astype(np.int64)
        return Stats(self, len(reports), sums=both[:, 1] - both[:, 0], level_n=level_n)

    def differences(self, stats: Stats) -> list[np.ndarray]:
        """Unbiased child differences ``F_left - F_right`` of every node, by depth."""
        stats = self.check_stats(stats, nonempty=True)
        out = []
        for t in range(self.height):
            n_t = int(stats.level_n[t])
            if n_t == 0:
                out.append(np.zeros(1 << t))
                continue
            sums = np.asarray(stats.sums[(1 << t) - 1 : (1 << (t + 1)) - 1], dtype=np.float64)
            out.append(fwht(sums) / (n_t * self.signal))
        return out

    def coefficient_estimates(self, stats: Stats) -> list[np.ndarray]:
        """Unbiased Haar detail coefficients, by depth (layout of :func:`haar_transform`)."""
        h = self.height
        return [d / 2.0 ** ((h - t) / 2.0) for t, d in enumerate(self.differences(stats))]

    def leaf_estimates(self, stats: Stats) -> np.ndarray:
        """Return the inverse Haar transform with total 1 on the buckets, before Norm-Sub.

        May hold negative values.
        """
        return self._leaves(stats)[: self.buckets]

    def _leaves(self, stats: Stats) -> np.ndarray:
        h = self.height
        return inverse_haar_transform(2.0 ** (-h / 2.0), self.coefficient_estimates(stats))

    def estimate(self, stats: Stats, *, postprocess: str | None = None) -> Distribution:
        """Inverse Haar transform; the leaves as a Distribution.

        ``postprocess`` as for :meth:`HierarchicalHistogram.estimate` (None: the plain,
        signed, unbiased leaves; ``"cdf"`` recommended for distribution metrics: W1 0.008
        vs 0.118 with Norm-Sub on Beta(5,2), n = 1e5, eps = 1).
        """
        return self._distribution(self._leaves(stats), stats, postprocess)
