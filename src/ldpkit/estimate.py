"""Frequency estimates with their variance and confidence intervals."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._validation import check_integer, check_probability

__all__ = ["FrequencyEstimate", "IntervalWarning"]


class IntervalWarning(UserWarning):
    """A confidence interval is not available (NaN) or only approximate: e.g. after a
    biased post-processing (Norm-Sub, ...) or for a non-linear estimator (EM/EMS)."""


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
        freq = np.array(self.frequencies, dtype=np.float64)
        var = np.broadcast_to(np.asarray(self.variance, dtype=np.float64), freq.shape).copy()
        if freq.ndim != 1:
            raise ValueError(f"frequencies must be a 1-D array, got shape {freq.shape}")
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
        return int(self.frequencies.size)

    @property
    def unbiased(self) -> bool:
        """True when no post-processing has been applied."""
        return not self.postprocessing

    @property
    def std_error(self) -> np.ndarray:
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

        The estimate is a mean of n independent bounded terms, so it is asymptotically
        normal; the interval is ``f ± z_{1-alpha/2} * std_error``.
        """
        from scipy import stats as _sps  # server side: not loaded on the client path

        alpha = check_probability(alpha, "alpha")
        z = float(_sps.norm.ppf(1.0 - alpha / 2.0))
        half = z * self.std_error
        return self.frequencies - half, self.frequencies + half

    def top(self, k: int) -> np.ndarray:
        """Indices of the k largest estimates, largest first."""
        k = check_integer(k, "k", low=1, high=self.domain_size)
        idx = np.argpartition(-self.frequencies, k - 1)[:k]
        return idx[np.argsort(-self.frequencies[idx], kind="stable")]

    def replace(self, **changes: Any) -> FrequencyEstimate:
        """A copy with some attributes changed."""
        return dataclasses.replace(self, **changes)

    def with_postprocessing(self, frequencies: np.ndarray, step: str) -> FrequencyEstimate:
        """A post-processed copy: new frequencies, ``step`` appended to ``postprocessing``."""
        return dataclasses.replace(
            self, frequencies=frequencies, postprocessing=(*self.postprocessing, step)
        )

    def to_frame(self) -> Any:
        """A pandas DataFrame with item, label, estimate, std_error and 95% interval."""
        import pandas as pd

        lo, hi = self.confidence_interval(0.05)
        data: dict[str, Any] = {
            "item": np.arange(self.domain_size),
            "frequency": self.frequencies,
            "std_error": self.std_error,
            "ci_low": lo,
            "ci_high": hi,
        }
        if self.labels is not None:
            data["label"] = list(self.labels)
        return pd.DataFrame(data)

    def __repr__(self) -> str:
        spec = f", spec={self.spec!r}" if self.spec is not None else ""
        post = f", postprocessing={self.postprocessing}" if self.postprocessing else ""
        return f"FrequencyEstimate(d={self.domain_size}, n={self.n}{spec}{post})"
