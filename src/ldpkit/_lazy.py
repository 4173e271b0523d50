"""Lazy submodules for ldpkit's packages (the SPEC 1 pattern of the Scientific Python project).

A package ``__init__`` lists, for every public name, the submodule that defines it; the name
is imported on first attribute access (module ``__getattr__``, PEP 562) and then cached in the
package namespace, so later accesses are plain lookups. ``import ldpkit`` therefore loads only
numpy and a few small modules; scipy, pandas, numba and pyarrow load when the code that needs
them runs (server-side estimation, I/O, data sets), never for randomizing.

The table is the package's own ``if TYPE_CHECKING:`` block: type checkers and IDEs read its
imports as usual, and :func:`attach` parses the same statements to know where each name
lives, so the two cannot drift apart.
"""

from __future__ import annotations

import ast
import importlib
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["attach"]


class _LazyPackage(types.ModuleType):
    """A package module whose public names win over same-named submodules.

    ``ldpkit.numeric.em`` is the function ``em`` defined in the submodule ``ldpkit.numeric.em``.
    Python's import system binds a submodule to its parent's attribute when the submodule is
    first imported, which would replace the function by the module whenever the submodule
    happens to load first; those bindings are ignored here (the submodule stays reachable
    through ``sys.modules`` and ``from ldpkit.numeric.em import ...``), as an eager
    ``from .em import em`` in ``__init__`` used to guarantee.
    """

    _lazy_shadowed: frozenset[str] = frozenset()

    def __setattr__(self, name: str, value: Any) -> None:
        if (
            name in self._lazy_shadowed
            and isinstance(value, types.ModuleType)
            and value.__name__ == f"{self.__name__}.{name}"
        ):
            return
        super().__setattr__(name, value)


def _typing_imports(path: str) -> tuple[dict[str, str], set[str]]:
    """Names and submodules imported by the ``if TYPE_CHECKING:`` block of the file at ``path``."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), filename=path)
    names: dict[str, str] = {}
    submodules: set[str] = set()
    for node in tree.body:
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"):
            continue
        for stmt in node.body:
            if not isinstance(stmt, ast.ImportFrom) or stmt.level == 0:
                continue
            where = "." * stmt.level + (stmt.module or "")
            for alias in stmt.names:
                if alias.asname not in (None, alias.name):
                    raise ValueError(f"{path}: lazy names cannot be renamed ({alias.name})")
                if stmt.module is None:
                    submodules.add(alias.name)
                else:
                    names[alias.name] = where
    return names, submodules


def attach(
    package: str,
    init_file: str,
    *,
    submodules: Iterable[str] = (),
    factories: Mapping[str, Callable[[], Any]] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for a package whose attributes load on first use.

    The lazy table is read from the package's own ``if TYPE_CHECKING:`` block (relative
    ``from .mod import name`` and ``from . import submodule`` statements), so the names that
    type checkers see and the names that load at run time cannot drift apart.

    Parameters
    ----------
    package : str
        The package's ``__name__`` (the package must be in ``sys.modules``, as it is while its
        ``__init__`` runs).
    init_file : str
        The package's ``__file__``.
    submodules : iterable of str
        More submodule names that load on attribute access (``ldpkit.io``).
    factories : mapping of str to callable, optional
        Public name -> zero-argument function computing the value on first access (for
        registries that would otherwise import every module at once).
    """
    table, subs = _typing_imports(init_file)
    subs |= set(submodules)
    made = dict(factories or {})
    module = sys.modules[package]
    module.__class__ = _LazyPackage
    module._lazy_shadowed = frozenset(  # type: ignore[attr-defined]
        name for name, where in table.items() if where == f".{name}"
    )

    def __getattr__(name: str) -> Any:
        if name in table:
            value = getattr(importlib.import_module(table[name], package), name)
        elif name in subs:
            value = importlib.import_module(f"{package}.{name}")
        elif name in made:
            value = made[name]()
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(module, name, value)  # cache: the next access skips __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(module)) | set(table) | subs | set(made))

    return __getattr__, __dir__
