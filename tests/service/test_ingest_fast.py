"""The lean ingest path (raw ASGI, JSON rows aggregated per commit group) answers exactly like
the FastAPI route it stands in for."""

import json
import re
import tracemalloc

import numpy as np
import pytest
from fastapi import HTTPException
from fastapi.testclient import TestClient
from sqlalchemy.exc import OperationalError

from ldpkit import GRR, OLH, OUE, PiecewiseMechanism, Reports, SquareWave, Stats
from ldpkit.io import reports_from_dict, reports_to_bytes, reports_to_dict
from ldpkit.service import Limits, app_from_config, create_app, new_token
from ldpkit.service.auth import parse_tokens
from ldpkit.service.commit import ReportRows
from ldpkit.service.decode import _fast_json_reports, _FastField

SPEC = OLH(epsilon=2.0, domain_size=50)
ORIGIN = "https://dashboard.example.org"


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'c.db'}"


def _one(value, seed):
    return reports_to_dict(SPEC.randomize([value], rng=seed))


def test_fast_path_answers_like_the_fastapi_route(tmp_path, monkeypatch):
    devices, devices_hash = new_token()
    analyst, analyst_hash = new_token()
    tokens = parse_tokens(
        [
            {"name": "devices", "scopes": ["ingest"], "sha256": devices_hash},
            {"name": "analyst", "scopes": ["read"], "sha256": analyst_hash},
        ]
    )
    ok = {"Authorization": f"Bearer {devices}"}
    read = {"Authorization": f"Bearer {analyst}"}
    cases = [
        ("x", {}, _one(1, 1)),  # 401
        ("x", {"Authorization": "Bearer nope"}, _one(1, 1)),  # 401, unknown token
        ("x", read, _one(1, 1)),  # 403
        ("nope", ok, _one(1, 1)),  # 404
        ("x", {**ok, "Idempotency-Key": "a b"}, _one(1, 1)),  # 422, key
        ("x", ok, b""),  # 422, empty
        ("x", ok, b"x" * 5_001),  # 413
        ("x", ok, {**_one(1, 1), "fingerprint": "0" * 16}),  # 409
        ("x", ok, {**_one(1, 1), "arrays": {"values": [300]}}),  # 422, fields
        ("x", {**ok, "Idempotency-Key": "k1"}, _one(2, 2)),  # 201
        ("x", {**ok, "Idempotency-Key": "k1"}, _one(2, 2)),  # 200, retry
        ("x", {**ok, "Idempotency-Key": "k1"}, _one(3, 3)),  # 422, key reused
    ]
    answers = {}
    # Without Origin the fast path answers; with one, the FastAPI route (and CORS headers).
    for i, origin in enumerate((None, ORIGIN)):
        app = create_app(
            {"x": SPEC},
            f"sqlite:///{tmp_path / f'c{i}.db'}",
            tokens=tokens,
            cors_origins=[ORIGIN],
            limits=Limits(max_body_bytes=5_000),
        )
        extra = {"Origin": origin} if origin else {}
        got = []
        with TestClient(app) as c:
            for collection, headers, body in cases:
                kwargs = {"json": body} if isinstance(body, dict) else {"content": body}
                resp = c.post(f"/v1/reports/{collection}", headers={**headers, **extra}, **kwargs)
                assert resp.headers["content-type"] == "application/json"
                assert ("access-control-allow-origin" in resp.headers) == (origin is not None)
                detail = resp.json().get("detail")
                if isinstance(detail, str):  # batch ids differ between the two databases
                    detail = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "<id>", detail)
                got.append((resp.status_code, detail, resp.headers.get("www-authenticate")))

            def down(*args, **kwargs):
                raise OperationalError("COMMIT", {}, Exception("disk I/O error"))

            monkeypatch.setattr(app.state.collector.store.sqlite, "_commit_group", down)
            resp = c.post("/v1/reports/x", json=_one(4, 4), headers={**ok, **extra})
            assert resp.status_code == 503 and resp.headers["retry-after"] == "5"
            got.append((resp.status_code, resp.json()["detail"], None))
            monkeypatch.undo()
            assert c.get("/v1/collections/x", headers=read).json()["n"] == 1
            metrics = c.get("/metrics", headers=read).text
        assert 'reason="unauthenticated",status="401"' in metrics
        assert 'reason="database_unavailable",status="503"' in metrics
        answers[origin] = got
    statuses = [a[0] for a in answers[None]]
    assert statuses == [401, 401, 403, 404, 422, 422, 413, 409, 422, 201, 200, 422, 503]
    assert answers[None][0][2] == "Bearer"
    assert answers[None] == answers[ORIGIN]


SPECS = [
    SPEC,
    GRR(epsilon=1.0, domain_size=7),
    OUE(epsilon=1.0, domain_size=9),  # 2-D bits: not a row batch
    SquareWave(epsilon=1.0, low=0.0, high=10.0, buckets=16),
    PiecewiseMechanism(epsilon=1.0, low=-1.0, high=1.0),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: type(s).__name__)
def test_json_rows_decode_to_the_same_reports_as_the_general_decoder(spec):
    low, high = getattr(spec, "low", 0), getattr(spec, "high", 5)
    values = np.linspace(low, high, 5) if hasattr(spec, "low") else np.arange(5)
    reports = spec.randomize(values, rng=7)
    data = json.loads(json.dumps(reports_to_dict(reports)))
    template = {k: _FastField(v.dtype, v.shape[1:]) for k, v in reports.arrays.items()}
    fast = _fast_json_reports(data, spec, template)
    assert fast is not None  # fixed-width integer rows (OUE's packed bits) too
    got = fast.to_reports(spec) if isinstance(fast, ReportRows) else fast
    assert got.equals(reports_from_dict(data, expected=spec))
    assert got.equals(reports)


def test_values_outside_their_dtype_never_reach_the_group(db):
    app = create_app({"x": SPEC}, db)
    with TestClient(app) as c:
        bad_bodies = []
        for field, value in [
            ("values", 256),  # uint8
            ("values", -1),
            ("seeds", 2**64),  # uint64
            ("seeds", -5),
            ("values", True),  # bools are not integers here
            ("values", 1.0),
        ]:
            body = _one(1, 1)
            body["arrays"][field]["data"] = [value]
            bad_bodies.append(body)
        for body in bad_bodies:
            resp = c.post("/v1/reports/x", json=body)
            assert resp.status_code == 422, (body["arrays"], resp.text)
        assert c.post("/v1/reports/x", json=_one(1, 1)).status_code == 201
        assert c.get("/v1/collections/x").json()["n"] == 1


def _oue_rows_mutations():
    ok = {"dtype": "|u1", "shape": [1, 2], "data": [[6, 35]]}
    yield "ok", ok, True
    yield "bare list", [[6, 35]], True
    yield "no shape", {"data": [[6, 35]]}, True
    yield "string entry", {**ok, "data": [["6", 35]]}, True  # the general decoder's leniency
    yield "256", {**ok, "data": [[256, 35]]}, False
    yield "-1", {**ok, "data": [[-1, 35]]}, False
    yield "bool", {**ok, "data": [[True, 35]]}, False
    yield "float", {**ok, "data": [[6.0, 35]]}, False
    yield "short row", {"data": [[6]]}, False
    yield "long row", {"data": [[6, 35, 1]]}, False
    yield "ragged rows", {"data": [[6, 35], [1]]}, False
    yield "flat", {"data": [6, 35]}, False
    yield "wrong shape", {**ok, "shape": [2, 1]}, False
    yield "wrong dtype", {**ok, "dtype": "<u2"}, False
    yield "empty", {**ok, "shape": [0, 2], "data": []}, False


@pytest.mark.parametrize("case", list(_oue_rows_mutations()), ids=lambda c: c[0])
def test_fixed_width_rows_are_accepted_exactly_when_the_general_decoder_accepts(case, db):
    _, entry, accepted = case
    spec = OUE(epsilon=1.0, domain_size=16)  # 2 bytes of packed bits per report
    body = {**reports_to_dict(spec.randomize([3], rng=1)), "arrays": {"bits": entry}}
    template = {"bits": _FastField(np.dtype(np.uint8), (2,))}
    fast = _fast_json_reports(json.loads(json.dumps(body)), spec, template)
    try:
        general = reports_from_dict(body, expected=spec, dtypes={"bits": np.dtype(np.uint8)})
        spec.aggregate(general)
    except (ValueError, TypeError):
        general = None
    assert (general is not None) == accepted
    if fast is not None:  # what the fast path takes, the general path takes, same arrays
        assert general is not None
        got = fast.to_reports(spec) if isinstance(fast, ReportRows) else fast
        assert got.equals(general)
    with TestClient(create_app({"o": spec}, db)) as c:
        resp = c.post("/v1/reports/o", json=body)
        assert resp.status_code == (201 if accepted else 422), resp.text


def test_fixed_width_rows_of_a_group_aggregate_like_one_batch(db):
    spec = OUE(epsilon=1.0, domain_size=20)
    reports = spec.randomize(np.arange(40) % 20, rng=5)
    with TestClient(create_app({"o": spec}, db)) as c:
        for i in range(len(reports)):
            resp = c.post("/v1/reports/o", json=reports_to_dict(reports[i : i + 1]))
            assert resp.status_code == 201
        stats = c.get("/v1/collections/o/stats").json()
    assert Stats.from_dict(stats) == spec.aggregate(reports)
    # and not just any 40 reports: one flipped bit changes the stored Stats
    other = reports.arrays["bits"].copy()
    other[0, 0] ^= 1
    assert Stats.from_dict(stats) != spec.aggregate(Reports(spec, bits=other))


def _peak(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_npz_bodies_decode_in_bounded_memory_or_are_refused_unread(db):
    spec = GRR(epsilon=1.0, domain_size=1000)
    n = 4_000_000  # 8 MB of uint16 once decoded, ~10 KB on the wire
    body = reports_to_bytes(Reports(spec, values=np.zeros(n, dtype=np.uint16)))
    roomy = Limits(max_reports_per_batch=n, max_decoded_bytes=16 * 2**20)
    collector = create_app({"g": spec}, db, limits=roomy).state.collector
    items = []
    # The first npz body of a process imports the whole mechanism registry (its header's
    # spec is read by name), ~3 MB of module objects, once: not per batch, so warm it up.
    collector.decoder.prepare("g", reports_to_bytes(spec.randomize([0], rng=0)), "", "", None)
    peak = _peak(lambda: items.append(collector.decoder.prepare("g", body, "", "", None)))
    assert items[0].n == n and items[0].stats.n == n
    assert peak < 3 * 2**20  # 65,536 reports at a time, never the 8 MB array
    # A body declaring more than max_decoded_bytes: 413 from the headers, nothing decoded.
    tight_small = create_app({"g": spec}, db, max_decoded_bytes=4 * 2**20).state.collector
    errors = []

    def refused():
        try:
            tight_small.decoder.prepare("g", body, "", "", None)
        except HTTPException as exc:
            errors.append(exc)

    assert _peak(refused) < 2**20
    assert errors[0].status_code == 413 and "must decode to at most 4194304" in errors[0].detail
    with TestClient(create_app({"g": spec}, db, max_decoded_bytes=4 * 2**20)) as c:
        resp = c.post("/v1/reports/g", content=body, headers={"Content-Type": "application/x-npz"})
        assert resp.status_code == 413 and resp.json()["detail"].startswith("batch must decode")


def test_commit_window_is_configurable_and_checked(tmp_path):
    config = {
        "database_url": f"sqlite:///{tmp_path / 'w.db'}",
        "commit_window": 0,
        "collections": {"x": {"mechanism": "OLH", "params": SPEC.params()}},
    }
    app = app_from_config(config)
    assert app.state.collector.committer.window == 0
    with TestClient(app) as c:  # no waiting at all still commits and answers
        assert c.post("/v1/reports/x", json=_one(1, 1)).status_code == 201
    assert create_app({"x": SPEC}, "sqlite://").state.collector.committer.window == 0.003
    for bad in (-0.001, 2, float("nan")):
        with pytest.raises(ValueError, match="commit_window must be a finite number >= 0"):
            app_from_config({**config, "commit_window": bad})
    with pytest.raises(TypeError, match="commit_window"):
        create_app({"x": SPEC}, "sqlite://", commit_window="1ms")


def _one_report_bodies(spec):
    """A one-report body as json.dumps writes it, and variants around the matcher's edges."""
    reports = spec.randomize([1] if not hasattr(spec, "low") else [0.5], rng=3)
    d = reports_to_dict(reports)
    field = next(iter(d["arrays"]))
    entry = d["arrays"][field]
    plain = json.dumps(d)
    yield "default separators", plain.encode()
    yield "compact", json.dumps(d, separators=(",", ":")).encode()
    yield "JSON whitespace", json.dumps(d, indent="\t").replace(": ", ":\r\n ").encode() + b"\n"
    yield "other whitespace", plain.replace(": ", ":\x0b").encode()
    yield "leading space", b" " + plain.encode()
    yield "long whitespace runs", plain.replace(": ", ": " + " \n" * 5000).encode()
    yield "no format", json.dumps({k: v for k, v in d.items() if k != "format"}).encode()
    yield "no mechanism", json.dumps({k: v for k, v in d.items() if k != "mechanism"}).encode()
    yield "other format", json.dumps({**d, "format": "ldpkit.reports/2"}).encode()
    yield "keys reordered", json.dumps(dict(reversed(list(d.items())))).encode()
    yield "wrong fingerprint", json.dumps({**d, "fingerprint": "0" * 16}).encode()
    other = spec.replace(epsilon=spec.epsilon * 1.3)
    yield "other mechanism", json.dumps({**d, "mechanism": other.to_dict()}).encode()
    yield "trailing data", plain.encode() + b"{}"
    yield "duplicate key", plain.replace('{"format"', '{"fingerprint": "0", "format"', 1).encode()
    yield "dtype by name", json.dumps(d).replace(entry["dtype"], np.dtype(entry["dtype"]).name)
    yield "other dtype", json.dumps(d).replace(f'"{entry["dtype"]}"', '"<i8"').encode()
    yield "extra entry key", json.dumps({**d, "arrays": {**d["arrays"], field: {**entry, "x": 1}}})
    flat = entry["data"][0]
    if isinstance(flat, list):  # a fixed-width row (OUE's packed bits)
        row = json.dumps(flat)
        rest = ", ".join(map(str, flat[1:]))
        for name, text in [
            ("row zero", "[0, " + rest + "]"),
            ("row minus zero", "[-0, " + rest + "]"),
            ("row 256", "[256, " + rest + "]"),
            ("row negative", "[-1, " + rest + "]"),
            ("row leading zero", "[01, " + rest + "]"),
            ("row empty item", "[1,, " + rest + "]"),
            ("row trailing comma", "[1, " + rest + ",]"),
            ("row lone sign", "[-, " + rest + "]"),
            ("row float", "[1.0, " + rest + "]"),
            ("row short", "[" + rest + "]"),
            ("row long", "[1, 2, " + rest + "]"),
            ("row empty", "[]"),
            ("row whitespace", row.replace(", ", " ,\n\t")),
        ]:
            yield name, plain.replace(f'"data": [{row}]', f'"data": [{text}]', 1)
    else:
        for name, text in [
            ("zero", "0"),
            ("minus zero", "-0"),
            ("negative", "-1"),
            ("leading zero", "01"),
            ("float", "1.0"),
            ("exponent", "1e2"),
            ("2**64", str(2**64)),
            ("u64 max", str(2**64 - 1)),
            ("256", "256"),
            ("many digits", "9" * 40),
            ("string", '"1"'),
            ("true", "true"),
        ]:
            yield name, plain.replace(f'"data": [{json.dumps(flat)}]', f'"data": [{text}]', 1)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: type(s).__name__)
def test_one_report_matcher_decodes_exactly_like_json_loads(spec, db):
    app = create_app({"x": spec}, db)
    collector = app.state.collector.decoder  # the one place bodies are decoded
    matcher = collector.one_report.get("x")
    assert (matcher is not None) == (not hasattr(spec, "low"))  # integer fields only
    if matcher is not None:  # the usual bodies take it (and so skip json.loads)
        for i in range(3):
            body = json.dumps(reports_to_dict(spec.randomize([i], rng=i))).encode()
            assert matcher.match(body, 32) is not None

    def decode(body, limits):
        collector.limits = limits
        try:
            got = collector.decode_json("x", body, "application/json")
        except HTTPException as exc:
            return exc.status_code, exc.detail
        return "ok", (got.to_reports(spec) if isinstance(got, ReportRows) else got)

    for limits in (Limits(), Limits(max_json_depth=4), Limits(max_json_bytes=64)):
        for name, body in _one_report_bodies(spec):
            body = body.encode() if isinstance(body, str) else body
            collector.one_report = {} if matcher is None else {"x": matcher}
            fast = decode(body, limits)
            collector.one_report = {}
            general = decode(body, limits)
            if general[0] == "ok":
                assert fast[0] == "ok" and fast[1].equals(general[1]), name
            else:
                assert fast == general, name
