"""ToPS's threshold optimizer: the exponential mechanism over a sensitivity-1 score (STR21 §4).

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

References
----------
T. Wang, J. Q. Chen, Z. Zhang, D. Su, Y. Cheng, Z. Li, N. Li, S. Jha. Continuous Release of
Data Streams under both Centralized and Local Differential Privacy. CCS 2021, §4 (ToPS).
F. McSherry, K. Talwar. Mechanism Design via Differential Privacy. FOCS 2007.
"""

from __future__ import annotations

import math
from typing import Any, Literal

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

__all__ = [
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
    """Return the quality ``q(theta) = -#{v > theta} - lambda theta`` per candidate."""
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
