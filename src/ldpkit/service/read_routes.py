"""The read routes of a collection: its estimate (GET, and POST with candidates), buckets, Stats.

:func:`add_read_routes` registers them on the app :func:`ldpkit.service.app.create_app`
builds; the answers come from :class:`~ldpkit.service.collector._Collector` and the store.
"""

import json
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from .collector import _Collector, _iso
from .kinds import MAX_CANDIDATES, MAX_CANDIDATES_BODY
from .models import BucketInfo, BucketList, CandidatesBody, EstimateResult
from .multidim import MarginalParam, RangeParam
from .params import CollectionName, TimeParam, TopK
from .store import CollectorStore

__all__ = ["add_read_routes"]


def add_read_routes(app: FastAPI, collector: _Collector, store: CollectorStore) -> None:
    """Add the estimate (GET and POST), bucket and Stats routes of a collection."""

    def estimate_of(
        collection: str,
        request: Request,
        alpha: float,
        postprocessing: str | None,
        since: str | None,
        until: str | None,
        bootstrap: int,
        candidates: list[Any] | None,
        top_k: int | None,
        control: str | None = None,
        marginal: str | None = None,
        ranges: str | None = None,
    ) -> Response:
        collector.authorize(request, "read")
        collector.get(collection)
        s, u = collector.window(since, until)
        collector.compact_if_behind(collection)
        result = collector.estimate(
            collection,
            alpha,
            postprocessing,
            s,
            u,
            bootstrap,
            candidates=candidates,
            top_k=top_k,
            control=control,
            marginal=marginal,
            ranges=ranges,
        )
        # Serialized once here (the model is already validated), not again by FastAPI.
        return Response(result.model_dump_json(), media_type="application/json")

    @app.get(
        "/v1/collections/{collection}/estimate", response_model=EstimateResult, tags=["collections"]
    )
    def get_estimate(
        collection: CollectionName,
        request: Request,
        alpha: Annotated[
            float, Query(gt=0, lt=1, description="1 - confidence level of the intervals")
        ] = 0.05,
        postprocessing: Annotated[
            str | None,
            Query(
                description="frequencies: a method of ldpkit.consistency.METHODS, e.g. norm_sub; "
                "distributions: cdf, norm_sub or norm_mul (Distribution.postprocess); biased"
            ),
        ] = None,
        since: TimeParam = None,
        until: TimeParam = None,
        bootstrap: Annotated[
            int,
            Query(
                ge=0,
                le=2000,
                description="EM/EMS distributions (Square Wave): bootstrap replicates B for "
                "the intervals (0: none; costs 2 B + 1 estimator runs)",
            ),
        ] = 0,
        candidates: Annotated[
            str | None,
            Query(
                description="open-domain collections (CMS, HCMS, FLH): the items to estimate, "
                "comma-separated, each a UTF-8 string (items holding commas, and integer "
                "items, go in the POST body instead)"
            ),
        ] = None,
        top_k: TopK = None,
        control: Annotated[
            str | None,
            Query(
                description="heavy-hitter collections (PEM, TreeHist, SFP): the error control "
                "of the discovered list, none, fwer or fdr at level alpha (default: the spec's)"
            ),
        ] = None,
        marginal: MarginalParam = None,
        range: RangeParam = None,  # the query parameter's public name
    ) -> EstimateResult:
        """Return the estimate over whole buckets in ``[since, until)`` (everything by default)."""
        items = None if candidates is None else candidates.split(",")
        return estimate_of(  # type: ignore[return-value]
            collection,
            request,
            alpha,
            postprocessing,
            since,
            until,
            bootstrap,
            items,
            top_k,
            control,
            marginal,
            range,
        )

    @app.post(
        "/v1/collections/{collection}/estimate",
        response_model=EstimateResult,
        tags=["collections"],
        responses={413: {"description": f"body over {MAX_CANDIDATES_BODY} bytes"}},
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": CandidatesBody.model_json_schema()}},
            }
        },
    )
    async def post_estimate(
        collection: CollectionName,
        request: Request,
        alpha: Annotated[
            float, Query(gt=0, lt=1, description="1 - confidence level of the intervals")
        ] = 0.05,
        since: TimeParam = None,
        until: TimeParam = None,
        top_k: TopK = None,
    ) -> EstimateResult:
        """Estimate an open-domain collection for the body's candidates.

        JSON strings and integers, as typed: ``"7"`` and ``7`` are different items.
        """
        # The body is read here, under a size limit, before pydantic parses any of it.
        collector.authorize(request, "read")
        try:
            body = CandidatesBody.model_validate(await _limited_json(request))
        except ValidationError as exc:  # the same 422 as FastAPI's own body check
            raise RequestValidationError(exc.errors(include_url=False)) from None
        answer: Any = await run_in_threadpool(
            estimate_of, collection, request, alpha, None, since, until, 0, body.candidates, top_k
        )
        return answer  # type: ignore[no-any-return]

    async def _limited_json(request: Request) -> Any:
        """Read the request's JSON body: 413 past MAX_CANDIDATES_BODY bytes, 422 if not JSON."""
        too_large = HTTPException(
            413,
            f"candidates body must be at most {MAX_CANDIDATES_BODY} bytes (at most "
            f"{MAX_CANDIDATES} candidates), got more",
        )
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_CANDIDATES_BODY:
            collector.metrics.reject("too_large", 413)
            raise too_large
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_CANDIDATES_BODY:
                collector.metrics.reject("too_large", 413)
                raise too_large
            chunks.append(chunk)
        try:
            return json.loads(b"".join(chunks))
        except (ValueError, RecursionError):
            raise HTTPException(
                422, 'candidates body must be JSON {"candidates": [...]}, got other bytes'
            ) from None

    @app.get(
        "/v1/collections/{collection}/buckets", response_model=BucketList, tags=["collections"]
    )
    def get_buckets(
        collection: CollectionName,
        request: Request,
        since: TimeParam = None,
        until: TimeParam = None,
    ) -> BucketList:
        """List reports and batches per roll-up bucket (a time series)."""
        collector.authorize(request, "read")
        collector.get(collection)
        s, u = collector.window(since, until)
        w = collector.bucket_seconds
        return BucketList(
            collection=collection,
            bucket_seconds=w,
            buckets=[
                BucketInfo(start=_iso(b) or "", end=_iso(b + w) or "", n=n, batches=c)
                for b, n, c in store.buckets(collection, since=s, until=u)
            ],
        )

    @app.get("/v1/collections/{collection}/stats", tags=["collections"])
    def get_stats(
        collection: CollectionName,
        request: Request,
        since: TimeParam = None,
        until: TimeParam = None,
    ) -> dict[str, Any]:
        """Whole buckets merged: ``Stats.to_dict()`` (merge it with ``Stats.from_dict`` elsewhere)."""
        collector.authorize(request, "read")
        c = collector.get(collection)
        s, u = collector.window(since, until)
        collector.compact_if_behind(collection)
        stats, _ = store.merged(collection, c.spec, since=s, until=u)
        return stats.to_dict()
