"""What a batch is to the store and how it is told apart.

The pending batch and its stored record, batch ids, the digests that tell a retried batch
from a different one under the same idempotency key, and the refusals of a reused or deleted
key.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import itertools
import json
import os
import time
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from ..spec import Reports, Stats


class IdempotencyConflict(ValueError):
    """An idempotency key was reused for a batch with different content."""


class BatchDeleted(ValueError):
    """An idempotency key names a batch an admin deleted: it is not stored again."""


@dataclasses.dataclass(frozen=True)
class BatchRecord:
    """What the store knows about one stored batch."""

    batch_id: str
    collection: str
    n: int
    received_at: dt.datetime
    duplicate: bool = False
    token: str = ""


@dataclasses.dataclass(eq=False)
class PendingBatch:
    """One batch waiting for the next group commit.

    ``stats`` is the batch's aggregate, or None when the committer aggregates ``reports``
    itself (small batches, aggregated together). ``digest`` identifies the content of a
    keyed batch (:func:`reports_digest`), so a retry can be told from a key reused for
    other data.
    """

    collection: str
    n: int
    stats: Stats | None = None
    reports: Any = None  # Reports, or commit.ReportRows for a small JSON batch
    token: str = ""
    idempotency_key: str | None = None
    digest: str | None = None
    raw: tuple[str, bytes] | None = None
    received_at: dt.datetime = dataclasses.field(
        default_factory=lambda: dt.datetime.now(dt.UTC).replace(microsecond=0)
    )


class GroupStats(Protocol):
    """How a group commit gets the merged Stats of the new batches of one roll-up row.

    The writers call :meth:`combine` once per (collection, bucket, token) of a group's new
    batches. The default, :class:`~ldpkit.service.writes.MergeStats`, merges the batches'
    own ``stats``; the group committer passes one that reuses the Stats it aggregated for
    several small batches at once (:class:`~ldpkit.service.commit.GroupAggregates`).
    """

    def combine(self, members: Sequence[PendingBatch]) -> Stats:
        """Return the merged Stats of ``members`` (batches of one roll-up row)."""
        ...


def stats_digest(stats: Stats) -> str:
    """sha256 of the canonical JSON of ``stats``."""
    text_ = json.dumps(stats.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text_.encode()).hexdigest()


class ReportsDigest:
    """sha256 of a batch's report arrays, fed in row chunks (same result for any chunking).

    One hash per field over its C-order bytes, then one hash over the field names, dtypes,
    per-user shapes and field hashes: independent of the wire format the batch came in.
    """

    def __init__(self) -> None:
        self._fields: dict[str, Any] = {}
        self._meta: dict[str, tuple[str, tuple[int, ...]]] = {}

    def update(self, reports: Reports) -> None:
        """Hash the arrays of ``reports`` into the per-field digests."""
        for name, arr in reports.arrays.items():
            if name not in self._fields:
                self._fields[name] = hashlib.sha256()
                self._meta[name] = (arr.dtype.str, arr.shape[1:])
            self._fields[name].update(np.ascontiguousarray(arr).tobytes())

    def hexdigest(self) -> str:
        """Return the digest of every field (name, dtype, shape, bytes) as hex."""
        outer = hashlib.sha256()
        for name in sorted(self._fields):
            dtype, shape = self._meta[name]
            outer.update(f"{name}|{dtype}|{shape}|".encode())
            outer.update(self._fields[name].digest())
        return outer.hexdigest()


def reports_digest(reports: Reports) -> str:
    """:class:`ReportsDigest` of one Reports."""
    d = ReportsDigest()
    d.update(reports)
    return d.hexdigest()


_ID_BITS = 2**74 - 1


_id_state: tuple[int, int, Any] = (-1, 0, None)  # (pid, random base, counter)


def new_batch_id() -> str:
    """Return a UUID version 7 (RFC 9562): time-ordered, so new rows append to the index.

    The 74 bits after the millisecond timestamp are a random base drawn once per process
    plus a counter (RFC 9562 section 6.2 allows counters): unique within a process, and
    across processes unless two random bases land within a few ids of each other (then
    the unique index refuses the row and the group is retried). Batch ids are not secrets:
    no route accepts one as a capability, so they need uniqueness, not unpredictability,
    and one ``os.urandom`` call per process instead of per batch saves a system call.
    """
    return new_batch_ids(1)[0]


_LOW48 = 2**48 - 1


def new_batch_ids(count: int) -> list[str]:
    """Return ``count`` ids of :func:`new_batch_id` from one clock read.

    The common digits are formatted once: a group commit names all its batches at once.
    """
    global _id_state
    pid, base, counter = _id_state
    if pid != os.getpid():  # first call, or a forked child: a base of its own
        base = int.from_bytes(os.urandom(10), "big") & _ID_BITS
        counter = itertools.count()
        _id_state = (os.getpid(), base, counter)
    ms = (time.time_ns() // 1_000_000) & _LOW48
    # Layout: 48 bits ms | version 7 | 12 bits rand | variant 0b10 | 62 bits rand, printed
    # 8-4-4-4-12 hex digits; consecutive counters change only the last 12 digits (the
    # others are formatted again when a carry reaches them). next(counter) is atomic:
    # committer threads never share a value.
    prefix = f"{ms >> 16:08x}-{ms & 0xFFFF:04x}-7"
    out: list[str] = []
    last, mid = -1, ""
    for _ in range(count):
        rand = (base + next(counter)) & _ID_BITS
        high = rand >> 48  # 12 bits after the version, then 14 after the variant
        if high != last:
            last = high
            mid = f"{prefix}{high >> 14:03x}-{0x8000 | (high & 0x3FFF):04x}-"
        out.append(f"{mid}{rand & _LOW48:012x}")
    return out
