"""Map arbitrary category labels to items 0..d-1 and back."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from .estimate import FrequencyEstimate

__all__ = ["Encoder"]

OTHER = "<other>"


class Encoder:
    """A fixed, public list of categories and their item numbers.

    The category list must be public (agreed before collection, e.g. a product catalogue);
    fitting it on users' raw values would leak them. :meth:`from_values` exists for
    simulations only.

    Parameters
    ----------
    categories : sequence of hashable
        Distinct labels; label ``categories[i]`` becomes item ``i``.
    unknown : {"error", "other"}
        What :meth:`encode` does with a label not in ``categories``: raise ValueError, or
        map it to an extra last item labelled ``"<other>"`` (then ``domain_size`` is
        ``len(categories) + 1``).

    Examples
    --------
    >>> enc = Encoder(["red", "green", "blue"], unknown="other")
    >>> enc.encode(["blue", "red", "mauve"]).tolist()
    [2, 0, 3]
    >>> enc.decode([3, 1]).tolist()
    ['<other>', 'green']
    """

    def __init__(
        self, categories: Iterable[Any], *, unknown: Literal["error", "other"] = "error"
    ) -> None:
        cats = list(categories)
        if unknown not in ("error", "other"):
            raise ValueError(f"unknown must be 'error' or 'other', got {unknown!r}")
        index = pd.Index(cats)
        if not index.is_unique:
            dupes = index[index.duplicated()].unique().tolist()[:5]
            raise ValueError(f"categories must be distinct, got duplicates {dupes}")
        if len(cats) + (unknown == "other") < 2:
            raise ValueError(f"categories must give a domain of at least 2 items, got {len(cats)}")
        self._index = index
        self._labels = np.array(cats + ([OTHER] if unknown == "other" else []), dtype=object)
        self.unknown = unknown

    @classmethod
    def from_values(
        cls,
        values: Iterable[Any],
        *,
        top: int | None = None,
        unknown: Literal["error", "other"] = "error",
    ) -> Encoder:
        """Categories ordered by frequency in ``values`` (simulation only: not private)."""
        counts = pd.Series(
            list(values) if not isinstance(values, (np.ndarray, pd.Series)) else values
        ).value_counts(sort=True)
        cats = counts.index.tolist()
        return cls(cats[:top] if top else cats, unknown=unknown)

    @property
    def categories(self) -> list[Any]:
        return self._index.tolist()

    @property
    def labels(self) -> np.ndarray:
        """Label of every item, including ``"<other>"`` when present."""
        return self._labels.copy()

    @property
    def domain_size(self) -> int:
        return int(self._labels.size)

    @property
    def other_item(self) -> int | None:
        return len(self._index) if self.unknown == "other" else None

    def encode(self, labels: Iterable[Any]) -> np.ndarray:
        """Items (int64) for ``labels``; vectorized through a hash index."""
        arr = labels if isinstance(labels, (np.ndarray, pd.Series, pd.Index)) else list(labels)
        items = self._index.get_indexer(arr).astype(np.int64)
        missing = items < 0
        if missing.any():
            if self.unknown == "error":
                bad = np.asarray(arr, dtype=object)[missing]
                raise ValueError(
                    f"labels must be among the encoder's {len(self._index)} categories, got "
                    f"{int(missing.sum())} unknown label(s) (e.g. {bad[0]!r}); "
                    "use Encoder(..., unknown='other') to bucket them"
                )
            items[missing] = len(self._index)
        return items

    def decode(self, items: Sequence[int] | np.ndarray) -> np.ndarray:
        """Labels for ``items``."""
        idx = np.asarray(items)
        if idx.dtype.kind not in "iu":
            raise TypeError(
                f"items must be integers in [0, {self.domain_size}), got dtype {idx.dtype}"
            )
        if idx.size and (idx.min() < 0 or idx.max() >= self.domain_size):
            raise ValueError(
                f"items must be integers in [0, {self.domain_size}), got {idx.min()}..{idx.max()}"
            )
        return self._labels[idx]

    def label(self, estimate: FrequencyEstimate) -> FrequencyEstimate:
        """Attach this encoder's labels to an estimate over the same domain."""
        if estimate.domain_size != self.domain_size:
            raise ValueError(
                f"estimate must cover {self.domain_size} items, got {estimate.domain_size}"
            )
        return estimate.replace(labels=tuple(self._labels.tolist()))

    def __len__(self) -> int:
        return self.domain_size

    def __repr__(self) -> str:
        return f"Encoder({len(self._index)} categories, unknown={self.unknown!r})"
