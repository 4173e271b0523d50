"""The answers of multi-attribute collections (:mod:`ldpkit.multidim`) at the collector.

A collection whose spec is SPL, SMP, RSFD, CALM, FullDomain, Fourier, HDG, TDG,
UniformGrid or GroupMean is of kind ``multidim``: its reports are decoded, committed and
rolled up as any other (the Stats do not grow with n), and ``GET
/v1/collections/{c}/estimate`` fills :class:`MultidimResult`:

* ``attributes``: every attribute's 1-way marginal (SPL, SMP, RSFD: the per-attribute
  frequencies; CALM, FullDomain, Fourier: each attribute summed from a collected marginal);
* ``marginal``: with ``?marginal=0,1`` the marginal of those attributes, axes in that
  order (CALM, FullDomain, Fourier: any subset of a collected marginal;
  ``result.marginal((0, 1))`` offline);
* ``range``: with ``?range=0:0.1:0.5,1:10:20`` the fraction of users in the box
  ``attribute:lo:hi`` (one constraint per attribute named, the others unconstrained;
  HDG, TDG, UniformGrid: ``result.range_query({0: (0.1, 0.5), 1: (10, 20)})`` offline);
* ``group_means``: GroupMean's mean and share of every group.

Every cell comes with its estimate, standard error and normal ``1 - alpha`` interval
(``null`` where the estimator has none, e.g. after CALM's consistency step). A range's
interval is ``result.interval(box, alpha)``: the grid noise plus the model of the error
inside partly covered cells; its ``std_error`` is the noise term alone (``null`` over more
than two attributes). The answer is the offline estimate of the same Stats.
"""

import dataclasses
import math
import warnings
from typing import Annotated, Any

import numpy as np
from fastapi import HTTPException, Query
from pydantic import BaseModel, Field

__all__ = [
    "GroupMeansResult",
    "probe_size",
    "refuse_multidim",
    "multidim_check",
    "multidim_fill",
    "MarginalParam",
    "MarginalResult",
    "MultidimResult",
    "RangeParam",
    "RangeResult",
    "multidim_answer",
    "multidim_query",
    "parse_marginal",
    "parse_range",
]

#: Most cells a requested marginal may hold in one answer.
MAX_ANSWER_CELLS = 1 << 16
#: Most characters of a ``range`` or ``marginal`` query parameter.
MAX_QUERY_CHARS = 4096


class MarginalResult(BaseModel):
    """One marginal: its attributes, shape, and every cell (row-major, last axis fastest)."""

    attributes: list[int]
    shape: list[int] = Field(description="the attributes' domain sizes, in that order")
    labels: list[list[Any]] | None = Field(
        default=None, description="per attribute, its item labels (null: item indices)"
    )
    estimates: list[float]
    std_errors: list[float]
    ci_low: list[float | None] = Field(description="null where the estimator has no interval")
    ci_high: list[float | None]
    postprocessing: list[str] = Field(description="steps beyond the linear estimate (biased)")
    method: str = Field(
        default="collected",
        description="collected (a collected table or its sum) or max_entropy (reconstructed "
        "from the collected tables; bootstrap error bars)",
    )


class RangeResult(BaseModel):
    """The fraction of users inside a box of ranges."""

    ranges: dict[str, list[float]] = Field(description="attribute -> [lo, hi], as asked")
    estimate: float
    std_error: float | None = Field(
        default=None, description="the grid noise term (null for more than two attributes)"
    )
    ci_low: float | None = None
    ci_high: float | None = None


class GroupMeansResult(BaseModel):
    """The mean of the value in every group, and every group's share."""

    means: list[float]
    std_errors: list[float]
    ci_low: list[float]
    ci_high: list[float]
    shares: list[float]
    share_std_errors: list[float]
    estimable: list[bool] = Field(description="false: the group's share is not positive")


class MultidimResult(BaseModel):
    """What a multi-attribute collection answers (fields by spec and query)."""

    attributes: list[MarginalResult] | None = Field(
        default=None, description="every attribute's 1-way marginal (categorical specs)"
    )
    marginal: MarginalResult | None = Field(default=None, description="the ?marginal= asked for")
    range: RangeResult | None = Field(default=None, description="the ?range= asked for (grids)")
    group_means: GroupMeansResult | None = None
    note: str | None = Field(
        default=None,
        description="why there is no answer (e.g. a window in which some marginal or grid "
        "has no report: each is estimated from its own users)",
    )


def parse_marginal(text: str, d: int) -> tuple[int, ...]:
    """Return ``"0,1"`` as attribute indices; ValueError naming ``marginal``."""
    want = f"distinct attribute indices in [0, {d}) separated by commas, e.g. 0,1"
    parts = text.split(",") if len(text) <= MAX_QUERY_CHARS else []
    try:
        attrs = tuple(int(p) for p in parts)
    except ValueError:
        attrs = ()
    if not attrs or len(set(attrs)) != len(attrs) or any(not 0 <= a < d for a in attrs):
        raise ValueError(f"marginal must be {want}, got {text[:80]!r}")
    return attrs


def parse_range(text: str, d: int) -> dict[int, tuple[float, float]]:
    """Return ``"0:0.1:0.5,1:10:20"`` as ``{attribute: (lo, hi)}``; ValueError naming ``range``."""
    want = (
        f"comma-separated attribute:lo:hi constraints (attribute in [0, {d}), each at most "
        "once, finite lo <= hi), e.g. 0:0.1:0.5,1:10:20"
    )
    out: dict[int, tuple[float, float]] = {}
    parts = text.split(",") if len(text) <= MAX_QUERY_CHARS else [""]
    for part in parts:
        fields = part.split(":")
        try:
            a, lo, hi = int(fields[0]), float(fields[1]), float(fields[2])
            ok = len(fields) == 3
        except (ValueError, IndexError):
            ok = False
        if not ok or not 0 <= a < d or a in out or not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError(f"range must be {want}, got {text[:80]!r}")
        if lo > hi:
            raise ValueError(f"range must be {want}, got {part!r} with lo > hi")
        out[a] = (lo, hi)
    return out


def _none_if_nan(values: np.ndarray) -> list[float | None]:
    return [None if math.isnan(v) else v for v in np.asarray(values, dtype=float).tolist()]


def _table_result(table: Any, alpha: float, labels: list[list[Any]] | None) -> MarginalResult:
    """Return a :class:`~ldpkit.multidim.MarginalTable` as a MarginalResult."""
    from ..estimate import IntervalWarning

    with warnings.catch_warnings():  # biased after post-processing: NaN -> null
        warnings.simplefilter("ignore", IntervalWarning)
        low, high = table.confidence_interval(alpha)
    values = np.asarray(getattr(table, "table", getattr(table, "frequencies", None)))
    return MarginalResult(
        attributes=list(table.attributes),
        shape=list(values.shape),
        labels=labels,
        estimates=values.ravel().tolist(),
        std_errors=np.asarray(table.std_error).ravel().tolist(),
        ci_low=_none_if_nan(np.asarray(low).ravel()),
        ci_high=_none_if_nan(np.asarray(high).ravel()),
        postprocessing=list(table.postprocessing),
        method=getattr(table, "method", "collected"),
    )


def _check_cells(spec: Any, attrs: tuple[int, ...]) -> None:
    cells = math.prod(spec.domain_sizes[a] for a in attrs)
    if cells > MAX_ANSWER_CELLS:
        raise ValueError(
            f"marginal must have at most {MAX_ANSWER_CELLS} cells, got {cells} for {attrs}"
        )


def _check_reconstruction(est: Any, attrs: tuple[int, ...]) -> None:
    """Refuse a marginal beyond the collected ones whose bootstrap would run too long."""
    from ..multidim.maxent import MAX_BOOTSTRAP_CELLS, REPLICATES

    if any(set(attrs) <= set(t.attributes) for t in est.tables):
        return  # summed from a collected table: cheap
    cells = math.prod(est.spec.domain_sizes[a] for a in attrs)
    most = MAX_BOOTSTRAP_CELLS // REPLICATES
    if cells > most:
        raise ValueError(
            f"marginal must have at most {most} cells when no collected table holds it "
            f"(max-entropy reconstruction, {REPLICATES} bootstrap replicates), got {cells} "
            f"for {attrs}"
        )


def multidim_answer(
    est: Any,
    alpha: float,
    marginal: tuple[int, ...] | None,
    ranges: dict[int, tuple[float, float]] | None,
) -> MultidimResult:
    """Return the answer of ``est`` (the spec's estimate) to a query.

    Raises ValueError (the collector's 422) for a query the estimate cannot answer: a
    marginal of a spec without joint marginals, a marginal whose attributes no collected
    table covers, a range of a spec without grids.
    """
    from ..multidim import (
        GroupMeans,
        MarginalsEstimate,
        MultiFrequencyEstimate,
        RangeEstimate,
    )
    from ..multidim.marginals import MarginalTable

    out = MultidimResult()
    name = type(est.spec).__name__
    if ranges is not None and not isinstance(est, RangeEstimate):
        raise ValueError(
            f"range must be left out for a {name} collection (grids only: HDG, TDG, UniformGrid)"
        )
    if marginal is not None and not isinstance(est, (MarginalsEstimate, MultiFrequencyEstimate)):
        raise ValueError(f"marginal must be left out for a {name} collection")
    if isinstance(est, MultiFrequencyEstimate):
        if marginal is not None and len(marginal) != 1:
            raise ValueError(
                f"marginal must be one attribute for a {name} collection (it estimates "
                f"per-attribute frequencies; CALM, FullDomain, Fourier give joint ones), got "
                f"{list(marginal)}"
            )
        out.attributes = []
        for j, e in enumerate(est):
            table = MarginalTable((j,), e.frequencies, e.variance, est.n, tuple(e.postprocessing))
            labels = None if e.labels is None else [list(e.labels)]
            out.attributes.append(_table_result(table, alpha, labels))
        if marginal is not None:
            out.marginal = out.attributes[marginal[0]]
    elif isinstance(est, MarginalsEstimate):
        d = len(est.spec.domain_sizes)
        out.attributes = [_table_result(est.marginal((j,)), alpha, None) for j in range(d)]
        if marginal is not None:
            _check_cells(est.spec, marginal)
            _check_reconstruction(est, marginal)
            try:
                table = est.marginal(marginal)
            except NotImplementedError as exc:
                raise ValueError(f"marginal must be inside a collected marginal: {exc}") from None
            out.marginal = _table_result(table, alpha, None)
    elif isinstance(est, RangeEstimate):
        if ranges is not None:
            value = est.range_query(ranges)
            se = est.std_error(ranges)
            # the offline interval: noise plus the model of the within-cell error, so the
            # collector's bars cover as docs/results/multidim_ranges.md measures
            r_low, r_high = est.interval(ranges, alpha)
            ok = math.isfinite(r_low) and math.isfinite(r_high)
            out.range = RangeResult(
                ranges={str(a): [lo, hi] for a, (lo, hi) in sorted(ranges.items())},
                estimate=value,
                std_error=se if math.isfinite(se) else None,
                ci_low=r_low if ok else None,
                ci_high=r_high if ok else None,
            )
    elif isinstance(est, GroupMeans):
        low, high = est.confidence_interval(alpha)
        out.group_means = GroupMeansResult(
            means=est.means.tolist(),
            std_errors=est.std_error.tolist(),
            ci_low=low.tolist(),
            ci_high=high.tolist(),
            shares=est.shares.tolist(),
            share_std_errors=np.sqrt(est.share_variance).tolist(),
            estimable=np.asarray(est.estimable, dtype=bool).tolist(),
        )
    else:  # kinds.py serves only the four types above
        raise TypeError(f"est must be a multi-attribute estimate, got {type(est).__name__}")
    return out


def is_multidim_estimate(est: Any) -> bool:
    """Tell whether ``est`` is one of the estimates this module answers."""
    from ..multidim import GroupMeans, MarginalsEstimate, MultiFrequencyEstimate, RangeEstimate

    return isinstance(est, (GroupMeans, MarginalsEstimate, MultiFrequencyEstimate, RangeEstimate))


#: ``GET /estimate``'s ``marginal`` parameter.
MarginalParam = Annotated[
    str | None,
    Query(
        description="multi-attribute collections (CALM, FullDomain, Fourier; SPL, SMP, RSFD "
        "one attribute): the marginal's attributes, comma-separated, e.g. 0,1"
    ),
]
#: ``GET /estimate``'s ``range`` parameter.
RangeParam = Annotated[
    str | None,
    Query(
        description="grid collections (HDG, TDG, UniformGrid): the box, comma-separated "
        "attribute:lo:hi constraints in the attributes' units, e.g. 0:0.1:0.5,1:10:20"
    ),
]


def multidim_query(query: Any, spec: Any, marginal: str | None, ranges: str | None) -> Any:
    """Return ``query`` (an EstimateQuery) with the parsed ``marginal`` and ``range`` (422 if bad).

    For a spec without attributes the parameters stay unparsed but present, so that the
    kind's check refuses them by name.
    """
    d = getattr(spec, "attributes", None)
    if not isinstance(d, int):
        return dataclasses.replace(
            query,
            marginal=None if marginal is None else (),
            ranges=None if ranges is None else {},
        )
    try:
        return dataclasses.replace(
            query,
            marginal=None if marginal is None else parse_marginal(marginal, d),
            ranges=None if ranges is None else parse_range(ranges, d),
        )
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None


def probe_size(spec: Any) -> int:
    """Return how many users the collector's probe of ``spec`` samples.

    64 per group (CALM's marginals, a grid spec's grids), so that none is left without a
    report when the config loads.
    """
    return 64 * max(len(getattr(spec, "marginal_sets", getattr(spec, "grids", ()))), 1)


def refuse_multidim(kind: str, query: Any) -> None:
    """422 for ``marginal`` or ``range`` asked of a collection of another ``kind``."""
    for field, param in (("marginal", "marginal"), ("ranges", "range")):
        if getattr(query, field) is not None:
            raise HTTPException(
                422,
                f"{param} must be left out for a {kind} collection (only multi-attribute "
                "collections take it)",
            )


def multidim_check(spec: Any, query: Any) -> None:
    """422 for a marginal or a range ``spec`` cannot answer (before any read of the store)."""
    from ..multidim import HDG, TDG, GroupMean, UniformGrid

    grid = isinstance(spec, (HDG, TDG, UniformGrid))
    name = type(spec).__name__
    if query.ranges is not None and not grid:
        raise HTTPException(
            422,
            f"range must be left out for a {name} collection (grids only: HDG, TDG, UniformGrid)",
        )
    if query.marginal is not None and (grid or isinstance(spec, GroupMean)):
        raise HTTPException(
            422,
            f"marginal must be left out for a {name} collection (CALM, FullDomain, "
            "Fourier, SPL, SMP, RSFD only)",
        )


def multidim_fill(result: Any, spec: Any, stats: Any, query: Any) -> None:
    """Write the answer to ``query`` (an EstimateQuery) into ``result.multidim``.

    A window in which the spec cannot estimate (some marginal or grid without a report)
    answers a ``note``, not an error: a series of windows keeps its other windows.
    """
    try:
        est = spec.estimate(stats)
    except ValueError as exc:
        result.multidim = MultidimResult(note=f"no estimate for these reports: {exc}")
        return
    try:
        result.multidim = multidim_answer(est, query.alpha, query.marginal, query.ranges)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
