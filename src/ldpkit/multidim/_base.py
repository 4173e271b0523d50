"""Shared base of the multi-attribute mechanisms: a tuple of categorical attributes per user.

Every user holds one item of each of ``d = len(domain_sizes)`` categorical attributes; a batch
of users is an ``(n, d)`` integer array whose column j holds items in ``[0, domain_sizes[j])``
(map raw categories with one :class:`ldpkit.Encoder` per attribute). The schema is declared
once, in the spec's ``domain_sizes``.

The estimate is a :class:`MultiFrequencyEstimate`: one :class:`ldpkit.FrequencyEstimate` per
attribute (marginal frequencies with their variance and intervals) and a long-format
``to_frame()``. Stats hold the concatenated per-attribute counts (``offsets`` locate each).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from .._constraints import Alternatives, Check
from .._validation import check_integer, check_not_masked, check_sequence
from ..estimate import FrequencyEstimate, IntervalWarning
from ..frequency._base import postprocess_method
from ..spec import Mechanism, Reports, Stats

__all__ = ["MultiAttributeMechanism", "MultiFrequencyEstimate", "check_tuples"]

#: Most attributes a spec may declare (each is one column of every report).
MAX_ATTRIBUTES = 64
#: Largest total of the domain sizes (one count per item of every attribute in the Stats).
MAX_TOTAL_ITEMS = 1 << 22
#: Largest product of the domain sizes for which ``transition_matrix()`` enumerates tuples.
MAX_ENUMERABLE_TUPLES = 4096


def check_domain_sizes(value: Any, name: str = "domain_sizes") -> tuple[int, ...]:
    """``value`` as a tuple of at least 2 domain sizes, each an integer >= 2."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        raise TypeError(
            f"{name} must be a sequence of integers >= 2 (one per attribute), got {value!r}"
        )
    items = check_sequence(value, name, "integers >= 2 (one per attribute)")
    if not 2 <= len(items) <= MAX_ATTRIBUTES:
        raise ValueError(
            f"{name} must hold 2 to {MAX_ATTRIBUTES} domain sizes (one per attribute), "
            f"got {len(items)}"
        )
    sizes = tuple(check_integer(k, f"{name}[{j}]", low=2) for j, k in enumerate(items))
    if sum(sizes) > MAX_TOTAL_ITEMS:
        raise ValueError(f"{name} must total at most {MAX_TOTAL_ITEMS} items, got {sum(sizes)}")
    return sizes


def check_tuples(values: Any, domain_sizes: Sequence[int], name: str = "values") -> np.ndarray:
    """``values`` as an int64 ``(n, d)`` array with column j in ``[0, domain_sizes[j])``."""
    check_not_masked(values, name)
    d = len(domain_sizes)
    want = f"an (n, {d}) array of item indices (column j in [0, domain_sizes[j]))"
    arr = np.asarray(values)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be {want}, got dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[1] != d:
        if arr.size == 0 and arr.ndim == 1:  # no users at all
            return np.zeros((0, d), dtype=np.int64)
        raise ValueError(f"{name} must be {want}, got shape {arr.shape}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.floor(arr)):
            raise TypeError(f"{name} must be {want}, got non-integer reals")
    out = arr.astype(np.int64, copy=False)
    if out.size:
        check_in_domains(out, domain_sizes, name, want)
    return out


def check_in_domains(
    items: np.ndarray, domain_sizes: Sequence[int], name: str, want: str, first: int = 0
) -> None:
    """Raise naming ``name`` at the first column holding an item outside its domain.

    ``items`` holds whole numbers (integer or float dtype), one column per categorical
    attribute; ``first`` is the column's index in the user's tuple (for the message).
    """
    sizes = np.asarray(domain_sizes, dtype=np.int64)
    bad = (items < 0) | (items >= sizes[None, :])
    if bad.any():
        col = int(np.flatnonzero(bad.any(axis=0))[0])
        raise ValueError(
            f"{name} must be {want}, got column {first + col} with items in "
            f"[{int(items[:, col].min())}, {int(items[:, col].max())}] for domain_sizes[{col}] "
            f"= {domain_sizes[col]}"
        )


def split_min_epsilon(minimum: float, parts: int) -> float:
    """Return the smallest epsilon whose even split in ``parts`` gives each ``>= minimum``.

    ``minimum * parts``, moved up by ulps while the rounding of the division falls short.
    """
    low = minimum * parts
    while low / parts < minimum:
        low = float(np.nextafter(low, np.inf))
    return low


def inner_aggregate(spec: Mechanism, inner: Mechanism, reports: Reports) -> Stats:
    """Aggregate ``spec``'s reports, which are ``inner``'s reports, into ``spec``'s Stats.

    For the specs that send one item of a derived domain (a product cell, a (group, bit)
    pair) through one frequency oracle: their reports and Stats are the oracle's.
    """
    stats = inner.aggregate(Reports(inner, **spec.check_reports(reports).arrays))
    return Stats(spec, stats.n, **stats.arrays)


def inner_output_index(spec: Mechanism, inner: Any, reports: Reports) -> np.ndarray:
    """Return the inner oracle's output column of each of ``spec``'s reports."""
    return np.asarray(inner.output_index(Reports(inner, **spec.check_reports(reports).arrays)))


def frequency_frame(est: FrequencyEstimate, alpha: float, **columns: Any) -> Any:
    """Return one attribute's rows of a ``to_frame`` table: a pandas DataFrame.

    ``columns`` (e.g. ``attribute``, ``kind``) first, then ``item``,
    ``estimate``, ``std_error``, ``low``, ``high`` (the ``1 - alpha`` normal interval; NaN,
    without a warning, after post-processing).
    """
    import pandas as pd

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IntervalWarning)
        lo, hi = est.confidence_interval(alpha)
    rows = {**columns, "item": np.arange(est.domain_size), "estimate": est.frequencies}
    rows.update(std_error=est.std_error, low=lo, high=hi)
    return pd.DataFrame(rows)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MultiAttributeMechanism(Mechanism):
    """A mechanism over a tuple of categorical attributes (one item of each per user).

    Parameters
    ----------
    epsilon : float
        What one user spends on her whole tuple (LDP for any two tuples).
    domain_sizes : sequence of int
        The number of items of each attribute (at least 2 attributes, each >= 2 items).
    """

    domain_sizes: tuple[int, ...]

    exact_epsilon: ClassVar[bool] = True
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "domain_sizes": [
            Check(
                check_domain_sizes,
                f"a sequence of 2 to {MAX_ATTRIBUTES} integers >= 2 (one per attribute), "
                f"totalling at most {MAX_TOTAL_ITEMS}",
                kind="tuple[int, ...]",
                hostile_values=[5, (3,), (3, 1), (3, 2.5), "ab", (3, True), (3, -1)],
                size=True,
                small=(3, 4),
            )
        ]
    }

    @property
    def attributes(self) -> int:
        """The number of attributes d."""
        return len(self.domain_sizes)

    @property
    def offsets(self) -> np.ndarray:
        """Where each attribute's items start in the concatenated counts (length d + 1)."""
        return np.concatenate([[0], np.cumsum(self.domain_sizes)]).astype(np.int64)

    def check_values(self, values: Any) -> np.ndarray:
        return check_tuples(values, self.domain_sizes, "values")

    def _item_counts(self, y: np.ndarray) -> np.ndarray:
        """Count the items of report rows ``y`` (one item of each attribute per row).

        The counts are concatenated: attribute j's at ``offsets[j]:offsets[j + 1]``. ``y``
        must have shape (n, d) with column j in ``[0, domain_sizes[j])``.
        """
        d = self.attributes
        if y.ndim != 2 or y.shape[1] != d:
            raise ValueError(f"reports.values must have shape (n, {d}), got {y.shape}")
        y64 = y.astype(np.int64)
        if y.size and np.any(y64 >= np.asarray(self.domain_sizes)[None, :]):
            raise ValueError("reports.values must be items in [0, domain_sizes[j]) per column")
        offsets = self.offsets
        return np.bincount((y64 + offsets[None, :-1]).ravel(), minlength=int(offsets[-1]))

    def empty_stats(self) -> Stats:
        schema = self.stats_schema() or {}
        return Stats(self, 0, **{k: np.zeros(f.shape, dtype=np.int64) for k, f in schema.items()})

    # -- exact law over tuples, for small domains ---------------------------------------
    def _tuples(self) -> np.ndarray:
        """Every input tuple, row-major (the last attribute varies fastest)."""
        total = int(np.prod(self.domain_sizes))
        if total > MAX_ENUMERABLE_TUPLES:
            raise NotImplementedError(
                f"{self.name} enumerates its input tuples only up to {MAX_ENUMERABLE_TUPLES}, "
                f"got {total}"
            )
        grids = np.meshgrid(*[np.arange(k) for k in self.domain_sizes], indexing="ij")
        return np.stack([g.ravel() for g in grids], axis=1)

    def _tuple_index(self, tuples: np.ndarray) -> np.ndarray:
        return np.ravel_multi_index(tuple(np.asarray(tuples, dtype=np.int64).T), self.domain_sizes)

    # -- hooks of ldpkit.testing.check_mechanism ------------------------------------------
    def _contract_values(self, n: int, gen: np.random.Generator) -> np.ndarray:
        sizes = np.asarray(self.domain_sizes)
        out = gen.integers(0, sizes[None, :], size=(n, self.attributes))
        out[0] = 0
        out[1] = sizes - 1  # both ends of every domain
        return out

    def _contract_bad_values(self) -> tuple[list[Any], list[Any]]:
        d, k = self.attributes, self.domain_sizes
        ok = [0] * d
        high = list(ok)
        high[-1] = k[-1]
        outside: list[Any] = [
            [ok, high],
            [ok, [-1, *ok[1:]]],
            [0, 1],  # one item per user, not a tuple
            [[*ok, 0]],  # one attribute too many
        ]
        wrong_type: list[Any] = [[ok, [0.5] * d], [["a"] * d], [[True] * d]]
        return outside, wrong_type

    def _contract_check_estimate(self, estimate: Any, stats: Stats) -> None:
        assert isinstance(estimate, MultiFrequencyEstimate), type(estimate).__name__
        assert len(estimate) == self.attributes, f"{len(estimate)} attributes"
        for j, (est, k) in enumerate(zip(estimate, self.domain_sizes, strict=True)):
            f, v = est.frequencies, est.variance
            assert f.shape == (k,) and v.shape == (k,), f"attribute {j}: shapes {f.shape}"
            assert np.all(np.isfinite(f)) and np.all(v >= 0), f"attribute {j}: not finite"
        total = int(sum(self.domain_sizes))
        assert estimate.frequencies.shape == (total,), estimate.frequencies.shape


@dataclasses.dataclass(frozen=True, eq=False)
class MultiFrequencyEstimate:
    """Marginal frequencies of every attribute of a tuple, each a :class:`FrequencyEstimate`.

    Attributes
    ----------
    estimates : tuple of FrequencyEstimate
        One per attribute, in the spec's order (``result[j]``).
    n : int
        Number of reports behind the estimate.
    spec : Mechanism
        The multi-attribute mechanism that produced it.
    """

    estimates: tuple[FrequencyEstimate, ...]
    n: int
    spec: Any = None

    def __post_init__(self) -> None:
        ests = tuple(self.estimates)
        if not ests or not all(isinstance(e, FrequencyEstimate) for e in ests):
            raise TypeError("estimates must be a non-empty tuple of FrequencyEstimate")
        object.__setattr__(self, "estimates", ests)
        object.__setattr__(self, "n", check_integer(self.n, "n", low=0))

    def __len__(self) -> int:
        return len(self.estimates)

    def __getitem__(self, j: int) -> FrequencyEstimate:
        return self.estimates[j]

    def __iter__(self) -> Any:
        return iter(self.estimates)

    @property
    def frequencies(self) -> np.ndarray:
        """Every attribute's frequencies, concatenated (as the Stats' counts)."""
        return np.concatenate([e.frequencies for e in self.estimates])

    @property
    def variance(self) -> np.ndarray:
        """Every attribute's per-item variance, concatenated."""
        return np.concatenate([e.variance for e in self.estimates])

    @property
    def postprocessing(self) -> tuple[str, ...]:
        return self.estimates[0].postprocessing

    def postprocess(self, method: str | Callable[[FrequencyEstimate], FrequencyEstimate]) -> Any:
        """Apply a consistency method to every attribute's estimate.

        ``method`` is a name of :data:`ldpkit.consistency.METHODS` (e.g. ``"ibu"`` or
        ``"norm_sub"``) or a function.
        """
        fn: Callable[[FrequencyEstimate], FrequencyEstimate]
        if isinstance(method, str):
            named = postprocess_method(method)  # a name of a method, or a ValueError
            assert named is not None
            fn = named
        elif callable(method):
            fn = method
        else:
            raise TypeError(f"method must be a method name or a function, got {method!r:.60}")
        return dataclasses.replace(self, estimates=tuple(fn(e) for e in self.estimates))

    def to_frame(self, alpha: float = 0.05) -> Any:
        """Return a long pandas DataFrame.

        One row per (attribute, item), with columns ``attribute``, ``item``, ``label``,
        ``estimate``, ``std_error``, ``low``, ``high`` (the ``1 - alpha`` normal interval;
        NaN after post-processing).
        """
        import pandas as pd

        frames = []
        for j, est in enumerate(self.estimates):
            labels = est.labels if est.labels is not None else range(est.domain_size)
            frame = frequency_frame(est, alpha, attribute=j)
            frame.insert(2, "label", list(labels))  # after attribute and item
            frames.append(frame)
        frame = pd.concat(frames, ignore_index=True)
        frame.attrs["alpha"] = alpha
        return frame

    def __repr__(self) -> str:
        return f"MultiFrequencyEstimate(d={len(self)}, n={self.n}, spec={self.spec!r})"


def grouped_support_counts(
    reports: Reports, group_field: str, offsets: np.ndarray, oracle_of: Callable[[int], Any]
) -> tuple[np.ndarray, np.ndarray]:
    """Count the support of users split into groups, each with its own oracle.

    Groups are CALM's marginals or HDG/TDG's grids. Returns the groups' counts
    concatenated at ``offsets`` (group m in ``counts[offsets[m]:offsets[m + 1]]``) and
    the group sizes.

    ``reports.<group_field>`` holds each user's group; the other fields are the oracle's
    report arrays (each group's oracle checks its own slice).
    """
    which = reports.arrays[group_field]
    groups = len(offsets) - 1
    if which.ndim != 1 or (which.size and int(which.max()) >= groups):
        raise ValueError(f"reports.{group_field} must be indices in [0, {groups})")
    w64 = which.astype(np.int64)
    order = np.argsort(w64, kind="stable")  # one sort, then each group is a slice
    sizes = np.bincount(w64, minlength=groups)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    counts = np.zeros(int(offsets[-1]), dtype=np.int64)
    fields = [k for k in reports.fields if k != group_field]
    for m in range(groups):  # a loop over groups, not users
        if not sizes[m]:
            continue
        rows = order[bounds[m] : bounds[m + 1]]
        spec = oracle_of(m)
        part = {k: reports.arrays[k][rows] for k in fields}
        counts[offsets[m] : offsets[m + 1]] = spec.support_counts(Reports(spec, **part))
    return counts, sizes
