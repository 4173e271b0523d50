"""Per-window estimates: a collection's roll-ups cut into windows of a day, an hour, a week.

Longitudinal collections (:mod:`ldpkit.longitudinal`: a device reports its memoized answer
every day) are read as a series: one estimate per window, each from the whole roll-up
buckets inside it, with the spec's own standard errors. ``GET
/v1/collections/{c}/windows?width=day`` answers the series (:class:`WindowList`); any
collection kind can be read so, since each window is an ordinary estimate
(:class:`~ldpkit.service.models.EstimateResult`) of the buckets it holds.

Windows start at multiples of their width since the Unix epoch (UTC days for ``day``), so
the same window has the same bounds in every request; a window is cut to the query's
``[since, until)``. The series runs from the first window holding reports to the last
one, empty windows in between included (``n = 0``, no estimate), so a chart's x axis is
regular.

Each spec's longitudinal budgets travel with its answers
(:func:`longitudinal_info`): the loss of one report, of any number of reports of one value,
of a change of value, and the most any device can lose.
"""

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import HTTPException, Query, Request
from pydantic import BaseModel, Field

from .kinds import KINDS, EstimateQuery, longitudinal_info
from .models import EstimateResult, LongitudinalInfo

if TYPE_CHECKING:
    from fastapi import FastAPI

    from .collector import _Collector

__all__ = [
    "MAX_WINDOWS",
    "WIDTHS",
    "LongitudinalInfo",
    "WindowList",
    "add_window_routes",
    "longitudinal_info",
    "window_width",
]

#: Named window widths, in seconds.
WIDTHS = {"hour": 3600, "day": 86_400, "week": 604_800}

#: Most windows one series may hold (each is one estimate).
MAX_WINDOWS = 2000

_TimeParam = Annotated[
    str | None,
    Query(description="ISO 8601 time (UTC if no offset) or Unix seconds; whole buckets only"),
]


class WindowList(BaseModel):
    """A per-window series of estimates."""

    collection: str
    kind: str
    width_seconds: int = Field(description="window width (a multiple of bucket_seconds)")
    bucket_seconds: int
    alpha: float
    longitudinal: LongitudinalInfo | None = Field(
        None, description="the spec's budgets (longitudinal specs only)"
    )
    windows: list[EstimateResult] = Field(
        description="one estimate per window, oldest first: since/until are the window's "
        "bounds; n = 0 (no estimate) for a window without reports"
    )


def window_width(width: str, bucket_seconds: int) -> int:
    """Return the seconds of ``width`` (``hour``, ``day``, ``week`` or seconds).

    422 unless it is a positive multiple of ``bucket_seconds`` (windows are made of whole
    buckets).
    """
    seconds = WIDTHS.get(width)
    if seconds is None:
        try:
            seconds = int(width)
        except ValueError:
            seconds = 0
    if seconds < 1 or seconds % bucket_seconds:
        raise HTTPException(
            422,
            f"width must be one of {sorted(WIDTHS)} or a number of seconds that is a "
            f"multiple of the bucket width {bucket_seconds} s, got {width!r}",
        )
    return seconds


def window_series(
    collector: "_Collector",
    name: str,
    width: int,
    alpha: float,
    postprocessing: str | None,
    since: int | None,
    until: int | None,
    candidates: list[Any] | None = None,
) -> WindowList:
    """Estimate every window of ``width`` seconds in ``[since, until)`` (whole buckets)."""
    spec = collector.collections[name].spec
    # 422 for a bad query even when the series is empty
    KINDS[collector.kinds[name]].check(
        spec, EstimateQuery(alpha, postprocessing, 0, candidates, None)
    )
    buckets = [b for b, n, _ in collector.store.buckets(name, since=since, until=until) if n]
    starts: list[int] = []
    if buckets:
        first, last = buckets[0] // width * width, buckets[-1] // width * width
        count = (last - first) // width + 1
        if count > MAX_WINDOWS:
            raise HTTPException(
                422,
                f"width must leave at most {MAX_WINDOWS} windows between the first and the "
                f"last report in [since, until), got {count} windows of {width} s: widen "
                "them or narrow since/until",
            )
        starts = list(range(first, last + 1, width))
    collector.compact_if_behind(name)
    bounds = [
        (
            start if since is None else max(start, since),
            start + width if until is None else min(start + width, until),
        )
        for start in starts
    ]
    merged = collector.store.reader.merged_windows(name, spec, bounds)
    windows = [
        collector.estimate(name, alpha, postprocessing, lo, hi, candidates=candidates, merged=m)
        for (lo, hi), m in zip(bounds, merged)
    ]
    return WindowList(
        collection=name,
        kind=collector.kinds[name],
        width_seconds=width,
        bucket_seconds=collector.bucket_seconds,
        alpha=alpha,
        longitudinal=longitudinal_info(spec),
        windows=windows,
    )


def add_window_routes(app: "FastAPI", collector: "_Collector") -> None:
    """Add ``GET /v1/collections/{collection}/windows`` to the collector ``app``."""

    @app.get(
        "/v1/collections/{collection}/windows", response_model=WindowList, tags=["collections"]
    )
    def get_windows(
        collection: str,
        request: Request,
        width: Annotated[
            str,
            Query(
                description="window width: hour, day, week, or seconds (a multiple of the "
                "bucket width); windows start at multiples of it since the epoch (UTC)"
            ),
        ] = "day",
        alpha: Annotated[
            float, Query(gt=0, lt=1, description="1 - confidence level of the intervals")
        ] = 0.05,
        postprocessing: Annotated[
            str | None, Query(description="as for /estimate (biased)")
        ] = None,
        since: _TimeParam = None,
        until: _TimeParam = None,
        candidates: Annotated[
            str | None,
            Query(description="open-domain collections: the items, comma-separated"),
        ] = None,
    ) -> Any:
        """One estimate per window (a day, an hour, ...) with its standard errors."""
        from fastapi import Response

        collector.authorize(request, "read")
        collector.get(collection)
        s, u = collector.window(since, until)
        seconds = window_width(width, collector.bucket_seconds)
        items = None if candidates is None else candidates.split(",")
        result = window_series(collector, collection, seconds, alpha, postprocessing, s, u, items)
        return Response(result.model_dump_json(), media_type="application/json")
