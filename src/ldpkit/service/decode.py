"""Request decoding: one report batch's body to a checked PendingBatch.

The body is npz, Parquet or JSON; the result a
:class:`~ldpkit.service.batch_identity.PendingBatch` (:class:`BatchDecoder`, the collector's
one entry into :mod:`ldpkit.io`). A JSON body of the usual shape (one report, or columns of
plain integers) is read without ``json.loads``; others go to
:func:`ldpkit.io.reports_from_dict`.
"""

import datetime as dt
import io
import json
import math
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from fastapi import HTTPException

from ..io import _FORMAT as _REPORTS_FORMAT
from ..io import (
    _sniff,
    decoded_size,
    iter_reports_npz,
    iter_reports_parquet,
    reports_from_dict,
)
from ..spec import Mechanism, Reports, Stats, spec_from_dict
from .commit import SMALL_BATCH, AggregationError, ReportRows, aggregate_one
from .config import Collection, Limits
from .prometheus import Metrics
from .store import PendingBatch, ReportsDigest

_ENTRY_KEYS = frozenset({"dtype", "shape", "data"})


def _json_depth_ok(obj: Any, limit: int) -> bool:
    """Return True if ``obj`` nests at most ``limit`` containers deep (iterative: no recursion)."""
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return False
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, (dict, list)))
    return True


class _FastField:
    """A report field's dtype, per-user shape, accepted dtype names and integer range."""

    __slots__ = ("dtype", "high", "low", "names", "shape")

    def __init__(self, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        self.dtype, self.shape, self.names = dtype, shape, (dtype.str, dtype.name)
        info = np.iinfo(dtype) if dtype.kind in "iu" else None
        self.low = None if info is None else int(info.min)
        self.high = None if info is None else int(info.max)


# JSON whitespace (RFC 8259; what json.loads skips) and a JSON integer as json.loads reads
# it (no leading zeros, no fraction or exponent; at most 26 digits: int() of them is cheap).
_JW = rb"[ \t\n\r]*+"


_JINT = rb"-?(?:0|[1-9][0-9]{0,25})"


# A fixed-width row's text: digits, signs, commas and whitespace (read by json, checked).
_JROW = rb"([-0-9, \t\n\r]*+)"


_ROW_DECODER = json.JSONDecoder()


class _OneReport:
    """Decode the usual body, one report as ``json.dumps(reports_to_dict(r))`` writes it.

    With one regular expression instead of ``json.loads`` and a walk of the parsed dict.

    A body it matches decodes to exactly the :class:`ReportRows` the general path
    (``json.loads`` + :func:`_fast_json_reports`) would give: the same keys in
    ``reports_to_dict``'s order (``format`` and ``mechanism`` optional), the mechanism
    written as ``json.dumps`` writes the collection's spec dict (default or compact
    separators), this collection's fingerprint, each field's dtype name, shape ``[1]`` or
    ``[1, width]``, and integers that fit the field's dtype. Anything else (other spacing
    inside the mechanism, key order, a value out of range, float fields, ...) is None and
    goes through the general path, which also gives every error message.
    """

    __slots__ = ("checks", "depth", "dtypes", "exact", "pattern")

    def __init__(
        self,
        exact: re.Pattern[bytes],
        pattern: re.Pattern[bytes],
        fields: list[tuple[str, _FastField]],
        depth: int,
    ) -> None:
        self.exact, self.pattern, self.depth = exact, pattern, depth
        # (name, row width or 0 for one number per user, dtype range)
        # (integer fields only, so low and high are set: see build)
        self.checks: list[tuple[str, int, int, int]] = [
            (k, f.shape[0] if f.shape else 0, f.low or 0, f.high or 0) for k, f in fields
        ]
        self.dtypes = {k: f.dtype for k, f in fields}

    @classmethod
    def build(
        cls, spec_dict: dict[str, Any], fingerprint: str, template: Mapping[str, _FastField]
    ) -> "_OneReport | None":
        """Return the matcher of one collection, or None when its reports do not qualify."""

        def seq(*tokens: bytes) -> bytes:  # JSON tokens, optional whitespace between them
            return _JW.join(tokens)

        def lit(value: Any, separators: tuple[str, str] = (", ", ": ")) -> bytes:
            return re.escape(json.dumps(value, separators=separators).encode())

        def key(k: str) -> bytes:
            return seq(lit(k), b":")

        fields = list(template.items())
        sample: dict[str, Any] = {}
        flexible: list[bytes] = []  # any JSON whitespace between tokens
        exact: list[bytes] = []  # json.dumps's spacing
        for k, f in fields:
            if f.low is None or len(f.shape) > 1 or (f.shape and f.shape[0] < 1):
                return None  # floats keep the general path (numpy converts them)
            dtype = b"(?:" + b"|".join(lit(x) for x in f.names) + b")"
            if f.shape == ():
                shape = seq(rb"\[", b"1", rb"\]")
                data = seq(rb"\[", b"(" + _JINT + b")", rb"\]")
                exact_shape, exact_data = rb"\[1\]", rb"\[(" + _JINT + rb")\]"
                sample[k] = {"data": [0]}
            else:
                width = str(f.shape[0]).encode()
                shape = seq(rb"\[", b"1", b",", width, rb"\]")
                # a row's characters only: match() reads it as JSON (ints only then)
                data = seq(rb"\[", rb"\[", _JROW, rb"\]", rb"\]")
                exact_shape = rb"\[1, " + width + rb"\]"
                exact_data = rb"\[\[" + _JROW + rb"\]\]"
                sample[k] = {"data": [[0]]}
            flexible.append(
                seq(key(k), rb"\{", key("dtype"), dtype, b",", key("shape"), shape, b",")
                + _JW
                + seq(key("data"), data, rb"\}")
            )
            exact.append(
                lit(k)
                + rb': \{"dtype": '
                + lit(f.dtype.str)
                + rb', "shape": '
                + exact_shape
                + rb', "data": '
                + exact_data
                + rb"\}"
            )
        if not fields:
            return None
        # The mechanism as json.dumps writes the spec dict (default or compact separators),
        # kept only if it reads back equal to it (what the general path compares).
        mechanisms = [
            lit(spec_dict, sep)
            for sep in ((", ", ": "), (",", ":"))
            if json.loads(json.dumps(spec_dict, separators=sep)) == spec_dict
        ]
        if not mechanisms:
            return None
        # Optional groups end with whitespace, so no two whitespace runs ever meet (a run
        # is then scanned a bounded number of times: linear in the body, whatever it holds).
        pattern = seq(
            rb"\{",
            b"(?:"
            + seq(key("format"), lit(_REPORTS_FORMAT), b",")
            + _JW
            + b")?"
            + b"(?:"
            + seq(key("mechanism"), b"(?:" + b"|".join(mechanisms) + b")", b",")
            + _JW
            + b")?"
            + key("fingerprint"),
            lit(fingerprint),
            b",",
            key("arrays"),
            rb"\{",
            seq(b"", b",", b"").join(flexible),
            rb"\}",
            rb"\}",
            b"",
        )
        exact_pattern = (
            rb'\{"format": '
            + lit(_REPORTS_FORMAT)
            + rb', "mechanism": '
            + mechanisms[0]
            + rb', "fingerprint": '
            + lit(fingerprint)
            + rb', "arrays": \{'
            + b", ".join(exact)
            + rb"\}\}"
        )
        # How deep such a body nests (with the mechanism): matched only within the limit.
        tree = {"mechanism": spec_dict, "arrays": sample}
        depth = next(d for d in range(1, 10_000) if _json_depth_ok(tree, d))
        return cls(re.compile(exact_pattern), re.compile(pattern), fields, depth)

    def match(self, body: bytes, depth_limit: int) -> ReportRows | None:
        if self.depth > depth_limit:
            return None
        # json.dumps's exact spacing first: a mostly literal pattern, about twice as fast
        m = self.exact.fullmatch(body) or self.pattern.fullmatch(body)
        if m is None:
            return None
        columns: dict[str, list[Any]] = {}
        for (k, width, low, high), text in zip(self.checks, m.groups()):
            if not width:
                value = int(text)
                if value < low or value > high:
                    return None  # the general path explains
                columns[k] = [value]
            else:
                try:  # (json's C decoder: several times faster than int() per value)
                    row = _ROW_DECODER.decode("[" + text.decode("ascii") + "]")
                except ValueError:
                    return None  # e.g. "1,,2" or "01": not JSON integers
                if len(row) != width or min(row) < low or max(row) > high:
                    return None
                columns[k] = [row]
        return ReportRows(columns, self.dtypes)


def _fast_json_reports(
    data: dict[str, Any], spec: Mechanism, template: Mapping[str, _FastField]
) -> Reports | ReportRows | None:
    """Decode plain integer (or float) arrays of the report fields, or return None.

    Decoded without the general path's per-value checks; None sends anything else to
    ``reports_from_dict`` (which gives the error messages), so both paths accept exactly the
    same bodies.

    A field holds one number per user, or (integer fields) a fixed-width row per user,
    e.g. OUE's packed bits. Integer fields (and float64 fields of Python floats) come back
    as :class:`ReportRows`: each value is checked to fit its dtype here, and the arrays
    are built once per commit group rather than once per request.
    """
    arrays = data.get("arrays")
    if not isinstance(arrays, dict) or set(arrays) != set(template) or not template:
        return None
    columns: dict[str, list[Any]] = {}
    plain = True  # every field can stay a list until the group is aggregated
    n = -1
    for k, field in template.items():
        entry = arrays[k]
        values: Any
        if isinstance(entry, dict):
            if not _ENTRY_KEYS.issuperset(entry):
                return None
            if entry.get("dtype") is not None and entry["dtype"] not in field.names:
                return None
            values = entry.get("data")
            declared = entry.get("shape")
        else:
            values, declared = entry, None
        if type(values) is not list or not values or (n >= 0 and len(values) != n):
            return None  # ragged fields too: let reports_from_dict explain
        n = len(values)
        if field.shape == ():
            flat = values
            if declared is not None and declared != [n]:
                return None
        elif len(field.shape) == 1 and field.low is not None and field.shape[0] > 0:
            width = field.shape[0]
            if declared is not None and declared != [n, width]:
                return None
            if not all(type(row) is list and len(row) == width for row in values):
                return None
            flat = values[0] if n == 1 else [x for row in values for x in row]
        else:
            return None
        if field.low is not None:
            if not all(type(x) is int for x in flat):
                return None
            if min(flat) < field.low or max(flat) > field.high:  # type: ignore[operator]
                return None
        elif field.dtype.kind == "f":
            if not all(type(x) is float or type(x) is int for x in flat):
                return None
            # NaN and +-Infinity (json.loads reads them) are no report: the general path
            # refuses them with Reports' message, before the group committer
            try:
                if not all(map(math.isfinite, flat)):
                    return None
            except OverflowError:  # an integer beyond any float: the general path explains
                return None
            if field.dtype != np.float64 or not all(type(x) is float for x in flat):
                plain = False  # numpy decides how ints or narrower floats convert
        else:
            return None
        columns[k] = values
    dtypes = {k: f.dtype for k, f in template.items()}
    if plain:
        return ReportRows(columns, dtypes)
    try:
        return Reports(spec, **{k: np.array(v, dtype=dtypes[k]) for k, v in columns.items()})
    except (OverflowError, ValueError, TypeError):
        return None


def _whole_second_clock() -> Callable[[], dt.datetime]:
    """Return a clock of ``datetime.now(UTC)`` without microseconds, built once per second.

    The same object for every request of a second: one float read and a compare per call.
    """
    # One tuple, replaced whole: a thread (large bodies are decoded in the thread pool)
    # never sees one second's number with another second's datetime.
    last: list[tuple[int, dt.datetime]] = [(-1, dt.datetime.fromtimestamp(0, dt.UTC))]

    def clock() -> dt.datetime:
        second = math.floor(time.time())
        cached = last[0]
        if cached[0] == second:
            return cached[1]
        now = dt.datetime.fromtimestamp(second, dt.UTC)
        last[0] = (second, now)
        return now

    return clock


class BatchDecoder:
    """Decode and check one report batch of a collection, whatever its format.

    The result is a :class:`~ldpkit.service.batch_identity.PendingBatch`; every refusal is
    an ``HTTPException`` (4xx) counted in ``metrics``. The regular route and the fast path
    both come here (through ``_Collector.ingest``): the collector's one entry into
    :mod:`ldpkit.io`.
    """

    def __init__(
        self,
        collections: dict[str, Collection],
        templates: dict[str, dict[str, tuple[np.dtype, tuple[int, ...]]] | None],
        spec_dicts: dict[str, dict[str, Any]],
        fingerprints: dict[str, str],
        *,
        limits: Limits,
        metrics: Metrics,
        store_reports: bool,
    ) -> None:
        self.collections = collections
        self.templates = templates
        self.spec_dicts = spec_dicts
        self.fingerprints = fingerprints
        self.limits = limits
        self.metrics = metrics
        self.store_reports = store_reports
        self.fast_fields = {
            name: {k: _FastField(dt_, shape) for k, (dt_, shape) in t.items()}
            for name, t in self.templates.items()
            if t is not None
        }
        # The usual one-report body, matched without json.loads (see _OneReport).
        self.one_report = {
            name: one
            for name, fields in self.fast_fields.items()
            if (one := _OneReport.build(self.spec_dicts[name], self.fingerprints[name], fields))
            is not None
        }
        # When a batch counts as received (whole seconds, UTC); tests replace it.
        self.clock: Callable[[], dt.datetime] = _whole_second_clock()

    def _fail(self, status: int, reason: str, message: str) -> HTTPException:
        self.metrics.reject(reason, status)
        return HTTPException(status, message)

    def decode_json(self, name: str, body: bytes, content_type: str) -> Reports | ReportRows:
        """Decode a JSON body of collection ``name`` into Reports or ReportRows."""
        spec = self.collections[name].spec
        spec_fingerprint = self.fingerprints[name]
        if "json" not in content_type and not body.lstrip().startswith(b"{"):
            raise self._fail(
                415,
                "unsupported_media",
                "body must be npz or Parquet reports (ldpkit.io.reports_to_bytes) or a JSON object "
                f"(ldpkit.io.reports_to_dict), got Content-Type {content_type or 'none'!r} and "
                f"bytes starting with {body[:8]!r}",
            )
        if len(body) > self.limits.max_json_bytes:
            raise self._fail(
                413,
                "too_large",
                f"JSON body must be at most {self.limits.max_json_bytes} bytes, got {len(body)}; "
                "send larger batches as npz or Parquet (ldpkit.io.reports_to_bytes)",
            )
        one = self.one_report.get(name)
        if one is not None:
            rows = one.match(body, self.limits.max_json_depth)
            if rows is not None:
                return rows
        try:
            # json.loads(bytes) sniffs the encoding first: a body opening with "{" and no
            # NUL after it is UTF-8 by its rule, so decode it as json.loads would
            if body[:1] == b"{" and body[1:2] not in (b"\x00", b""):
                data = json.loads(body.decode("utf-8", "surrogatepass"))
            else:
                data = json.loads(body)
        except RecursionError:
            data = None
        except (ValueError, UnicodeDecodeError) as exc:
            raise self._fail(422, "malformed", f"body must be valid JSON: {exc}") from exc
        limit = self.limits.max_json_depth
        if data is None or (
            # fewer opening brackets than the limit cannot nest deeper: skip the walk
            body.count(b"[") + body.count(b"{") > limit and not _json_depth_ok(data, limit)
        ):
            raise self._fail(
                422,
                "malformed",
                f"JSON body must nest at most {self.limits.max_json_depth} levels deep",
            )
        if not isinstance(data, dict):
            raise self._fail(
                422,
                "malformed",
                f"body must be a JSON object with 'fingerprint' and 'arrays', got {type(data).__name__}",
            )
        if "mechanism" in data and data["mechanism"] != self.spec_dicts[name]:
            try:
                claimed = spec_from_dict(data["mechanism"])
            except (KeyError, TypeError, ValueError) as exc:
                raise self._fail(
                    422, "malformed", f"mechanism must be a spec dict (spec.to_dict()): {exc}"
                ) from exc
            self._check_spec(name, claimed)
        fingerprint = data.get("fingerprint")
        if fingerprint != spec_fingerprint:
            raise self._fail(
                409 if isinstance(fingerprint, str) else 422,
                "wrong_spec",
                f"reports must be made under collection {name!r}'s {spec!r} (fingerprint "
                f"{spec_fingerprint}), got fingerprint {fingerprint!r}; fetch the spec from "
                f"GET /v1/collections/{name}",
            )
        template = self.templates[name] or {}
        fast = _fast_json_reports(data, spec, self.fast_fields.get(name, {}))
        if fast is not None:
            return fast
        try:
            data = {k: v for k, v in data.items() if k != "mechanism"}
            return reports_from_dict(
                data, expected=spec, dtypes={k: v[0] for k, v in template.items()}
            )
        except (ValueError, TypeError) as exc:
            raise self._fail(422, "malformed", str(exc)) from exc

    def _check_spec(self, name: str, got: Mechanism) -> None:
        spec = self.collections[name].spec
        if got != spec:
            raise self._fail(
                409,
                "wrong_spec",
                f"reports must be made under collection {name!r}'s {spec!r} (fingerprint "
                f"{spec.fingerprint}), got reports made under {got!r} (fingerprint {got.fingerprint}); "
                f"fetch the spec from GET /v1/collections/{name}",
            )

    def _check_fields(self, name: str, reports: Reports | ReportRows) -> None:
        template = self.templates[name]
        if template is not None and set(reports.fields) != set(template):
            raise self._fail(
                422,
                "malformed",
                f"reports must have fields {sorted(template)} for {self.collections[name].spec!r}, "
                f"got {sorted(reports.fields)}",
            )

    def _check_count(self, n: int) -> None:
        if n == 0:
            raise self._fail(422, "malformed", "batch must hold at least one report, got 0")
        if n > self.limits.max_reports_per_batch:
            raise self._fail(
                413,
                "too_many_reports",
                f"batch must hold at most {self.limits.max_reports_per_batch} reports, got {n}; "
                "split it into several batches",
            )

    def prepare(
        self, name: str, body: bytes, content_type: str, token: str, key: str | None
    ) -> PendingBatch:
        """Decode and check one batch; aggregate it unless it is small (see commit.py)."""
        spec = self.collections[name].spec
        kind = _sniff(body[:4])
        digest = ReportsDigest() if key else None
        if kind is None:
            reports = self.decode_json(name, body, content_type)
            self._check_fields(name, reports)
            n = len(reports)
            self._check_count(n)
            if isinstance(reports, ReportRows) and (digest is not None or n > SMALL_BATCH):
                reports = reports.to_reports(spec)
            if digest is not None:
                digest.update(reports)  # type: ignore[arg-type]
            stats = None
            if n > SMALL_BATCH:
                stats = self._aggregate(spec, reports)  # type: ignore[arg-type]
            return PendingBatch(
                name,
                n,
                stats=stats,
                reports=None if stats is not None else reports,
                token=token,
                idempotency_key=key,
                digest=None if digest is None else digest.hexdigest(),
                raw=("json", body) if self.store_reports else None,
                received_at=self.clock(),
            )
        try:
            size = decoded_size(body)
        except ValueError as exc:
            raise self._fail(
                422, "malformed", f"body must be a readable {kind} reports payload: {exc}"
            ) from exc
        if size is not None and size > self.limits.max_decoded_bytes:
            raise self._fail(
                413,
                "too_large",
                f"batch must decode to at most {self.limits.max_decoded_bytes} bytes, got {size}; "
                "send smaller batches",
            )
        try:
            if kind == "parquet":
                chunks = iter_reports_parquet(
                    io.BytesIO(body), batch_size=self.limits.aggregate_chunk
                )
            else:  # decompressed as a stream, a block of rows at a time
                chunks = iter_reports_npz(io.BytesIO(body), batch_size=self.limits.aggregate_chunk)
            stats, n = spec.empty_stats(), 0
            for i, chunk in enumerate(chunks):
                if i == 0:
                    self._check_spec(name, chunk.spec)
                    self._check_fields(name, chunk)
                n += len(chunk)
                if n > self.limits.max_reports_per_batch:
                    self._check_count(n)
                if digest is not None:
                    digest.update(chunk)
                stats = stats.merge(self._aggregate(spec, chunk))
        except (ValueError, TypeError) as exc:
            raise self._fail(422, "malformed", f"body must be valid {kind} reports: {exc}") from exc
        self._check_count(n)
        return PendingBatch(
            name,
            n,
            stats=stats,
            token=token,
            idempotency_key=key,
            digest=None if digest is None else digest.hexdigest(),
            raw=(kind, body) if self.store_reports else None,
            received_at=self.clock(),
        )

    def _aggregate(self, spec: Mechanism, reports: Reports) -> Stats:
        step = self.limits.aggregate_chunk
        try:
            if len(reports) <= step:
                return aggregate_one(spec, reports)
            # bounded scratch memory: aggregate a chunk at a time (merge is exact)
            parts = [
                aggregate_one(spec, reports[i : i + step]) for i in range(0, len(reports), step)
            ]
            return parts[0].merge(*parts[1:])
        except AggregationError as exc:
            raise self._fail(422, "rejected_by_spec", str(exc)) from exc
