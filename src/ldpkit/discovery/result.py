"""HeavyHitters: the strings a discovery spec found, with frequencies and intervals."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .._validation import check_probability

__all__ = ["HeavyHitters"]


@dataclasses.dataclass(frozen=True, eq=False)
class HeavyHitters:
    r"""Discovered strings, most frequent first, with their estimated frequencies.

    Attributes
    ----------
    items : tuple of str
        The strings (cut at the spec's ``max_length``; bytes that are not valid UTF-8
        appear as ``\xNN`` escapes).
    frequencies : ndarray
        Estimated share of the users holding each item (unbiased over the draw of the
        public hash family; see :mod:`ldpkit.discovery._search`).
    std_error : ndarray
        Standard error of each frequency (oracle noise, group sampling and untested
        collisions).
    n : int
        Number of reports behind the search.
    spec : PrefixDiscovery
        The spec that produced it.
    tested : int
        Number of candidate prefixes the search estimated, over every level: the family
        over which ``control`` holds.
    candidates_per_level : tuple of int
        How many candidates each level tested.

    Notes
    -----
    :meth:`confidence_interval` follows the spec's ``control``: None gives marginal
    ``1 - alpha`` intervals (valid for one item chosen in advance, not for the selected
    list); ``"fwer"`` Bonferroni intervals at ``1 - alpha / tested``, which hold for every
    tested prefix at once, hence for the returned ones whatever the selection;
    ``"fdr"`` false-coverage-rate intervals at ``1 - R alpha / tested`` for the R returned
    items (Benjamini and Yekutieli, "False Discovery Rate-Adjusted Multiple Confidence
    Intervals for Selected Parameters", JASA 2005, section 3).
    """

    items: tuple[str, ...]
    frequencies: np.ndarray
    std_error: np.ndarray
    n: int
    spec: Any
    tested: int
    candidates_per_level: tuple[int, ...] = ()

    def __len__(self) -> int:
        """Return the number of discovered strings."""
        return len(self.items)

    @property
    def control(self) -> str | None:
        """The spec's ``control`` setting (how the false discoveries are bounded)."""
        return self.spec.control

    def interval_level(self, alpha: float | None = None) -> float:
        """Return the per-item error level the intervals use at overall level ``alpha``."""
        a = self.spec.alpha if alpha is None else check_probability(alpha, "alpha")
        if self.control == "fwer":
            return a / max(self.tested, 1)
        if self.control == "fdr":
            return a * max(len(self.items), 1) / max(self.tested, 1)
        return a

    def confidence_interval(self, alpha: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Two-sided normal intervals, clipped to [0, 1] (default ``alpha``: the spec's)."""
        from scipy import special

        level = self.interval_level(alpha)
        z = float(-special.ndtri(level / 2.0))
        with np.errstate(invalid="ignore"):
            lo = np.clip(self.frequencies - z * self.std_error, 0.0, 1.0)
            hi = np.clip(self.frequencies + z * self.std_error, 0.0, 1.0)
        return lo, np.maximum(hi, lo)

    def to_frame(self, alpha: float | None = None) -> Any:
        """Return a DataFrame: ``item``, ``frequency``, ``std_error``, ``ci_low``, ``ci_high``."""
        import pandas as pd

        lo, hi = self.confidence_interval(alpha)
        frame = pd.DataFrame(
            {
                "item": list(self.items),
                "frequency": self.frequencies,
                "std_error": self.std_error,
                "ci_low": lo,
                "ci_high": hi,
            }
        )
        frame.attrs["alpha"] = self.spec.alpha if alpha is None else alpha
        frame.attrs["control"] = self.control
        return frame

    def plot(self, ax: Any = None, *, alpha: float | None = None) -> Any:
        """Horizontal bars of the items' frequencies with their intervals (matplotlib)."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        lo, hi = self.confidence_interval(alpha)
        f = self.frequencies
        pos = np.arange(len(self.items))[::-1]  # most frequent on top
        err = np.vstack([np.maximum(f - lo, 0.0), np.maximum(hi - f, 0.0)])
        ax.barh(pos, f, xerr=err if len(f) else None, capsize=2)
        ax.set_yticks(pos, list(self.items))
        ax.set_xlabel("estimated frequency")
        ax.set_title(f"{self.spec.name}: top {len(self.items)} of n = {self.n}")
        return ax

    def __repr__(self) -> str:
        """Return a one-line summary."""
        shown = ", ".join(repr(s) for s in self.items[:5])
        more = ", ..." if len(self.items) > 5 else ""
        return f"HeavyHitters([{shown}{more}], n={self.n}, spec={self.spec!r})"


def check_heavy_hitters(estimate: Any, top_k: int) -> None:
    """Check a discovery spec's result for the contract (``check_mechanism``'s hook).

    At most ``top_k`` string items, most frequent first, finite float64 frequencies and
    standard errors, intervals inside [0, 1]; AssertionError otherwise.
    """
    assert isinstance(estimate, HeavyHitters), f"estimate is {type(estimate).__name__}"
    k = len(estimate.items)
    assert k <= top_k, f"{k} items for top_k = {top_k}"
    assert all(isinstance(s, str) for s in estimate.items), "items are not strings"
    for name in ("frequencies", "std_error"):
        arr = np.asarray(getattr(estimate, name))
        assert arr.shape == (k,) and arr.dtype == np.float64, f"{name}: {arr.shape}"
    assert np.all(np.isfinite(estimate.frequencies)), "frequencies are not finite"
    assert np.all(np.diff(estimate.frequencies) <= 0), "items are not most frequent first"
    lo, hi = estimate.confidence_interval()
    assert np.all((lo <= hi) & (lo >= 0) & (hi <= 1)), "intervals outside [0, 1]"
