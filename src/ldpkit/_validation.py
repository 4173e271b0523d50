"""Parameter and input validation: one place, one message format.

Every message reads ``"<name> must be <requirement>, got <value>"``. Wrong *types* raise
:class:`TypeError`, wrong *values* raise :class:`ValueError` (as scikit-learn does).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "MIN_EPSILON",
    "MAX_STREAM_EPSILON",
    "check_epsilon",
    "check_integer",
    "check_real",
    "check_bound",
    "check_probability",
    "check_categorical_values",
    "check_numeric_values",
    "check_same_spec",
    "check_frequencies",
    "check_array",
    "check_not_masked",
    "check_sequence",
    "MEMORY_BUDGET",
    "MAX_ENTRIES",
    "MAX_MAGNITUDE",
    "check_memory",
    "WORK_BUDGET",
    "check_work",
]


#: Smallest privacy budget any mechanism accepts. Below it the mechanisms' probabilities
#: differ from uniform by less than ~1e-6 and their estimators' variances exceed ~1e12 per
#: user: no useful estimate, while the floating-point forms start to lose the difference
#: between p and q. One bound for every mechanism, so that a budget valid for
#: one is valid for all (up to each mechanism's ``max_epsilon``).
MIN_EPSILON = 1e-6

#: Largest budget of the central-DP stream releases and their selection steps: far beyond any
#: meaningful budget, and below where ``epsilon**2`` or ``epsilon * score`` overflow.
MAX_STREAM_EPSILON = 1e15


#: Largest magnitude of the values that error metrics, sums of squares and weights accept
#: (``bounded=True`` in :func:`check_array`): its square times MAX_ENTRIES values stays far
#: below the float64 maximum (1.8e308), so no mean of squared errors, variance or weighted sum
#: overflows to inf. No meaningful frequency, count or measurement comes near it.
MAX_MAGNITUDE = 1e100


def _show(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype} and shape {value.shape}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fail(name: str, requirement: str, value: Any, exc: type[Exception] = ValueError) -> None:
    raise exc(f"{name} must be {requirement}, got {_show(value)}")


def _as_array(values: Any, name: str, requirement: str) -> np.ndarray:
    """Return ``np.asarray(values)``, refusing ragged nested sequences.

    The refusal is in the project's format instead of numpy's "setting an array element
    with a sequence".
    """
    try:
        return np.asarray(values)
    except (ValueError, TypeError):
        raise TypeError(f"{name} must be {requirement}, got {_show(values)}") from None


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def check_real(
    value: Any,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> float:
    """Return ``value`` as a finite float inside the given bounds."""
    parts = ["a finite number"]
    if low is not None:
        parts.append(f"{'>=' if low_inclusive else '>'} {low:g}")
    if high is not None:
        parts.append(f"{'<=' if high_inclusive else '<'} {high:g}")
    requirement = " ".join(parts[:1]) + (" " + " and ".join(parts[1:]) if parts[1:] else "")
    if not _is_real(value):
        _fail(name, requirement, value, TypeError)
    x = float(value)
    if not math.isfinite(x):
        _fail(name, requirement, value)
    if low is not None and (x < low or (x == low and not low_inclusive)):
        _fail(name, requirement, value)
    if high is not None and (x > high or (x == high and not high_inclusive)):
        _fail(name, requirement, value)
    return x


def check_bound(value: Any, name: str = "bound") -> float:
    """Return ``value`` as the positive bound of a stream's values, at most :data:`MAX_MAGNITUDE`.

    Values up to the bound are summed over a stream and squared in variances and threshold
    objectives (``n^2 B^2`` terms): a larger bound would overflow to inf, and one
    below ``1 / MAX_MAGNITUDE`` would underflow to 0 (bound = 1e-300).
    """
    return check_real(value, name, low=1.0 / MAX_MAGNITUDE, high=MAX_MAGNITUDE)


def check_epsilon(
    value: Any, name: str = "epsilon", *, high: float = math.inf, low: float = MIN_EPSILON
) -> float:
    """Return the privacy budget as a float in ``[low, high]`` (default ``[MIN_EPSILON, inf]``).

    ``high`` is the mechanism's ``max_epsilon``: the largest budget at which its sampler
    still realizes the mechanism's law exactly (see each class). The message names the
    accepted range, e.g. ``epsilon must be a finite number >= 1e-06 and <= 30, got 500.0``.
    Pure accounting (budgets, composition, amplification bounds) may pass ``low=0`` to
    accept any finite budget > 0: no mechanism runs at it.
    """
    top = None if math.isinf(high) else high
    if low <= 0.0:
        return check_real(value, name, low=0.0, low_inclusive=False, high=top)
    return check_real(value, name, low=low, high=top)


def check_probability(value: Any, name: str = "alpha") -> float:
    """Return a probability strictly between 0 and 1."""
    return check_real(value, name, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)


def _bounds_words(low: Any, high: Any, fmt: str) -> str:
    """Return " in [low, high]", " >= low", " <= high" or "" (each present bound by ``fmt``)."""
    if low is not None and high is not None:
        return f" in [{low:{fmt}}, {high:{fmt}}]"
    if low is not None:
        return f" >= {low:{fmt}}"
    if high is not None:
        return f" <= {high:{fmt}}"
    return ""


def check_integer(value: Any, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an int inside ``[low, high]``."""
    requirement = "an integer" + _bounds_words(low, high, "")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        _fail(name, requirement, value, TypeError)
    x = int(value)
    if (low is not None and x < low) or (high is not None and x > high):
        _fail(name, requirement, value)
    return x


def check_not_masked(values: Any, name: str, *, ragged: bool = False) -> None:
    """Refuse a numpy masked array: its mask would be dropped silently by ``np.asarray``.

    Masked (missing) entries have no defined randomization; the caller decides what they mean
    (drop them with ``values.compressed()`` or fill them with ``values.filled(x)``).

    Every array input passes here before ``np.asarray``, so it also refuses ragged nested
    Python lists (rows of different lengths), which numpy would refuse with its own "setting
    an array element with a sequence", unless ``ragged`` is true: inputs that are
    one sequence per user of any length (sets, key-value pairs), never made one array. Lists
    of arrays (e.g. one per level) are left to their callers.
    """
    if isinstance(values, np.ma.MaskedArray):
        raise TypeError(
            f"{name} must be a plain array, not a masked array (its mask would be ignored; "
            f"pass {name}.compressed() or {name}.filled(...)), got {_show(np.asarray(values))}"
        )
    if (
        not ragged
        and isinstance(values, (list, tuple))
        and any(issubclass(t, (list, tuple)) for t in set(map(type, values)))  # C loop
    ):
        _as_array(values, name, "an array of numbers with rows of equal length")


def check_sequence(values: Any, name: str, what: str = "values") -> list[Any]:
    """Return the items of an iterable ``values`` as a list (not a string, not a masked array).

    The items may be sequences of different lengths (e.g. one array per tree level): the
    list is never made one array here.
    """
    check_not_masked(values, name, ragged=True)
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a sequence of {what}, got {_show(values)}")
    if isinstance(values, np.ndarray) and values.ndim == 0:
        raise TypeError(f"{name} must be a sequence of {what}, got {_show(values)}")
    return list(values)


def check_array(
    values: Any,
    name: str,
    *,
    ndim: int | tuple[int, ...] = 1,
    integer: bool = False,
    low: float | None = None,
    high: float | None = None,
    size: int | None = None,
    nonempty: bool = False,
    bounded: bool = False,
) -> np.ndarray:
    """Return ``values`` as a finite float64 (or int64 when ``integer``) array, checked.

    Refuses masked arrays, non-numeric dtypes (strings, objects, booleans, complex), NaN and
    +-inf, values outside ``[low, high]``, a wrong number of dimensions, an empty array (when
    ``nonempty``) and a length other than ``size``; each with one message naming ``name``.
    ``bounded`` also refuses magnitudes above :data:`MAX_MAGNITUDE` (``low`` / ``high``
    default to ``-MAX_MAGNITUDE`` / ``MAX_MAGNITUDE``): for inputs that are squared or summed.
    """
    check_not_masked(values, name)
    if bounded:
        low = -MAX_MAGNITUDE if low is None else max(low, -MAX_MAGNITUDE)
        high = MAX_MAGNITUDE if high is None else min(high, MAX_MAGNITUDE)
    kind = "integers" if integer else "real numbers"
    bounds = _bounds_words(low, high, "g")
    dims = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    if len(dims) == 1:
        shape = "a number" if dims[0] == 0 else f"a {dims[0]}-D array"
    else:
        shape = f"{'a number or ' if 0 in dims else ''}an array of up to {max(dims)} dimensions"
    requirement = f"finite {kind}{bounds} ({shape})"
    arr = _as_array(values, name, requirement)
    allowed = "iu" if integer else "iuf"
    if arr.dtype.kind not in allowed:  # floats (even integral ones) are not items
        raise TypeError(f"{name} must be {requirement}, got {_show(arr)}")
    if arr.ndim not in dims:
        raise ValueError(f"{name} must be {requirement}, got shape {arr.shape}")
    if size is not None and arr.shape[:1] != (size,):
        raise ValueError(f"{name} must be {requirement} of length {size}, got shape {arr.shape}")
    if nonempty and arr.size == 0:
        raise ValueError(f"{name} must be {requirement} with at least one value, got none")
    if arr.dtype.kind == "f":
        arr = arr.astype(np.float64, copy=False)
        bad = ~np.isfinite(arr)
        if bad.any():
            raise ValueError(f"{name} must be {requirement}, got {float(arr[bad][0])!r}")
    else:
        if arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and arr.size and arr.max() > 2**62:
            raise ValueError(f"{name} must be {requirement}, got {int(arr.max())}")
        arr = arr.astype(np.int64 if integer else np.float64, copy=False)
    if arr.size:
        if low is not None and arr.min() < low:
            raise ValueError(f"{name} must be {requirement}, got {arr.min().item()!r}")
        if high is not None and arr.max() > high:
            raise ValueError(f"{name} must be {requirement}, got {arr.max().item()!r}")
    return arr


def check_categorical_values(values: Any, domain_size: int, name: str = "values") -> np.ndarray:
    """Return ``values`` as a 1-D int64 array of items in ``[0, domain_size)``.

    Floats (even integral ones), booleans, strings and objects are rejected with a
    TypeError: map labels to integers with :class:`ldpkit.Encoder` first. Masked arrays are
    refused (TypeError) rather than losing their mask.
    """
    check_not_masked(values, name)
    requirement = f"integers in [0, {domain_size})"
    arr = _as_array(values, name, f"a 1-D array of {requirement}")
    if arr.dtype.kind not in "iu":
        hint = " (map labels with ldpkit.Encoder first)" if arr.dtype.kind in "USO" else ""
        raise TypeError(f"{name} must be {requirement}{hint}, got {_show(arr)}")
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of {requirement}, got {_show(arr)}")
    if arr.size:
        lo, hi = arr.min(), arr.max()
        if lo < 0 or hi >= domain_size:
            bad = arr[(arr < 0) | (arr >= domain_size)]
            raise ValueError(
                f"{name} must be {requirement}, got {bad.size} value(s) outside it "
                f"(e.g. {int(bad[0])})"
            )
    return arr.astype(np.int64, copy=False)


def check_numeric_values(values: Any, low: float, high: float, name: str = "values") -> np.ndarray:
    """Return ``values`` as a 1-D float64 array inside ``[low, high]`` (no NaN; not masked)."""
    check_not_masked(values, name)
    requirement = f"real numbers in [{low:g}, {high:g}]"
    arr = _as_array(values, name, f"a 1-D array of {requirement}")
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be {requirement}, got {_show(arr)}")
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of {requirement}, got {_show(arr)}")
    arr = arr.astype(np.float64, copy=False)
    if arr.size:
        bad = ~((arr >= low) & (arr <= high))  # catches NaN too
        if bad.any():
            example = float(arr[bad][0])
            raise ValueError(
                f"{name} must be {requirement}, got {int(bad.sum())} value(s) outside it "
                f"(e.g. {example!r})"
            )
    return arr


def check_same_spec(expected: Any, got: Any, what: str) -> None:
    """Raise ValueError when ``got`` (a spec) is not the same configuration as ``expected``."""
    if got is not expected and got != expected:  # (the same object: skip the field compare)
        raise ValueError(
            f"{what} must come from {expected!r} (fingerprint {expected.fingerprint}), "
            f"got {what} from {got!r} (fingerprint {getattr(got, 'fingerprint', '?')})"
        )


def check_frequencies(f: Any, domain_size: int, name: str = "f") -> Any:
    """Return true frequencies ``f`` (a number, or one per item) as float64 in [0, 1].

    A scalar stays a float; an array must have shape ``(domain_size,)``.
    """
    requirement = f"frequencies in [0, 1] (a number or an array of shape ({domain_size},))"
    arr = _as_array(f, name, requirement)
    if arr.dtype.kind not in "iuf" or isinstance(f, np.ma.MaskedArray):
        raise TypeError(f"{name} must be {requirement}, got {_show(f)}")
    if arr.shape not in ((), (domain_size,)):
        raise ValueError(f"{name} must be {requirement}, got shape {arr.shape}")
    arr = arr.astype(np.float64)
    bad = ~((arr >= 0.0) & (arr <= 1.0))  # catches NaN too
    if bad.any():
        example = float(arr[bad][0]) if arr.ndim else float(arr)
        raise ValueError(f"{name} must be {requirement}, got {example!r}")
    return float(arr) if arr.ndim == 0 else arr


#: Largest memory (bytes) one spec's state may need: its Stats arrays (8 bytes per entry).
#: Larger configurations are refused when the spec is built, with the estimate of what they
#: would need, rather than exhausting memory (or hanging) later.
MEMORY_BUDGET = 4 * 2**30


#: Largest number of 8-byte entries one array may hold within MEMORY_BUDGET (2**29): the
#: upper bound of sizes (domain sizes, counts of queries or users) that allocate one entry each.
MAX_ENTRIES = MEMORY_BUDGET // 8


def check_memory(nbytes: float, name: str, owner: str, *, budget: float | None = None) -> None:
    """Raise ValueError when the parameters ``name`` make ``owner`` need more than the budget.

    E.g. ``domain_size=4294967296 must keep the state of SUE within the memory budget of
    4 GiB (ldpkit._validation.MEMORY_BUDGET), got a configuration needing about 32 GiB``.
    """
    limit = MEMORY_BUDGET if budget is None else budget
    if nbytes > limit:
        raise ValueError(
            f"{name} must keep the state of {owner} within the memory budget of "
            f"{limit / 2**30:g} GiB (ldpkit._validation.MEMORY_BUDGET), got a configuration "
            f"needing about {nbytes / 2**30:.3g} GiB"
        )


#: Largest number of elementary operations (about a nanosecond each) one call may need:
#: ~1 s of CPU on a fast core, a few seconds on a slow shared one. Calls whose cost is set by
#: their parameters (not by the data's size) and would exceed it are refused up front with
#: the estimate, rather than running for minutes.
WORK_BUDGET = 2**30


def check_work(ops: float, name: str, owner: str, *, budget: float | None = None) -> None:
    """Raise ValueError when the parameters ``name`` make ``owner`` need more than the budget.

    E.g. ``buckets=1048576, max_iter=100 must keep the work of WienerDeconvolution.estimate
    within the budget of 1.07e+09 operations (ldpkit._validation.WORK_BUDGET), got a
    configuration needing about 2.1e+09``.
    """
    limit = WORK_BUDGET if budget is None else budget
    if ops > limit:
        raise ValueError(
            f"{name} must keep the work of {owner} within the budget of {limit:.3g} "
            f"operations (ldpkit._validation.WORK_BUDGET), got a configuration needing "
            f"about {ops:.3g}"
        )


def check_layout(data: Any, source: str, keys: tuple[str, ...], version: int) -> Mapping[str, Any]:
    """Check a ``to_dict`` layout: a mapping made by ``source``, at ``version``, only ``keys``.

    Raise ``TypeError`` for a non-mapping and ``ValueError`` naming ``format`` or ``data``
    for another layout version or a key outside ``format`` and ``keys``.
    """
    if not isinstance(data, Mapping):
        raise TypeError(f"data must be a mapping from {source}, got {data!r}")
    if data.get("format", version) != version:
        raise ValueError(f"format must be {version}, got {data.get('format')!r}")
    extra = set(data) - {"format", *keys}
    if extra:
        raise ValueError(
            f"data must only have the keys {', '.join(('format', *keys))}, got {sorted(extra)}"
        )
    return data
