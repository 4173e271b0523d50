"""Group commit: requests wait for a shared transaction, then get their answer.

Each worker process has one committer task on its event loop. A request hands its decoded
batch to the committer and waits; the committer takes *everything* waiting (up to
``max_group`` batches), writes it in one transaction, and only after the commit returns
answers every waiting request. On SQLite the whole transaction runs in the loop's thread
(in process, the statements only fill the transaction; the COMMIT blocks the loop for one
fsync, which measured cheaper than handing it to a thread, except for a few seconds after
a commit that took over 0.1 s, e.g. a stalled disk: see
:meth:`CollectorStore.commit_group_async`); on PostgreSQL the loop keeps reading requests
for the next group while a group's statement waits for the server (up to two groups in
flight, each on its own connection): a group without idempotency keys or raw reports (the
usual one-report POST) of up to ``store.postgres.in_loop_max_group`` batches is one statement sent
and awaited by the loop itself on a connection of this loop's own (no thread; driven
through libpq, :mod:`ldpkit.service._pgloop`), any
other group runs in a helper thread. So a
201 still means "on disk", but one fsync serves many requests: the more requests arrive
while a commit runs, the larger the next group.

Before taking a group the committer waits until as many batches are queued as recent
groups held (a slowly decaying maximum of their sizes), but at most ``window`` seconds
(3 ms by default): the clients answered by the previous commit send their next batch
meanwhile and join this group. The cap only binds when fewer come back than before: with
1 ms, 8 clients per process (PostgreSQL, 2 processes, 16 connections) formed groups of
~7, because decoding the last requests (~0.14 ms each, preempted by the database and the
load generator on a 2-core machine) outlasted it and the late client waited a whole
extra commit; 3 ms made them 8 and served 7.6 % more requests (12 alternated pairs). Without it a fixed set of clients splits into two halves
that alternate, each waiting for the other's commit (twice the latency, half the group
size); with a fixed sleep instead, every group would wait the whole window even once all
its clients are in, and a lone request after a quiet spell would wait too.

Group commits append roll-up *parts* (see :mod:`ldpkit.service.store`); between groups,
about once every ``compact_interval`` seconds while parts were written, or at once when
this process wrote more than ``store.compaction.max_parts`` since its last compaction, the committer
folds them into the roll-up rows (:meth:`CollectorStore.try_compact`; failures are counted
for ``/healthz`` and ``/metrics``). On SQLite it does so in the loop's thread between two
groups (:meth:`CollectorStore.try_compact_on_loop`: one writer, so no group could commit
meanwhile anyway); on a database server in a helper thread while groups keep committing.

Small batches (up to ``SMALL_BATCH`` reports, e.g. one report per device) arrive without
Stats; the committer concatenates those of one (collection, token, bucket) and aggregates
them with one ``spec.aggregate`` call, which costs about as much as aggregating one of
them. If that call refuses the group (a malformed report inside), each batch is aggregated
alone so that only the bad one gets its 422. Likewise, when a group's transaction fails
for any reason but an unreachable database, it is committed again in halves (and halves of a
failing half), so an error one batch causes fails that batch's request alone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..spec import Mechanism, Reports, Stats
from .batch_identity import GroupStats
from .store import BatchRecord, CollectorStore, PendingBatch

__all__ = ["GroupCommitter", "SMALL_BATCH", "AggregationError", "GroupAggregates", "ReportRows"]

SMALL_BATCH = 64

logger = logging.getLogger("ldpkit.service")


class AggregationError(ValueError):
    """The spec's ``aggregate`` refused a batch (its message says why)."""


class ReportRows:
    """A small JSON batch kept as Python lists (one number per user and field).

    The decoder has already checked every value's type and that it fits the field's dtype,
    so turning the lists into arrays cannot fail; the committer does it once for its whole
    group (:func:`_concat`) instead of once per request.
    """

    __slots__ = ("columns", "dtypes")

    def __init__(self, columns: dict[str, list[Any]], dtypes: Mapping[str, np.dtype]) -> None:
        self.columns = columns
        self.dtypes = dtypes

    @property
    def fields(self) -> tuple[str, ...]:
        """The report fields, in column order."""
        return tuple(self.columns)

    def __len__(self) -> int:
        """Return the number of reports (rows)."""
        return len(next(iter(self.columns.values())))

    def to_reports(self, spec: Mechanism) -> Reports:
        """Return the columns as Reports of ``spec``."""
        return Reports(
            spec, **{k: np.array(v, dtype=self.dtypes[k]) for k, v in self.columns.items()}
        )


def _row_arrays(rows: Sequence[ReportRows]) -> dict[str, np.ndarray]:
    """Return the columns of several ReportRows as one array per field (their decoded dtypes)."""
    first = rows[0]
    return {
        k: np.array([x for b in rows for x in b.columns[k]], dtype=first.dtypes[k])
        for k in first.columns
    }


def _concat(spec: Mechanism, batches: Sequence[Reports | ReportRows]) -> Reports:
    if all(isinstance(b, ReportRows) for b in batches):
        return Reports(spec, **_row_arrays(batches))  # type: ignore[arg-type]
    whole = [b.to_reports(spec) if isinstance(b, ReportRows) else b for b in batches]
    if len(whole) == 1:
        return whole[0]
    fields = whole[0].fields
    return Reports(
        spec, **{k: np.concatenate([np.asarray(b.arrays[k]) for b in whole]) for k in fields}
    )


def _aggregate_group(spec: Mechanism, batches: Sequence[Reports | ReportRows]) -> Stats:
    """Return ``aggregate_one(spec, _concat(spec, batches))``, the same Stats and errors.

    A group of ReportRows (the JSON fast path) goes straight to ``spec._aggregate_decoded``,
    which skips the checks the decoder already made (about a third of the CPU time for a
    group of seven one-report OLH batches, d = 1024).
    """
    if not all(isinstance(b, ReportRows) for b in batches):
        return aggregate_one(spec, _concat(spec, batches))
    try:
        return spec._aggregate_decoded(_row_arrays(batches))  # type: ignore[arg-type]
    except (ValueError, TypeError, AttributeError, IndexError, KeyError, ArithmeticError) as exc:
        raise AggregationError(f"reports rejected by {spec!r}: {exc}") from exc


def aggregate_one(spec: Mechanism, reports: Reports | ReportRows) -> Stats:
    try:
        if isinstance(reports, ReportRows):  # (Reports' own checks: dtypes, finite reals)
            reports = reports.to_reports(spec)
        return spec.aggregate(reports)  # the spec's own checks: dtypes, shapes, ranges
    except (ValueError, TypeError, AttributeError, IndexError, KeyError, ArithmeticError) as exc:
        raise AggregationError(f"reports rejected by {spec!r}: {exc}") from exc


class GroupAggregates:
    """The committer's :class:`~ldpkit.service.batch_identity.GroupStats` for one group.

    The writers ask it for the merged Stats of the new batches of each roll-up row; it
    reuses the Stats the committer aggregated for several small batches at once
    (``shared``, keyed by the ids of those batches) and merges in the batches that came
    with their own.

    Parameters
    ----------
    specs : Mapping[str, Mechanism]
        Collection name -> its spec.
    shared : dict[frozenset[int], Stats]
        The Stats of small batches aggregated together, keyed by ``frozenset`` of the
        ``id`` of each batch.
    """

    def __init__(self, specs: Mapping[str, Mechanism], shared: dict[frozenset[int], Stats]):
        self.specs = specs
        self.shared = shared

    def combine(self, members: Sequence[PendingBatch]) -> Stats:
        """Return the merged Stats of ``members`` (batches of one roll-up row)."""
        spec = self.specs[members[0].collection]
        own = [m.stats for m in members if m.stats is not None]
        rest = [m for m in members if m.stats is None]
        if rest:
            key = frozenset(id(m) for m in rest)
            if key in self.shared:
                own.append(self.shared[key])
            else:  # a retry inside the group was dropped: aggregate the others again
                own.append(aggregate_one(spec, _concat(spec, [m.reports for m in rest])))  # type: ignore[misc]
        if len(own) == 1:  # usually (one roll-up row per group): no copy to make
            return own[0]
        return spec.empty_stats().merge(*own)


def _is_outage(exc: BaseException) -> bool:
    """Tell whether a group's commit failed because the database is unreachable.

    Then every batch would fail alike: answer them all 503 at once, rather than blame one
    batch.
    """
    from sqlalchemy.exc import InterfaceError, OperationalError
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    return isinstance(exc, (OperationalError, InterfaceError, PoolTimeout, OSError)) or bool(
        getattr(exc, "connection_invalidated", False)
    )


@dataclasses.dataclass
class _LoopState:
    """The committer's queue and task on one event loop."""

    queue: list[tuple[PendingBatch, asyncio.Future[Any]]]
    wake: asyncio.Event
    task: asyncio.Task[None] | None = None
    busy: bool = False  # compacting (never cancel the task then)
    # A database server: the compaction running in a helper thread while groups commit.
    compacting: asyncio.Future[Any] | None = None
    last_compact: float = 0.0  # loop time of the last compaction's end
    # Groups being written (their tasks) and how many batches they hold.
    inflight: set[asyncio.Task[None]] = dataclasses.field(default_factory=set)
    inflight_items: int = 0
    # The group size to wait for (a slowly decaying maximum of recent groups), and the
    # future that commit() completes once the queue holds that many.
    target: float = 1.0
    full: asyncio.Future[None] | None = None
    want: float = 1.0
    # PostgreSQL: this loop's idle connections for keyless groups (one per group in
    # flight; PostgresWriter.commit_in_loop, _pgloop.LoopConnection), closed by
    # close().
    connections: list[Any] = dataclasses.field(default_factory=list)


class GroupCommitter:
    """Writes waiting batches in groups (see the module docstring).

    One committer task per event loop (a server has one loop; test clients may run
    several): it takes every batch waiting, writes them in one transaction (SQLite: in the
    loop's thread unless a commit was slow lately; PostgreSQL: a keyless group awaited on
    the loop's own asyncio connection, others in a helper thread), then answers the
    group's requests.
    """

    def __init__(
        self,
        store: CollectorStore,
        specs: Mapping[str, Mechanism],
        *,
        max_group: int = 4096,
        window: float = 0.003,
        on_commit: Callable[[float, int], None] | None = None,
        compact_interval: float = 1.0,
    ) -> None:
        self.store = store
        self.specs = dict(specs)
        self.max_group = max_group
        self.window = window
        self.compact_interval = compact_interval
        self.on_commit = on_commit
        self._states: dict[asyncio.AbstractEventLoop, _LoopState] = {}
        # Groups in flight per loop: on a database server two (one commits in its own
        # thread and connection while the loop decodes the next); SQLite commits in the
        # loop's thread, one group at a time.
        self.max_inflight = 2 if store.backend == "postgresql" else 1
        self._executor = self._new_executor()
        self.peak_inflight = 0  # most groups seen in flight at once (for tests)

    def _new_executor(self) -> concurrent.futures.ThreadPoolExecutor:
        # A database server: one more thread for the compaction, which runs beside the
        # groups in flight (SQLite: one writer, nothing runs beside a compaction).
        workers = self.max_inflight + (self.max_inflight > 1)
        return concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="ldpkit-commit"
        )

    async def commit(self, item: PendingBatch) -> BatchRecord:
        """Queue one batch and wait until the transaction that stored it has committed."""
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None or state.task is None or state.task.done():
            state = _LoopState([], asyncio.Event())
            state.task = loop.create_task(self._run(state))
            self._states[loop] = state
        future: asyncio.Future[Any] = loop.create_future()
        state.queue.append((item, future))
        state.wake.set()
        full = state.full
        if full is not None and len(state.queue) >= state.want and not full.done():
            full.set_result(None)
        return await future  # type: ignore[no-any-return]

    async def close(self) -> None:
        """Commit what this loop has queued, then stop its task."""
        loop = asyncio.get_running_loop()
        state = self._states.pop(loop, None)
        if state is not None and state.task is not None:
            # Let the last groups answer (and a compaction in its thread finish).
            while state.queue or state.busy or state.inflight or state.compacting is not None:
                await asyncio.sleep(0.001)
            # Cancel until it ends: asyncio.wait_for (Python < 3.12) swallows a cancel that
            # arrives just as the event it waits for is set, and the task would wait again,
            # so a single cancel could leave close() waiting forever (found by helper pgpipe).
            while not state.task.done():
                state.task.cancel()
                await asyncio.wait({state.task}, timeout=0.05)
            if not state.task.cancelled() and state.task.exception() is not None:
                logger.error(
                    "the group committer stopped with an error", exc_info=state.task.exception()
                )
            if self.store.needs_compaction:  # leave the roll-ups folded (failures: logged)
                await loop.run_in_executor(self._executor, self.store.try_compact)
            await self.store.close_loop_connections(state.connections)
        if not self._states:
            self._executor.shutdown(wait=True)
            self._executor = self._new_executor()

    async def _run(self, state: _LoopState) -> None:
        loop = asyncio.get_running_loop()

        def run_blocking(fn: Callable[[], Any]) -> Any:
            return loop.run_in_executor(self._executor, fn)

        def release(full: asyncio.Future[None]) -> None:
            if not full.done():
                full.set_result(None)

        state.last_compact = loop.time()
        while True:
            if not state.queue:
                due = None
                if self.store.needs_compaction and state.compacting is None:
                    due = max(0.0, state.last_compact + self.compact_interval - loop.time())
                # A timer that sets the event rather than asyncio.wait_for: wait_for with a
                # timeout wraps the wait in a new Task on every idle spell (each group, at
                # full load), a measurable share of a group's CPU.
                timer = None if due is None else loop.call_later(due, state.wake.set)
                try:
                    await state.wake.wait()
                finally:
                    if timer is not None:
                        timer.cancel()
                state.wake.clear()
            store = self.store
            if (
                store.needs_compaction
                and state.compacting is None
                and (
                    loop.time() - state.last_compact >= self.compact_interval
                    # more parts than readers should sum: now (unless it just failed)
                    or (store.parts_written > store.compaction.max_parts and store.compaction_due())
                )
            ):
                # Fold the roll-up parts; a failure (counted) leaves them for later.
                if store.compacts_on_loop:  # SQLite: in this thread, between two groups
                    store.try_compact_on_loop()  # (why: its docstring)
                    state.last_compact = loop.time()
                elif self.max_inflight == 1:  # SQLite off the loop: no group commits meanwhile
                    state.busy = True
                    try:
                        await run_blocking(store.try_compact)
                    finally:
                        state.busy = False
                        state.last_compact = loop.time()
                    continue
                else:
                    # A database server: in a helper thread while groups keep committing
                    # (they only insert parts; the fold locks roll-up rows). Awaited in
                    # turn, a fold stalled every request queued meanwhile (p99 at 64
                    # connections).
                    state.compacting = run_blocking(store.try_compact)
                    state.compacting.add_done_callback(functools.partial(self._compacted, state))
                    continue
            if not state.queue:
                continue
            if len(state.inflight) >= self.max_inflight:
                # Every slot busy: the queue keeps growing until one group has answered.
                await asyncio.wait(state.inflight, return_when=asyncio.FIRST_COMPLETED)
            # The batches of the groups in flight come back once those commit: wait for
            # the rest (with one group at a time, the whole target). Waiting for only half
            # the clients with two slots (so that the halves would alternate) measured
            # worse: smaller groups, 25-35% more CPU per request, no overlap gained.
            want = min(self.max_group, state.target - state.inflight_items)
            if self.window > 0 and len(state.queue) < want:
                # Wait (at most `window`) until as many batches wait as recent groups held:
                # the clients answered by the last commit send their next batch meanwhile
                # and join this group, instead of the clients splitting into two halves
                # that alternate (each waiting for the other's commit). A lone request
                # after a quiet spell (target ~1) goes at once.
                full: asyncio.Future[None] = loop.create_future()
                state.full = full
                state.want = want
                timer = loop.call_later(self.window, release, full)
                try:
                    await full
                finally:
                    timer.cancel()
                    state.full = None
            group = state.queue[: self.max_group]
            del state.queue[: self.max_group]
            state.target = max(float(len(group) + state.inflight_items), state.target * 0.9)
            if self.max_inflight == 1:  # SQLite: the group commits in this task
                state.busy = True
                try:
                    await self._process(group, run_blocking, state.connections)
                finally:
                    state.busy = False
                continue
            state.inflight_items += len(group)
            task = loop.create_task(self._process(group, run_blocking, state.connections))
            state.inflight.add(task)
            self.peak_inflight = max(self.peak_inflight, len(state.inflight))
            task.add_done_callback(functools.partial(self._done, state, len(group)))

    @staticmethod
    def _compacted(state: _LoopState, future: asyncio.Future[Any]) -> None:
        state.compacting = None
        state.last_compact = future.get_loop().time()
        if not future.cancelled() and future.exception() is not None:  # try_compact logs its own
            logger.error("roll-up compaction task failed", exc_info=future.exception())
        state.wake.set()

    @staticmethod
    def _done(state: _LoopState, n: int, task: asyncio.Task[None]) -> None:
        state.inflight.discard(task)
        state.inflight_items -= n
        if not task.cancelled() and task.exception() is not None:  # _process answers all
            logger.error("group commit task failed", exc_info=task.exception())
        state.wake.set()

    def _aggregate_small(
        self, items: list[PendingBatch]
    ) -> tuple[dict[int, Exception], dict[frozenset[int], Stats]]:
        errors: dict[int, Exception] = {}
        shared: dict[frozenset[int], Stats] = {}
        pending: dict[tuple[str, str, int], list[int]] = {}
        collection, when, bucket = "", None, 0
        for i, item in enumerate(items):
            if item.stats is None:
                # (a group's batches usually share one per-second received_at object)
                if item.received_at is not when or item.collection != collection:
                    collection, when = item.collection, item.received_at
                    bucket = self.store.bucket_of(collection, when)
                key = (collection, item.token, bucket)
                idx = pending.get(key)
                if idx is None:
                    pending[key] = [i]
                else:
                    idx.append(i)
        for (collection, _, _), idx in pending.items():
            spec = self.specs[collection]
            try:
                members = [items[i] for i in idx]
                together = _aggregate_group(spec, [m.reports for m in members])
                shared[frozenset(map(id, members))] = together
            except Exception:  # whatever the cause: it must not fail the other batches
                for i in idx:  # find the bad batch(es); the others keep their own Stats
                    try:
                        items[i].stats = aggregate_one(spec, items[i].reports)  # type: ignore[arg-type]
                    except Exception as exc:  # AggregationError: 422; anything else: 500
                        errors[i] = exc
        return errors, shared

    async def _commit_split(
        self,
        items: Sequence[PendingBatch],
        combine: GroupStats,
        run_blocking: Callable[[Callable[[], Any]], Any],
        connections: list[Any] | None,
    ) -> list[Any]:
        """Commit the two halves of a group that failed, each in its own transaction.

        Splits again whichever fails: one result per item (a record, or the exception
        that failed a batch alone). A bad batch costs about 2 log2(n) transactions, not n;
        an unreachable database fails a whole part at once.
        """
        half = len(items) // 2
        results: list[Any] = []
        for part in (items[:half], items[half:]):
            try:
                results += await self.store.commit_group_async(
                    part, combine, run_blocking, connections
                )
            except Exception as exc:
                if _is_outage(exc) or len(part) == 1:
                    # (not raised: the other half may be committed already, and its
                    # requests must hear so)
                    results += [exc] * len(part)
                else:
                    results += await self._commit_split(part, combine, run_blocking, connections)
        return results

    async def _process(
        self,
        group: list[tuple[PendingBatch, asyncio.Future[Any]]],
        run_blocking: Callable[[Callable[[], Any]], Any],
        connections: list[Any] | None = None,
    ) -> None:
        items = [item for item, _ in group]
        try:
            errors, shared = self._aggregate_small(items)
            live = [i for i in range(len(items)) if i not in errors]
            combine = GroupAggregates(self.specs, shared)
            start = time.perf_counter()
            results: list[Any] = []
            if live:
                try:
                    results = await self.store.commit_group_async(
                        [items[i] for i in live], combine, run_blocking, connections
                    )
                except Exception as exc:
                    if len(live) == 1 or _is_outage(exc):
                        raise
                    # Nothing of the group is stored (one transaction). The cause may be
                    # one batch: commit halves, then halves of a failing half, so that only
                    # a bad batch fails.
                    logger.warning(
                        "a group commit of %d batches failed (%s: %s); committing it in parts",
                        len(live),
                        type(exc).__name__,
                        exc,
                    )
                    results = await self._commit_split(
                        [items[i] for i in live], combine, run_blocking, connections
                    )
                if self.on_commit is not None:
                    self.on_commit(time.perf_counter() - start, len(live))
        except Exception as exc:  # the database failed: nobody's batch is stored
            for _, future in group:
                if not future.done():
                    future.set_exception(exc)
            return
        for i, error in errors.items():
            if not group[i][1].done():
                group[i][1].set_exception(error)
        for i, result in zip(live, results):
            future = group[i][1]
            if future.done():  # the client went away; its batch is stored all the same
                continue
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(result)
