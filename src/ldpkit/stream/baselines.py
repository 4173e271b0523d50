"""Baselines that STR21 compares ToPS with (§6): PAK, NM-E, H^c_16 and flat Laplace.

All of them are :class:`~ldpkit.stream.ToPS` with another threshold rule and/or another
perturber, so they share its batching, serialization and range answers:

=============  ===============================================  ==========================
name           threshold (first m values)                       perturber
=============  ===============================================  ==========================
``PAK``        smooth-sensitivity 99.5th percentile, (eps, δ)   binary tree, g = 1, no
                                                                 consistency
``NME``        ToPS's exponential mechanism (lambda from the    binary tree, g = 1, no
               binary tree's b = 2 and h)                       consistency
``HC16``       PAK's                                            ToPS's (b = 16, g, online
                                                                 consistency, smoother)
``FlatLaplace`` ToPS's (lambda from ToPS's default hierarchy),  ``Laplace(theta/eps)`` on
               a fixed value, or ``bound``                      every value
=============  ===============================================  ==========================

PAK (Perrier, Asghar, Kaafar, NDSS 2019) estimates a high percentile with the smooth
sensitivity framework of Nissim, Raskhodnikova and Smith (STOC 2007):
``theta = x_(k) + (2 S*(x) / epsilon) Z`` with ``Z ~ Laplace(1)``, where ``x_(k)`` is the
order statistic at rank ``k = floor(p m) + 1`` and ``S*`` its beta-smooth sensitivity,
``beta = epsilon / (2 ln(2/δ))``. Laplace noise is ``(epsilon/2, beta)``-admissible, so the
release is ``(epsilon, δ)``-DP (NRS Lemma 2.9). The authors' code uses
``beta = epsilon / (2 ln(1/δ))`` and ``δ = 1/n^2``; we keep their ``δ`` default and NRS's
``beta``; theta is clipped to ``[0, bound]`` (post-processing).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import (
    MAX_STREAM_EPSILON,
    check_array,
    check_bound,
    check_epsilon,
    check_integer,
    check_probability,
    check_real,
)
from .online_hierarchy import choose_leaf_exponent
from .smoothers import Smoother
from .tops import ToPS, hierarchy_levels

__all__ = [
    "smooth_sensitivity_order_statistic",
    "pak_threshold",
    "PAK",
    "NME",
    "HC16",
    "FlatLaplace",
]


def _percentile_rank(size: int, percentile: float) -> int:
    """1-based rank ``k = floor(p m) + 1`` (clamped to ``[1, m]``) of the p-th percentile."""
    return min(max(math.floor(percentile * size) + 1, 1), size)


def smooth_sensitivity_order_statistic(values: Any, rank: int, bound: float, beta: float) -> float:
    """beta-smooth sensitivity of the ``rank``-th smallest value (NRS 2007, Prop. 3.4).

    ``S*(x) = max_{t >= 0} e^{-t beta} max_{j = 0..t+1} (x_{k+j} - x_{k+j-t-1})`` over the
    sorted data (1-based) padded with ``x_i = 0`` for ``i < 1`` and ``x_i = bound`` for
    ``i > m``. The search stops once ``e^{-t beta} bound`` cannot beat the best value found,
    so the cost is O(m log m + t*^2) with ``t* ≈ ln(bound / S*) / beta``.
    """
    bound = check_bound(bound)
    x = np.sort(check_array(values, "values", low=0.0, high=bound, nonempty=True))
    m = x.size
    k = check_integer(rank, "rank", low=1, high=m)
    beta = check_real(beta, "beta", low=0.0, low_inclusive=False)
    # padded[p] = x_{p - m - 1} in 1-based terms: m + 1 zeros before, m + 1 bounds after
    padded = np.concatenate([np.zeros(m + 1), x, np.full(m + 2, bound)])
    off = m + 1  # padded index of x_1 is off; of x_i is off + i - 1
    best = 0.0
    for t in range(m + 1):
        decay = math.exp(-t * beta)
        if decay * bound <= best:
            break
        j = np.arange(t + 2)
        hi_idx = off + k + j - 1
        lo_idx = off + k + j - t - 2
        local = float(np.max(padded[hi_idx] - padded[lo_idx]))
        best = max(best, decay * local)
    return best


def pak_threshold(
    values: Any,
    epsilon: float,
    bound: float,
    *,
    delta: float,
    percentile: float = 0.995,
    rng: RNGLike = None,
) -> float:
    """PAK's (epsilon, delta)-DP estimate of the ``percentile`` of ``values``, clipped to [0, bound].

    Examples
    --------
    >>> v = np.arange(1, 1001) % 50  # 99.5th percentile: 49
    >>> round(pak_threshold(v, 50.0, 100, delta=1e-9, rng=0))
    49

    The smooth sensitivity of a top percentile of a small sample is large (few values lie
    above it, and the bound is near): at epsilon = 1 the noise scale here is about 90.
    """
    eps = check_epsilon(epsilon, high=MAX_STREAM_EPSILON)
    delta = check_probability(delta, "delta")
    p = check_probability(percentile, "percentile")
    bound = check_bound(bound)
    x = np.sort(check_array(values, "values", low=0.0, high=bound, nonempty=True))
    k = _percentile_rank(x.size, p)
    beta = eps / (2.0 * math.log(2.0 / delta))
    ss = smooth_sensitivity_order_statistic(x, k, bound, beta)
    z = as_generator(rng).laplace(0.0, 1.0)
    return float(np.clip(x[k - 1] + 2.0 * ss / eps * z, 0.0, bound))


class _PAKThreshold:
    """Mixin: the threshold is PAK's smooth-sensitivity percentile."""

    epsilon: float
    bound: float
    length: int
    delta: float | None
    percentile: float

    def _pak_delta(self) -> float:
        return 1.0 / float(self.length) ** 2 if self.delta is None else self.delta

    def _select_threshold(self, items: np.ndarray, rng: np.random.Generator) -> float:
        return pak_threshold(
            items,
            self.epsilon,
            self.bound,
            delta=self._pak_delta(),
            percentile=self.percentile,
            rng=rng,
        )


def _binary_tree(length: int) -> dict[str, Any]:
    """ToPS arguments of a binary tree with one value per leaf and no consistency step."""
    n = check_integer(length, "length", low=1)
    return {
        "length": n,
        "branching": 2,
        "leaf_size": 1,
        "levels": hierarchy_levels(n, 1, 2),
        "consistency": False,
    }


class PAK(_PAKThreshold, ToPS):
    """PAK: smooth-sensitivity percentile threshold + binary tree without consistency.

    ``(epsilon, delta)``-DP: the threshold part is (epsilon, delta)-DP, the tree part
    epsilon-DP, on disjoint values. ``delta`` defaults to ``1/length^2`` (authors' code).

    Examples
    --------
    >>> values = np.random.default_rng(1).poisson(5.0, 20_000).clip(0, 100)
    >>> pak = PAK(epsilon=1.0, bound=100, threshold_size=4096, length=15_904, rng=0).update(values)
    >>> pak.leaf_size, pak.branching, pak.levels
    (1, 2, 13)
    """

    def __init__(
        self,
        epsilon: float,
        bound: float,
        *,
        threshold_size: int = 65_536,
        length: int = 2**20,
        percentile: float = 0.995,
        delta: float | None = None,
        rng: RNGLike = None,
    ) -> None:
        self.percentile = check_probability(percentile, "percentile")
        self.delta = None if delta is None else check_probability(delta, "delta")
        # checked here: the parent would read None as its own default silently
        threshold_size = check_integer(threshold_size, "threshold_size", low=1)
        super().__init__(
            epsilon, bound, threshold_size=threshold_size, **_binary_tree(length), rng=rng
        )


class NME(ToPS):
    """NM-E: ToPS's exponential-mechanism threshold + binary tree without consistency.

    lambda uses the binary tree's ``b = 2`` and ``h = floor(log2 n)`` (the hierarchy
    actually used; the authors' code hard-codes b = 16, h = 6 for every method).
    """

    def __init__(
        self,
        epsilon: float,
        bound: float,
        *,
        threshold_size: int = 65_536,
        length: int = 2**20,
        excess: float = 60.0,
        step: float = 1.0,
        threshold_method: Literal["gumbel", "noisy_max"] = "gumbel",
        rng: RNGLike = None,
    ) -> None:
        # checked here: the parent would read None as its own default silently
        threshold_size = check_integer(threshold_size, "threshold_size", low=1)
        super().__init__(
            epsilon,
            bound,
            threshold_size=threshold_size,
            **_binary_tree(length),
            excess=excess,
            step=step,
            threshold_method=threshold_method,
            rng=rng,
        )


class HC16(_PAKThreshold, ToPS):
    """H^c_16: PAK's smooth-sensitivity threshold + ToPS's perturber and smoother.

    Takes every :class:`ToPS` parameter except those of the exponential mechanism, plus
    ``percentile`` and ``delta`` (default ``1/length^2``).
    """

    def __init__(
        self,
        epsilon: float,
        bound: float,
        *,
        percentile: float = 0.995,
        delta: float | None = None,
        **kwargs: Any,
    ) -> None:
        self.percentile = check_probability(percentile, "percentile")
        self.delta = None if delta is None else check_probability(delta, "delta")
        for name in ("threshold", "threshold_method", "excess", "step"):
            if name in kwargs:
                raise TypeError(f"HC16 does not take {name!r} (its threshold is PAK's)")
        super().__init__(epsilon, bound, **kwargs)

    def params(self) -> dict[str, Any]:
        """Return the constructor arguments (those of ToPS that HC16 takes)."""
        out = self._signature_params(ToPS)  # the rest of the arguments pass through **kwargs
        for name in ("threshold", "threshold_method", "excess", "step"):
            out.pop(name)
        out["percentile"] = self.percentile
        out["delta"] = self.delta
        return out


class FlatLaplace(ToPS):
    """Flat Laplace: every released value gets ``Laplace(theta / epsilon)`` noise.

    A one-level hierarchy with one value per leaf. ``threshold`` is ``"tops"`` (default:
    ToPS's exponential mechanism, with lambda of ToPS's default hierarchy for the same
    epsilon and length, so the two methods share theta's law), a fixed number, or ``None``
    for ``bound`` (no threshold phase with either).
    """

    _param_attributes: ClassVar[dict[str, str]] = {
        **ToPS._param_attributes,
        "threshold": "threshold_rule",
    }

    def __init__(
        self,
        epsilon: float,
        bound: float,
        *,
        threshold: float | Literal["tops"] | None = "tops",
        threshold_size: int | None = None,
        length: int = 2**20,
        excess: float = 60.0,
        step: float = 1.0,
        threshold_method: Literal["gumbel", "noisy_max"] = "gumbel",
        smoother: str | dict[str, Any] | Smoother = "recent",
        rng: RNGLike = None,
    ) -> None:
        self.threshold_rule = threshold
        if threshold is None:
            fixed: float | None = check_bound(bound)
        elif isinstance(threshold, str) and threshold == "tops":  # not == on an array
            fixed = None
        else:
            fixed = threshold  # validated by ToPS
        super().__init__(
            epsilon,
            bound,
            threshold_size=threshold_size,
            length=length,
            branching=2,
            leaf_size=1,
            levels=1,
            excess=excess,
            step=step,
            threshold_method=threshold_method,
            threshold=fixed,
            smoother=smoother,
            consistency=False,
            rng=rng,
        )

    def _lambda_hierarchy(self) -> tuple[int, int]:
        b = 16
        g = b ** choose_leaf_exponent(b, self.length, self.epsilon)
        return b, hierarchy_levels(self.length, g, b)
