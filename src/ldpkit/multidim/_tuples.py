"""Tuples with numerical attributes: bounds, value checks and the per-attribute result.

Shared by :class:`ldpkit.multidim.DuchiMean` (numerical attributes only) and
:class:`ldpkit.multidim.AttributeSampling` (numerical attributes, then categorical ones).
A batch of users is an ``(n, d)`` float array: column j < ``len(low)`` holds reals in
``[low[j], high[j]]``, the next columns hold item indices of the categorical attributes
(map raw categories with one :class:`ldpkit.Encoder` per attribute).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._constraints import FINITE_BOUND, Check
from .._validation import check_integer, check_not_masked, check_probability, check_sequence
from ..estimate import FrequencyEstimate
from ..numeric.distribution import check_bounds
from ._base import check_in_domains, frequency_frame

__all__ = ["TupleMeans", "check_numeric_bounds", "check_mixed_values"]


def check_bound_side(value: Any, name: str) -> Any:
    """Refuse a ``low`` or ``high`` that is not one finite real or a sequence of them."""
    want = "a finite real or a sequence of finite reals (one per attribute)"
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise TypeError(f"{name} must be {want}, got {value!r}")
    items = [value] if isinstance(value, (int, float, np.integer, np.floating)) else None
    for j, v in enumerate(items if items is not None else check_sequence(value, name, want)):
        FINITE_BOUND.convert(v, name if items is not None else f"{name}[{j}]", None)
    return value  # (normalized with the other end by the spec's pair check)


#: The declaration of a multi-attribute spec's ``low`` or ``high`` (check_numeric_bounds or
#: the grids' pair check then checks the two together).
ATTRIBUTE_BOUNDS = Check(
    check_bound_side,
    "a finite real or a sequence of finite reals (one per attribute)",
    kind="float or tuple[float, ...]",
    hostile_values=["a", True, math.nan, (0.0, math.inf), [0.0, "a"]],
)


def check_numeric_bounds(
    low: Any, high: Any, *, minimum: int, maximum: int
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``low`` and ``high`` as equal-length tuples of valid bounds (one per attribute)."""
    want = "finite reals (one per numerical attribute)"

    def scalar(v: Any) -> bool:
        return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)

    # one real stands for every attribute: as many as the other sequence holds, else minimum
    if scalar(low) and scalar(high):
        low, high = (low,) * minimum, (high,) * minimum
    elif scalar(low):
        low = [low] * len(check_sequence(high, "high", want))
    elif scalar(high):
        high = [high] * len(check_sequence(low, "low", want))
    lows = check_sequence(low, "low", want)
    highs = check_sequence(high, "high", want)
    if not minimum <= len(lows) <= maximum:
        raise ValueError(
            f"low must hold {minimum} to {maximum} bounds (one per numerical attribute), "
            f"got {len(lows)}"
        )
    if len(highs) != len(lows):
        raise ValueError(f"high must hold {len(lows)} bounds (as low), got {len(highs)}")
    pairs = [check_bounds(lo, hi) for lo, hi in zip(lows, highs, strict=True)]
    return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)


def check_mixed_values(
    values: Any,
    low: Sequence[float],
    high: Sequence[float],
    domain_sizes: Sequence[int] = (),
) -> np.ndarray:
    """``values`` as a float64 ``(n, d)`` array: reals in the bounds, then item indices."""
    check_not_masked(values, "values")
    dn, d = len(low), len(low) + len(domain_sizes)
    want = f"an (n, {d}) array of reals, column j in [low[j], high[j]]"
    if domain_sizes:
        want += f" for j < {dn}, then item indices in [0, domain_sizes[j - {dn}])"
    arr = np.asarray(values)
    if arr.dtype.kind not in "iuf" or arr.dtype.kind == "b":
        raise TypeError(f"values must be {want}, got dtype {arr.dtype}")
    if arr.ndim == 1 and arr.size == 0:
        return np.zeros((0, d))
    if arr.ndim != 2 or arr.shape[1] != d:
        raise ValueError(f"values must be {want}, got shape {arr.shape}")
    x = arr.astype(np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"values must be {want}, got NaN or infinity")
    num = x[:, :dn]
    bad = (num < np.asarray(low)) | (num > np.asarray(high))
    if bad.any():
        col = int(np.flatnonzero(bad.any(axis=0))[0])
        raise ValueError(
            f"values must be {want}, got column {col} in [{num[:, col].min():g}, "
            f"{num[:, col].max():g}] for [{low[col]:g}, {high[col]:g}]"
        )
    if domain_sizes:
        cat = x[:, dn:]
        if np.any(cat != np.floor(cat)):
            raise ValueError(f"values must be {want}, got a non-integer item")
        check_in_domains(cat, domain_sizes, "values", want, first=dn)
    return x


def box_contract_values(
    low: Sequence[float], high: Sequence[float], n: int, gen: np.random.Generator
) -> np.ndarray:
    """Draw n tuples uniform in the box ``[low, high]``, the first two at its two corners.

    The ``_contract_values`` hook of the specs over d numerical attributes.
    """
    lo, hi = np.asarray(low), np.asarray(high)
    out = lo + (hi - lo) * gen.random((n, lo.size))
    out[0], out[1] = lo, hi  # both ends of every domain
    return out


def box_contract_bad_values(
    low: Sequence[float], high: Sequence[float]
) -> tuple[list[Any], list[Any]]:
    """Return inputs outside the box ``[low, high]``, then inputs of the wrong type.

    The ``_contract_bad_values`` hook of the specs over d numerical attributes: a value
    above its bound, a NaN, a 1-D input and a row of d + 1 columns; strings and booleans.
    """
    lo, hi = list(low), list(high)
    above = list(lo)
    above[-1] = hi[-1] + (hi[-1] - lo[-1])
    nan = list(lo)
    nan[0] = float("nan")
    outside: list[Any] = [[lo, above], [lo, nan], [0.0, 1.0], [[*lo, lo[0]]]]
    return outside, [[["a"] * len(lo)], [[True] * len(lo)]]


class NormalIntervals:
    """Standard errors and normal intervals of estimated ``means`` from their ``variance``.

    Mixed into the frozen result types whose estimates are means with a variance.
    """

    means: np.ndarray
    variance: np.ndarray

    @property
    def std_error(self) -> np.ndarray:
        """Standard error of every mean: the square root of its variance."""
        return np.sqrt(self.variance)

    def confidence_interval(self, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
        """Return the normal two-sided ``1 - alpha`` interval of every mean."""
        alpha = check_probability(alpha, "alpha")
        from scipy import special

        half = float(-special.ndtri(alpha / 2.0)) * self.std_error
        return self.means - half, self.means + half


@dataclasses.dataclass(frozen=True, eq=False)
class TupleMeans(NormalIntervals):
    """Estimated mean of every numerical attribute (and frequencies of categorical ones).

    Attributes
    ----------
    means, variance : ndarray, shape (d_num,)
        Unbiased means in the attributes' units and their estimated variances (the
        empirical variance of the users' unbiased terms, divided by n: see the spec).
    categorical : tuple of FrequencyEstimate
        One per categorical attribute (empty when the spec has none).
    n : int
        Number of reports behind the estimate.
    spec : Mechanism
        The spec that produced it.
    """

    means: np.ndarray
    variance: np.ndarray
    categorical: tuple[FrequencyEstimate, ...]
    n: int
    spec: Any = None

    def __post_init__(self) -> None:
        """Check the shapes and freeze the arrays."""
        means = np.asarray(self.means, dtype=np.float64)
        var = np.asarray(self.variance, dtype=np.float64)
        if means.ndim != 1 or var.shape != means.shape:
            raise ValueError(
                f"variance must have the shape of means {means.shape}, got {var.shape}"
            )
        if not (np.all(np.isfinite(means)) and np.all(np.isfinite(var)) and np.all(var >= 0)):
            raise ValueError("means and variance must be finite (variance >= 0)")
        for arr in (means, var):
            arr.setflags(write=False)
        object.__setattr__(self, "means", means)
        object.__setattr__(self, "variance", var)
        object.__setattr__(self, "categorical", tuple(self.categorical))
        object.__setattr__(self, "n", check_integer(self.n, "n", low=0))

    def to_frame(self, alpha: float = 0.05) -> Any:
        """Return a long DataFrame: one row per mean, then one per (attribute, item).

        Columns ``attribute``, ``kind`` (``"mean"`` or ``"frequency"``), ``item`` (-1 for
        a mean), ``estimate``, ``std_error``, ``low`` and ``high`` (the ``1 - alpha``
        normal interval).
        """
        import pandas as pd

        lo, hi = self.confidence_interval(alpha)
        dn = self.means.size
        frames = [
            pd.DataFrame(
                {
                    "attribute": np.arange(dn),
                    "kind": "mean",
                    "item": -1,
                    "estimate": self.means,
                    "std_error": self.std_error,
                    "low": lo,
                    "high": hi,
                }
            )
        ]
        for j, est in enumerate(self.categorical):
            frames.append(frequency_frame(est, alpha, attribute=dn + j, kind="frequency"))
        frame = pd.concat(frames, ignore_index=True)
        frame.attrs["alpha"] = alpha
        return frame

    def __repr__(self) -> str:
        """Summarize the sizes and the spec."""
        return (
            f"TupleMeans(numerical={self.means.size}, categorical={len(self.categorical)}, "
            f"n={self.n}, spec={self.spec!r})"
        )


class BoxMeanHooks:
    """The contract hooks (:func:`ldpkit.testing.check_mechanism`) of a mean spec on a box.

    Mixed into the specs that take d numerical attributes in ``[low, high]`` and estimate
    their d means as a :class:`TupleMeans` without categorical parts (DuchiMean,
    LaplaceMean).
    """

    # The specs it is mixed into hold low, high and attributes.
    def _contract_values(self: Any, n: int, gen: np.random.Generator) -> np.ndarray:
        return box_contract_values(self.low, self.high, n, gen)

    def _contract_bad_values(self: Any) -> tuple[list[Any], list[Any]]:
        return box_contract_bad_values(self.low, self.high)

    def _contract_check_estimate(self: Any, estimate: Any, stats: Any) -> None:
        assert isinstance(estimate, TupleMeans), type(estimate).__name__
        d = self.attributes
        assert estimate.means.shape == (d,) and estimate.variance.shape == (d,)
        assert np.all(np.isfinite(estimate.means)) and np.all(estimate.variance >= 0)
        assert estimate.categorical == ()
