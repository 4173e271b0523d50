"""Frequency estimates with their variance and confidence intervals."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._validation import check_integer, check_not_masked, check_probability

__all__ = ["FrequencyEstimate", "IntervalWarning"]


class IntervalWarning(UserWarning):
    """A confidence interval is not available (NaN) or only approximate.

    E.g. after a biased post-processing (Norm-Sub, ...) or for a non-linear estimator
    (EM/EMS).
    """


def _real_array(value: Any, name: str) -> np.ndarray:
    """``value`` as a float64 array; TypeError (naming ``name``) for non-numbers."""
    if isinstance(value, (list, tuple)):
        check_not_masked(value, name)  # refuses ragged nested lists in the project's words
    arr = np.asarray(value)
    if arr.dtype.kind not in "iuf" or isinstance(value, np.ma.MaskedArray):
        raise TypeError(
            f"{name} must be an array of real numbers, got dtype {arr.dtype}"
            + (" (a masked array)" if isinstance(value, np.ma.MaskedArray) else "")
        )
    return np.array(arr, dtype=np.float64)


@dataclasses.dataclass(frozen=True, eq=False)
class FrequencyEstimate:
    """Estimated frequency of every item of a categorical domain.

    Attributes
    ----------
    frequencies : ndarray, shape (d,)
        The estimates. Straight from a frequency oracle they are unbiased (they may be
        negative and need not sum to 1); post-processing (:mod:`ldpkit.consistency`)
        returns a new estimate whose ``postprocessing`` names what was applied.
    variance : ndarray, shape (d,)
        Per-item variance. For an unbiased estimate this is the oracle's analytical
        variance at the (clipped) estimated frequency; after post-processing it is carried
        over unchanged and is then only a guide (post-processed estimates are biased).
    n : int
        Number of reports behind the estimate.
    spec : Mechanism or None
        The oracle that produced it (gives ``variance_null`` for significance tests).
    labels : sequence or None
        Item labels, when an :class:`ldpkit.Encoder` attached them.
    postprocessing : tuple of str
        Names of the post-processing steps applied, in order; empty means unbiased.
    """

    frequencies: np.ndarray
    variance: np.ndarray
    n: int
    spec: Any = None
    labels: Sequence[Any] | None = None
    postprocessing: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Validate and normalize the fields."""
        freq = _real_array(self.frequencies, "frequencies")
        if freq.ndim != 1 or freq.size == 0:
            raise ValueError(
                f"frequencies must be a non-empty 1-D array of finite numbers, got shape "
                f"{freq.shape}"
            )
        if not np.all(np.isfinite(freq)):
            raise ValueError(
                f"frequencies must be finite numbers, got {int((~np.isfinite(freq)).sum())} "
                "NaN/inf value(s)"
            )
        var = _real_array(self.variance, "variance")
        if var.shape not in ((), freq.shape):
            raise ValueError(
                f"variance must be a number or an array of shape {freq.shape} (one per "
                f"item), got shape {var.shape}"
            )
        var = np.broadcast_to(var, freq.shape).copy()
        bad = ~(np.isfinite(var) & (var >= 0))
        if bad.any():  # an infinite variance makes every interval and test meaningless
            raise ValueError(
                f"variance must be finite numbers >= 0 (no NaN or inf), got {float(var[bad][0])!r}"
            )
        if self.spec is not None:
            from .spec import Mechanism

            if not isinstance(self.spec, Mechanism):
                raise TypeError(f"spec must be an ldpkit mechanism spec or None, got {self.spec!r}")
            d = getattr(self.spec, "domain_size", None)
            if isinstance(d, int) and d != freq.size:
                raise ValueError(
                    f"spec must have domain_size {freq.size} (one per frequency), got {self.spec!r}"
                )
        if not isinstance(self.postprocessing, tuple) or not all(
            isinstance(step, str) for step in self.postprocessing
        ):
            raise TypeError(
                f"postprocessing must be a tuple of step names, got {self.postprocessing!r}"
            )
        for arr in (freq, var):
            arr.flags.writeable = False
        object.__setattr__(self, "frequencies", freq)
        object.__setattr__(self, "variance", var)
        object.__setattr__(self, "n", check_integer(self.n, "n", low=0))
        if self.labels is not None and len(self.labels) != freq.size:
            raise ValueError(
                f"labels must have one entry per item ({freq.size}), got {len(self.labels)}"
            )

    @property
    def domain_size(self) -> int:
        """Number of items d."""
        return int(self.frequencies.size)

    @property
    def unbiased(self) -> bool:
        """True when no post-processing has been applied."""
        return not self.postprocessing

    @property
    def std_error(self) -> np.ndarray:
        """Standard errors: the square roots of the variances."""
        return np.sqrt(self.variance)

    @property
    def counts(self) -> np.ndarray:
        """Estimated number of users holding each item (``frequencies * n``)."""
        return self.frequencies * self.n

    @property
    def variance_null(self) -> np.ndarray:
        """Variance of an item with true frequency 0 (FO17's Var*), for significance tests."""
        if self.spec is not None and hasattr(self.spec, "variance") and self.n > 0:
            return np.broadcast_to(
                np.asarray(self.spec.variance(self.n), dtype=np.float64), self.frequencies.shape
            )
        return self.variance

    def confidence_interval(self, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
        """Normal-approximation two-sided (1 - alpha) interval for each frequency.

        The unbiased estimate is a mean of n independent bounded terms, so it is
        asymptotically normal; the interval is ``f ± z_{1-alpha/2} * std_error``. After
        post-processing (:mod:`ldpkit.consistency`) the estimate is biased and this
        interval would not cover the truth (an item set to 0 would get ``[-2.3 SE, +2.3
        SE]``): both bounds are then NaN and an :class:`IntervalWarning` is issued.
        """
        alpha = check_probability(alpha, "alpha")
        if self.postprocessing:
            warnings.warn(
                f"confidence intervals are NaN: post-processing {list(self.postprocessing)} "
                "biases the estimate (use the plain estimate for intervals)",
                IntervalWarning,
                stacklevel=2,
            )
            nan = np.full(self.domain_size, np.nan)
            return nan, nan.copy()
        from scipy import special  # server side: not loaded on the client path

        z = float(-special.ndtri(alpha / 2.0))
        half = z * self.std_error
        return self.frequencies - half, self.frequencies + half

    def top(self, k: int, *, indices: bool = False) -> Any:
        """Return the k largest estimates, largest first.

        Returns their labels (a list) when labels are attached (:meth:`Encoder.label
        <ldpkit.Encoder.label>`), else, or with ``indices=True``, their item indices (an
        int array).
        """
        k = check_integer(k, "k", low=1, high=self.domain_size)
        idx = np.argpartition(-self.frequencies, k - 1)[:k]
        idx = idx[np.argsort(-self.frequencies[idx], kind="stable")]
        return self.labels_of(idx) if (self.labels is not None and not indices) else idx

    def labels_of(self, items: Any) -> list[Any]:
        """Return the labels of some item indices (the indices themselves without labels)."""
        idx = np.asarray(items, dtype=np.int64).reshape(-1)
        if self.labels is None:
            return idx.tolist()
        return [self.labels[i] for i in idx.tolist()]

    def replace(self, **changes: Any) -> FrequencyEstimate:
        """Return a copy with some attributes changed."""
        return dataclasses.replace(self, **changes)

    def with_postprocessing(self, frequencies: np.ndarray, step: str) -> FrequencyEstimate:
        """Return a post-processed copy: new frequencies, ``step`` added to ``postprocessing``."""
        return dataclasses.replace(
            self, frequencies=frequencies, postprocessing=(*self.postprocessing, step)
        )

    def to_frame(self, alpha: float = 0.05) -> Any:
        """Return a pandas DataFrame: one row per item, indexed by label (or item index).

        Columns ``item`` (the index, when labels are the DataFrame's index),
        ``frequency``, ``std_error``, ``ci_low`` and ``ci_high`` (the ``1 - alpha``
        interval of :meth:`confidence_interval`: NaN after post-processing).
        """
        import pandas as pd

        lo, hi = self.confidence_interval(alpha)
        data: dict[str, Any] = {
            "item": np.arange(self.domain_size),
            "frequency": self.frequencies,
            "std_error": self.std_error,
            "ci_low": lo,
            "ci_high": hi,
        }
        if self.labels is None:
            frame = pd.DataFrame(data).set_index("item")
        else:
            frame = pd.DataFrame(data, index=pd.Index(list(self.labels), name="label"))
        frame.attrs["alpha"] = alpha
        return frame

    def plot(self, ax: Any = None, *, alpha: float = 0.05, top: int | None = None) -> Any:
        """Bar chart of the estimates with ``1 - alpha`` error bars (matplotlib).

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Where to draw (default: a new figure's axes).
        alpha : float
            Error bars are the :meth:`confidence_interval` (none after post-processing).
        top : int, optional
            Only the ``top`` largest estimates, largest first (default: every item).

        Returns
        -------
        matplotlib.axes.Axes
        """
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        idx = np.arange(self.domain_size) if top is None else self.top(top, indices=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IntervalWarning)  # NaN bars: drawn without
            lo, hi = self.confidence_interval(alpha)
        f = self.frequencies[idx]
        err = np.vstack([f - lo[idx], hi[idx] - f])
        pos = np.arange(idx.size)
        ax.bar(pos, f, yerr=None if np.all(np.isnan(err)) else err, capsize=2)
        ax.set_xticks(pos, [str(x) for x in self.labels_of(idx)])
        ax.set_ylabel("estimated frequency")
        ax.axhline(0.0, color="black", lw=0.5)
        title = f"n = {self.n}"
        title += f", {1 - alpha:.0%} intervals" if self.unbiased else f", {self.postprocessing}"
        ax.set_title(title)
        return ax

    def __repr__(self) -> str:
        """Return a one-line summary."""
        spec = f", spec={self.spec!r}" if self.spec is not None else ""
        post = f", postprocessing={self.postprocessing}" if self.postprocessing else ""
        return f"FrequencyEstimate(d={self.domain_size}, n={self.n}{spec}{post})"
