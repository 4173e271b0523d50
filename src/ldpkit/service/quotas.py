"""Per-token ingest quotas: reports per minute and batches per second (429 + Retry-After).

LDP cannot tell a fake report from a real one, so what one ingest token can add to a
collection is bounded only by how fast the collector accepts its batches. Each token gets
two fixed-window counters, checked on every ingest request (regular and fast path):

* ``batches_per_second``: batches (requests) a second, checked before the body is decoded;
* ``reports_per_minute``: reports a minute, charged once the batch is decoded (a batch that
  would cross the quota is refused whole, nothing of it is stored).

Over either one the answer is **429** with ``Retry-After`` (whole seconds until the window
ends); a single batch larger than the token's whole ``reports_per_minute`` is **413** (it
could never pass). Config::

    [quotas]                       # defaults for every token (these are the built-in ones)
    reports_per_minute = 1000000
    batches_per_second = 1000

    [auth]
    tokens = [
      { name = "web", scopes = ["ingest"], sha256 = "...", collections = ["browsers"], reports_per_minute = 60000 },
    ]

``"unlimited"`` turns a counter off. With ``[auth]`` every token is limited (by its own
numbers, else ``[quotas]``, else the defaults above); without ``[auth]`` (loopback only)
nothing is unless ``[quotas]`` is given, and then all clients share one budget.

Several worker processes (``ldpkit serve --workers N``) share the counters through one
memory-mapped file in the metrics directory, each update under an exclusive ``flock``, so
the quota holds for the server as a whole, not per process. Without ``fcntl`` (Windows)
each process counts alone: the effective quota is then N times the configured one.
"""

from __future__ import annotations

import dataclasses
import math
import mmap
import os
import struct
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: per-process counters (see the docstring)
    fcntl = None  # type: ignore[assignment]

__all__ = ["Quota", "QuotaCounters", "QuotaExceeded", "parse_quota"]

QUOTA_KEYS = ("reports_per_minute", "batches_per_second")
_FILE = "ldpkit-quotas.bin"
# Per token two (window, count) pairs of int64: the minute and its reports, then the
# second and its batches.
_PAIR = struct.Struct("<2q")
_SLOT_SIZE = 2 * _PAIR.size


@dataclasses.dataclass(frozen=True)
class Quota:
    """One token's ingest budget; ``None`` means unlimited.

    Parameters
    ----------
    reports_per_minute : int or None
        Reports a token may add per minute (fixed window): 1,000,000 by default, about
        17,000 a second. A token shared by many devices (a web page's ingest-only token)
        needs the whole population's rate: size it to the expected traffic, since this is
        also what one holder of the token can add in fake reports.
    batches_per_second : int or None
        Requests a token may send per second (fixed window): 1,000 by default.
    """

    reports_per_minute: int | None = 1_000_000
    batches_per_second: int | None = 1_000

    def __post_init__(self) -> None:
        """Validate and normalize the fields."""
        for name in QUOTA_KEYS:
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(f"{name} must be an integer >= 1 or 'unlimited', got {value!r}")


def parse_quota(entry: Mapping[str, Any], where: str, base: Quota | None = None) -> Quota:
    """Return a :class:`Quota` from the config keys of ``entry`` (others ignored), over ``base``."""
    base = base or Quota()
    values: dict[str, Any] = {}
    for name in QUOTA_KEYS:
        if name not in entry:
            continue
        value = entry[name]
        if value == "unlimited":
            value = None
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(
                f"{where}.{name} must be an integer >= 1 or 'unlimited', got {value!r}"
            )
        values[name] = value
    return dataclasses.replace(base, **values)


class QuotaExceeded(Exception):
    """A request over its token's quota: ``status`` (429 or 413) and ``retry_after`` (s)."""

    def __init__(self, status: int, message: str, retry_after: int | None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class QuotaCounters:
    """Fixed-window counters per token, in memory or shared by processes (see module doc).

    Parameters
    ----------
    quotas : mapping of token name -> Quota
        Tokens not in it are not limited.
    directory : str, os.PathLike or None
        Share the counters with the other worker processes through a file there.
    clock : callable
        Wall-clock seconds (shared by the processes); tests replace it.
    """

    def __init__(
        self,
        quotas: Mapping[str, Quota],
        directory: str | os.PathLike[str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.quotas = dict(quotas)
        self.clock = clock
        # token -> (offset of its slot, batches_per_second, reports_per_minute)
        self._limits = {
            name: (i * _SLOT_SIZE, q.batches_per_second, q.reports_per_minute)
            for i, (name, q) in enumerate(sorted(self.quotas.items()))
        }
        self._lock = threading.Lock()
        self._fd: int | None = None
        size = max(1, len(self._limits)) * _SLOT_SIZE
        self._buffer: bytearray | mmap.mmap
        if directory is None or fcntl is None:
            self._buffer = bytearray(size)
        else:
            # Opened without truncation: every worker maps the same file; stale windows
            # from an earlier run are older than the current one and so start afresh.
            fd = os.open(Path(directory) / _FILE, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if os.fstat(fd).st_size < size:
                    os.ftruncate(fd, size)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            self._buffer = mmap.mmap(fd, size)
            self._fd = fd

    def close(self) -> None:
        """Release the shared file (the counters stay in it for the other processes)."""
        if self._fd is not None:
            if isinstance(self._buffer, mmap.mmap):
                self._buffer.close()
            os.close(self._fd)
            self._fd = None

    def _count(self, offset: int, window: int, amount: int, limit: int) -> int | None:
        """Add ``amount`` to the counter at ``offset`` for ``window``.

        None if over ``limit`` (nothing added), else the new count. Under the locks (thread,
        then file).
        """
        with self._lock:
            fd = self._fd
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                seen, count = _PAIR.unpack_from(self._buffer, offset)
                if seen != window:
                    count = 0
                if count + amount > limit:
                    return None
                _PAIR.pack_into(self._buffer, offset, window, count + amount)
                return count + amount
            finally:
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def admit_batch(self, token: str) -> None:
        """Count one request of ``token``; QuotaExceeded (429) over ``batches_per_second``."""
        found = self._limits.get(token)
        if found is None or found[1] is None:
            return
        now = self.clock()
        if self._count(found[0] + _PAIR.size, int(now // 1), 1, found[1]) is None:
            raise QuotaExceeded(
                429,
                f"token {token!r} must send at most {found[1]} batches per second "
                "(quota batches_per_second); retry after the Retry-After seconds",
                1,
            )

    def charge_reports(self, token: str, n: int) -> None:
        """Count ``n`` reports of ``token``.

        QuotaExceeded over ``reports_per_minute`` (429, or 413 for a batch larger than the
        whole quota).
        """
        found = self._limits.get(token)
        if found is None or found[2] is None:
            return
        n, limit = int(n), found[2]
        if n > limit:
            raise QuotaExceeded(
                413,
                f"batch must hold at most {limit} reports (token {token!r}'s "
                f"reports_per_minute), got {n}; send smaller batches",
                None,
            )
        now = self.clock()
        minute = int(now // 60)
        if self._count(found[0], minute, n, limit) is None:
            wait = max(1, math.ceil((minute + 1) * 60 - now))
            raise QuotaExceeded(
                429,
                f"token {token!r} must add at most {limit} reports per minute "
                f"(quota reports_per_minute), got {n} more; retry in {wait} s",
                wait,
            )
