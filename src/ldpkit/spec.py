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

from ._rng import RNGLike
from ._validation import check_epsilon, check_same_spec

__all__ = ["Mechanism", "Reports", "Stats", "mechanism_registry", "spec_from_dict"]

_REGISTRY: dict[str, type[Mechanism]] = {}


def _load_mechanisms() -> None:
    # Classes register when their module runs, and ldpkit.frequency / ldpkit.numeric load
    # their modules lazily (ldpkit._lazy): touch every public name so all of them register.
    import importlib

    for package in ("ldpkit.frequency", "ldpkit.numeric"):
        module = importlib.import_module(package)
        for name in module.__all__:
            getattr(module, name)


def mechanism_registry() -> Mapping[str, type[Mechanism]]:
    """All public concrete mechanism classes by name (read-only view)."""
    _load_mechanisms()
    return MappingProxyType(
        {k: v for k, v in _REGISTRY.items() if not inspect.isabstract(v) and not k.startswith("_")}
    )


def spec_from_dict(data: Mapping[str, Any]) -> Mechanism:
    """Rebuild a spec from :meth:`Mechanism.to_dict` output."""
    if isinstance(data, Mapping) and data.get("mechanism") not in _REGISTRY:
        _load_mechanisms()  # its module may not be imported yet
    try:
        cls = _REGISTRY[data["mechanism"]]
    except KeyError as exc:
        raise ValueError(
            f"mechanism must be one of {sorted(_REGISTRY)}, got {data.get('mechanism')!r}"
        ) from exc
    return cls(**data["params"])


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
    #: exactly (issue 11). Every mechanism accepts ``[MIN_EPSILON, max_epsilon]``.
    max_epsilon: ClassVar[float] = math.inf

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__
        _REGISTRY[cls.name] = cls

    def __post_init__(self) -> None:
        self._set("epsilon", check_epsilon(self.epsilon, high=type(self).max_epsilon))
        self._validate()

    def _validate(self) -> None:  # noqa: B027 - optional hook, not abstract
        """Validate and normalize the subclass's own fields (override)."""

    def _set(self, field: str, value: Any) -> None:
        object.__setattr__(self, field, value)

    # -- identity ------------------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        """The spec's fields as a plain dict (JSON-safe)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def to_dict(self) -> dict[str, Any]:
        return {"mechanism": self.name, "params": self.params()}

    @property
    def fingerprint(self) -> str:
        """A short stable hash of the configuration; reports/stats carry it on the wire."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def replace(self, **changes: Any) -> Mechanism:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    # -- the flow ------------------------------------------------------------------------
    @abstractmethod
    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Randomize one value per user (vectorized over users)."""

    @abstractmethod
    def aggregate(self, reports: Reports) -> Stats:
        """Reduce reports to their mergeable sufficient statistic."""

    @abstractmethod
    def empty_stats(self) -> Stats:
        """The neutral element of :meth:`Stats.merge` for this spec."""

    @abstractmethod
    def estimate(self, stats: Stats) -> Any:
        """Turn (merged) statistics into an estimate."""

    def run(self, values: Any, *, rng: RNGLike = None) -> Any:
        """Simulate the whole protocol on raw values: randomize, aggregate, estimate."""
        return self.estimate(self.aggregate(self.randomize(values, rng=rng)))

    def check_reports(self, reports: Any) -> Reports:
        """Raise unless ``reports`` are Reports made under this exact configuration."""
        if not isinstance(reports, Reports):
            raise TypeError(f"reports must be ldpkit.Reports, got {type(reports).__name__}")
        check_same_spec(self, reports.spec, "reports")
        return reports

    def check_stats(self, stats: Any, *, nonempty: bool = False) -> Stats:
        """Raise unless ``stats`` are Stats made under this exact configuration (and, with
        ``nonempty``, summarize at least one report, as every estimate needs)."""
        if not isinstance(stats, Stats):
            raise TypeError(f"stats must be ldpkit.Stats, got {type(stats).__name__}")
        check_same_spec(self, stats.spec, "stats")
        if nonempty and stats.n == 0:
            raise ValueError("stats must summarize at least one report, got n = 0")
        return stats


def _readonly(arr: np.ndarray) -> np.ndarray:
    view = arr.view()
    view.flags.writeable = False
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
        object.__setattr__(
            self, "_arrays", {k: _readonly(np.asarray(v)) for k, v in arrays.items()}
        )

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

    def __len__(self) -> int:
        return int(next(iter(self._arrays.values())).shape[0])

    def __getitem__(self, index: Any) -> Reports:
        return Reports(self._spec, **{k: v[index] for k, v in self._arrays.items()})

    def concat(self, *others: Reports) -> Reports:
        """Join this batch with others made under the same spec (raises otherwise)."""
        for other in others:
            if not isinstance(other, Reports):
                raise TypeError(f"reports must be ldpkit.Reports, got {type(other).__name__}")
            check_same_spec(self._spec, other.spec, "reports")
            if other.fields != self.fields:
                raise ValueError(f"reports must have fields {self.fields}, got {other.fields}")
        return Reports(
            self._spec,
            **{
                k: np.concatenate([self._arrays[k]] + [o._arrays[k] for o in others])
                for k in self.fields
            },
        )

    def equals(self, other: Reports) -> bool:
        """True when both hold the same spec and identical arrays."""
        return self._spec == other.spec and self._same_arrays(other)

    def __repr__(self) -> str:
        return f"Reports({self._spec!r}, n={len(self)}, fields={list(self._arrays)})"


class Stats(_ArrayBundle):
    """Mergeable sufficient statistics of a batch of reports.

    Every statistic in ldpkit is a sum over users (support counts, output histograms,
    per-level counts), so :meth:`merge` adds ``n`` and the arrays; it is associative and
    commutative, and refuses statistics made under another spec.
    """

    __slots__ = ("_n",)
    _n: int

    def __init__(self, spec: Mechanism, n: int, **arrays: Any) -> None:
        super().__init__(spec, arrays)
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n must be a non-negative integer, got {n!r}")
        object.__setattr__(self, "_n", int(n))

    @property
    def n(self) -> int:
        """Number of reports summarized."""
        return self._n

    @classmethod
    def empty(cls, spec: Mechanism) -> Stats:
        """The neutral element for ``spec`` (n = 0, zero arrays)."""
        return spec.empty_stats()

    def merge(self, *others: Stats) -> Stats:
        """Sum with other statistics of the same spec."""
        arrays = {k: np.array(v) for k, v in self._arrays.items()}
        n = self._n
        for other in others:
            if not isinstance(other, Stats):
                raise TypeError(f"stats must be ldpkit.Stats, got {type(other).__name__}")
            check_same_spec(self._spec, other.spec, "stats")
            for k in arrays:
                arrays[k] = arrays[k] + other._arrays[k]
            n += other.n
        return Stats(self._spec, n, **arrays)

    __add__ = merge

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["n"] = self._n
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        Stats.__init__(self, state["spec"], state["n"], **state["arrays"])

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (exact: float64 values round-trip through ``json``)."""
        return {
            "format": "ldpkit.stats/1",
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
        """Inverse of :meth:`to_dict`; checks the fingerprint against the rebuilt spec."""
        spec = spec_from_dict(data["mechanism"])
        if data.get("fingerprint") not in (None, spec.fingerprint):
            raise ValueError(
                f"fingerprint must match the mechanism {spec!r} ({spec.fingerprint}), "
                f"got {data['fingerprint']!r}"
            )
        arrays = {
            k: np.asarray(a["data"], dtype=np.dtype(a["dtype"])).reshape(a["shape"])
            for k, a in data["arrays"].items()
        }
        return cls(spec, int(data["n"]), **arrays)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Stats):
            return NotImplemented
        return self._spec == other.spec and self._n == other.n and self._same_arrays(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Stats({self._spec!r}, n={self._n}, fields={list(self._arrays)})"
