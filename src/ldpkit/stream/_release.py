"""Shared machinery of the continuous-release estimators (ToPS, its baselines, and later ToPL).

A stream estimator has two phases (STR21 §3): the first ``threshold_size`` (``m``) items
only choose a clipping threshold ``theta``; every later item is *released* (clipped to
``[0, theta]`` and fed to a perturber). Range queries are over released items, 0-based
(position 0 is the first item after the m threshold items).

This module owns what every such estimator shares: feeding batches of any size across the
phase boundary, the Generator (kept between batches and serialized with its full bit
generator state so a resumed estimator continues the same stream of draws), the range-query
API with standard errors, and ``to_dict``/``from_dict``.
"""

from __future__ import annotations

import copy
import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, NamedTuple

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import MAX_ENTRIES, check_array, check_integer, check_real

__all__ = ["RangeSum", "StreamRelease", "stream_from_dict", "STREAM_CLASSES"]

STREAM_CLASSES: dict[str, type[StreamRelease]] = {}


class RangeSum(NamedTuple):
    """A range-sum answer: the estimate and the standard error of its noise."""

    estimate: float
    std_error: float


def _generator_state(gen: np.random.Generator) -> dict[str, Any]:
    return copy.deepcopy(dict(gen.bit_generator.state))


def _generator_from_state(state: dict[str, Any]) -> np.random.Generator:
    name = state["bit_generator"]
    bit_gen_cls = getattr(np.random, name, None)
    if name in ("AESCounter", "randomgen.aes.AESCounter"):  # rng=None's secure generator
        from randomgen.aes import AESCounter

        bit_gen_cls = AESCounter
    if bit_gen_cls is None or not isinstance(bit_gen_cls, type):
        raise ValueError(
            f"rng state must name a numpy bit generator or randomgen's AESCounter, got {name!r}"
        )
    bit_gen = bit_gen_cls()
    bit_gen.state = copy.deepcopy(state)
    return np.random.Generator(bit_gen)


_DICT_KEYS = ("class", "params", "n_seen", "threshold", "buffer", "rng", "state")


def _check_finite_tree(value: Any, path: str) -> None:
    """Raise ValueError naming the first NaN or +-inf inside a to_dict structure.

    A restored estimator carries its sums and noisy counts forward: one NaN in them makes
    every later answer NaN, so the whole state is checked on the way in.
    """
    if isinstance(value, Mapping):
        for k, v in value.items():
            _check_finite_tree(v, f"{path}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_finite_tree(v, f"{path}[{i}]")
    elif isinstance(value, np.ndarray):
        if value.dtype.kind in "fc" and not np.all(np.isfinite(value)):
            raise ValueError(f"{path} must hold finite numbers, got NaN or infinity")
        if value.dtype.kind == "O":
            _check_finite_tree(value.tolist(), path)
    elif isinstance(value, (float, np.floating)) and not math.isfinite(value):
        raise ValueError(f"{path} must be a finite number, got {value!r}")


def _check_params(target: type, params: Mapping[str, Any]) -> None:
    """Raise ValueError unless ``params`` are keyword arguments of ``target``.

    A dict whose class was edited must not reach another class's constructor.
    """
    accepted: list[str] = []
    for klass in target.__mro__:  # a constructor taking **kwargs passes them to its base's
        if "__init__" not in vars(klass):
            continue
        signature = inspect.signature(vars(klass)["__init__"]).parameters.values()
        accepted += [
            p.name
            for p in signature
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and p.name not in ("self", "rng")
            and p.name not in accepted
        ]
        if not any(p.kind == p.VAR_KEYWORD for p in signature):
            break
    unknown = sorted(str(k) for k in params if k not in accepted)
    if unknown:
        raise ValueError(
            f"params must be parameters of {target.__name__} {accepted}, got {unknown}"
        )


def stream_from_dict(data: dict[str, Any]) -> StreamRelease:
    """Rebuild any stream estimator from its :meth:`StreamRelease.to_dict` output."""
    if not isinstance(data, Mapping):
        raise TypeError(f"data must be a mapping (to_dict output), got {type(data).__name__}")
    name = data.get("class")
    if name not in STREAM_CLASSES:
        raise ValueError(f"class must be one of {sorted(STREAM_CLASSES)}, got {name!r}")
    return STREAM_CLASSES[name].from_dict(data)


class StreamRelease(ABC):
    """Base class of the stateful, serializable continuous-release estimators.

    Subclasses implement the threshold selection, the perturber, and the answers; the
    base class owns the phase split, the Generator and serialization.
    """

    _registry_name: ClassVar[str] = "StreamRelease"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        STREAM_CLASSES[cls.__name__] = cls
        cls._registry_name = cls.__name__

    def __init__(self, threshold_size: int, rng: RNGLike) -> None:
        self._rng = as_generator(rng)
        # the phase-1 buffer holds threshold_size floats: bounded by the memory budget
        self._m = check_integer(threshold_size, "threshold_size", low=0, high=MAX_ENTRIES)
        self._buffer = np.zeros(self._m)  # phase-1 items, freed once theta is chosen
        self._buffer_fill = 0
        self._n_seen = 0
        self._threshold: float | None = None

    # ------------------------------------------------------------------ to implement
    @abstractmethod
    def _check_items(self, items: Any) -> np.ndarray:
        """Validate a batch and return it as a 1-D array."""

    @abstractmethod
    def _select_threshold(self, items: np.ndarray, rng: np.random.Generator) -> float:
        """Choose theta from the m phase-1 items."""

    @abstractmethod
    def _start_release(self, threshold: float) -> None:
        """Set up the perturber for the chosen threshold."""

    @abstractmethod
    def _release(self, items: np.ndarray, rng: np.random.Generator) -> None:
        """Feed phase-2 items to the perturber."""

    @property
    @abstractmethod
    def n_released(self) -> int:
        """Number of items released (fed to the perturber) so far."""

    @abstractmethod
    def _range_estimates(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """Estimated sums of released items over ``[starts, stops)``."""

    @abstractmethod
    def _range_variance(self, start: int, stop: int) -> float:
        """Variance of the noise of the estimate over ``[start, stop)``."""

    #: constructor argument -> the attribute that holds it, where the two names differ
    _param_attributes: ClassVar[dict[str, str]] = {
        "threshold_size": "_m",
        "threshold": "_fixed_threshold",  # the fixed one; ``threshold`` is the chosen theta
    }

    def _signature_params(self, cls: type) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, par in inspect.signature(cls).parameters.items():
            if name == "rng" or par.kind in (par.VAR_KEYWORD, par.VAR_POSITIONAL):
                continue
            value = getattr(self, self._param_attributes.get(name, name))
            out[name] = value.to_dict() if hasattr(value, "to_dict") else value
        return out

    def params(self) -> dict[str, Any]:
        """Return the constructor arguments (JSON-able) of an equivalent fresh estimator.

        Read from the constructor's signature: every argument but ``rng``, from the
        attribute of the same name (or :attr:`_param_attributes`); objects with ``to_dict``
        (smoothers) as their dict.
        """
        return self._signature_params(type(self))

    @abstractmethod
    def _state(self) -> dict[str, Any]:
        """Subclass state (numpy arrays and JSON-able scalars)."""

    @abstractmethod
    def _load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`_state` output."""

    # ------------------------------------------------------------------ feeding
    @property
    def threshold_size(self) -> int:
        """``m``: the number of leading items spent on choosing the threshold."""
        return self._m

    @property
    def threshold(self) -> float | None:
        """The clipping threshold theta (None until the first m items have arrived)."""
        return self._threshold

    @property
    def n_seen(self) -> int:
        """Number of items received, threshold phase included."""
        return self._n_seen

    def update(self, items: Any) -> StreamRelease:
        """Ingest a batch of items (any size, vectorized) and return ``self``."""
        x = self._check_items(items)
        if x.size == 0:
            return self
        if self._threshold is None:
            take = min(self._m - self._buffer_fill, x.size)
            self._buffer[self._buffer_fill : self._buffer_fill + take] = x[:take]
            self._buffer_fill += take
            self._n_seen += take
            x = x[take:]
            if self._buffer_fill == self._m:
                self._set_threshold(self._select_threshold(self._buffer, self._rng))
        if x.size:
            self._release(x, self._rng)
            self._n_seen += x.size
        return self

    def extend(self, batches: Iterable[Any]) -> StreamRelease:
        """Ingest several batches in order."""
        for batch in batches:
            self.update(batch)
        return self

    def _set_threshold(self, threshold: float) -> None:
        self._threshold = float(threshold)
        self._buffer = np.zeros(0)
        self._buffer_fill = 0
        self._start_release(self._threshold)

    # ------------------------------------------------------------------ answers
    def _check_range(self, starts: Any, stops: Any) -> tuple[np.ndarray, np.ndarray]:
        i = check_array(starts, "starts", ndim=(0, 1, 2), integer=True)
        j = check_array(stops, "stops", ndim=(0, 1, 2), integer=True)
        try:
            i, j = np.broadcast_arrays(i, j)
        except ValueError:
            raise ValueError(
                f"starts and stops must have broadcastable shapes, got {i.shape} and {j.shape}"
            ) from None
        n = self.n_released
        bad = (i < 0) | (j < i) | (j > n)
        if np.any(bad):
            k = int(np.flatnonzero(bad.ravel())[0])
            raise ValueError(
                f"starts and stops must satisfy 0 <= start <= stop <= n_released = {n}, "
                f"got [{int(i.ravel()[k])}, {int(j.ravel()[k])})"
            )
        return i.ravel(), j.ravel()

    def range_sum(self, start: int, stop: int) -> RangeSum:
        """Estimated sum of the released items ``start, ..., stop - 1`` with its standard error.

        The standard error is that of the privacy noise given the (clipped) data; it does
        not include clipping bias, nor the error of predicting not-yet-summarized items.
        """
        start = check_integer(start, "start", low=0, high=2**62)
        stop = check_integer(stop, "stop", low=0, high=2**62)
        est, se = self.range_sums(np.array([start]), np.array([stop]))
        assert se is not None
        return RangeSum(float(est[0]), float(se[0]))

    def range_sums(
        self, starts: Any, stops: Any, *, std_error: bool = True
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Vectorized :meth:`range_sum`: ``(estimates, std_errors)`` (``None`` if not asked)."""
        i, j = self._check_range(starts, stops)
        est = self._range_estimates(i, j)
        if not std_error:
            return est, None
        var = np.array([self._range_variance(int(a), int(b)) for a, b in zip(i, j)])
        return est, np.sqrt(var)

    # ------------------------------------------------------------------ serialization
    def to_dict(self) -> dict[str, Any]:
        """Everything needed to resume: parameters, state arrays, and the Generator's state.

        For the central-DP streams (ToPS and its baselines) this is **secret**: it holds raw
        values and the Generator state that produced (and so can remove) the noise.
        """
        return {
            "class": self._registry_name,
            "params": self.params(),
            "n_seen": int(self._n_seen),
            "threshold": self._threshold,
            "buffer": self._buffer[: self._buffer_fill].copy(),
            "rng": _generator_state(self._rng),
            "state": self._state() if self._threshold is not None else {},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StreamRelease:
        """Rebuild an estimator from :meth:`to_dict` output; it continues where it stopped."""
        if not isinstance(data, Mapping):
            raise TypeError(f"data must be a mapping (to_dict output), got {type(data).__name__}")
        missing = [k for k in _DICT_KEYS if k not in data]
        if missing:
            raise ValueError(f"data must hold the keys {list(_DICT_KEYS)}, missing {missing}")
        name = data["class"]
        target = STREAM_CLASSES.get(name) if isinstance(name, str) else None
        if target is None or not issubclass(target, cls):
            raise ValueError(f"class must name a subclass of {cls.__name__}, got {name!r}")
        if not isinstance(data["params"], Mapping):
            raise TypeError(f"params must be a mapping, got {type(data['params']).__name__}")
        _check_params(target, data["params"])
        _check_finite_tree({k: v for k, v in data.items() if k != "rng"}, "data")
        if not isinstance(data["rng"], Mapping) or "bit_generator" not in data["rng"]:
            raise ValueError("rng must be a bit generator state (to_dict output)")
        try:
            gen = _generator_from_state(dict(data["rng"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f"rng must be a valid bit generator state, got an error: {exc}"
            ) from None
        try:
            obj = target(**data["params"], rng=gen)
        except TypeError as exc:  # e.g. HC16's "does not take": name the dict's part
            raise ValueError(f"params must be valid parameters of {name}: {exc}") from None
        buf = check_array(data["buffer"], "buffer")
        # the phase-1 values were checked on entry: [0, bound] for every stream
        bound = float(getattr(obj, "bound", np.inf))
        if buf.size and (buf.min() < 0.0 or buf.max() > bound):
            raise ValueError(f"buffer must hold values in [0, {bound:g}], got one outside")
        threshold = data["threshold"]
        if threshold is not None:
            threshold = check_real(threshold, "threshold", low=0.0, high=bound)
        n_seen = check_integer(data["n_seen"], "n_seen", low=0)
        if obj._threshold is None:
            if buf.size > obj._m:
                raise ValueError(
                    f"buffer must hold at most threshold_size = {obj._m} values, got {buf.size}"
                )
            if threshold is None and not buf.size <= n_seen <= obj._m:
                raise ValueError(
                    f"n_seen must be in [{buf.size}, {obj._m}] (buffered values, threshold_size)"
                    f" before the threshold is chosen, got {n_seen}"
                )
            obj._buffer[: buf.size] = buf
            obj._buffer_fill = buf.size
            if threshold is not None:
                obj._set_threshold(threshold)
        if obj._threshold is not None and n_seen < obj._m:
            raise ValueError(
                f"n_seen must be >= threshold_size = {obj._m} once the threshold is chosen, "
                f"got {n_seen}"
            )
        obj._n_seen = n_seen
        if obj._threshold is not None:
            try:
                obj._load_state(data["state"])
            except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
                raise ValueError(f"state must be the to_dict output of {name}: {exc}") from None
            if obj.n_released != n_seen - obj._m:
                raise ValueError(
                    f"state must hold the n_seen - threshold_size = {n_seen - obj._m} released "
                    f"values, got {obj.n_released}"
                )
        return obj

    def __getstate__(self) -> dict[str, Any]:
        return self.to_dict()

    def __setstate__(self, state: dict[str, Any]) -> None:
        other = type(self).from_dict(state)
        self.__dict__.update(other.__dict__)
