"""Map arbitrary category labels to items 0..d-1 and back."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from ._validation import check_integer, check_layout, check_not_masked, check_sequence
from .estimate import FrequencyEstimate

__all__ = ["Encoder"]

OTHER = "<other>"
MISSING = "<missing>"
#: Version of :meth:`Encoder.to_dict`'s layout; :meth:`Encoder.from_dict` refuses others.
FORMAT = 1


def _is_missing(label: Any) -> bool:
    """None, float NaN (incl. numpy's) and pandas' NA/NaT count as missing."""
    if label is None:
        return True
    try:
        return bool(label != label)  # NaN, NaT and pd.NA are the values unequal to themselves
    except (TypeError, ValueError):  # pd.NA raises on bool()
        return True


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
        map it to an extra item labelled ``"<other>"`` (then ``domain_size`` is
        ``len(categories) + 1``).
    missing : {"error", "item"}
        What :meth:`encode` does with a missing value (None, NaN, ``pd.NA``): raise
        ValueError, or map it to an extra last item labelled ``"<missing>"``, so that "no
        answer" is reported under the same privacy as any other answer (dropping it on the
        device would reveal that the value is missing).

    Two encoders are equal when their categories (in order) and policies are equal;
    :meth:`to_dict` / :meth:`from_dict` round-trip them through JSON or TOML.

    Examples
    --------
    >>> enc = Encoder(["red", "green", "blue"], unknown="other")
    >>> enc.encode(["blue", "red", "mauve"]).tolist()
    [2, 0, 3]
    >>> enc.decode([3, 1]).tolist()
    ['<other>', 'green']
    >>> Encoder.from_dict(enc.to_dict()) == enc
    True
    """

    def __init__(
        self,
        categories: Iterable[Any],
        *,
        unknown: Literal["error", "other"] = "error",
        missing: Literal["error", "item"] = "error",
    ) -> None:
        if isinstance(categories, (str, bytes)):
            raise TypeError(f"categories must be a sequence of labels, got {categories!r}")
        cats = check_sequence(categories, "categories", "labels")
        if unknown not in ("error", "other"):
            raise ValueError(f"unknown must be 'error' or 'other', got {unknown!r}")
        if missing not in ("error", "item"):
            raise ValueError(f"missing must be 'error' or 'item', got {missing!r}")
        reserved = [c for c in cats if isinstance(c, str) and c in (OTHER, MISSING)]
        if reserved:
            raise ValueError(
                f"categories must not contain the reserved labels {OTHER!r} or {MISSING!r}, "
                f"got {reserved[0]!r}"
            )
        if any(_is_missing(c) for c in cats):
            raise ValueError(
                "categories must not contain missing values (None, NaN); use missing='item'"
            )
        import pandas as pd  # the hash index; loaded with the first Encoder, not with ldpkit

        index = pd.Index(cats)
        if not index.is_unique:
            dupes = index[index.duplicated()].unique().tolist()[:5]
            raise ValueError(f"categories must be distinct, got duplicates {dupes}")
        extra = ([OTHER] if unknown == "other" else []) + ([MISSING] if missing == "item" else [])
        if len(cats) + len(extra) < 2:
            raise ValueError(f"categories must give a domain of at least 2 items, got {len(cats)}")
        self._index = index
        self._labels = np.array(cats + extra, dtype=object)
        self.unknown = unknown
        self.missing = missing

    @classmethod
    def from_values(
        cls,
        values: Iterable[Any],
        *,
        top: int | None = None,
        unknown: Literal["error", "other"] = "error",
        missing: Literal["error", "item"] = "error",
    ) -> Encoder:
        """Categories ordered by frequency in ``values`` (simulation only: not private).

        ``top`` (an integer >= 1, or None for all) keeps the most frequent categories.
        """
        import pandas as pd

        if top is not None:  # top=0 would silently keep every category
            top = check_integer(top, "top", low=1)

        counts = pd.Series(
            list(values) if not isinstance(values, (np.ndarray, pd.Series)) else values
        ).value_counts(sort=True, dropna=True)
        cats = counts.index.tolist()
        return cls(cats if top is None else cats[:top], unknown=unknown, missing=missing)

    # -- serialization -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Return a JSON/TOML-safe description; :meth:`from_dict` rebuilds an equal encoder.

        Categories must then be JSON scalars (str, int, float, bool).
        """
        cats = [c.item() if isinstance(c, np.generic) else c for c in self._index.tolist()]
        bad = [c for c in cats if not isinstance(c, (str, int, float, bool))]
        if bad:
            raise TypeError(
                f"categories must be str, int, float or bool to serialize, got {bad[0]!r}"
            )
        return {
            "format": FORMAT,
            "categories": cats,
            "unknown": self.unknown,
            "missing": self.missing,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Encoder:
        """Rebuild an encoder from :meth:`to_dict` output (checks the layout version)."""
        data = check_layout(data, "Encoder.to_dict", ("categories", "unknown", "missing"), FORMAT)
        if "categories" not in data:
            raise ValueError("data must have a 'categories' list, got none")
        return cls(
            data["categories"],
            unknown=data.get("unknown", "error"),
            missing=data.get("missing", "error"),
        )

    def __eq__(self, other: object) -> bool:
        """Compare categories, ``unknown`` and ``missing``."""
        if not isinstance(other, Encoder):
            return NotImplemented
        return (
            self.unknown == other.unknown
            and self.missing == other.missing
            and self._index.equals(other._index)
            and [type(c) for c in self._index] == [type(c) for c in other._index]
        )

    def __hash__(self) -> int:
        """Hash consistently with ``__eq__``."""
        return hash((tuple(self._index.tolist()), self.unknown, self.missing))

    @property
    def categories(self) -> list[Any]:
        """The known labels, in item order."""
        return self._index.tolist()

    @property
    def labels(self) -> np.ndarray:
        """Label of every item, including ``"<other>"`` when present."""
        return self._labels.copy()

    @property
    def domain_size(self) -> int:
        """Number of items, the extra items (other, missing) included."""
        return int(self._labels.size)

    @property
    def other_item(self) -> int | None:
        """The item unseen labels map to (``unknown='other'``), else None."""
        return len(self._index) if self.unknown == "other" else None

    @property
    def missing_item(self) -> int | None:
        """The item of missing values (the last one) when ``missing='item'``."""
        return self.domain_size - 1 if self.missing == "item" else None

    def encode(self, labels: Iterable[Any]) -> np.ndarray:
        """Items (int64) for ``labels``; vectorized through a hash index."""
        if isinstance(labels, (str, bytes)):
            raise TypeError(f"labels must be a sequence of labels, got the string {labels!r}")
        import pandas as pd

        check_not_masked(labels, "labels")
        if isinstance(labels, np.ndarray) and labels.ndim != 1:
            raise ValueError(f"labels must be a 1-D sequence of labels, got shape {labels.shape}")
        arr = (
            labels
            if isinstance(labels, (np.ndarray, pd.Series, pd.Index))
            else check_sequence(labels, "labels", "labels")
        )
        if isinstance(arr, list):
            # A label is one hashable scalar: nested sequences would reach pandas as a
            # MultiIndex lookup and fail there with its own message.
            bad = next((x for x in arr if isinstance(x, (list, dict, set, np.ndarray))), None)
            if bad is not None:
                raise TypeError(
                    f"labels must be a 1-D sequence of labels (scalars), got an element {bad!r}"
                )
        items = self._index.get_indexer(arr).astype(np.int64)
        unmatched = items < 0
        if unmatched.any():
            absent = np.asarray(pd.isna(arr), dtype=bool) & unmatched
            if absent.any():
                if self.missing == "error":
                    raise ValueError(
                        f"labels must not be missing (None/NaN), got {int(absent.sum())} "
                        "missing label(s); use Encoder(..., missing='item') to report them"
                    )
                items[absent] = self.domain_size - 1
                unmatched &= ~absent
        if unmatched.any():
            if self.unknown == "error":
                bad = np.asarray(arr, dtype=object)[unmatched]
                raise ValueError(
                    f"labels must be among the encoder's {len(self._index)} categories, got "
                    f"{int(unmatched.sum())} unknown label(s) (e.g. {bad[0]!r}); "
                    "use Encoder(..., unknown='other') to bucket them"
                )
            items[unmatched] = len(self._index)
        return items

    def decode(self, items: Sequence[int] | np.ndarray) -> np.ndarray:
        """Labels for ``items``."""
        check_not_masked(items, "items")
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
        """Return the number of items (``domain_size``)."""
        return self.domain_size

    def __repr__(self) -> str:
        """Return a one-line summary."""
        return (
            f"Encoder({len(self._index)} categories, unknown={self.unknown!r}, "
            f"missing={self.missing!r})"
        )
