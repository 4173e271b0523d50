"""Aggregate report partitions with Dask: ``spec.aggregate`` per partition, tree-merge Stats.

Only :class:`~ldpkit.Stats` travel between workers (a few KiB per partition whatever the
number of users), and :meth:`~ldpkit.Stats.merge` is associative and commutative, so Dask's
tree reduction gives the same result as one process. For the frequency oracles the
statistics are integer counts, so the result is *exactly* equal, bit for bit.

Needs the ``distributed`` extra (``pip install 'ldpkit[distributed]'``). Client code never
imports this module.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from typing import Any

from .spec import Mechanism, Reports, Stats

try:
    import dask
    import dask.bag as db
    from dask.delayed import Delayed
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "ldpkit.distributed needs dask; install it with: pip install 'ldpkit[distributed]'"
    ) from exc

__all__ = ["aggregate_dask", "aggregate_item"]


def aggregate_item(spec: Mechanism, item: Any, *, batch_size: int | None = None) -> Stats:
    """Stats of one partition element under ``spec``.

    ``item`` is a :class:`~ldpkit.Reports`, a :class:`~ldpkit.Stats` (merged as is), or a
    path to a reports file written by :mod:`ldpkit.io` (npz or Parquet). A Parquet file
    is read one row group (or ``batch_size`` rows) at a time, so a worker's memory stays
    bounded by one batch whatever the file size. Every element is checked against
    ``spec`` (ValueError for another configuration).
    """
    from .io import _sniff, iter_reports_parquet, load_reports

    if isinstance(item, Reports):
        return spec.aggregate(item)
    if isinstance(item, Stats):
        return spec.check_stats(item)
    if isinstance(item, (str, os.PathLike)):
        with open(item, "rb") as fh:
            kind = _sniff(fh.read(4))
        if kind == "parquet":
            stats = spec.empty_stats()
            for batch in iter_reports_parquet(item, expected=spec, batch_size=batch_size):
                stats = stats.merge(spec.aggregate(batch))
            return stats
        return spec.aggregate(load_reports(item, expected=spec))
    raise TypeError(
        "partition elements must be ldpkit.Reports, ldpkit.Stats or paths to reports files, "
        f"got {type(item).__name__}"
    )


def _aggregate_partition(spec: Mechanism, batch_size: int | None, items: Iterable[Any]) -> Stats:
    return _merge_all(spec, [aggregate_item(spec, item, batch_size=batch_size) for item in items])


def _merge_all(spec: Mechanism, stats: Iterable[Stats]) -> Stats:
    # Starting from the neutral element makes an empty group (an empty partition) valid.
    return spec.empty_stats().merge(*stats)


def _singleton(item: Any) -> list[Any]:
    return [item]


def _as_bag(partitions: Any) -> db.Bag:
    if isinstance(partitions, db.Bag):
        return partitions
    if isinstance(partitions, (Reports, Stats, str, os.PathLike, Delayed)):
        partitions = [partitions]
    if not isinstance(partitions, Iterable):
        raise TypeError(
            "partitions must be a list of Reports, Stats, paths or dask.delayed objects, "
            f"or a dask.bag.Bag, got {type(partitions).__name__}"
        )
    items = list(partitions)
    if not items:
        return db.from_sequence([], npartitions=1)
    # One Dask partition per element; a Delayed element is computed where its partition runs.
    return db.from_delayed([dask.delayed(_singleton)(p) for p in items])


def aggregate_dask(
    spec: Mechanism,
    partitions: Any,
    *,
    scheduler: str | None = None,
    split_every: int = 8,
    batch_size: int | None = None,
    compute: bool = True,
) -> Any:
    """Aggregate partitions of reports with Dask and tree-reduce the Stats with ``merge``.

    Parameters
    ----------
    spec : Mechanism
        The configuration every partition must have been made under.
    partitions : list, dask.bag.Bag, or one element
        Elements are :class:`~ldpkit.Reports`, :class:`~ldpkit.Stats`, paths to reports
        files (npz or Parquet, see :mod:`ldpkit.io`), or ``dask.delayed`` objects that
        compute to one of those. A list gives one Dask partition per element; a Bag keeps
        its own partitioning (each partition's elements are aggregated and merged).
    scheduler : str or None
        Passed to ``compute``: ``"synchronous"``, ``"threads"``, ``"processes"``, or None
        for Dask's configured default (which is an active ``dask.distributed`` Client if
        there is one, else the Bag default, processes). Paths are the cheapest elements to
        ship to other processes or machines: only the file name travels.
    split_every : int
        Fan-in of the tree reduction (>= 2): partial Stats are merged in groups of this
        size, level by level, so no single task receives every partition's Stats.
    batch_size : int or None
        Rows per batch when reading Parquet files (default: one row group).
    compute : bool
        If False, return the lazy Dask ``Item`` (compute it later, or combine it with other
        Dask work) instead of the Stats.

    Returns
    -------
    Stats
        The merged statistics; equal to ``spec.aggregate`` of all reports concatenated
        (exactly, for integer statistics such as every frequency oracle's counts).

    Raises
    ------
    ValueError
        If a partition was made under another spec (raised from the task that read it).

    Examples
    --------
    >>> from ldpkit import OLH
    >>> spec = OLH(epsilon=1.0, domain_size=50)
    >>> batches = [spec.randomize([i % 50] * 100, rng=i) for i in range(6)]
    >>> stats = aggregate_dask(spec, batches, scheduler="synchronous", split_every=2)
    >>> stats.n, stats == spec.aggregate(batches[0].concat(*batches[1:]))
    (600, True)
    """
    if not isinstance(spec, Mechanism):
        raise TypeError(f"spec must be an ldpkit mechanism spec, got {type(spec).__name__}")
    if isinstance(split_every, bool) or not isinstance(split_every, int) or split_every < 2:
        raise ValueError(f"split_every must be an integer >= 2, got {split_every!r}")
    bag = _as_bag(partitions)
    item = bag.reduction(
        functools.partial(_aggregate_partition, spec, batch_size),
        functools.partial(_merge_all, spec),
        split_every=split_every,
        name="ldpkit-aggregate",
    )
    if not compute:
        return item
    return item.compute(scheduler=scheduler)
