"""The store's reads.

The sums of roll-ups and roll-up parts a collection's estimates and listings come from
(:class:`StoreReader`), with a cache of closed buckets' sums that is valid for one
generation of the collection.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import defaultdict
from typing import Any

import numpy as np
from sqlalchemy import (
    Table,
    and_,
    func,
    select,
    union_all,
)
from sqlalchemy.engine import Engine

from ..spec import Mechanism, Stats
from .batch_identity import (
    BatchRecord,
)
from .schema import (
    _Layout,
    _utc,
    batches_table,
    collections_table,
    reports_table,
    rollup_parts_table,
    rollups_table,
)

logger = logging.getLogger("ldpkit.service")


class _ClosedBuckets:
    """Per-bucket sums of closed buckets of one collection (all tokens), in time order."""

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.until = -(2**62)  # every bucket before this one is in the cache
        self.starts: list[int] = []
        self.arrays: list[dict[str, np.ndarray]] = []
        self.n: list[int] = []
        self.batches: list[int] = []

    def add(self, bucket: int, arrays: dict[str, np.ndarray], n: int, batches: int) -> None:
        self.starts.append(bucket)
        self.arrays.append(arrays)
        self.n.append(n)
        self.batches.append(batches)

    def window(self, lo: int, hi: int) -> tuple[dict[str, np.ndarray], int, int]:
        """Return the sums over cached buckets with ``lo <= start < hi`` (empty dict if none)."""
        import bisect

        i, j = bisect.bisect_left(self.starts, lo), bisect.bisect_left(self.starts, hi)
        if i >= j:
            return {}, 0, 0
        keys = self.arrays[i].keys()
        out = {k: np.sum([a[k] for a in self.arrays[i:j]], axis=0) for k in keys}
        return out, sum(self.n[i:j]), sum(self.batches[i:j])


class StoreReader:
    """Reads of roll-ups, roll-up parts and batch metadata.

    The :class:`~ldpkit.service.store.CollectorStore` makes one and passes it its engine
    and its per-collection layouts and bucket lengths.
    """

    def __init__(
        self,
        engine: Engine,
        layouts: dict[str, _Layout],
        bucket_seconds: dict[str, int],
    ) -> None:
        self.engine = engine
        self.layouts = layouts  # shared with the store: register() fills them
        self.bucket_seconds = bucket_seconds
        self._cache: dict[str, _ClosedBuckets] = {}

    # -- reading -----------------------------------------------------------------------------
    def rollup_filter(
        self,
        collection: str,
        since: int | None = None,
        until: int | None = None,
        token: str | None = None,
        table: Table = rollups_table,
    ) -> Any:
        """Return the WHERE clause of a collection's roll-up rows (time range, token)."""
        cond = [table.c.collection == collection]
        if since is not None:
            cond.append(table.c.bucket >= since)
        if until is not None:
            # whole buckets only: a bucket counts if it ends at or before `until`
            cond.append(table.c.bucket + self.bucket_seconds[collection] <= until)
        if token is not None:
            cond.append(table.c.token == token)
        return and_(*cond)

    def sums(
        self,
        collection: str,
        since: int | None = None,
        until: int | None = None,
        token: str | None = None,
    ) -> Any:
        """Return roll-up rows and not yet folded parts in ``[since, until)``, one subquery.

        Columns ``bucket, token, n, batches, arrays``: read in one statement, hence one
        snapshot, so a compaction running meanwhile is seen entirely or not at all.
        """
        return union_all(
            *(
                select(t.c.bucket, t.c.token, t.c.n, t.c.batches, t.c.arrays).where(
                    self.rollup_filter(collection, since, until, token, table=t)
                )
                for t in (rollups_table, rollup_parts_table)
            )
        ).subquery()

    def summary(self, collection: str) -> tuple[int, int]:
        """``(n, batches)``: total reports and number of stored batches."""
        u = self.sums(collection)
        with self.engine.connect() as conn:
            n, count = conn.execute(
                select(func.coalesce(func.sum(u.c.n), 0), func.coalesce(func.sum(u.c.batches), 0))
            ).one()
        return int(n), int(count)

    def last_received(self, collection: str) -> dt.datetime | None:
        """Arrival time of the latest stored batch (read in the latest bucket: indexed)."""
        u = self.sums(collection)
        latest = select(func.max(u.c.bucket)).scalar_subquery()
        with self.engine.connect() as conn:
            value = conn.execute(
                select(func.max(batches_table.c.received_at)).where(
                    batches_table.c.collection == collection, batches_table.c.bucket == latest
                )
            ).scalar()
        return None if value is None else _utc(value).astimezone(dt.UTC)

    def last_bucket(self, collection: str) -> int | None:
        """Return the start of the latest bucket with data, or None."""
        u = self.sums(collection)
        with self.engine.connect() as conn:
            value = conn.execute(select(func.max(u.c.bucket))).scalar()
        return None if value is None else int(value)

    def merged(
        self,
        collection: str,
        spec: Mechanism,
        *,
        since: int | None = None,
        until: int | None = None,
        token: str | None = None,
    ) -> tuple[Stats, int]:
        """Return the roll-ups of whole buckets in ``[since, until)`` merged, and their batch count.

        Closed buckets (ended over five minutes ago) are summed once and kept in memory per
        bucket, valid while the collection's ``generation`` is unchanged (any delete or late
        write bumps it, in every process); only open buckets are read each time.
        """
        layout = self.layouts[collection]
        if spec != layout.spec:
            raise ValueError(
                f"spec must be collection {collection!r}'s {layout.spec!r}, got {spec!r}"
            )
        if token is not None:
            arrays, n, count = self._read_sum(collection, since, until, token)
            return Stats(spec, n, **arrays), count
        with self.engine.connect() as conn:
            generation = conn.execute(
                select(collections_table.c.generation).where(collections_table.c.name == collection)
            ).scalar_one()
        cache = self._cache.get(collection)
        if cache is None or cache.generation != generation:
            cache = self._cache[collection] = _ClosedBuckets(generation)
        closed = self.closed_before(collection)
        if cache.until < closed:  # read the buckets that closed since last time, per bucket
            # Buckets before `closed` end before it too: until = closed keeps them all.
            for bucket, sums in self._bucket_sums(collection, cache.until, closed).items():
                cache.add(bucket, *sums)
            cache.until = closed
        width = self.bucket_seconds[collection]
        lo = since if since is not None else -(2**62)
        hi = (until - width + 1) if until is not None else 2**62  # bucket + width <= until
        cached_arrays, n, count = cache.window(lo, min(hi, cache.until))
        open_since = max(lo, cache.until)
        arrays, n2, count2 = self._read_sum(collection, open_since, until, None)
        total = {k: arrays[k] + cached_arrays[k] for k in arrays} if cached_arrays else arrays
        return Stats(spec, n + n2, **total), count + count2

    def _bucket_sums(
        self, collection: str, since: int, until: int
    ) -> dict[int, tuple[dict[str, np.ndarray], int, int]]:
        """Return ``{bucket start: (summed arrays, n, batches)}`` of the buckets in the range.

        One query over the roll-ups and their parts (:meth:`sums`, all tokens), summed per
        bucket; what :meth:`merged` caches for the closed buckets and
        :meth:`merged_windows` reads for the open ones.
        """
        u = self.sums(collection, since=since, until=until)
        query = select(u.c.bucket, u.c.arrays, u.c.n, u.c.batches).order_by(u.c.bucket)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        by_bucket: dict[int, list[Any]] = defaultdict(list)
        for row in rows:
            by_bucket[int(row.bucket)].append(row)
        layout = self.layouts[collection]
        out: dict[int, tuple[dict[str, np.ndarray], int, int]] = {}
        for bucket, part in by_bucket.items():
            n_bucket = sum(int(r.n) for r in part)
            # The real n: Stats check their arrays against what n reports can produce.
            summed = layout.sum([bytes(r.arrays) for r in part], n_bucket).arrays
            out[bucket] = (
                {k: np.asarray(v) for k, v in summed.items()},
                n_bucket,
                sum(int(r.batches) for r in part),
            )
        return out

    def merged_windows(
        self, collection: str, spec: Mechanism, windows: list[tuple[int, int]]
    ) -> list[tuple[Stats, int]]:
        """Return :meth:`merged` of each ``[since, until)`` in ``windows``, in two reads.

        The windows are bucket-aligned and in time order. The closed buckets come from the
        per-bucket cache (a zero-width :meth:`merged` refreshes it), the open ones from one
        query grouped by bucket: a year of daily windows costs one estimate per day, not
        two queries per day.
        """
        if not windows:
            return []
        first = windows[0][0]
        self.merged(collection, spec, since=first, until=first)  # refresh the cache
        cache = self._cache[collection]
        width = self.bucket_seconds[collection]
        last = max(hi for _, hi in windows)
        open_buckets: dict[int, tuple[dict[str, np.ndarray], int, int]] = {}
        if last > cache.until:
            open_buckets = self._bucket_sums(collection, max(first, cache.until), last)
        import bisect

        empty = {k: np.array(v) for k, v in spec.empty_stats().arrays.items()}
        starts = sorted(open_buckets)
        out = []
        for lo, hi in windows:
            end = hi - width + 1  # whole buckets: start + width <= hi
            arrays, n, count = cache.window(lo, min(end, cache.until))
            total = {k: np.array(v) for k, v in (arrays or empty).items()}
            i = bisect.bisect_left(starts, max(lo, cache.until))
            for bucket in starts[i : bisect.bisect_left(starts, end)]:
                extra, n_extra, c_extra = open_buckets[bucket]
                for k in total:
                    total[k] = total[k] + extra[k]
                n, count = n + n_extra, count + c_extra
            out.append((Stats(spec, n, **total), count))
        return out

    def _read_sum(
        self, collection: str, since: int | None, until: int | None, token: str | None
    ) -> tuple[dict[str, np.ndarray], int, int]:
        layout = self.layouts[collection]
        u = self.sums(collection, since, until, token)
        query = select(u.c.arrays, u.c.n, u.c.batches)
        arrays = {k: np.array(v) for k, v in layout.spec.empty_stats().arrays.items()}
        n = count = 0
        with self.engine.connect() as conn:
            result = conn.execution_options(yield_per=4096).execute(query)
            for part in result.partitions():
                rows_n = sum(int(r.n) for r in part)
                count += sum(int(r.batches) for r in part)
                summed = layout.sum([bytes(r.arrays) for r in part], rows_n)
                for k in arrays:
                    arrays[k] = arrays[k] + summed.arrays[k]
                n += rows_n
        return arrays, n, count

    def closed_before(self, collection: str) -> int:
        """Start of the first bucket that may still receive batches (real time)."""
        width = self.bucket_seconds[collection]
        return (int(time.time()) - width - 300) // width * width

    def buckets(
        self, collection: str, *, since: int | None = None, until: int | None = None
    ) -> list[tuple[int, int, int]]:
        """``(bucket start, n, batches)`` per bucket (all tokens summed), in time order."""
        u = self.sums(collection, since, until)
        query = (
            select(u.c.bucket, func.sum(u.c.n), func.sum(u.c.batches))
            .group_by(u.c.bucket)
            .order_by(u.c.bucket)
        )
        with self.engine.connect() as conn:
            return [(int(b), int(n), int(c)) for b, n, c in conn.execute(query)]

    def list_batches(
        self,
        collection: str,
        *,
        token: str | None = None,
        since: int | None = None,
        until: int | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[BatchRecord]:
        """Batch metadata (oldest first), filtered by token name and bucket range."""
        cond = self.batch_filter(collection, token, since, until)
        query = (
            select(
                batches_table.c.batch_id,
                batches_table.c.n,
                batches_table.c.received_at,
                batches_table.c.token,
            )
            .where(cond)
            .order_by(batches_table.c.id)
            .limit(limit)
            .offset(offset)
        )
        with self.engine.connect() as conn:
            return [
                BatchRecord(r.batch_id, collection, int(r.n), _utc(r.received_at), token=r.token)
                for r in conn.execute(query)
            ]

    def batch_filter(
        self, collection: str, token: str | None, since: int | None, until: int | None
    ) -> Any:
        """Return the WHERE clause of a collection's batch rows (token, time range)."""
        cond = [batches_table.c.collection == collection]
        if token is not None:
            cond.append(batches_table.c.token == token)
        if since is not None:
            cond.append(batches_table.c.bucket >= since)
        if until is not None:
            cond.append(batches_table.c.bucket + self.bucket_seconds[collection] <= until)
        return and_(*cond)

    def raw_reports(self, batch_id: str) -> tuple[str, bytes] | None:
        """Return the stored payload of a batch (only when the app stores raw reports)."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(reports_table.c.format, reports_table.c.payload).where(
                    reports_table.c.batch_id == batch_id
                )
            ).one_or_none()
        return None if row is None else (row.format, bytes(row.payload))
