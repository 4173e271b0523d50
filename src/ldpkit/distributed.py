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


def _is_frame(item: Any) -> bool:
    """Tell whether ``item`` is a pandas or Dask DataFrame/Series (refused: no spec)."""
    module = type(item).__module__.split(".")[0]
    return module in ("pandas", "dask") and type(item).__name__ in ("DataFrame", "Series")


_FRAME_HINT = (
    "a DataFrame has no spec or fingerprint: convert it with ldpkit.io.reports_to_arrow / "
    "reports_from_arrow (the Arrow table carries the spec), or write it with "
    "ldpkit.io.save_reports_parquet and pass the file's path or URL"
)


def aggregate_item(spec: Mechanism, item: Any, *, batch_size: int | None = None) -> Stats:
    """Stats of one partition element under ``spec``.

    ``item`` is a :class:`~ldpkit.Reports`, a :class:`~ldpkit.Stats` (merged as is), a
    ``pyarrow.Table`` of reports written by :func:`ldpkit.io.reports_to_arrow` (its schema
    carries the spec), or a path or fsspec URL (``file://``, ``s3://``, ``gs://``, ...)
    of a reports file written by :mod:`ldpkit.io` (npz or Parquet). URLs are opened where
    the task runs (remote protocols need their fsspec package, e.g. ``s3fs``). A Parquet
    file is read one row group (or ``batch_size`` rows) at a time, so a worker's memory
    stays bounded by one batch whatever the file size. Every element is checked against
    ``spec`` (ValueError for another configuration). DataFrames are refused with
    TypeError: they do not carry the spec.
    """
    from .io import _sniff, iter_reports_parquet, reports_from_arrow, reports_from_bytes

    if isinstance(item, Reports):
        return spec.aggregate(item)
    if isinstance(item, Stats):
        return spec.check_stats(item)
    if type(item).__module__.startswith("pyarrow") and type(item).__name__ == "Table":
        return spec.aggregate(reports_from_arrow(item, expected=spec))
    if _is_frame(item):
        raise TypeError(f"partition elements must not be {type(item).__name__}s: {_FRAME_HINT}")
    if isinstance(item, (str, os.PathLike)):
        import fsspec

        with fsspec.open(os.fspath(item), "rb") as fh:
            kind = _sniff(fh.read(4))
            fh.seek(0)
            if kind == "parquet":
                stats = spec.empty_stats()
                for batch in iter_reports_parquet(fh, expected=spec, batch_size=batch_size):
                    stats = stats.merge(spec.aggregate(batch))
                return stats
            return spec.aggregate(reports_from_bytes(fh.read(), expected=spec))
    raise TypeError(
        "partition elements must be ldpkit.Reports, ldpkit.Stats, pyarrow Tables of reports, "
        f"or paths/URLs of reports files, got {type(item).__name__}"
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
    if _is_frame(partitions):
        raise TypeError(f"partitions must not be a {type(partitions).__name__}: {_FRAME_HINT}")
    if type(partitions).__module__.startswith("pyarrow"):
        partitions = [partitions]
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
        Elements are :class:`~ldpkit.Reports`, :class:`~ldpkit.Stats`, ``pyarrow.Table``
        objects of reports, paths or fsspec URLs (``file://``, ``s3://``...) of reports
        files (npz or Parquet, see :mod:`ldpkit.io`; read by the workers), or
        ``dask.delayed`` objects that compute to one of those. pandas and Dask DataFrames
        are refused with TypeError (they do not carry the spec). A list gives one Dask partition per element; a Bag keeps
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
