"""Group commit: requests wait for a shared transaction, then get their answer.

Each worker process has one committer thread. A request hands its decoded batch to the
committer and waits; the committer takes *everything* waiting (up to ``max_group``
batches), writes it in one transaction, and only after the commit returns answers every
waiting request. So a 201 still means "on disk", but one fsync serves many requests: the
more requests arrive while a commit runs, the larger the next group.

Small batches (up to ``SMALL_BATCH`` reports, e.g. one report per device) arrive without
Stats; the committer concatenates those of one (collection, token, bucket) and aggregates
them with one ``spec.aggregate`` call, which costs about as much as aggregating one of
them. If that call refuses the group (a malformed report inside), each batch is aggregated
alone so that only the bad one gets its 422.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..spec import Mechanism, Reports, Stats
from .store import BatchRecord, CollectorStore, PendingBatch

__all__ = ["GroupCommitter", "SMALL_BATCH", "AggregationError"]

SMALL_BATCH = 64


class AggregationError(ValueError):
    """The spec's ``aggregate`` refused a batch (its message says why)."""


def _concat(spec: Mechanism, batches: Sequence[Reports]) -> Reports:
    if len(batches) == 1:
        return batches[0]
    fields = batches[0].fields
    return Reports(
        spec, **{k: np.concatenate([np.asarray(b.arrays[k]) for b in batches]) for k in fields}
    )


def aggregate_one(spec: Mechanism, reports: Reports) -> Stats:
    try:
        return spec.aggregate(reports)  # the spec's own checks: dtypes, shapes, ranges
    except (ValueError, TypeError, AttributeError, IndexError, KeyError) as exc:
        raise AggregationError(f"reports rejected by {spec!r}: {exc}") from exc


class GroupCommitter:
    """One thread that writes waiting batches in groups (see the module docstring)."""

    def __init__(
        self,
        store: CollectorStore,
        specs: Mapping[str, Mechanism],
        *,
        max_group: int = 4096,
        on_commit: Callable[[float, int], None] | None = None,
    ) -> None:
        self.store = store
        self.specs = dict(specs)
        self.max_group = max_group
        self.on_commit = on_commit
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, item: PendingBatch) -> concurrent.futures.Future[BatchRecord]:
        """Queue one batch; the future resolves after the commit that stored it."""
        future: concurrent.futures.Future[BatchRecord] = concurrent.futures.Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="ldpkit-group-commit", daemon=True
                )
                self._thread.start()
            self._queue.put((item, future))
        return future

    def close(self, timeout: float = 30.0) -> None:
        """Commit what is queued, then stop the thread."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None:
                self._queue.put(None)
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            group = [first]
            stop = False
            while len(group) < self.max_group:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                group.append(nxt)
            self._process(group)
            if stop:
                return

    def _process(self, group: list[tuple[PendingBatch, concurrent.futures.Future[Any]]]) -> None:
        items = [item for item, _ in group]
        errors: dict[int, Exception] = {}
        shared: dict[frozenset[int], Stats] = {}
        try:
            pending: dict[tuple[str, str, int], list[int]] = defaultdict(list)
            for i, item in enumerate(items):
                if item.stats is None:
                    bucket = self.store.bucket_of(item.collection, item.received_at)
                    pending[(item.collection, item.token, bucket)].append(i)
            for (collection, _, _), idx in pending.items():
                spec = self.specs[collection]
                try:
                    together = aggregate_one(spec, _concat(spec, [items[i].reports for i in idx]))  # type: ignore[misc]
                    shared[frozenset(id(items[i]) for i in idx)] = together
                except (AggregationError, ValueError, TypeError):
                    for i in idx:  # find the bad batch(es); the others keep their own Stats
                        try:
                            items[i].stats = aggregate_one(spec, items[i].reports)  # type: ignore[arg-type]
                        except AggregationError as exc:
                            errors[i] = exc
            live = [i for i in range(len(items)) if i not in errors]

            def combine(members: Sequence[PendingBatch]) -> Stats:
                spec = self.specs[members[0].collection]
                own = [m.stats for m in members if m.stats is not None]
                rest = [m for m in members if m.stats is None]
                if rest:
                    key = frozenset(id(m) for m in rest)
                    if key in shared:
                        own.append(shared[key])
                    else:  # a retry inside the group was dropped: aggregate the others again
                        own.append(aggregate_one(spec, _concat(spec, [m.reports for m in rest])))  # type: ignore[misc]
                return spec.empty_stats().merge(*own)

            start = time.perf_counter()
            results = self.store.commit_group([items[i] for i in live], combine) if live else []
            if self.on_commit is not None and live:
                self.on_commit(time.perf_counter() - start, len(live))
        except BaseException as exc:  # the database failed: nobody's batch is stored
            for _, future in group:
                if not future.done():
                    future.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            if not isinstance(exc, Exception):
                raise
            return
        for i, exc in errors.items():
            group[i][1].set_exception(exc)
        for i, result in zip(live, results):
            if isinstance(result, Exception):
                group[i][1].set_exception(result)
            else:
                group[i][1].set_result(result)
