"""The mechanism contract: frozen specs, Reports (wire), Stats (mergeable sufficient statistics).

Flow: ``spec.randomize(values, rng=...) -> Reports -> spec.aggregate -> Stats -> merge ->
spec.estimate``. A spec is the single source of truth for a protocol's constants; Reports and
Stats carry the spec they were made under, and refuse to mix with another configuration.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from ._constraints import (
    Alternatives,
    Boolean,
    Check,
    Epsilon,
    Integer,
    Options,
    Real,
    Ref,
    Size,
    check_parameter,
    size_fields,
)
from ._rng import RNGLike
from ._validation import _show as _show_array
from ._validation import check_memory, check_not_masked, check_same_spec

__all__ = [
    "MAX_REPORTS",
    "Mechanism",
    "Reports",
    "Stats",
    "StatsField",
    "mechanism_registry",
    "spec_from_dict",
    # the constraint kinds a spec declares its fields with (``_parameter_constraints``)
    "Boolean",
    "Check",
    "Epsilon",
    "Integer",
    "Options",
    "Real",
    "Ref",
    "Size",
]

#: Largest number of reports one Stats may summarize (2^53: every count is then exact in
#: float64, and any per-report bound up to 2^9 keeps int64 sums far from overflow).
MAX_REPORTS = 2**53

#: The only layout :meth:`Stats.to_dict` writes and :meth:`Stats.from_dict` reads.
STATS_FORMAT = "ldpkit.stats/1"

_REGISTRY: dict[str, type[Mechanism]] = {}
_CONSTRAINTS: dict[type, dict[str, Alternatives]] = {}
_DECLARED: dict[type, tuple[tuple[tuple[str, Alternatives], ...], tuple[str, ...]]] = {}


def _declared(cls: type[Mechanism]) -> tuple[tuple[tuple[str, Alternatives], ...], tuple[str, ...]]:
    """Return the declared fields of ``cls`` (with their alternatives) and its size fields.

    Both in field order, computed once per class: every construction reads them.
    """
    got = _DECLARED.get(cls)
    if got is None:
        constraints = cls.parameter_constraints()
        names = [f.name for f in dataclasses.fields(cls)]
        sizes = set(size_fields(cls))
        got = (
            tuple((n, constraints[n]) for n in names if n in constraints),
            tuple(n for n in names if n in sizes),
        )
        _DECLARED[cls] = got
    return got


def _load_mechanisms() -> None:
    # Classes register when their module runs, and ldpkit.frequency / ldpkit.numeric load
    # their modules lazily (ldpkit._lazy): touch every public name so all of them register.
    import importlib

    for package in (
        "ldpkit.frequency",
        "ldpkit.numeric",
        "ldpkit.sets",
        "ldpkit.longitudinal",
        "ldpkit.multidim",
    ):
        module = importlib.import_module(package)
        for name in module.__all__:
            getattr(module, name)
    importlib.import_module("ldpkit.discovery")  # PEM, TreeHist: imported eagerly


def mechanism_registry() -> Mapping[str, type[Mechanism]]:
    """All public concrete mechanism classes by name (read-only view)."""
    _load_mechanisms()
    return MappingProxyType(
        {k: v for k, v in _REGISTRY.items() if not inspect.isabstract(v) and not k.startswith("_")}
    )


def spec_from_dict(data: Mapping[str, Any]) -> Mechanism:
    """Rebuild a spec from :meth:`Mechanism.to_dict` output."""
    if not isinstance(data, Mapping):
        raise TypeError(f"data (a spec dict) must be a mapping, got {type(data).__name__}")
    name = data.get("mechanism")
    if name not in _REGISTRY:
        _load_mechanisms()  # its module may not be imported yet
    public = mechanism_registry()  # private and abstract classes are not buildable from data
    if not isinstance(name, str) or name not in public:
        raise ValueError(f"mechanism must be one of {sorted(public)}, got {name!r}")
    params = data.get("params")
    if not isinstance(params, Mapping) or not all(isinstance(k, str) for k in params):
        raise ValueError(f"params must be a mapping of field names, got {params!r}")
    fields = {f.name for f in dataclasses.fields(public[name])}
    unknown = sorted(set(params) - fields)
    if unknown:
        raise ValueError(f"params must be fields of {name} {sorted(fields)}, got {unknown}")
    return public[name]._from_params(dict(params))


def _plain(value: Any) -> Any:
    """Convert a parameter value to a JSON-safe canonical form."""
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True, kw_only=True)
class Mechanism(ABC):
    """Base class of every mechanism spec: a frozen, hashable, picklable configuration.

    Subclasses are ``@dataclass(frozen=True, kw_only=True)`` and validate their fields in
    :meth:`_validate`; derived constants are computed from the fields, never stored twice.

    Parameters
    ----------
    epsilon : float
        The privacy budget of one report; finite and > 0.
    """

    epsilon: float
    name: ClassVar[str] = "Mechanism"
    #: Largest accepted epsilon: where the sampler still realizes the mechanism's law
    #: exactly. Every mechanism accepts ``[MIN_EPSILON, max_epsilon]``.
    max_epsilon: ClassVar[float] = math.inf
    #: Report fields sent as real numbers (finite float64); every other report field holds
    #: integers (indices, bits, seeds, signs). :class:`Reports` checks each field's dtype.
    float_report_fields: ClassVar[frozenset[str]] = frozenset()
    #: Each init field's accepted values (see :mod:`ldpkit._constraints`): subclasses
    #: declare their own fields; :meth:`parameter_constraints` merges the classes' dicts.
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {"epsilon": [Epsilon()]}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Name the subclass (``name`` defaults to the class name)."""
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__
        _REGISTRY[cls.name] = cls

    @classmethod
    def parameter_constraints(cls) -> dict[str, Alternatives]:
        """Return each declared field's accepted alternatives, subclasses overriding bases."""
        merged = _CONSTRAINTS.get(cls)
        if merged is None:
            merged = {}
            for klass in reversed(cls.__mro__):
                merged.update(klass.__dict__.get("_parameter_constraints", {}))
            _CONSTRAINTS[cls] = merged
        return merged

    def __post_init__(self) -> None:
        """Check the declared fields, then ``_validate``, then the state's memory budget."""
        checks, size_names = _declared(type(self))
        for name, alternatives in checks:  # in field order: a Ref bound reads earlier fields
            self._set(name, check_parameter(getattr(self, name), name, alternatives, self))
        self._validate()
        schema = self.stats_schema()
        if schema is not None:  # refuse up front what the server could never hold
            entries = sum(math.prod(field.shape) for field in schema.values())
            sizes = [
                f"{name}={getattr(self, name)!r}"
                for name in size_names
                if getattr(self, name) is not None
            ]
            check_memory(8.0 * entries, ", ".join(sizes) or "the configuration", self.name)

    def _validate(self) -> None:  # noqa: B027 - optional hook, not abstract
        """Validate and normalize the subclass's own fields (override)."""

    def _set(self, field: str, value: Any) -> None:
        object.__setattr__(self, field, value)

    # -- identity ------------------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        """Return the spec's fields as a plain dict (JSON-safe)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def _from_params(cls, params: dict[str, Any]) -> Mechanism:
        """Build the spec from :meth:`params` output.

        A spec whose ``params`` omits a field, to keep an older wire identity, restores it
        here.
        """
        return cls(**params)

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"mechanism": name, "params": params()}`` (JSON-safe)."""
        return {"mechanism": self.name, "params": self.params()}

    @property
    def fingerprint(self) -> str:
        """A short stable hash of the configuration; reports/stats carry it on the wire."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def replace(self, **changes: Any) -> Mechanism:
        """Return a copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    # -- the flow ------------------------------------------------------------------------
    @abstractmethod
    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Randomize one value per user (vectorized over users)."""

    @abstractmethod
    def aggregate(self, reports: Reports) -> Stats:
        """Reduce reports to their mergeable sufficient statistic."""

    def _aggregate_decoded(self, arrays: dict[str, np.ndarray]) -> Stats:
        """Aggregate ``Reports(self, **arrays)`` for plain arrays from the collector's decoder.

        One row per user, each field of this spec's report dtype.

        Same result and same errors as ``aggregate``; subclasses may skip checks that such
        arrays make redundant (:class:`ldpkit.frequency.PureFrequencyOracle` does: a
        collector group of a few reports spends most of its aggregate in them).
        """
        return self.aggregate(Reports(self, **arrays))

    @abstractmethod
    def empty_stats(self) -> Stats:
        """Return the neutral element of :meth:`Stats.merge` for this spec."""

    def stats_schema(self) -> Mapping[str, StatsField] | None:
        """Return the fields of this spec's :class:`Stats`.

        Name -> shape, kind and the range n reports can produce. :class:`Stats` checks every
        construction against it (None: unchecked, only for specs outside the registry).
        """
        return None

    @abstractmethod
    def estimate(self, stats: Stats) -> Any:
        """Turn (merged) statistics into an estimate."""

    def run(self, values: Any, *, rng: RNGLike = None) -> Any:
        """Simulate the whole protocol on raw values: randomize, aggregate, estimate."""
        reports = self.randomize(values, rng=rng)
        if len(reports) == 0:  # no estimate from no user; say so in terms of the input
            raise ValueError("values must hold at least one value to estimate from, got none")
        return self.estimate(self.aggregate(reports))

    def check_reports(self, reports: Any) -> Reports:
        """Raise unless ``reports`` are Reports made under this exact configuration."""
        if not isinstance(reports, Reports):
            raise TypeError(f"reports must be ldpkit.Reports, got {type(reports).__name__}")
        check_same_spec(self, reports.spec, "reports")
        return reports

    def check_stats(self, stats: Any, *, nonempty: bool = False) -> Stats:
        """Raise unless ``stats`` are Stats made under this exact configuration.

        With ``nonempty``, they must also summarize at least one report, as every estimate
        needs.
        """
        if not isinstance(stats, Stats):
            raise TypeError(f"stats must be ldpkit.Stats, got {type(stats).__name__}")
        check_same_spec(self, stats.spec, "stats")
        if nonempty and stats.n == 0:
            raise ValueError("stats must summarize at least one report, got n = 0")
        return stats


def _readonly(arr: np.ndarray) -> np.ndarray:
    view = arr.view()
    view.setflags(write=False)  # (cheaper than through the flags object)
    return view


class _ArrayBundle:
    """Shared machinery of Reports and Stats: a spec plus named, read-only arrays."""

    __slots__ = ("_arrays", "_spec")
    _spec: Mechanism
    _arrays: dict[str, np.ndarray]

    def __init__(self, spec: Mechanism, arrays: Mapping[str, Any]) -> None:
        if not isinstance(spec, Mechanism):
            raise TypeError(f"spec must be an ldpkit mechanism spec, got {type(spec).__name__}")
        object.__setattr__(self, "_spec", spec)
        checked = {}
        for k, v in arrays.items():
            check_not_masked(v, k)  # np.asarray would drop the mask
            arr = np.asarray(v)
            if arr.dtype.kind not in "biuf":  # wire arrays are bits, integers or floats
                raise TypeError(f"{k} must be an array of numbers, got {_show_array(arr)}")
            checked[k] = _readonly(arr)
        object.__setattr__(self, "_arrays", checked)

    @property
    def spec(self) -> Mechanism:
        return self._spec

    @property
    def fingerprint(self) -> str:
        return self._spec.fingerprint

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(self._arrays)

    @property
    def arrays(self) -> Mapping[str, np.ndarray]:
        return MappingProxyType(self._arrays)

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return object.__getattribute__(self, "_arrays")[name]
        except KeyError:
            raise AttributeError(
                f"{type(self).__name__} of {self._spec.name} has no field {name!r}; "
                f"fields are {list(self._arrays)}"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self._spec, "arrays": {k: np.array(v) for k, v in self._arrays.items()}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        _ArrayBundle.__init__(self, state["spec"], state["arrays"])

    def _same_arrays(self, other: _ArrayBundle) -> bool:
        return self._arrays.keys() == other._arrays.keys() and all(
            np.array_equal(v, other._arrays[k]) for k, v in self._arrays.items()
        )


class Reports(_ArrayBundle):
    """What users send: one row per user in each named array, plus the spec they used.

    Arrays are read-only. ``len(reports)`` is the number of users; ``reports[i:j]`` or
    ``reports[mask]`` selects users; :meth:`concat` joins batches made under one spec.
    """

    __slots__ = ()

    def __init__(self, spec: Mechanism, **arrays: Any) -> None:
        if not arrays:
            raise ValueError("reports must hold at least one array")
        super().__init__(spec, arrays)
        lengths = {k: v.shape[0] if v.ndim else -1 for k, v in self._arrays.items()}
        if len(set(lengths.values())) != 1 or -1 in lengths.values():
            raise ValueError(f"report arrays must all have one row per user, got lengths {lengths}")
        # Each field's dtype per the spec: what a mechanism sends is integers except its
        # float_report_fields, which are finite reals; never booleans.
        floats = type(spec).float_report_fields
        for k, arr in self._arrays.items():
            if k in floats:
                if arr.dtype.kind not in "iuf":
                    raise TypeError(
                        f"{k} must be an array of finite real numbers (a report field of "
                        f"{spec.name}), got {_show_array(arr)}"
                    )
                if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
                    raise ValueError(
                        f"{k} must be an array of finite real numbers (a report field of "
                        f"{spec.name}), got {int((~np.isfinite(arr)).sum())} NaN/inf value(s)"
                    )
            elif arr.dtype.kind not in "iu":
                raise TypeError(
                    f"{k} must be an array of integers (a report field of {spec.name}), "
                    f"got {_show_array(arr)}"
                )

    @classmethod
    def _from_decoded(cls, spec: Mechanism, arrays: dict[str, np.ndarray]) -> Reports:
        """Return ``Reports(spec, **arrays)`` for arrays made by the collector's decoder.

        The same checks on what :meth:`__init__` checks, in fewer steps (plain ndarrays need
        no mask or conversion pass). Anything unusual goes through ``__init__`` for its
        message. The arrays become read-only in place (the caller hands them over).
        """
        floats = type(spec).float_report_fields
        n = -1
        for k, arr in arrays.items():
            if type(arr) is not np.ndarray or not arr.ndim or (n >= 0 and arr.shape[0] != n):
                break
            kind = arr.dtype.kind
            if kind not in "iu" and (kind != "f" or k not in floats or not np.isfinite(arr).all()):
                break
            n = arr.shape[0]
            arr.setflags(write=False)
        else:
            if n >= 0 and isinstance(spec, Mechanism):
                out = object.__new__(cls)
                object.__setattr__(out, "_spec", spec)
                object.__setattr__(out, "_arrays", arrays)
                return out
        return cls(spec, **arrays)  # (raises, naming the field)

    def __len__(self) -> int:
        """Return the number of reports n."""
        return int(next(iter(self._arrays.values())).shape[0])

    def __getitem__(self, index: Any) -> Reports:
        """Return the reports selected by ``index`` (the same spec)."""
        return Reports(self._spec, **{k: v[index] for k, v in self._arrays.items()})

    def concat(self, *others: Reports) -> Reports:
        """Join this batch with others made under the same spec (raises otherwise)."""
        for other in others:
            if not isinstance(other, Reports):
                raise TypeError(f"reports must be ldpkit.Reports, got {type(other).__name__}")
            check_same_spec(self._spec, other.spec, "reports")
            if other.fields != self.fields:
                raise ValueError(f"reports must have fields {self.fields}, got {other.fields}")
            for k, v in self._arrays.items():  # no silent upcast (e.g. uint8 bits -> int64)
                w = other._arrays[k]
                if w.dtype != v.dtype or w.shape[1:] != v.shape[1:]:
                    raise ValueError(
                        f"reports.{k} must have dtype {v.dtype} and row shape {v.shape[1:]} "
                        f"in every batch, got {w.dtype} and {w.shape[1:]}"
                    )
        return Reports(
            self._spec,
            **{
                k: np.concatenate([self._arrays[k]] + [o._arrays[k] for o in others])
                for k in self.fields
            },
        )

    def equals(self, other: Reports) -> bool:
        """Return True when both hold the same spec and identical arrays."""
        return self._spec == other.spec and self._same_arrays(other)

    def __repr__(self) -> str:
        """Return a one-line summary."""
        return f"Reports({self._spec!r}, n={len(self)}, fields={list(self._arrays)})"


@dataclasses.dataclass(frozen=True)
class StatsField:
    """Schema of one :class:`Stats` array.

    Every entry lies in ``[low * n, high * n]`` for a Stats of n reports (the most n
    reports can contribute); with ``total`` set, the entries sum to exactly
    ``total * n`` (e.g. one count per report). ``integer`` fields are stored as int64;
    the others as finite float64 (bounds then checked with a relative slack of 1e-9 for
    rounding).
    """

    shape: tuple[int, ...]
    low: float = 0.0
    high: float = 1.0
    integer: bool = True
    total: int | None = None

    def check(self, name: str, value: Any, n: int) -> np.ndarray:
        """Return ``value`` as this field's array for n reports, or raise ValueError/TypeError."""
        check_not_masked(value, f"stats.{name}")
        arr = np.asarray(value)
        kinds = "iu" if self.integer else "iuf"
        want = "integers" if self.integer else "real numbers"
        if arr.dtype.kind not in kinds:
            raise TypeError(f"stats.{name} must be an array of {want}, got dtype {arr.dtype}")
        if arr.shape != self.shape:
            raise ValueError(
                f"stats.{name} must have shape {self.shape} for this spec, got {arr.shape}"
            )
        lo, hi = self.low * n, self.high * n
        if self.integer:
            if arr.size and (int(arr.min()) < lo or int(arr.max()) > hi):
                raise ValueError(
                    f"stats.{name} must be integers in [{lo:g}, {hi:g}] for n = {n} reports, "
                    f"got values in [{int(arr.min())}, {int(arr.max())}]"
                )
            out = arr.astype(np.int64, copy=False)
            if self.total is not None and int(out.sum(dtype=np.int64)) != self.total * n:
                raise ValueError(
                    f"stats.{name} must {'sum to' if self.shape else 'be'} {self.total * n} "
                    f"for n = {n} reports, "
                    f"got {int(out.sum(dtype=np.int64))}"
                )
            return out
        out = arr.astype(np.float64, copy=False)
        if not np.all(np.isfinite(out)):
            raise ValueError(f"stats.{name} must be finite, got NaN or infinity")
        slack = 1e-9 * max(abs(lo), abs(hi), 1.0)
        if out.size and (float(out.min()) < lo - slack or float(out.max()) > hi + slack):
            raise ValueError(
                f"stats.{name} must be in [{lo:g}, {hi:g}] for n = {n} reports, "
                f"got values in [{float(out.min()):g}, {float(out.max()):g}]"
            )
        return out


#: Name of the Stats field counting the reports, for specs whose other arrays do not fix n
#: (sums of reals or of noisy counts, support counts that vary per report): it must equal
#: n, so Stats whose n disagrees with their arrays (n = 10**9 beside the arrays of 3000
#: reports, which understates the variance ~3e5 times) are refused.
REPORT_COUNT = "count"


def with_report_count(schema: Mapping[str, StatsField]) -> dict[str, StatsField]:
    """Add a :data:`REPORT_COUNT` field equal to n to ``schema``, unless it is implied.

    Implied when one of its fields already sums to a multiple of n (``total``).
    """
    if any(field.total is not None for field in schema.values()):
        return dict(schema)
    return {**schema, REPORT_COUNT: StatsField((), total=1)}


def report_count_arrays(spec: Mechanism, n: int) -> dict[str, np.ndarray]:
    """Return ``{REPORT_COUNT: n}`` when ``spec``'s schema has that field, else ``{}``.

    What a wrapper adds to an inner spec's arrays to make its own Stats.
    """
    schema = spec.stats_schema()
    return {REPORT_COUNT: np.array(n, dtype=np.int64)} if schema and REPORT_COUNT in schema else {}


#: dtypes a Stats array may have in a dict (what Stats.to_dict writes, either byte order).
_DICT_DTYPES = {"<i8", ">i8", "<f8", ">f8"}


def _array_from_dict(name: str, entry: Any) -> np.ndarray:
    if not isinstance(entry, Mapping) or set(entry) != {"dtype", "shape", "data"}:
        raise ValueError(f"stats.{name} must be an array dict {{'dtype', 'shape', 'data'}}")
    if entry["dtype"] not in _DICT_DTYPES:
        raise ValueError(
            f"stats.{name} dtype must be one of {sorted(_DICT_DTYPES)}, got {entry['dtype']!r}"
        )
    shape, data = entry["shape"], entry["data"]
    if not isinstance(shape, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= MAX_REPORTS for s in shape
    ):
        raise ValueError(f"stats.{name} shape must be a list of non-negative integers")
    if not isinstance(data, list) or len(data) != math.prod(shape):
        raise ValueError(
            f"stats.{name} data must be a flat list of {math.prod(shape)} numbers for shape {shape}"
        )
    dtype = np.dtype(entry["dtype"])
    kinds = (int,) if dtype.kind == "i" else (int, float)
    if not all(isinstance(v, kinds) and not isinstance(v, bool) for v in data):
        want = "integers" if dtype.kind == "i" else "numbers"
        raise ValueError(f"stats.{name} data must hold only {want}")
    try:
        return np.asarray(data, dtype=dtype).reshape(shape)
    except OverflowError:
        raise ValueError(f"stats.{name} data must fit {dtype}") from None


def _check_n(n: Any) -> int:
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be an integer in [0, {MAX_REPORTS}], got {n!r}")
    if not 0 <= int(n) <= MAX_REPORTS:
        raise ValueError(f"n must be an integer in [0, {MAX_REPORTS}], got {n!r}")
    return int(n)


class Stats(_ArrayBundle):
    """Mergeable sufficient statistics of a batch of reports.

    Every statistic in ldpkit is a sum over users (support counts, output histograms,
    per-level counts), so :meth:`merge` adds ``n`` and the arrays; it is associative and
    commutative, and refuses statistics made under another spec.

    Construction checks the arrays against ``spec.stats_schema()``: field names, shapes,
    dtypes, and the range n reports can produce (so an estimate never sees counts that no
    batch of reports could have made).
    """

    __slots__ = ("_n",)
    _n: int

    def __init__(self, spec: Mechanism, n: int, **arrays: Any) -> None:
        if not isinstance(spec, Mechanism):
            raise TypeError(f"spec must be an ldpkit mechanism spec, got {type(spec).__name__}")
        n = _check_n(n)
        schema = spec.stats_schema()
        if schema is not None:
            if set(arrays) != set(schema):
                raise ValueError(
                    f"stats fields must be {sorted(schema)} for {spec.name}, got {sorted(arrays)}"
                )
            # field.check returns plain int64/float64 arrays: _ArrayBundle's checks would
            # only repeat themselves (a measurable share of a small aggregate)
            object.__setattr__(self, "_spec", spec)
            checked = {k: _readonly(field.check(k, arrays[k], n)) for k, field in schema.items()}
            object.__setattr__(self, "_arrays", checked)
        else:
            super().__init__(spec, arrays)
        object.__setattr__(self, "_n", n)

    @classmethod
    def _exact(cls, spec: Mechanism, n: int, arrays: dict[str, np.ndarray]) -> Stats:
        """Make Stats without the schema check, for arrays valid by construction.

        Arrays that meet ``spec.stats_schema()`` by construction (int64 counts of the right
        shape computed by ldpkit's own aggregation from checked reports; the tests compare
        both paths). Not for arrays from outside: those go through ``Stats(...)``. The
        arrays become read-only in place (the caller hands them over).
        """
        for v in arrays.values():
            v.setflags(write=False)
        out = object.__new__(cls)
        object.__setattr__(out, "_spec", spec)
        object.__setattr__(out, "_arrays", arrays)
        object.__setattr__(out, "_n", n)
        return out

    @property
    def n(self) -> int:
        """Number of reports summarized."""
        return self._n

    @classmethod
    def empty(cls, spec: Mechanism) -> Stats:
        """Return the neutral element for ``spec`` (n = 0, zero arrays)."""
        return spec.empty_stats()

    def merge(self, *others: Stats) -> Stats:
        """Sum with other statistics of the same spec."""
        arrays = {k: np.array(v) for k, v in self._arrays.items()}
        n = self._n
        for other in others:
            if not isinstance(other, Stats):
                raise TypeError(f"stats must be ldpkit.Stats, got {type(other).__name__}")
            check_same_spec(self._spec, other.spec, "stats")
            if other.fields != self.fields:
                raise ValueError(f"stats must have fields {self.fields}, got {other.fields}")
            n += other.n
            if n > MAX_REPORTS:
                raise ValueError(
                    f"merged stats must summarize at most {MAX_REPORTS} reports, got {n}"
                )
            for k in arrays:
                a, b = arrays[k], other._arrays[k]
                if a.dtype.kind in "iu" and a.size:
                    # Refuse rather than wrap around: int64 sums are exact or rejected.
                    bound = int(np.abs(a).max()) + int(np.abs(b).max())
                    if bound > np.iinfo(np.int64).max:
                        raise ValueError(
                            f"stats.{k} would overflow int64 when merged (|sum| up to {bound})"
                        )
                arrays[k] = a + b
        return Stats(self._spec, n, **arrays)

    __add__ = merge

    def __getstate__(self) -> dict[str, Any]:
        """Return the state to pickle."""
        state = super().__getstate__()
        state["n"] = self._n
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore from a pickled state (validated again)."""
        Stats.__init__(self, state["spec"], state["n"], **state["arrays"])

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict (exact: float64 values round-trip through ``json``)."""
        return {
            "format": STATS_FORMAT,
            "mechanism": self._spec.to_dict(),
            "fingerprint": self.fingerprint,
            "n": self._n,
            "arrays": {
                k: {"dtype": v.dtype.str, "shape": list(v.shape), "data": v.ravel().tolist()}
                for k, v in self._arrays.items()
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Stats:
        """Rebuild Stats from :meth:`to_dict`'s output.

        Checks the layout, the format version, the fingerprint against the rebuilt spec,
        then the arrays against the spec's schema.
        """
        if not isinstance(data, Mapping):
            raise TypeError(f"data (a stats dict) must be a mapping, got {type(data).__name__}")
        keys = {"format", "mechanism", "fingerprint", "n", "arrays"}
        missing, extra = keys - {"fingerprint"} - set(data), set(data) - keys
        if missing or extra:
            raise ValueError(
                f"stats dict must have keys {sorted(keys)} (fingerprint optional), "
                f"got missing {sorted(missing)} and unknown {sorted(map(str, extra))}"
            )
        if data["format"] != STATS_FORMAT:
            raise ValueError(f"stats format must be {STATS_FORMAT!r}, got {data['format']!r}")
        mech = data["mechanism"]
        if not isinstance(mech, Mapping) or set(mech) != {"mechanism", "params"}:
            raise ValueError("stats mechanism must be a spec dict {'mechanism', 'params'}")
        if not isinstance(mech["params"], Mapping):
            raise ValueError("stats mechanism params must be a mapping")
        spec = spec_from_dict(mech)
        if data.get("fingerprint") not in (None, spec.fingerprint):
            raise ValueError(
                f"fingerprint must match the mechanism {spec!r} ({spec.fingerprint}), "
                f"got {data['fingerprint']!r}"
            )
        if not isinstance(data["arrays"], Mapping):
            raise ValueError("stats arrays must be a mapping of field name to array dict")
        arrays = {str(k): _array_from_dict(str(k), a) for k, a in data["arrays"].items()}
        return cls(spec, _check_n(data["n"]), **arrays)

    def __eq__(self, other: object) -> bool:
        """Compare spec, n and arrays."""
        if not isinstance(other, Stats):
            return NotImplemented
        return self._spec == other.spec and self._n == other.n and self._same_arrays(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        """Return a one-line summary: spec, n and fields."""
        return f"Stats({self._spec!r}, n={self._n}, fields={list(self._arrays)})"
