"""A small TOML writer for ldpkit's own documents (questions, collector configs).

Python reads TOML with :mod:`tomllib` but has no writer; ldpkit only writes nested tables of
strings, numbers, booleans and lists of them (and arrays of tables), which this module
covers. Keys that hold None are left out (TOML has no null): readers fall back to the
field's default, which is None wherever ldpkit writes one.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["dumps"]

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(name: str) -> str:
    return name if _BARE_KEY.match(name) else json.dumps(name)


def _value(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON's escapes are valid in TOML basic strings
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v, where) for v in value if v is not None) + "]"
    if isinstance(value, Mapping):
        items = ", ".join(
            f"{_key(str(k))} = {_value(v, where)}" for k, v in value.items() if v is not None
        )
        return "{ " + items + " }" if items else "{}"
    raise TypeError(f"{where} must hold str, int, float, bool, lists or tables, got {value!r}")


def _is_table_array(value: Any) -> bool:
    return (
        isinstance(value, (list, tuple))
        and len(value) > 0
        and all(isinstance(v, Mapping) for v in value)
    )


def _emit(table: Mapping[str, Any], path: list[str], out: list[str]) -> None:
    plain = {
        k: v
        for k, v in table.items()
        if v is not None and not isinstance(v, Mapping) and not _is_table_array(v)
    }
    for k, v in plain.items():
        out.append(f"{_key(str(k))} = {_value(v, '.'.join([*path, str(k)]))}")
    for k, v in table.items():
        if isinstance(v, Mapping):
            sub = [*path, str(k)]
            out.append("")
            out.append("[" + ".".join(_key(p) for p in sub) + "]")
            _emit(v, sub, out)
        elif _is_table_array(v):
            sub = [*path, str(k)]
            for item in v:
                out.append("")
                out.append("[[" + ".".join(_key(p) for p in sub) + "]]")
                _emit(item, sub, out)


def dumps(document: Mapping[str, Any]) -> str:
    """Return the TOML text of ``document`` (a mapping of tables and values)."""
    if not isinstance(document, Mapping):
        raise TypeError(f"document must be a mapping, got {document!r}")
    out: list[str] = []
    _emit(document, [], out)
    return "\n".join(out).lstrip("\n") + "\n"
