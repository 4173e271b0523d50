"""Saving and loading Reports and Stats with the spec and its fingerprint.

Reports go to ``.npz`` (no pickles: loaded with ``allow_pickle=False``), Stats to JSON.
Loading checks the stored fingerprint against the rebuilt spec, and callers can demand
an expected spec, so a server never mixes reports from another configuration.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from .spec import Mechanism, Reports, Stats, spec_from_dict

__all__ = ["save_reports", "load_reports", "save_stats", "load_stats"]

_META = "__ldpkit_meta__"


def _check_expected(spec: Mechanism, expected: Mechanism | None, what: str) -> None:
    if expected is not None and spec != expected:
        raise ValueError(
            f"{what} must come from {expected!r} (fingerprint {expected.fingerprint}), "
            f"got {what} from {spec!r} (fingerprint {spec.fingerprint})"
        )


def save_reports(reports: Reports, path: str | os.PathLike[str]) -> Path:
    """Write reports to ``path`` (.npz) with the spec and its fingerprint."""
    if not isinstance(reports, Reports):
        raise TypeError(f"reports must be ldpkit.Reports, got {type(reports).__name__}")
    meta = {"format": "ldpkit.reports/1", "mechanism": reports.spec.to_dict(), "fingerprint": reports.fingerprint}
    path = Path(path)
    if _META in reports.fields:
        raise ValueError(f"reports must not have a field named {_META!r}")
    arrays: dict[str, Any] = dict(reports.arrays)
    arrays[_META] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)
    return path


def load_reports(path: str | os.PathLike[str], *, expected: Mechanism | None = None) -> Reports:
    """Read reports saved by :func:`save_reports`; ``expected`` demands a configuration."""
    with np.load(path, allow_pickle=False) as data:
        if _META not in data:
            raise ValueError(f"path must be an ldpkit reports file, got {os.fspath(path)!r}")
        meta = json.loads(data[_META].tobytes().decode())
        spec = spec_from_dict(meta["mechanism"])
        if meta["fingerprint"] != spec.fingerprint:
            raise ValueError(f"fingerprint must match {spec!r}, got {meta['fingerprint']!r}")
        _check_expected(spec, expected, "reports")
        return Reports(spec, **{k: data[k] for k in data.files if k != _META})


def save_stats(stats: Stats, path: str | os.PathLike[str]) -> Path:
    """Write stats to ``path`` as JSON (exact for float64)."""
    if not isinstance(stats, Stats):
        raise TypeError(f"stats must be ldpkit.Stats, got {type(stats).__name__}")
    path = Path(path)
    path.write_text(json.dumps(stats.to_dict()))
    return path


def load_stats(path: str | os.PathLike[str], *, expected: Mechanism | None = None) -> Stats:
    """Read stats saved by :func:`save_stats`; ``expected`` demands a configuration."""
    stats = Stats.from_dict(json.loads(Path(path).read_text()))
    _check_expected(stats.spec, expected, "stats")
    return stats
