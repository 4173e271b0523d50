"""What every write path of the store shares: buckets, roll-up parts, retries and locks.

The SQLite and PostgreSQL writers (:mod:`ldpkit.service.sqlite_writer`,
:mod:`ldpkit.service.postgres_writer`), the compactor (:mod:`ldpkit.service.compaction`)
and the admin deletes (:mod:`ldpkit.service.deletes`) are handed one :class:`RollupWrites`
and one :class:`LoopGuard` by the store facade (:class:`~ldpkit.service.store.CollectorStore`):

- :class:`RollupWrites` maps arrival times to buckets (with a cache of whole seconds),
  turns a group's new batches into roll-up parts, sorts a group into new batches and
  retries (:meth:`RollupWrites.decide`), and counts the parts written since the last
  compaction (the compactor reads and resets that count);
- :class:`LoopGuard` remembers a slow SQLite transaction, after which commits and
  compactions run off the event loop for a while;
- the per-collection advisory locks of PostgreSQL (shared by group commits, exclusive for
  an admin delete) and the compaction lock's key.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import update
from sqlalchemy.engine import Connection

from ..spec import Stats
from .batch_identity import (
    BatchDeleted,
    BatchRecord,
    GroupStats,
    IdempotencyConflict,
    PendingBatch,
    new_batch_ids,
)
from .reads import StoreReader
from .schema import _Layout, _utc, collections_table

logger = logging.getLogger("ldpkit.service")

__all__ = [
    "COLLECTION_LOCK_CLASS",
    "COMPACT_LOCK",
    "INSERT_PART",
    "LoopGuard",
    "MERGE_STATS",
    "MergeStats",
    "RollupWrites",
    "batch_row",
    "bump_generation",
    "collection_lock_id",
    "lock_shared_sql",
]


class MergeStats:
    """The default :class:`~ldpkit.service.batch_identity.GroupStats`: merge the batches' Stats."""

    def combine(self, members: Sequence[PendingBatch]) -> Stats:
        """Merge the ``stats`` of ``members`` (each must carry its own)."""
        stats = [m.stats for m in members]
        if any(s is None for s in stats):
            raise ValueError("every batch must carry its Stats when no combine function is given")
        first, *rest = stats
        return first.merge(*rest)  # type: ignore[union-attr, arg-type]


MERGE_STATS = MergeStats()


# Per-collection advisory locks (PostgreSQL), keyed (class, collection) in the two-int4 key
# space, apart from the one-bigint compaction lock: every group commit takes its collections'
# locks in shared mode, an admin delete takes its collection's exclusively (delete_batches).
COLLECTION_LOCK_CLASS = 0x6C64706B  # "ldpk"

# A PostgreSQL advisory lock key ("ldpkit compact"): one compactor at a time across
# worker processes, and admin deletes wait for it.
COMPACT_LOCK = 0x6C64706B6974


# One roll-up part (DB-API paramstyle "format"; SQLite's writer swaps in "?").
INSERT_PART = (
    "INSERT INTO ldpkit_rollup_parts (collection, bucket, token, n, batches, arrays)"
    " VALUES (%s, %s, %s, %s, %s, %s)"
)


def collection_lock_id(collection: str) -> int:
    """Return the collection's int4 advisory-lock key.

    31 bits of sha256 of its name (non-negative, so the inlined literal is an int4; a
    collision only makes two collections' deletes wait for each other's writers).
    """
    return int.from_bytes(hashlib.sha256(collection.encode()).digest()[:4], "big") & 0x7FFFFFFF


@functools.lru_cache(maxsize=256)
def lock_shared_sql(names: frozenset[str]) -> str:
    """Return one statement taking the shared lock of each collection in ``names``.

    On the PostgreSQL group-commit path it is one more statement in the same pipelined
    round trip.
    """
    # Sorted: the same order in every transaction. Integer keys inlined and the text built
    # once per set of names: nothing to adapt or hash per group commit.
    calls = ", ".join(
        f"pg_advisory_xact_lock_shared({COLLECTION_LOCK_CLASS}, {collection_lock_id(c)})"
        for c in sorted(names)
    )
    return f"SELECT {calls}"


def bump_generation(conn: Connection, collection: str) -> None:
    """Bump the collection's generation (readers' caches of its closed buckets go stale)."""
    conn.execute(
        update(collections_table)
        .where(collections_table.c.name == collection)
        .values(generation=collections_table.c.generation + 1)
    )


class RollupWrites:
    """Buckets, roll-up parts and the retry decision of a group commit (every writer's).

    Parameters
    ----------
    layouts : dict
        Collection name -> its Stats layout (shared with the store; filled by ``register``).
    bucket_seconds : dict
        Collection name -> its bucket width in seconds (shared likewise).
    reader : StoreReader
        The store's reader (which buckets readers may have cached as closed).
    """

    def __init__(
        self,
        layouts: Mapping[str, _Layout],
        bucket_seconds: Mapping[str, int],
        reader: StoreReader,
    ) -> None:
        self.layouts = layouts
        self.bucket_seconds = bucket_seconds
        self.reader = reader
        # received_at -> Unix seconds (the app's clock hands out one datetime per second).
        self.epochs: dict[dt.datetime, int] = {}
        # Roll-up parts may exist (written since the last compaction, or left by an earlier
        # process): the committer compacts soon after it starts.
        self.dirty = True
        self.parts_written = 0  # by this process since its last compaction
        self.part_writes = 0  # group commits that wrote parts, ever (see Compactor.compact)
        self.count_lock = threading.Lock()  # PostgreSQL commits groups from two threads

    def bucket_of(self, collection: str, when: dt.datetime) -> int:
        """Return the start (Unix seconds) of the bucket of ``collection`` holding ``when``."""
        width = self.bucket_seconds[collection]
        epoch = self.epochs.get(when)
        if epoch is None:
            epoch = self.epoch(when)
        return epoch // width * width

    def epoch(self, when: dt.datetime) -> int:
        """Return ``int(when.timestamp())``, cached for whole-second times with a zone.

        The app's clock hands out one such datetime per second; the PostgreSQL writer's
        single statement relies on the cache holding only those.
        """
        epoch = int(when.timestamp())
        if when.tzinfo is not None and not when.microsecond:
            if len(self.epochs) >= 256:  # one new second per second under load
                self.epochs.clear()
            self.epochs[when] = epoch
        return epoch

    def wrote_parts(self, count: int) -> None:
        """Count a group's roll-up parts (for the bound and for compact's done check)."""
        with self.count_lock:
            self.dirty = True
            self.parts_written += count
            self.part_writes += 1

    def parts(
        self,
        items: Sequence[PendingBatch],
        new: Sequence[int],
        combine: GroupStats,
        buckets: Mapping[int, int] | Sequence[int] | None = None,
    ) -> list[tuple[str, int, str, int, int, bytes]]:
        """Return one roll-up part per (collection, bucket, token) of the new batches.

        In key order (``buckets``: the batches' buckets by index, when the caller has them).
        """
        groups: dict[tuple[str, int, str], list[PendingBatch]] = defaultdict(list)
        for i in new:
            b = items[i]
            bucket = (
                buckets[i] if buckets is not None else self.bucket_of(b.collection, b.received_at)
            )
            groups[(b.collection, bucket, b.token)].append(b)
        out = []
        for key in sorted(groups):
            members = groups[key]
            stats = combine.combine(members)
            out.append((*key, stats.n, len(members), self.layouts[key[0]].pack(stats)))
        return out

    def decide(
        self,
        items: Sequence[PendingBatch],
        digests: Mapping[int, str],
        prior: Mapping[tuple[str, str, str], tuple[Any, ...]],
        results: list[BatchRecord | Exception | None],
        deleted: Mapping[tuple[str, str, str], tuple[str, Any]] | None = None,
    ) -> tuple[list[int], dict[int, BatchRecord]]:
        """Sort a group's items into new batches and retries (both commit paths).

        ``prior`` maps ``(collection, token, idempotency_key)`` of keys stored before this
        group to ``(digest, batch_id, n, received_at)``, ``deleted`` those of deleted
        batches to ``(batch_id, deleted_at)``. A retry of a stored key, or of a key seen
        earlier in the group, gets its result (the first batch's record, or an
        :class:`IdempotencyConflict`) in ``results``, a key of a deleted batch a
        :class:`BatchDeleted`; returns the indices of the new batches and their records.
        """
        new: list[int] = []
        first_in_group: dict[tuple[str, str, str], int] = {}
        records: dict[int, BatchRecord] = {}
        ids = new_batch_ids(len(items))  # one each (a retry's goes unused)
        for i, b in enumerate(items):
            if b.idempotency_key:
                ident = (b.collection, b.token, b.idempotency_key)
                if deleted and ident in deleted:
                    gone_id, gone_at = deleted[ident]
                    results[i] = BatchDeleted(
                        f"Idempotency-Key {b.idempotency_key!r} must name a stored batch, but "
                        f"its batch {gone_id} was deleted by an administrator at "
                        f"{_utc(gone_at).isoformat()}; a deleted batch is not stored again "
                        "(a retry must not undo a delete): send new data with a new key"
                    )
                    continue
                if ident in prior:
                    digest, batch_id, n, received_at = prior[ident]
                    results[i] = self._retry(
                        b, digests[i], digest, batch_id, int(n), _utc(received_at)
                    )
                    continue
                if ident in first_in_group:
                    j = first_in_group[ident]
                    r = records[j]
                    results[i] = self._retry(
                        b, digests[i], digests[j], r.batch_id, r.n, r.received_at
                    )
                    continue
                first_in_group[ident] = i
            records[i] = BatchRecord(ids[i], b.collection, b.n, b.received_at, token=b.token)
            new.append(i)
        return new, records

    @staticmethod
    def _retry(
        b: PendingBatch,
        digest: str,
        stored_digest: str | None,
        batch_id: str,
        n: int,
        received_at: dt.datetime,
    ) -> BatchRecord | Exception:
        if stored_digest != digest:
            return IdempotencyConflict(
                f"Idempotency-Key {b.idempotency_key!r} must identify one batch, but it was used "
                f"for batch {batch_id} with different reports; use a new key for new data"
            )
        return BatchRecord(batch_id, b.collection, n, received_at, duplicate=True, token=b.token)


class LoopGuard:
    """When SQLite transactions may run in the event loop's thread.

    A SQLite transaction that took longer than ``slow_commit_seconds`` (0.1 s; ~1-15 ms is
    usual) moves the following commits and compactions off the loop for
    ``off_loop_seconds`` (3 s, renewed by every slow one there): see
    :meth:`CollectorStore.commit_group_async <ldpkit.service.store.CollectorStore.commit_group_async>`.
    """

    def __init__(self) -> None:
        self.slow_commit_seconds = 0.1
        self.off_loop_seconds = 3.0
        self.off_loop_until = -float("inf")

    @property
    def on_loop(self) -> bool:
        """Whether no slow transaction was seen lately (SQLite may run in the loop)."""
        return time.monotonic() >= self.off_loop_until

    def timed(
        self,
        commit: Callable[..., list[BatchRecord | Exception]],
        items: Sequence[PendingBatch],
        merge: GroupStats,
    ) -> list[BatchRecord | Exception]:
        """Run ``commit(items, merge)``, noting a slow one."""
        start = time.perf_counter()
        try:
            return commit(items, merge)
        finally:
            self.note(time.perf_counter() - start, "group commit")

    def note(self, took: float, what: str) -> None:
        """Note a SQLite transaction that took ``took`` s.

        Past ``slow_commit_seconds``, the next commits and compactions run off the event
        loop for ``off_loop_seconds``.
        """
        if took > self.slow_commit_seconds:
            if time.monotonic() >= self.off_loop_until:
                logger.warning(
                    "a SQLite %s took %.3f s (> %.3f s): the next ones run off the event "
                    "loop for %.0f s",
                    what,
                    took,
                    self.slow_commit_seconds,
                    self.off_loop_seconds,
                )
            self.off_loop_until = time.monotonic() + self.off_loop_seconds


def batch_row(
    batch_id: str, item: Any, digest: str | None, received: Any, bucket: int
) -> tuple[Any, ...]:
    """Return one ``ldpkit_batches`` row in the column order both writers insert.

    ``item`` is the batch's :class:`~ldpkit.service.batch_identity.PendingBatch`;
    ``received`` its arrival time as the writer's database takes it (text for SQLite's
    driver, ISO text inside PostgreSQL's JSON rows).
    """
    return (
        batch_id,
        item.collection,
        item.token,
        item.idempotency_key,
        digest,
        item.n,
        received,
        bucket,
    )
