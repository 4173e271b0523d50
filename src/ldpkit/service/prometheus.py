"""Counters for ``GET /metrics`` (Prometheus text exposition format 0.0.4).

Stored totals (batches, reports per collection) come from the database. Request counters,
rejects and commit latency are counted where they happen, in each worker process; with
``--workers N`` any process may answer ``/metrics``, so the counters must be shared:

* one process (the default): counters live in memory;
* ``directory`` set (``ldpkit serve --workers N`` makes a temporary one): each process
  keeps its counters in its own memory-mapped file there, and ``render`` sums the files
  of every process, so whichever worker answers gives the same totals. A process that
  exits leaves its file, so its counts stay in the totals (counters never go down while
  the server runs); the directory is removed when the server stops.

File layout (little-endian): an 8-byte count of used bytes, then records
``[u32 key length][key, UTF-8, padded to 8 bytes][f64 value]``. Only the owning process
writes its file; a new record is written before the used count covers it, so a reader
never sees half a record, and 8-byte aligned values are read whole.
"""

from __future__ import annotations

import functools
import json
import mmap
import os
import struct
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

__all__ = ["Metrics"]

# Upper bounds of the commit latency histogram, in seconds.
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_HEADER = 8
_INITIAL_SIZE = 1 << 16
_PREFIX = "ldpkit-metrics-"


_F64 = struct.Struct("<d")
# This process's id, kept current across fork() without a getpid() call per counter update.
_PID = [os.getpid()]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid()))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


@functools.lru_cache(maxsize=4096)
def _key(*parts: Any) -> str:
    return json.dumps(parts, separators=(",", ":"))


class _MappedCounters:
    """One process's counters in a memory-mapped file (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, _INITIAL_SIZE)
            self._map = mmap.mmap(fd, _INITIAL_SIZE)
        finally:
            os.close(fd)
        self._used = _HEADER
        struct.pack_into("<Q", self._map, 0, self._used)
        self._offsets: dict[str, int] = {}

    def add(self, key: str, amount: float) -> None:
        offset = self._offsets.get(key)
        if offset is None:
            offset = self._append(key)
        (value,) = _F64.unpack_from(self._map, offset)
        _F64.pack_into(self._map, offset, value + amount)

    def _append(self, key: str) -> int:
        raw = key.encode()
        padded = raw + b" " * (-(4 + len(raw)) % 8)
        record = struct.pack("<I", len(raw)) + padded + struct.pack("<d", 0.0)
        end = self._used + len(record)
        if end > len(self._map):
            size = len(self._map)
            while size < end:
                size *= 2
            self._map.resize(size)
        self._map[self._used : end] = record
        offset = end - 8
        self._used = end
        struct.pack_into("<Q", self._map, 0, end)  # publish the record last
        self._offsets[key] = offset
        return offset


def _read_file(path: Path) -> dict[str, float]:
    data = path.read_bytes()
    out: dict[str, float] = {}
    if len(data) < _HEADER:
        return out
    (used,) = struct.unpack_from("<Q", data, 0)
    pos = _HEADER
    while pos + 4 <= min(used, len(data)):
        (length,) = struct.unpack_from("<I", data, pos)
        start = pos + 4
        value_at = start + length + (-(4 + length) % 8)
        if value_at + 8 > len(data):
            break
        out[data[start : start + length].decode()] = struct.unpack_from("<d", data, value_at)[0]
        pos = value_at + 8
    return out


class Metrics:
    """Counters and one histogram; every method is thread-safe.

    Parameters
    ----------
    directory : str, os.PathLike or None
        Share the counters with the other worker processes through files in this directory
        (None: this process only).
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self._lock = threading.Lock()
        self.directory = None if directory is None else Path(directory)
        self._local: dict[str, float] = defaultdict(float)
        self._mapped: _MappedCounters | None = None
        self._pid: int | None = None
        # Per-collection keys of accept(), the call made for every accepted request.
        self._accept_keys: dict[str, tuple[str, str, str]] = {}

    def _add(self, key: str, amount: float) -> None:
        if self.directory is None:
            self._local[key] += amount
            return
        if self._mapped is None or self._pid != _PID[0]:  # new process (fork): own file
            self._pid = _PID[0] = os.getpid()
            self._mapped = _MappedCounters(self.directory / f"{_PREFIX}{self._pid}.bin")
        self._mapped.add(key, amount)

    def accept(self, collection: str, n: int, duplicate: bool) -> None:
        """Count an accepted (or duplicate) batch of ``n`` reports of ``collection``."""
        keys = self._accept_keys.get(collection)
        if keys is None:
            keys = self._accept_keys[collection] = (
                _key("duplicates", collection),
                _key("batches", collection),
                _key("reports", collection),
            )
        with self._lock:
            if duplicate:
                self._add(keys[0], 1)
            else:
                self._add(keys[1], 1)
                self._add(keys[2], n)

    def reject(self, reason: str, status: int) -> None:
        """Count a rejected request by reason and status."""
        with self._lock:
            self._add(_key("rejects", reason, status), 1)

    def commit(self, seconds: float, batches: int) -> None:
        """Count one group commit of ``batches`` batches that took ``seconds``."""
        i = next((k for k, b in enumerate(_BUCKETS) if seconds <= b), len(_BUCKETS))
        with self._lock:
            self._add(_key("commit_bucket", i), 1)
            self._add(_key("commit_sum"), seconds)
            self._add(_key("committed_batches"), batches)

    def compaction(self, folded: int | None) -> None:
        """One roll-up compaction: the parts it folded, or None when it failed."""
        with self._lock:
            if folded is None:
                self._add(_key("compaction_failures"), 1)
            else:
                self._add(_key("compactions"), 1)
                self._add(_key("compacted_parts"), folded)

    def totals(self) -> dict[tuple[Any, ...], float]:
        """Every counter, summed over the processes sharing the directory."""
        with self._lock:
            if self.directory is None:
                sources = [dict(self._local)]
            else:
                sources = [_read_file(p) for p in sorted(self.directory.glob(f"{_PREFIX}*.bin"))]
        out: dict[tuple[Any, ...], float] = defaultdict(float)
        for source in sources:
            for key, value in source.items():
                out[tuple(json.loads(key))] += value
        return out

    def render(self, stored: dict[str, tuple[int, int]]) -> str:
        """Return the exposition text; ``stored``: collection -> (reports, batches) stored."""
        totals = self.totals()

        def series(kind: str) -> list[tuple[tuple[Any, ...], float]]:
            return sorted((k[1:], v) for k, v in totals.items() if k[0] == kind)

        lines = [
            "# HELP ldpkit_stored_batches Batches stored per collection (database total).",
            "# TYPE ldpkit_stored_batches gauge",
        ]
        lines += [
            f'ldpkit_stored_batches{{collection="{_escape(c)}"}} {b}'
            for c, (_, b) in sorted(stored.items())
        ]
        lines += [
            "# HELP ldpkit_stored_reports Reports stored per collection (database total).",
            "# TYPE ldpkit_stored_reports gauge",
        ]
        lines += [
            f'ldpkit_stored_reports{{collection="{_escape(c)}"}} {n}'
            for c, (n, _) in sorted(stored.items())
        ]
        for kind, name, text in (
            ("batches", "ldpkit_batches_total", "Batches accepted (all worker processes)."),
            ("reports", "ldpkit_reports_total", "Reports accepted (all worker processes)."),
            (
                "duplicates",
                "ldpkit_duplicate_batches_total",
                "Retried batches answered from the store.",
            ),
        ):
            lines += [f"# HELP {name} {text}", f"# TYPE {name} counter"]
            lines += [f'{name}{{collection="{_escape(c)}"}} {int(v)}' for (c,), v in series(kind)]
        lines += [
            "# HELP ldpkit_rejects_total Requests refused, by reason and HTTP status.",
            "# TYPE ldpkit_rejects_total counter",
        ]
        lines += [
            f'ldpkit_rejects_total{{reason="{_escape(r)}",status="{s}"}} {int(v)}'
            for (r, s), v in series("rejects")
        ]
        lines += [
            "# HELP ldpkit_commit_seconds Duration of one group commit (one transaction).",
            "# TYPE ldpkit_commit_seconds histogram",
        ]
        counts = [0] * (len(_BUCKETS) + 1)
        for (i,), v in series("commit_bucket"):
            counts[int(i)] += int(v)
        total = 0
        for bound, count in zip(_BUCKETS, counts):
            total += count
            lines.append(f'ldpkit_commit_seconds_bucket{{le="{bound}"}} {total}')
        total += counts[-1]
        lines.append(f'ldpkit_commit_seconds_bucket{{le="+Inf"}} {total}')
        lines.append(f"ldpkit_commit_seconds_sum {totals.get(('commit_sum',), 0.0):.6f}")
        lines.append(f"ldpkit_commit_seconds_count {total}")
        lines += [
            "# HELP ldpkit_committed_batches_total Batches written by group commits.",
            "# TYPE ldpkit_committed_batches_total counter",
            f"ldpkit_committed_batches_total {int(totals.get(('committed_batches',), 0))}",
        ]
        for kind, name, text in (
            ("compactions", "ldpkit_compactions_total", "Roll-up compactions that succeeded."),
            (
                "compaction_failures",
                "ldpkit_compaction_failures_total",
                "Roll-up compactions that failed (parts kept; /healthz degraded from 3 in a row).",
            ),
            ("compacted_parts", "ldpkit_compacted_parts_total", "Roll-up parts folded."),
        ):
            lines += [
                f"# HELP {name} {text}",
                f"# TYPE {name} counter",
                f"{name} {int(totals.get((kind,), 0))}",
            ]
        return "\n".join(lines) + "\n"
