"""Results of the k-way marginal mechanisms: one table per marginal, with error bars.

:class:`MarginalTable` is one estimated marginal (a contingency table over some attributes)
with a per-cell variance, normal intervals, a long ``to_frame()`` and a heat-map ``plot()``;
:class:`MarginalsEstimate` holds every collected marginal and answers any requested one
(``result.marginal((i, j))``), by marginalizing a collected table that contains it, or by
max-entropy reconstruction from the collected tables (:mod:`ldpkit.multidim.maxent`).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._rng import RNGLike
from .._validation import check_integer, check_probability
from ..estimate import IntervalWarning

__all__ = ["MarginalTable", "MarginalsEstimate", "check_attributes"]


def check_attributes(attributes: Any, d: int, name: str = "attributes") -> tuple[int, ...]:
    """``attributes`` as a tuple of distinct attribute indices in ``[0, d)`` (non-empty)."""
    if isinstance(attributes, (int, np.integer)) and not isinstance(attributes, bool):
        attributes = (attributes,)
    if isinstance(attributes, (str, bytes)) or not hasattr(attributes, "__iter__"):
        raise TypeError(
            f"{name} must be a tuple of distinct attribute indices in [0, {d}), got {attributes!r}"
        )
    out = tuple(check_integer(a, name, low=0, high=d - 1) for a in attributes)
    if not out or len(set(out)) != len(out):
        raise ValueError(
            f"{name} must be a non-empty tuple of distinct attribute indices in [0, {d}), "
            f"got {attributes!r}"
        )
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class MarginalTable:
    """An estimated marginal: the joint frequencies of some attributes.

    Attributes
    ----------
    attributes : tuple of int
        The attributes, in the order of the table's axes.
    table : ndarray
        Estimated frequency of every combination (shape: the attributes' domain sizes).
    variance : ndarray
        Per-cell variance (same shape), the basis of the error bars.
    n : int
        Reports behind the whole estimate.
    postprocessing : tuple of str
        Steps applied beyond the linear estimate (none: intervals are available).
    method : {"collected", "max_entropy"}
        ``"collected"``: a collected table or a sum of its cells (unbiased; the variance
        is the estimator's). ``"max_entropy"``: reconstructed from the collected tables
        (:mod:`ldpkit.multidim.maxent`; it estimates the max-entropy table, and its
        variance is a parametric bootstrap's).
    """

    attributes: tuple[int, ...]
    table: np.ndarray
    variance: np.ndarray
    n: int
    postprocessing: tuple[str, ...] = ()
    method: str = "collected"

    def __post_init__(self) -> None:
        """Validate and normalize the fields."""
        t = np.array(self.table, dtype=np.float64)
        v = np.broadcast_to(np.asarray(self.variance, dtype=np.float64), t.shape).copy()
        if t.ndim != len(self.attributes) or not np.all(np.isfinite(t)):
            raise ValueError("table must be a finite array with one axis per attribute")
        if not np.all(np.isfinite(v) & (v >= 0)):
            raise ValueError("variance must be finite numbers >= 0")
        for arr in (t, v):
            arr.flags.writeable = False
        object.__setattr__(self, "table", t)
        object.__setattr__(self, "variance", v)

    @property
    def std_error(self) -> np.ndarray:
        """Standard errors: the square roots of the variances."""
        return np.sqrt(self.variance)

    def confidence_interval(self, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
        """Return the normal two-sided ``1 - alpha`` interval per cell (NaN if post-processed)."""
        alpha = check_probability(alpha, "alpha")
        if self.postprocessing:
            warnings.warn(
                f"confidence intervals are NaN: post-processing {list(self.postprocessing)} "
                "biases the estimate",
                IntervalWarning,
                stacklevel=2,
            )
            nan = np.full(self.table.shape, np.nan)
            return nan, nan.copy()
        from scipy import special

        half = float(-special.ndtri(alpha / 2.0)) * self.std_error
        return self.table - half, self.table + half

    def to_frame(self, alpha: float = 0.05) -> Any:
        """Return a long pandas DataFrame.

        One row per cell; a column per attribute (``attribute_<i>``: the item index), then
        ``estimate``, ``std_error``, ``low``, ``high``.
        """
        import pandas as pd

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IntervalWarning)
            lo, hi = self.confidence_interval(alpha)
        idx = np.indices(self.table.shape).reshape(len(self.attributes), -1)
        data: dict[str, Any] = {f"attribute_{a}": idx[i] for i, a in enumerate(self.attributes)}
        data.update(
            estimate=self.table.ravel(),
            std_error=self.std_error.ravel(),
            low=lo.ravel(),
            high=hi.ravel(),
        )
        frame = pd.DataFrame(data)
        frame.attrs["alpha"] = alpha
        return frame

    def plot(self, ax: Any = None, *, alpha: float = 0.05, annotate: bool | None = None) -> Any:
        """Plot a 2-way marginal as a heat map.

        Each cell annotated ``estimate ± half-width`` of its ``1 - alpha`` interval (by
        default when the table has at most 150 cells).
        """
        import matplotlib.pyplot as plt

        if self.table.ndim != 2:
            raise ValueError(f"plot needs a 2-way marginal, got {self.table.ndim} attributes")
        if ax is None:
            _, ax = plt.subplots()
        image = ax.imshow(self.table, cmap="viridis", aspect="auto", origin="lower")
        ax.figure.colorbar(image, ax=ax, label="estimated frequency")
        ax.set_ylabel(f"attribute {self.attributes[0]}")
        ax.set_xlabel(f"attribute {self.attributes[1]}")
        if annotate is None:
            annotate = self.table.size <= 150
        if annotate:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", IntervalWarning)
                lo, hi = self.confidence_interval(alpha)
            for (i, j), value in np.ndenumerate(self.table):
                half = (hi[i, j] - lo[i, j]) / 2.0
                text = f"{value:.3f}" + ("" if np.isnan(half) else f"\n±{half:.3f}")
                ax.text(j, i, text, ha="center", va="center", fontsize=6, color="white")
        ax.set_title(f"n = {self.n}, {1 - alpha:.0%} intervals")
        return ax

    def __repr__(self) -> str:
        """Return a one-line summary."""
        return f"MarginalTable(attributes={self.attributes}, shape={self.table.shape}, n={self.n})"


@dataclasses.dataclass(frozen=True, eq=False)
class MarginalsEstimate:
    """Every collected marginal of a k-way marginal mechanism.

    Answers any marginal that a collected one contains (``marginal((i, j))``).

    Attributes
    ----------
    tables : tuple of MarginalTable
        The collected marginals (after the mechanism's consistency step, if any).
    n : int
        Number of reports.
    spec : Mechanism
        The mechanism that produced it.
    """

    tables: tuple[MarginalTable, ...]
    n: int
    spec: Any = None
    #: Per collected table, the variance of its cells before the consistency step (CALM),
    #: the noise a max-entropy reconstruction's bootstrap redraws (None: ``tables``').
    plain_variances: tuple[np.ndarray, ...] | None = None
    #: ``f(attributes, {table: weight})``: the exact per-cell variance of the weighted sum
    #: of collected tables' projections on ``attributes`` (CALM with ``ell > way``); None:
    #: the summed cells' variances, the tables taken as independent.
    projection_variance: Callable[[tuple[int, ...], dict[int, float]], np.ndarray] | None = None

    @property
    def frequencies(self) -> np.ndarray:
        """Every collected table's cells, concatenated."""
        return np.concatenate([t.table.ravel() for t in self.tables])

    @property
    def variance(self) -> np.ndarray:
        """Every cell's variance, the tables concatenated."""
        return np.concatenate([t.variance.ravel() for t in self.tables])

    def marginal(
        self, attributes: Sequence[int], *, replicates: int = 200, rng: RNGLike = 0
    ) -> MarginalTable:
        """Return the marginal of ``attributes`` (any order; the table's axes follow it).

        Summed from the collected table that contains the attributes (their average when
        several do); its variance is the sum of the summed cells' variances. When no
        collected table contains them all (e.g. a 3-way marginal from CALM's 2-way ones),
        the max-entropy table whose projections are the collected tables (CALM, CCS 2018,
        sec. 4.5; :func:`ldpkit.multidim.maxent.reconstruct`), its ``method``
        ``"max_entropy"`` and its variance a parametric bootstrap of ``replicates`` draws
        from ``rng`` (fixed by default: the same estimate gives the same error bars).
        """
        d = len(self.spec.domain_sizes)
        attrs = check_attributes(attributes, d)
        index = [i for i, t in enumerate(self.tables) if set(attrs) <= set(t.attributes)]
        found = [self.tables[i] for i in index]
        if not found:
            from .maxent import reconstruct

            noise = self.plain_variances or tuple(t.variance for t in self.tables)
            collected = [
                (t.attributes, t.table, v) for t, v in zip(self.tables, noise, strict=True)
            ]
            table, var = reconstruct(
                collected, attrs, self.spec.domain_sizes, replicates=replicates, rng=rng
            )
            post = self.tables[0].postprocessing
            return MarginalTable(attrs, table, var, self.n, post, method="max_entropy")
        tables, variances = [], []
        for t in found:
            drop = tuple(i for i, a in enumerate(t.attributes) if a not in attrs)
            kept = [a for a in t.attributes if a in attrs]
            order = [kept.index(a) for a in attrs]
            tables.append(np.transpose(t.table.sum(axis=drop), order))
            variances.append(np.transpose(t.variance.sum(axis=drop), order))
        post = found[0].postprocessing
        if len(found) == 1 and self.projection_variance is None:
            return MarginalTable(attrs, tables[0], variances[0], self.n, post)
        # inverse-variance weights per table (the tables come from disjoint users)
        w = np.array([1.0 / max(float(v.mean()), 1e-300) for v in variances])
        w /= w.sum()
        table = sum(wi * t for wi, t in zip(w, tables, strict=True))
        if self.projection_variance is not None:  # the tables share users' noise: exact
            var = self.projection_variance(attrs, dict(zip(index, w.tolist(), strict=True)))
        else:
            var = sum(wi**2 * v for wi, v in zip(w, variances, strict=True))
        return MarginalTable(attrs, np.asarray(table), np.asarray(var), self.n, post)

    def to_frame(self, alpha: float = 0.05) -> Any:
        """Every collected marginal's long frame, stacked (a ``marginal`` column names it)."""
        import pandas as pd

        frames = []
        for t in self.tables:
            frame = t.to_frame(alpha)
            frame.insert(0, "marginal", "x".join(str(a) for a in t.attributes))
            frames.append(frame)
        out = pd.concat(frames, ignore_index=True)
        out.attrs["alpha"] = alpha
        return out

    def __repr__(self) -> str:
        """Return a one-line summary."""
        return f"MarginalsEstimate({len(self.tables)} marginals, n={self.n}, spec={self.spec!r})"
