"""Declarative parameter constraints of the mechanism specs: one declaration per field.

Each spec class declares ``_parameter_constraints``, a mapping from each of its init fields to
a list of accepted alternatives (a :class:`Constraint` or ``None`` for "None is accepted").
:meth:`ldpkit.spec.Mechanism.__post_init__` validates every field against it in field order
(:func:`check_parameter`, in the project's one message format ``"<name> must be ..., got
..."``), before the spec's ``_validate`` hook checks what involves several fields. The same
declaration gives the size fields (named when a configuration exceeds the memory budget),
the small sizes of :func:`ldpkit.testing.small_spec`, the hostile values of the contract's
validation check and of the fuzz registry, and the generated parameter table of the docs
(``docs/reference/parameters.md``, written by ``tests/test_constraints.py --write``).

The scheme follows scikit-learn's ``_parameter_constraints`` (``Interval``, ``StrOptions``,
type lists): a value is valid when one alternative accepts it. A wrong *type* for every
alternative raises TypeError, anything else ValueError.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ._validation import (
    MAX_MAGNITUDE,
    MIN_EPSILON,
    _bounds_words,
    _show,
    check_epsilon,
    check_integer,
    check_real,
)

__all__ = [
    "Boolean",
    "Check",
    "Constraint",
    "Epsilon",
    "FINITE_BOUND",
    "Integer",
    "Options",
    "Real",
    "Ref",
    "Size",
    "check_parameter",
    "hostile_values",
    "parameter_table",
    "size_fields",
    "small_values",
]


class Constraint:
    """One accepted kind of value of a spec field (an alternative of its declaration).

    Attributes
    ----------
    size : bool
        The field sizes the spec's state (named when a configuration exceeds the memory
        budget, see :func:`size_fields`).
    small : object
        A small valid value that :func:`ldpkit.testing.small_spec` sets (None: the field's
        default is used).
    """

    size: bool = False
    small: Any = None

    def accepts_type(self, value: Any) -> bool:
        """Return whether ``value`` has a type this constraint may accept."""
        raise NotImplementedError

    def convert(self, value: Any, name: str, owner: Any) -> Any:
        """Return ``value`` normalized, or raise in the project's message format."""
        raise NotImplementedError

    def describe(self, owner: Any) -> str:
        """Return the requirement in words, as messages print it after "must be"."""
        raise NotImplementedError

    def hostile(self, owner: Any) -> list[Any]:
        """Return candidate values this constraint refuses (out of range, wrong type)."""
        return []

    def kind(self) -> str:
        """Return the type column of the parameter table."""
        return type(self).__name__.lower()


class Ref:
    """A bound that is another field of the spec (declared before this one), plus an offset.

    E.g. ``Integer(1, Ref("domain_size", -1))``: at most ``domain_size - 1``. Validation
    reads the field from the spec being built; the docs print ``domain_size - 1``.
    """

    def __init__(self, field: str, offset: int = 0) -> None:
        self.field, self.offset = field, offset

    def resolve(self, owner: Any) -> int | None:
        """Return the bound for the spec ``owner`` (None when ``owner`` is a class)."""
        if isinstance(owner, type):
            return None
        value = getattr(owner, self.field)
        if callable(value):
            value = value()
        return None if value is None else int(value) + self.offset

    def __str__(self) -> str:
        """Return e.g. ``domain_size - 1``."""
        if self.offset:
            return f"{self.field} {'+' if self.offset > 0 else '-'} {abs(self.offset)}"
        return self.field


def _bound(value: Any, owner: Any) -> Any:
    return value.resolve(owner) if isinstance(value, Ref) else value


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


class Integer(Constraint):
    """An integer in ``[low, high]`` (either bound may be None: unbounded).

    Booleans and floats (even integral ones) are wrong types. ``power_of_two`` also requires
    a power of two (sketch widths, rounding grids: sizes a bit mask or a halving relies on).
    """

    def __init__(
        self,
        low: int | Ref | None = None,
        high: int | Ref | None = None,
        *,
        power_of_two: bool = False,
    ) -> None:
        self.low, self.high = low, high
        self.power_of_two = power_of_two

    def accepts_type(self, value: Any) -> bool:
        """Return whether ``value`` is an integer (not a bool)."""
        return _is_int(value)

    def convert(self, value: Any, name: str, owner: Any) -> int:
        """Return ``value`` as an int inside the bounds (a :class:`Ref` bound is named)."""
        refs = [str(b) for b in (self.low, self.high) if isinstance(b, Ref)]
        if not refs:  # (every construction passes here: the plain bounds directly)
            out = check_integer(value, name, low=self.low, high=self.high)  # type: ignore[arg-type]
        else:
            low, high = _bound(self.low, owner), _bound(self.high, owner)
            try:
                out = check_integer(value, name, low=low, high=high)
            except ValueError as exc:
                # name the other field too: changing it is what moved the bound
                raise ValueError(f"{exc} (the bound is {' and '.join(refs)})") from None
        if self.power_of_two and out & (out - 1):
            raise ValueError(f"{name} must be {self.describe(owner)}, got {out}")
        return out

    def describe(self, owner: Any) -> str:
        """Return e.g. ``an integer in [2, 1024]``, as :func:`check_integer` words it."""
        low, high = _bound(self.low, owner), _bound(self.high, owner)
        low = self.low if low is None else low  # a class: the bound's name
        high = self.high if high is None else high
        what = "a power of two" if self.power_of_two else "an integer"
        return what + _bounds_words(low, high, "")

    def hostile(self, owner: Any) -> list[Any]:
        """Return the values just outside the bounds, a float, a string, a bool and NaN."""
        out: list[Any] = [2.5, "8", True, math.nan]
        low, high = _bound(self.low, owner), _bound(self.high, owner)
        if low is not None:
            out.append(low - 1)
        if high is not None:
            out.append(high + 1)
        if self.power_of_two:
            inside = max(3, low if low is not None else 3)  # the first non-power inside
            inside += 0 if inside & (inside - 1) else 1
            if high is None or inside <= high:
                out.append(inside)
        return out

    def kind(self) -> str:
        """Return ``int``."""
        return "int"


class Size(Integer):
    """An integer field that sizes the spec's state (a domain size, a number of buckets).

    ``small`` is the value :func:`ldpkit.testing.small_spec` sets, so that the contract
    checks stay fast on any mechanism.
    """

    size = True

    def __init__(
        self,
        low: int | Ref | None = None,
        high: int | Ref | None = None,
        *,
        small: Any = None,
        power_of_two: bool = False,
    ) -> None:
        super().__init__(low, high, power_of_two=power_of_two)
        self.small = small


class Real(Constraint):
    """A finite real number inside the given bounds (each inclusive or not)."""

    def __init__(
        self,
        low: float | None = None,
        high: float | None = None,
        *,
        low_inclusive: bool = True,
        high_inclusive: bool = True,
    ) -> None:
        self.low, self.high = low, high
        self.low_inclusive, self.high_inclusive = low_inclusive, high_inclusive

    def accepts_type(self, value: Any) -> bool:
        """Return whether ``value`` is a real number (not a bool)."""
        return _is_real(value)

    def convert(self, value: Any, name: str, owner: Any) -> float:
        """Return ``value`` as a finite float inside the bounds."""
        return check_real(
            value,
            name,
            low=self.low,
            high=self.high,
            low_inclusive=self.low_inclusive,
            high_inclusive=self.high_inclusive,
        )

    def describe(self, owner: Any) -> str:
        """Return e.g. ``a finite number > 0 and <= 1``, as :func:`check_real` words it."""
        parts = []
        if self.low is not None:
            parts.append(f"{'>=' if self.low_inclusive else '>'} {self.low:g}")
        if self.high is not None:
            parts.append(f"{'<=' if self.high_inclusive else '<'} {self.high:g}")
        return "a finite number" + (" " + " and ".join(parts) if parts else "")

    def hostile(self, owner: Any) -> list[Any]:
        """Return NaN, +-inf, a string, a bool and the values just outside the bounds."""
        out: list[Any] = [math.nan, math.inf, -math.inf, "1", True]
        if self.low is not None:
            out.append(self.low if not self.low_inclusive else self.low - max(1.0, abs(self.low)))
        if self.high is not None:
            edge = self.high + max(1.0, abs(self.high))
            out.append(self.high if not self.high_inclusive else edge)
        return out

    def kind(self) -> str:
        """Return ``float``."""
        return "float"


class Epsilon(Real):
    """A privacy budget in ``[MIN_EPSILON, owner.<top>]`` (``max_epsilon`` by default).

    The upper end is the spec class's own (the largest budget its sampler realizes
    exactly), so one declaration on :class:`ldpkit.spec.Mechanism` serves every subclass.
    """

    def __init__(self, top: str = "max_epsilon") -> None:
        super().__init__(MIN_EPSILON, None)
        self.top = top

    def _high(self, owner: Any) -> float:
        return float(getattr(owner, self.top, math.inf))

    def convert(self, value: Any, name: str, owner: Any) -> float:
        """Return the budget as a float, as :func:`check_epsilon` does."""
        return check_epsilon(value, name, high=self._high(owner))

    def describe(self, owner: Any) -> str:
        """Return e.g. ``a finite number >= 1e-06 and <= 50``."""
        high = self._high(owner)
        top = "" if math.isinf(high) else f" and <= {high:g}"
        return f"a finite number >= {MIN_EPSILON:g}{top}"

    def hostile(self, owner: Any) -> list[Any]:
        """Return 0, -1, NaN, +-inf, a string, a bool and (if bounded) twice the maximum."""
        high = self._high(owner)
        out: list[Any] = [0, -1.0, math.nan, math.inf, -math.inf, "1", True, [1.0]]
        return out if math.isinf(high) else [*out, 2.0 * high]


class Options(Constraint):
    """One of a few strings (e.g. the name of an inner oracle)."""

    def __init__(self, *options: str) -> None:
        self.options = tuple(options)

    def accepts_type(self, value: Any) -> bool:
        """Return whether ``value`` is a string."""
        return isinstance(value, str)

    def convert(self, value: Any, name: str, owner: Any) -> str:
        """Return ``value`` if it is one of the options."""
        if not isinstance(value, str) or value not in self.options:
            exc = ValueError if isinstance(value, str) else TypeError
            raise exc(f"{name} must be {self.describe(owner)}, got {_show(value)}")
        return str(value)

    def describe(self, owner: Any) -> str:
        """Return e.g. ``'grr' or 'olh'``, or ``one of ['a', 'b', 'c']``."""
        if len(self.options) == 2:
            return f"{self.options[0]!r} or {self.options[1]!r}"
        return f"one of {list(self.options)}"

    def hostile(self, owner: Any) -> list[Any]:
        """Return a string that is no option, an int and a bool."""
        return ["nope", 3, True]

    def kind(self) -> str:
        """Return ``str``."""
        return "str"


class Boolean(Constraint):
    """True or False (numpy booleans are accepted and stored as bool)."""

    def accepts_type(self, value: Any) -> bool:
        """Return whether ``value`` is a bool."""
        return isinstance(value, (bool, np.bool_))

    def convert(self, value: Any, name: str, owner: Any) -> bool:
        """Return ``value`` as a bool."""
        if not self.accepts_type(value):
            raise TypeError(f"{name} must be True or False, got {_show(value)}")
        return bool(value)

    def describe(self, owner: Any) -> str:
        """Return ``True or False``."""
        return "True or False"

    def hostile(self, owner: Any) -> list[Any]:
        """Return an int, a float and a string."""
        return [1, 0.0, "yes"]

    def kind(self) -> str:
        """Return ``bool``."""
        return "bool"


class Check(Constraint):
    """A value checked by a function of the spec's family (tuples, strings, pairs).

    ``function(value, name)`` returns the normalized value or raises in the project's
    message format itself; ``description`` words the requirement for the docs, and
    ``hostile_values`` lists values it refuses (for the contract and fuzz checks).
    """

    def __init__(
        self,
        function: Callable[[Any, str], Any],
        description: str,
        *,
        kind: str = "object",
        hostile_values: Sequence[Any] = (),
        size: bool = False,
        small: Any = None,
    ) -> None:
        self.function = function
        self.description = description
        self._kind = kind
        self.hostile_values = list(hostile_values)
        self.size, self.small = size, small

    def accepts_type(self, value: Any) -> bool:
        """Return True: the function decides (and raises TypeError itself)."""
        return True

    def convert(self, value: Any, name: str, owner: Any) -> Any:
        """Return ``function(value, name)``."""
        return self.function(value, name)

    def describe(self, owner: Any) -> str:
        """Return the declared description."""
        return self.description

    def hostile(self, owner: Any) -> list[Any]:
        """Return the declared hostile values."""
        return list(self.hostile_values)

    def kind(self) -> str:
        """Return the declared type column."""
        return self._kind


#: An end of a numerical domain ``[low, high]`` (``check_bounds`` then checks the pair:
#: ``low < high``, a width float64 resolves).
FINITE_BOUND = Real(-MAX_MAGNITUDE, MAX_MAGNITUDE)

#: What a field's declaration holds: the accepted alternatives, None meaning "None is accepted".
Alternatives = Sequence[Constraint | None]


def _describe(alternatives: Alternatives, owner: Any) -> str:
    return " or ".join("None" if c is None else c.describe(owner) for c in alternatives)


def check_parameter(value: Any, name: str, alternatives: Alternatives, owner: Any) -> Any:
    """Return ``value`` normalized by the first alternative that accepts it, or raise.

    ``owner`` is the spec being built (its earlier fields already checked, for the
    :class:`Ref` bounds) or its class. With one constraint (besides None) its own checker
    raises, so the message is the one :func:`ldpkit._validation.check_integer` (or
    ``check_real``, ...) gives, unless None is listed first (then the message begins
    ``None or``). With several, the message lists them all; the error is a
    TypeError when no alternative accepts the value's type.
    """
    if len(alternatives) == 1 and alternatives[0] is not None:  # the common case, fast
        return alternatives[0].convert(value, name, owner)
    if value is None and None in alternatives:
        return None
    real = [c for c in alternatives if c is not None]
    if len(real) == 1:
        if alternatives[0] is not None or isinstance(real[0], Check):
            return real[0].convert(value, name, owner)
        try:  # None listed first: the message says so ("None or one of [...]")
            return real[0].convert(value, name, owner)
        except (TypeError, ValueError) as exc:
            requirement = _describe(alternatives, owner)
            raise type(exc)(f"{name} must be {requirement}, got {_show(value)}") from None
    for constraint in real:
        if constraint.accepts_type(value):
            try:
                return constraint.convert(value, name, owner)
            except (TypeError, ValueError):
                continue
    exc_type = ValueError if any(c.accepts_type(value) for c in real) else TypeError
    raise exc_type(f"{name} must be {_describe(alternatives, owner)}, got {_show(value)}")


def expected_error(
    value: Any, name: str, alternatives: Alternatives, owner: Any
) -> type[Exception] | None:
    """Return the error type :func:`check_parameter` raises for ``value`` (None: accepted)."""
    try:
        check_parameter(value, name, alternatives, owner)
    except (TypeError, ValueError) as exc:
        return type(exc)
    return None


def hostile_values(spec: Any) -> dict[str, list[tuple[Any, type[Exception]]]]:
    """Return, per declared field of the spec ``spec``, values its declaration refuses.

    Each value comes with the error type validation raises for it (out of range: ValueError;
    a wrong type, a bool where an int is due: TypeError). The contract's ``validation`` check
    and the fuzz registry try each one.
    """
    out: dict[str, list[tuple[Any, type[Exception]]]] = {}
    for name, alternatives in spec.parameter_constraints().items():
        seen: list[Any] = [] if None in alternatives else [None]
        for c in alternatives:
            if c is not None:
                seen.extend(v for v in c.hostile(spec) if not any(v is s for s in seen))
        rows = []
        for v in seen:
            exc = expected_error(v, name, alternatives, spec)
            if exc is not None:
                rows.append((v, exc))
        out[name] = rows
    return out


def size_fields(cls: Any) -> tuple[str, ...]:
    """Return the fields of ``cls`` declared as sizes of its state (in declaration order)."""
    return tuple(
        name
        for name, alternatives in cls.parameter_constraints().items()
        if any(c is not None and c.size for c in alternatives)
    )


def small_values(cls: Any) -> dict[str, Any]:
    """Return the small valid values declared for the fields of ``cls`` (see :class:`Size`)."""
    out = {}
    for name, alternatives in cls.parameter_constraints().items():
        for c in alternatives:
            if c is not None and c.small is not None:
                out[name] = c.small
                break
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def parameter_table(registry: Mapping[str, Any]) -> str:
    """Return the Markdown parameter table of the specs of ``registry`` (type and range).

    ``registry`` is :func:`ldpkit.spec.mechanism_registry` (passed in: this module sits
    below spec.py). ``docs/reference/parameters.md`` holds this text for ldpkit's registry;
    ``tests/test_constraints.py`` keeps it current and writes it (``--write``).
    """
    import dataclasses

    lines = [
        "# Parameters of the mechanism specs",
        "",
        "Generated from each spec's `_parameter_constraints` by "
        "`PYTHONPATH=src python tests/test_constraints.py --write`, "
        "which checks that it is current. A field accepts a value when "
        "one of the listed alternatives does; *size* marks the fields that size the state "
        "(named when a configuration exceeds the memory budget).",
        "",
    ]
    for name, cls in sorted(registry.items()):
        if not cls.__module__.startswith("ldpkit."):
            continue
        constraints = cls.parameter_constraints()
        defaults = {
            f.name: f.default
            for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING
        }
        lines += [
            f"## `{name}` ({cls.__module__.rsplit('.', 1)[0]})",
            "",
            "| parameter | type | allowed | default | size |",
            "|---|---|---|---|---|",
        ]
        for field in dataclasses.fields(cls):
            if not field.init:
                continue
            alternatives = constraints.get(field.name, ())
            kinds = " or ".join(
                dict.fromkeys("None" if c is None else c.kind() for c in alternatives)
            )
            default = f"`{defaults[field.name]!r}`" if field.name in defaults else "required"
            size = "size" if any(c is not None and c.size for c in alternatives) else ""
            lines.append(
                f"| `{field.name}` | {kinds} | {_cell(_describe(alternatives, cls))} | "
                f"{_cell(default)} | {size} |"
            )
        lines.append("")
    return "\n".join(lines)
