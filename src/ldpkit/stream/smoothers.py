"""Smoothers: predict the values of a block that the perturber has not summarized yet (STR21 App. D).

The perturber releases one noisy sum ``u_t`` per block ("leaf") of ``g`` consecutive values.
A smoother turns the leaves completed so far into a prediction for the values of a later
block: the stream can then be answered at every moment, including for values whose leaf is
still open. All smoothers here predict a *block sum* (the scale of ``u``); the per-value
prediction is that divided by ``g``.

Indexing (our convention, matching the appendix): blocks are 0-based; the prediction for
block ``t`` may use the completed leaves ``u[0], ..., u[t-1]`` (the appendix's
``u_1..u_t``) and a prior ``u_prior = theta * g / 2`` (the appendix's ``u_0``: before any
leaf exists, half the threshold per value). Every smoother falls back to the prior at
``t = 0``.

All smoothers except :class:`MedianSmoother` are linear in the leaves; their
:meth:`Smoother.weights` give the coefficients so that standard errors can account for the
noise of the leaves they average (see :meth:`ldpkit.stream.ToPS.range_sum`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from .._validation import check_integer, check_real

__all__ = [
    "Smoother",
    "RecentSmoother",
    "MeanSmoother",
    "MedianSmoother",
    "MovingAverageSmoother",
    "ExponentialSmoother",
    "SMOOTHERS",
    "make_smoother",
]


class Smoother(ABC):
    """Base class: predicts block sums from the leaves completed before the block.

    Subclasses are small immutable value objects; :meth:`to_dict` / :func:`make_smoother`
    round-trip them.
    """

    name: str = "smoother"
    #: whether the prediction is a fixed linear combination of the leaves (plus the prior)
    linear: bool = True

    @abstractmethod
    def predict(self, leaves: np.ndarray, blocks: np.ndarray, prior: float) -> np.ndarray:
        """Predicted sums of the given blocks.

        Parameters
        ----------
        leaves : ndarray of float
            The completed (consistent, for ToPS) leaf sums ``u[0..T-1]`` in time order.
        blocks : ndarray of int
            Block indices ``t`` with ``0 <= t <= T``; the prediction for ``t`` uses
            ``leaves[:t]`` only.
        prior : float
            The prior block sum used when no leaf is available (``theta * g / 2``).
        """

    def weights(self, t: int) -> tuple[np.ndarray, np.ndarray, float]:
        """Linear coefficients of the prediction for block ``t``.

        Returns ``(indices, coefficients, prior_coefficient)`` with
        ``predict(leaves, [t], prior) == coefficients @ leaves[indices] + prior_coefficient * prior``.
        Raises NotImplementedError for non-linear smoothers.
        """
        raise NotImplementedError(f"the {self.name} smoother is not linear in the leaves")

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"name": name}`` plus the smoother's parameters."""
        return {"name": self.name}

    def __eq__(self, other: object) -> bool:
        """Compare type and parameters."""
        return type(other) is type(self) and other.to_dict() == self.to_dict()

    def __hash__(self) -> int:
        """Hash consistently with ``__eq__``."""
        return hash(tuple(sorted(self.to_dict().items())))

    def __repr__(self) -> str:
        """Return a one-line summary."""
        params = {k: v for k, v in self.to_dict().items() if k != "name"}
        inner = ", ".join(f"{k}={v!r}" for k, v in params.items())
        return f"{type(self).__name__}({inner})"


def _as_blocks(leaves: np.ndarray, blocks: Any) -> tuple[np.ndarray, np.ndarray]:
    leaves = np.asarray(leaves, dtype=np.float64)
    t = np.asarray(blocks, dtype=np.int64).reshape(-1)
    if t.size and (t.min() < 0 or t.max() > leaves.size):
        raise ValueError(f"blocks must be integers in [0, {leaves.size}], got {t.min()}..{t.max()}")
    return leaves, t


class RecentSmoother(Smoother):
    """Recent smoother (the default): the most recent completed leaf, ``u[t-1]``."""

    name = "recent"

    def predict(self, leaves: np.ndarray, blocks: np.ndarray, prior: float) -> np.ndarray:
        """Predict each block as the last released leaf before it (``prior`` at 0)."""
        leaves, t = _as_blocks(leaves, blocks)
        out = np.full(t.shape, float(prior))
        has = t > 0
        out[has] = leaves[t[has] - 1]
        return out

    def weights(self, t: int) -> tuple[np.ndarray, np.ndarray, float]:
        """Return the leaf indices and weights of the prediction at t, and the prior's weight."""
        if t == 0:
            return np.zeros(0, np.int64), np.zeros(0), 1.0
        return np.array([t - 1]), np.array([1.0]), 0.0


class MeanSmoother(Smoother):
    """Mean smoother: the mean of all completed leaves ``u[0..t-1]``."""

    name = "mean"

    def predict(self, leaves: np.ndarray, blocks: np.ndarray, prior: float) -> np.ndarray:
        """Predict each block as the mean of the released leaves before it."""
        leaves, t = _as_blocks(leaves, blocks)
        cum = np.concatenate([[0.0], np.cumsum(leaves)])
        out = np.full(t.shape, float(prior))
        has = t > 0
        out[has] = cum[t[has]] / t[has]
        return out

    def weights(self, t: int) -> tuple[np.ndarray, np.ndarray, float]:
        """Return the leaf indices and weights of the prediction at t, and the prior's weight."""
        if t == 0:
            return np.zeros(0, np.int64), np.zeros(0), 1.0
        return np.arange(t), np.full(t, 1.0 / t), 0.0


class MedianSmoother(Smoother):
    """Median smoother: the median of all completed leaves (not linear: no standard error)."""

    name = "median"
    linear = False

    def predict(self, leaves: np.ndarray, blocks: np.ndarray, prior: float) -> np.ndarray:
        """Predict each block as the median of the released leaves before it."""
        leaves, t = _as_blocks(leaves, blocks)
        out = np.full(t.shape, float(prior))
        for k, tk in enumerate(t.tolist()):  # one median per requested block (a handful)
            if tk > 0:
                out[k] = float(np.median(leaves[:tk]))
        return out


class MovingAverageSmoother(Smoother):
    """Moving-average smoother: the mean of the last ``window`` completed leaves (fewer at the start)."""

    name = "moving_average"

    def __init__(self, window: int = 4) -> None:
        self.window = check_integer(window, "window", low=1)

    def predict(self, leaves: np.ndarray, blocks: np.ndarray, prior: float) -> np.ndarray:
        """Predict each block as the mean of the last ``window`` leaves before it."""
        leaves, t = _as_blocks(leaves, blocks)
        cum = np.concatenate([[0.0], np.cumsum(leaves)])
        out = np.full(t.shape, float(prior))
        has = t > 0
        hi = t[has]
        lo = np.maximum(hi - self.window, 0)
        out[has] = (cum[hi] - cum[lo]) / (hi - lo)
        return out

    def weights(self, t: int) -> tuple[np.ndarray, np.ndarray, float]:
        """Return the leaf indices and weights of the prediction at t, and the prior's weight."""
        if t == 0:
            return np.zeros(0, np.int64), np.zeros(0), 1.0
        lo = max(t - self.window, 0)
        return np.arange(lo, t), np.full(t - lo, 1.0 / (t - lo)), 0.0

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"name": name, "window": window}``."""
        return {"name": self.name, "window": self.window}


class ExponentialSmoother(Smoother):
    """Exponential smoother: ``s_0 = prior``, ``s_t = alpha u[t-1] + (1 - alpha) s_{t-1}``.

    Evaluated in closed form, ``s_t = (1-alpha)^t prior + sum_k alpha (1-alpha)^k u[t-1-k]``,
    truncated where ``(1-alpha)^k`` drops below 1e-20 (below double precision relative to
    the leading term), so a prediction costs O(1/alpha), not O(t).
    """

    name = "exponential"

    def __init__(self, alpha: float = 0.6) -> None:
        self.alpha = check_real(alpha, "alpha", low=0.0, high=1.0)

    def _horizon(self, t: int) -> int:
        decay = 1.0 - self.alpha
        if decay <= 0.0:
            return min(t, 1)
        if decay >= 1.0:
            return 0
        return min(t, math.ceil(math.log(1e-20) / math.log(decay)) + 1)

    def weights(self, t: int) -> tuple[np.ndarray, np.ndarray, float]:
        """Return the leaf indices and weights of the prediction at t, and the prior's weight."""
        k = self._horizon(t)
        decay = 1.0 - self.alpha
        lags = np.arange(k)
        coef = self.alpha * decay**lags
        prior_coef = decay**t  # negligible (< 1e-20) whenever the sum was truncated
        return (t - 1 - lags)[::-1].copy(), coef[::-1].copy(), float(prior_coef)

    def predict(self, leaves: np.ndarray, blocks: np.ndarray, prior: float) -> np.ndarray:
        """Predict each block by exponential smoothing of the leaves before it."""
        leaves, t = _as_blocks(leaves, blocks)
        out = np.empty(t.shape)
        for k, tk in enumerate(t.tolist()):
            idx, coef, pc = self.weights(tk)
            out[k] = float(coef @ leaves[idx]) + pc * prior
        return out

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"name": name, "alpha": alpha}``."""
        return {"name": self.name, "alpha": self.alpha}


SMOOTHERS: dict[str, type[Smoother]] = {
    "recent": RecentSmoother,
    "mean": MeanSmoother,
    "median": MedianSmoother,
    "moving_average": MovingAverageSmoother,
    "exponential": ExponentialSmoother,
}


def make_smoother(spec: str | dict[str, Any] | Smoother) -> Smoother:
    """Return a smoother from its name, a dict or an instance (STR21 App. D defaults)."""
    if isinstance(spec, Smoother):
        return spec
    if isinstance(spec, str):
        spec = {"name": spec}
    if not isinstance(spec, dict):
        raise TypeError(f"smoother must be a name, a dict or a Smoother, got {type(spec).__name__}")
    params = dict(spec)
    name = params.pop("name", None)
    if name not in SMOOTHERS:
        raise ValueError(f"smoother must be one of {sorted(SMOOTHERS)}, got {name!r}")
    return SMOOTHERS[name](**params)
