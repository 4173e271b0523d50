"""The :class:`Dataset` object every loader and generator returns."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_integer

__all__ = ["Dataset"]

Kind = Literal["numerical", "categorical"]


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr = np.array(arr, copy=True)
    arr.flags.writeable = False
    return arr


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class Dataset:
    """A named data set: one value per user, with its domain and provenance.

    Attributes
    ----------
    name : str
        Registry name (``ldpkit.datasets.list_datasets()``).
    kind : {"numerical", "categorical"}
        Numerical data sets hold ``float64`` values inside ``domain``; categorical data sets
        hold ``int64`` item indices in ``[0, len(labels))``.
    values : ndarray
        One entry per user (read-only).
    domain : (float, float) or None
        ``(low, high)`` of a numerical data set: every value satisfies
        ``low <= value <= high``. None for categorical data.
    labels : tuple of str or None
        Categorical data: the label of item ``i`` is ``labels[i]``. None for numerical data.
    licence, source, citation, description : str
        Provenance and documentation of the data (what one value means, what was removed).
    timestamps : ndarray of datetime64 or None
        For data sets ordered in time, the time of each value (non-decreasing).

    Notes
    -----
    The arrays are copied and made read-only so a cached data set cannot be changed by
    accident. ``n``, ``counts`` and ``frequencies`` are computed from ``values``.

    Examples
    --------
    >>> from ldpkit.datasets import zipf
    >>> data = zipf(s=1.1, d=8, n=1000, rng=0)
    >>> data.kind, data.n, data.domain_size
    ('categorical', 1000, 8)
    >>> int(data.counts.sum())
    1000
    """

    name: str
    kind: Kind
    values: np.ndarray
    licence: str
    source: str
    citation: str
    description: str
    domain: tuple[float, float] | None = None
    labels: tuple[str, ...] | None = None
    timestamps: np.ndarray | None = None

    def __post_init__(self) -> None:
        values = np.asarray(self.values)
        if values.ndim != 1:
            raise ValueError(f"values must be a 1-D array, got shape {values.shape}")
        if self.kind == "numerical":
            self._init_numerical(values)
        elif self.kind == "categorical":
            self._init_categorical(values)
        else:
            raise ValueError(f"kind must be 'numerical' or 'categorical', got {self.kind!r}")
        if self.timestamps is not None:
            ts = np.asarray(self.timestamps)
            if ts.shape != values.shape or ts.dtype.kind != "M":
                raise ValueError(
                    f"timestamps must be a datetime64 array of shape {values.shape}, "
                    f"got dtype {ts.dtype} and shape {ts.shape}"
                )
            object.__setattr__(self, "timestamps", _frozen(ts))

    def _init_numerical(self, values: np.ndarray) -> None:
        if self.domain is None or self.labels is not None:
            raise ValueError("a numerical data set needs domain=(low, high) and no labels")
        low, high = (float(x) for x in self.domain)
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(
                f"domain must be finite (low, high) with low < high, got {self.domain}"
            )
        if values.dtype.kind not in "iuf":
            raise TypeError(f"values must be numbers, got dtype {values.dtype}")
        values = values.astype(np.float64, copy=False)
        if values.size and not ((values >= low) & (values <= high)).all():  # NaN fails too
            raise ValueError(f"values must lie in the domain [{low:g}, {high:g}]")
        object.__setattr__(self, "domain", (low, high))
        object.__setattr__(self, "values", _frozen(values))

    def _init_categorical(self, values: np.ndarray) -> None:
        if self.labels is None or self.domain is not None:
            raise ValueError("a categorical data set needs labels and no domain")
        labels = tuple(str(x) for x in self.labels)
        if len(labels) < 1:
            raise ValueError("labels must not be empty")
        if values.dtype.kind not in "iu":
            raise TypeError(f"values must be integer item indices, got dtype {values.dtype}")
        if values.size and (values.min() < 0 or values.max() >= len(labels)):
            raise ValueError(f"values must be item indices in [0, {len(labels)})")
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "values", _frozen(values.astype(np.int64, copy=False)))

    # ---- derived quantities -------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of users (values)."""
        return int(self.values.shape[0])

    def __len__(self) -> int:
        return self.n

    @property
    def domain_size(self) -> int:
        """Number of items d of a categorical data set."""
        self._need("categorical", "domain_size")
        assert self.labels is not None
        return len(self.labels)

    @property
    def low(self) -> float:
        """Lower end of a numerical data set's domain."""
        self._need("numerical", "low")
        assert self.domain is not None
        return self.domain[0]

    @property
    def high(self) -> float:
        """Upper end of a numerical data set's domain."""
        self._need("numerical", "high")
        assert self.domain is not None
        return self.domain[1]

    @property
    def counts(self) -> np.ndarray:
        """Categorical data: number of users holding each item (int64, length d)."""
        self._need("categorical", "counts")
        return np.bincount(self.values, minlength=self.domain_size)

    @property
    def frequencies(self) -> np.ndarray:
        """Categorical data: fraction of users holding each item (the estimation target)."""
        counts = self.counts
        return counts / max(int(counts.sum()), 1)

    def _need(self, kind: str, what: str) -> None:
        if self.kind != kind:
            raise AttributeError(
                f"{what} is defined for {kind} data sets; {self.name} is {self.kind}"
            )

    # ---- derived data sets --------------------------------------------------------------
    def _derive(
        self, values: np.ndarray, timestamps: np.ndarray | None = None, **changes: Any
    ) -> Dataset:
        return dataclasses.replace(self, values=values, timestamps=timestamps, **changes)

    def sample(self, n: int, *, replace: bool = False, rng: RNGLike = None) -> Dataset:
        """Return a random subset of ``n`` users (uniform, without replacement by default).

        Sampling without replacement keeps the original order of the chosen users, so a
        time-ordered data set stays time-ordered.
        """
        limit = None if replace else self.n
        n = check_integer(n, "n", low=0, high=limit)
        gen = as_generator(rng)
        if replace:
            idx = gen.integers(0, self.n, size=n)
        else:
            idx = np.sort(gen.choice(self.n, size=n, replace=False))
        ts = None if self.timestamps is None or replace else self.timestamps[idx]
        return self._derive(self.values[idx], ts)

    def top_k(self, k: int) -> Dataset:
        """Keep the users whose item is among the ``k`` most frequent; relabel 0..k-1.

        Items are ranked by count (ties by lower index), so item 0 of the result is the
        most frequent. Users holding any other item are dropped.
        """
        self._need("categorical", "top_k")
        k = check_integer(k, "k", low=1, high=self.domain_size)
        counts = self.counts
        order = np.argsort(-counts, kind="stable")[:k]
        new_index = np.full(self.domain_size, -1, dtype=np.int64)
        new_index[order] = np.arange(k)
        mapped = new_index[self.values]
        keep = mapped >= 0
        assert self.labels is not None
        labels = tuple(self.labels[i] for i in order)
        ts = None if self.timestamps is None else self.timestamps[keep]
        return self._derive(mapped[keep], ts, labels=labels)

    def normalized(self) -> Dataset:
        """Numerical data mapped affinely from ``domain`` onto ``[0, 1]`` (as SW20 does)."""
        self._need("numerical", "normalized")
        low, high = self.low, self.high
        width = high - low
        if not (math.isfinite(width) and width > 0):
            # (-1e308, 1e308) overflows to an infinite width: every value would become 0
            raise ValueError(
                f"domain must have a finite width > 0 to be normalized, got ({low!r}, {high!r})"
            )
        scaled = np.clip((self.values - low) / width, 0.0, 1.0)
        return self._derive(scaled, self.timestamps, domain=(0.0, 1.0))

    def to_frame(self) -> Any:
        """Return the values (and timestamps, labels) as a pandas DataFrame."""
        import pandas as pd

        columns: dict[str, Any] = {"value": self.values}
        if self.kind == "categorical":
            assert self.labels is not None
            columns["label"] = pd.Categorical.from_codes(self.values, categories=list(self.labels))
        if self.timestamps is not None:
            columns["timestamp"] = self.timestamps
        return pd.DataFrame(columns)

    def __repr__(self) -> str:
        shape = (
            f"domain=({self.low:g}, {self.high:g})"
            if self.kind == "numerical"
            else f"domain_size={self.domain_size}"
        )
        return f"Dataset(name={self.name!r}, kind={self.kind!r}, n={self.n}, {shape})"
