"""The collector's state and its work behind the routes (:class:`_Collector`).

The collections and their report templates, authorization and quotas, one batch handed to
its :class:`~ldpkit.service.decode.BatchDecoder` and then to the group committer, and the
estimates.
"""

import datetime as dt
import json
import logging
import math
import re
import time
from typing import Any

import numpy as np
from fastapi import HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from ..spec import Mechanism, Stats
from .auth import Token, TokenAuth
from .commit import AggregationError, GroupCommitter
from .config import (
    Collection,
    Limits,
    _plain_label,
)
from .decode import BatchDecoder
from .kinds import KINDS, EstimateQuery, kind_of, longitudinal_info, sample_inputs
from .models import (
    CollectionInfo,
    EncoderInfo,
    EstimateResult,
    FieldInfo,
)
from .multidim import multidim_query
from .prometheus import Metrics
from .quotas import Quota, QuotaCounters, QuotaExceeded
from .store import (
    BatchDeleted,
    CollectorStore,
    IdempotencyConflict,
)

log = logging.getLogger("ldpkit.service")


# Consecutive compaction failures from which /healthz says degraded (one failure may be
# a passing lock timeout; the committer retries about once a second).
COMPACTION_FAILURES_DEGRADED = 3


_KEY = re.compile(r"^[\x21-\x7e]{1,200}$")  # visible ASCII, as HTTP header values allow


def _probe(spec: Mechanism) -> tuple[dict[str, tuple[np.dtype, tuple[int, ...]]] | None, str]:
    """Return the report template and the estimate kind of ``spec``.

    The template: field dtypes and per-user shapes; the kind: :func:`.kinds.kind_of`.

    Raises ValueError for a spec whose estimate the collector cannot serve, so a config
    naming one is refused when it is loaded, not after data has been ingested.
    """
    sample = None
    for values in sample_inputs(spec):
        try:
            sample = spec.randomize(values, rng=0)
            break
        except (ValueError, TypeError):
            continue
    if sample is None:
        raise ValueError(
            f"collections must use a spec whose randomize accepts values, got {spec!r}"
        )
    template = {k: (v.dtype, v.shape[1:]) for k, v in sample.arrays.items()}
    return template, kind_of(spec, spec.aggregate(sample)).name


def _iso(ts: int | None) -> str | None:
    return None if ts is None else dt.datetime.fromtimestamp(ts, dt.UTC).isoformat()


# The times a query may name: those datetime can print (years 1 to 9999, UTC); bucket
# numbers stay far inside the database's 64-bit integers.
TIME_MIN = -62135596800  # 0001-01-01T00:00:00Z


TIME_MAX = 253402300799  # 9999-12-31T23:59:59Z


_TIME_RANGE = (
    "a time from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z "
    f"(Unix seconds {TIME_MIN} to {TIME_MAX})"
)


def _parse_time(value: str | None, name: str) -> int | None:
    """Return Unix seconds from an ISO 8601 time (naive = UTC) or a number of seconds.

    422 outside [TIME_MIN, TIME_MAX] (``since=1e300`` was a 500).
    """
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = None
    if seconds is None:
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise HTTPException(
                422, f"{name} must be an ISO 8601 time or Unix seconds, got {value!r}"
            ) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        try:
            seconds = when.timestamp()
        except (OverflowError, ValueError):  # e.g. 0001-01-01T00:00:00+01:00
            seconds = math.nan
    if not TIME_MIN <= seconds <= TIME_MAX:  # (NaN too)
        raise HTTPException(422, f"{name} must be {_TIME_RANGE}, got {value!r}")
    return math.floor(seconds)


class _Collector:
    """The app's state: collections, their report templates, the store and the committer."""

    def __init__(
        self,
        collections: dict[str, Collection],
        store: CollectorStore,
        *,
        store_reports: bool,
        limits: Limits,
        auth: TokenAuth | None,
        bucket_seconds: int,
        commit_window: float = 0.003,
        metrics_dir: str | None = None,
        quotas: Quota | None = None,
    ) -> None:
        self.collections = collections
        probes = {name: _probe(c.spec) for name, c in collections.items()}
        self.templates = {name: p[0] for name, p in probes.items()}
        self.kinds = {name: p[1] for name, p in probes.items()}
        self.spec_dicts = {name: c.spec.to_dict() for name, c in collections.items()}
        self.fingerprints = {name: c.spec.fingerprint for name, c in collections.items()}
        self.store = store
        self.store_reports = store_reports
        self.limits = limits
        self.auth = auth
        self.bucket_seconds = bucket_seconds
        self.metrics = Metrics(metrics_dir)
        self.quotas = QuotaCounters(_token_quotas(auth, quotas), metrics_dir)
        # Decodes and checks one batch: the one entry into ldpkit.io (tests replace its clock).
        self.decoder = BatchDecoder(
            collections,
            self.templates,
            self.spec_dicts,
            self.fingerprints,
            limits=limits,
            metrics=self.metrics,
            store_reports=store_reports,
        )
        # Constant parts of the 201 answer, built once rather than per request.
        self._name_json = {name: json.dumps(name) for name in collections}
        self._iso_cache: dict[dt.datetime, str] = {}
        # When compact_if_behind last counted each collection's parts (monotonic seconds).
        self._parts_checked: dict[str, float] = {}
        self.parts_check_interval = 1.0
        self.committer = GroupCommitter(
            store,
            {n: c.spec for n, c in collections.items()},
            window=commit_window,
            on_commit=self.metrics.commit,
        )

    # -- access ----------------------------------------------------------------------------
    def authorize(self, request: Request, scope: str) -> str:
        """Return the calling token's name ("" when auth is off); 401/403 otherwise."""
        found = request.headers.getlist("authorization")
        return self.authorize_header(
            found[0] if found else None,
            scope,
            request.path_params.get("collection"),
            count=len(found),
        )

    def authorize_header(
        self, header: str | None, scope: str, collection: str | None = None, count: int = 1
    ) -> str:
        """Run :meth:`authorize` on the ``Authorization`` header's value (None if absent).

        ``count`` headers were sent: more than one is a 400 on every path (the fast path
        read the last, the FastAPI routes the first).
        """
        if count > 1:
            self.metrics.reject("malformed", 400)
            raise HTTPException(400, f"Authorization must be sent once, got {count} headers")
        if self.auth is None:
            return ""
        token: Token | None = self.auth.identify(header)
        if token is None:
            self.metrics.reject("unauthenticated", 401)
            raise HTTPException(
                401,
                "Authorization must be 'Bearer <token>' with a configured token, got "
                + ("none" if header is None else "an unknown token"),
                headers={"WWW-Authenticate": "Bearer"},
            )
        if not token.allows(scope):
            self.metrics.reject("forbidden", 403)
            raise HTTPException(
                403, f"token {token.name!r} must have scope {scope!r}, got {sorted(token.scopes)}"
            )
        if not token.allows(scope, collection):
            self.metrics.reject("forbidden", 403)
            raise HTTPException(
                403,
                f"collection must be one of token {token.name!r}'s "
                f"{sorted(token.collections or ())}, got {collection!r}",
            )
        return token.name

    def visible(self, token: str) -> list[str]:
        """Return the collections the named token may see (all of them when auth is off)."""
        found = None if self.auth is None else self.auth.by_name.get(token)
        if found is None or found.collections is None:
            return list(self.collections)
        return [name for name in self.collections if name in found.collections]

    def charge(self, token: str, n: int | None = None) -> None:
        """Count a request (``n`` None) or ``n`` reports against the token's quota."""
        try:
            if n is None:
                self.quotas.admit_batch(token)
            else:
                self.quotas.charge_reports(token, n)
        except QuotaExceeded as exc:
            self.metrics.reject("rate_limited" if exc.status == 429 else "too_large", exc.status)
            headers = None if exc.retry_after is None else {"Retry-After": str(exc.retry_after)}
            raise HTTPException(exc.status, str(exc), headers=headers) from None

    def get(self, name: str, *, listing: bool = True) -> Collection:
        """Return the collection ``name``.

        404 otherwise, naming the others only when ``listing`` (callers that may read; an
        ingest token must not learn them).
        """
        try:
            return self.collections[name]
        except KeyError:
            if not listing:
                raise HTTPException(404, f"collection {name!r} is not served here") from None
            raise HTTPException(
                404, f"collection must be one of {sorted(self.collections)}, got {name!r}"
            ) from None

    def info(self, name: str) -> CollectionInfo:
        c = self.collections[name]
        n, batches = self.store.summary(name)
        last = self.store.last_received(name)
        template = self.templates[name]
        return CollectionInfo(
            name=name,
            description=c.description,
            kind=self.kinds[name],
            mechanism=self.spec_dicts[name],
            fingerprint=c.spec.fingerprint,
            n=n,
            batches=batches,
            bucket_seconds=self.bucket_seconds,
            last_bucket=_iso(self.store.last_bucket(name)),
            last_report=None if last is None else last.isoformat(),
            labels=c.labels,
            encoder=None
            if c.encoder is None
            else EncoderInfo(
                categories=[_plain_label(x) for x in c.encoder.categories],
                unknown=c.encoder.unknown,
                missing=c.encoder.missing,
            ),
            report_fields=None
            if template is None
            else {
                k: FieldInfo(dtype=dtype.str, shape=list(shape))
                for k, (dtype, shape) in template.items()
            },
            longitudinal=longitudinal_info(c.spec),
        )

    # -- ingest ----------------------------------------------------------------------------
    def check_ingest_headers(self, key: str | None, content_length: str | None) -> None:
        """Refuse a malformed Idempotency-Key or a declared body over the limit early."""
        if key is not None and not _KEY.match(key):
            raise self._fail(
                422,
                "malformed",
                f"Idempotency-Key must be 1-200 visible ASCII characters, got {key!r}",
            )
        max_body = self.limits.max_body_bytes
        if (
            content_length is not None
            and content_length.isdigit()
            and int(content_length) > max_body
        ):
            raise self._fail(
                413, "too_large", f"body must be at most {max_body} bytes, got {content_length}"
            )

    def body_too_large(self) -> HTTPException:
        return self._fail(
            413, "too_large", f"body must be at most {self.limits.max_body_bytes} bytes"
        )

    async def ingest(
        self, name: str, body: bytes, content_type: str, token: str, key: str | None
    ) -> tuple[int, bytes]:
        """Decode, check and group-commit one batch: ``(status, JSON body)`` of the answer."""
        if not body:
            raise self._fail(
                422, "malformed", "body must hold a batch of reports, got an empty body"
            )
        self.charge(token)
        if len(body) <= 16_384:  # small: decoding is cheaper than a thread hop
            item = self.decoder.prepare(name, body, content_type, token, key)
        else:
            item = await run_in_threadpool(
                self.decoder.prepare, name, body, content_type, token, key
            )
        self.charge(token, item.n)  # before the commit: a refused batch stores nothing
        try:
            record = await self.committer.commit(item)
        except IdempotencyConflict as exc:
            raise self._fail(422, "idempotency_conflict", str(exc)) from exc
        except BatchDeleted as exc:
            raise self._fail(409, "deleted_batch", str(exc)) from exc
        except AggregationError as exc:
            raise self._fail(422, "rejected_by_spec", str(exc)) from exc
        self.metrics.accept(name, record.n, record.duplicate)
        received = record.received_at
        # Cached for UTC times only: equal datetimes in other zones print differently.
        when = self._iso_cache.get(received) if received.tzinfo is dt.UTC else None
        if when is None:  # one new second per second under load; retries bring old ones
            when = received.isoformat()
            if received.tzinfo is dt.UTC:
                if len(self._iso_cache) > 256:
                    self._iso_cache.clear()
                self._iso_cache[received] = when
        payload = (
            f'{{"batch_id":"{record.batch_id}","collection":{self._name_json[name]},'
            f'"n":{record.n},"received_at":"{when}",'
            f'"duplicate":{"true" if record.duplicate else "false"}}}'
        )
        return (200 if record.duplicate else 201), payload.encode()

    # -- rejections ----------------------------------------------------------------------
    def _fail(self, status: int, reason: str, message: str) -> HTTPException:
        self.metrics.reject(reason, status)
        return HTTPException(status, message)

    # -- estimates -------------------------------------------------------------------------
    def admin_window(self, since: str | None, until: str | None) -> tuple[int | None, int | None]:
        """Parse an admin delete's ``[since, until)``: both must be bucket boundaries."""
        w = self.bucket_seconds
        s, u = _parse_time(since, "since"), _parse_time(until, "until")
        for name, value in (("since", s), ("until", u)):
            if value is not None and value % w:
                raise HTTPException(
                    422,
                    f"{name} must be a bucket boundary (a multiple of {w} s since the epoch), "
                    f"got {_iso(value)}; batches are deleted by whole buckets",
                )
        return s, u

    def window(self, since: str | None, until: str | None) -> tuple[int | None, int | None]:
        s, u = _parse_time(since, "since"), _parse_time(until, "until")
        w = self.bucket_seconds
        if s is not None:
            s = -(-s // w) * w  # first whole bucket
            if s > TIME_MAX:
                raise HTTPException(
                    422,
                    f"since must leave a whole {w} s bucket before {_iso(TIME_MAX)}, got {since!r}",
                )
        if u is not None:
            u = u // w * w  # end of the last whole bucket
            if u < TIME_MIN:
                raise HTTPException(
                    422,
                    f"until must end a whole {w} s bucket after {_iso(TIME_MIN)}, got {until!r}",
                )
        if s is not None and u is not None and u < s:
            raise HTTPException(
                422, f"until must be at or after since (whole {w} s buckets), got {since}..{until}"
            )
        return s, u

    def compact_if_behind(self, name: str) -> None:
        """Fold roll-up parts now if more than ``max_rollup_parts`` of ``name`` wait.

        The committer normally folds them every second; this covers a process that does not
        ingest, or a committer that fell behind. Runs in the reader's thread, never twice
        at once in a process, not right after a failure; a failure leaves every total
        as it was (readers sum parts too).
        """
        store = self.store
        now = time.monotonic()
        # At most once a second per collection: the check is one more query (~0.5-1 ms
        # here), and the committer folds parts about once a second anyway.
        if now - self._parts_checked.get(name, -math.inf) < self.parts_check_interval:
            return
        self._parts_checked[name] = now
        if store.compaction_due() and store.parts_over(name):
            store.try_compact(wait=False)

    def compaction_health(self) -> str:
        """``ok``, or why compaction is failing or behind (``/healthz`` says degraded)."""
        store = self.store
        problems = []
        if store.compaction.compaction_failures >= COMPACTION_FAILURES_DEGRADED:
            problems.append(
                f"failing: {store.compaction.compaction_failures} consecutive failures in this process "
                f"(last: {store.compaction.last_compaction_error})"
            )
        behind = [name for name in self.collections if store.parts_over(name)]
        if behind:
            problems.append(
                f"behind: more than {store.compaction.max_parts} roll-up parts wait in {sorted(behind)}"
            )
        return "; ".join(problems) or "ok"

    def estimate(
        self,
        name: str,
        alpha: float,
        postprocessing: str | None,
        since: int | None,
        until: int | None,
        bootstrap: int = 0,
        *,
        candidates: list[Any] | None = None,
        top_k: int | None = None,
        merged: tuple[Stats, int] | None = None,
        control: str | None = None,
        marginal: str | None = None,
        ranges: str | None = None,
    ) -> EstimateResult:
        collection = self.collections[name]
        spec = collection.spec
        kind = KINDS[self.kinds[name]]
        query = EstimateQuery(alpha, postprocessing, bootstrap, candidates, top_k, control)
        if marginal is not None or ranges is not None:  # multi-attribute queries (multidim.py)
            query = multidim_query(query, spec, marginal, ranges)
        kind.check(spec, query)
        # merged: the window's (Stats, batches) when the caller read them already (windows.py)
        stats, batches = merged or self.store.merged(name, spec, since=since, until=until)
        result = EstimateResult(
            collection=name,
            kind=kind.name,
            mechanism=self.spec_dicts[name],
            fingerprint=spec.fingerprint,
            n=stats.n,
            batches=batches,
            since=_iso(since),
            until=_iso(until),
            alpha=alpha,
            labels=collection.labels,
            postprocessing=[],
            frequencies=None,
            ci_low=None,
            distribution=None,
            mean=None,
            longitudinal=longitudinal_info(spec),
        )
        if stats.n == 0:
            return result
        kind.fill(result, spec, stats, query)
        return result


def _token_quotas(auth: TokenAuth | None, default: Quota | None) -> dict[str, Quota]:
    """Each token's quota (its own, else ``default``, else Quota()); "" when auth is off."""
    if auth is None:
        return {} if default is None else {"": default}
    return {t.name: t.quota or default or Quota() for t in auth.tokens}


def _database_error(
    collector: "_Collector", exc: Exception
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """JSON 503 for a database failure: nothing was stored, the client should retry."""
    collector.metrics.reject("database_unavailable", 503)
    reason = "unavailable" if isinstance(exc, (OperationalError, PoolTimeout)) else "error"
    log.error("database %s: %s", reason, exc)
    return (
        503,
        {"detail": f"database {reason}: {type(exc).__name__}; retry later"},
        {"Retry-After": "5"},
    )
