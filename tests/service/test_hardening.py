"""The collector's hardening: CORS wildcard, header timeout, TLS, what an
ingest token's 404 reveals, two Authorization headers, the "[auth]" message, metrics
directories left by kill -9, and the deleted-keys table's expiry."""

import datetime as dt
import os

import numpy as np
import pytest
from fastapi.testclient import TestClient

from ldpkit import GRR
from ldpkit.io import reports_to_dict
from ldpkit.service import app_from_config, create_app, new_token
from ldpkit.service.auth import parse_tokens
from ldpkit.service.store import BatchDeleted, CollectorStore, PendingBatch, reports_digest

SPEC = GRR(epsilon=1.0, domain_size=8)


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'c.db'}"


def _tokens():
    made = {name: new_token() for name in ("devices", "analyst")}
    config = [
        {"name": "devices", "scopes": ["ingest"], "sha256": made["devices"][1]},
        {"name": "analyst", "scopes": ["read"], "sha256": made["analyst"][1]},
    ]
    return {k: f"Bearer {v[0]}" for k, v in made.items()}, parse_tokens(config)


def _body(seed=0):
    return reports_to_dict(SPEC.randomize(np.array([seed % 8]), rng=seed))


# -- CORS ---------------------------------------------------------------------------------
@pytest.mark.parametrize("origins", [["*"], ["https://ok.example", "*"], ["https://*.example"]])
def test_a_wildcard_cors_origin_is_refused_at_config_load(db, origins):
    config = {"database_url": db, "cors_origins": origins, "collections": {"c": SPEC.to_dict()}}
    with pytest.raises(ValueError, match=r"cors_origins must list each origin .* wildcard"):
        app_from_config(config)
    with pytest.raises(ValueError, match="Access-Control-Allow-Origin: \\*"):
        create_app({"c": SPEC}, db, cors_origins=origins)


def test_malformed_cors_origins_are_refused_and_explicit_ones_served(db):
    for bad in (["https://ok.example/path"], ["ok.example"], "https://ok.example"):
        with pytest.raises(ValueError, match="cors_origins must be"):
            create_app({"c": SPEC}, db, cors_origins=bad)
    auth, tokens = _tokens()
    app = create_app({"c": SPEC}, db, cors_origins=["https://ok.example"], tokens=tokens)
    with TestClient(app) as c:
        r = c.get(
            "/v1/collections/c",
            headers={"Origin": "https://ok.example", "Authorization": auth["analyst"]},
        )
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "https://ok.example"
        r = c.get(
            "/v1/collections/c",
            headers={"Origin": "https://evil.example", "Authorization": auth["analyst"]},
        )
        assert "access-control-allow-origin" not in r.headers


# -- what an ingest token learns; two Authorization headers -------------------------------
@pytest.mark.parametrize("origin", [None, "https://ok.example"])
def test_an_ingest_tokens_404_does_not_list_the_collections(db, origin):
    auth, tokens = _tokens()
    app = create_app(
        {"c": SPEC, "secret-survey": SPEC}, db, tokens=tokens, cors_origins=["https://ok.example"]
    )
    headers = {"Authorization": auth["devices"]}
    if origin:  # the FastAPI route (browsers); without: the raw-ASGI fast path
        headers["Origin"] = origin
    with TestClient(app) as c:
        r = c.post("/v1/reports/nope", json=_body(), headers=headers)
        assert r.status_code == 404
        assert r.json()["detail"] == "collection 'nope' is not served here"
        assert "secret-survey" not in r.text
        # a reader may still be told what exists
        r = c.get("/v1/collections/nope", headers={"Authorization": auth["analyst"]})
        assert r.status_code == 404 and "secret-survey" in r.json()["detail"]


@pytest.mark.parametrize("origin", [None, "https://ok.example"])
@pytest.mark.parametrize("order", ["good-first", "bad-first"])
def test_two_authorization_headers_are_refused_on_both_paths(db, origin, order):
    auth, tokens = _tokens()
    app = create_app({"c": SPEC}, db, tokens=tokens, cors_origins=["https://ok.example"])
    pair = [auth["devices"], "Bearer not-a-token"]
    if order == "bad-first":
        pair.reverse()
    headers = [("Authorization", pair[0]), ("Authorization", pair[1])]
    headers += [("Content-Type", "application/json")]
    if origin:
        headers.append(("Origin", origin))
    import json

    with TestClient(app) as c:
        r = c.post("/v1/reports/c", content=json.dumps(_body()), headers=headers)
        assert r.status_code == 400, r.text
        assert r.json()["detail"] == "Authorization must be sent once, got 2 headers"
        r = c.get("/v1/collections/c", headers=[("Authorization", auth["analyst"])] * 2)
        assert r.status_code == 400
        assert c.get("/v1/collections/c/stats").status_code == 401  # (none: as before)
        assert c.get("/v1/collections/c").status_code == 401
        assert (
            c.get("/v1/collections/c", headers={"Authorization": auth["analyst"]}).status_code
            == 200
        )


# -- the deleted-keys table expires -------------------------------------------------------
def _keyed(key, seed):
    r = SPEC.randomize([seed % 8, (seed + 3) % 8], rng=seed)
    return PendingBatch(
        "c", len(r), stats=SPEC.aggregate(r), idempotency_key=key, digest=reports_digest(r)
    )


def _deleted_keys(store):
    from sqlalchemy import func, select

    from ldpkit.service.store import deleted_keys_table

    with store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(deleted_keys_table)).scalar_one()


def test_deleted_keys_expire_after_the_retry_window(db):
    store = CollectorStore(db)
    store.register("c", SPEC, 3600)
    try:
        assert store.deletes.deleted_keys_seconds == 30 * 86400  # the documented default
        store.commit_group([_keyed(f"k{i}", i) for i in range(5)])
        store.delete_batches("c", token="")
        assert _deleted_keys(store) == 5
        (again,) = store.commit_group([_keyed("k1", 1)])
        assert isinstance(again, BatchDeleted)  # within the window: refused
        now = dt.datetime.now(dt.UTC)
        assert store.expire_deleted_keys(now + dt.timedelta(days=29)) == 0
        assert _deleted_keys(store) == 5
        assert store.expire_deleted_keys(now + dt.timedelta(days=31)) == 5
        assert _deleted_keys(store) == 0
        (later,) = store.commit_group([_keyed("k1", 1)])  # past the window: a new batch
        assert not isinstance(later, Exception) and not later.duplicate
        # each delete expires what is older than the window
        store.deletes.deleted_keys_seconds = 0.0
        store.commit_group([_keyed("k9", 9)])
        store.delete_batches("c", token="")
        assert _deleted_keys(store) == 0
    finally:
        store.close()


def test_the_compaction_expires_deleted_keys_about_once_an_hour(db, monkeypatch):
    store = CollectorStore(db)
    store.register("c", SPEC, 3600)
    calls = []
    monkeypatch.setattr(store.deletes, "expire_deleted_keys", lambda: calls.append(1) or 0)
    try:
        for i in range(3):
            store.commit_group([_keyed(f"k{i}", i)])
            store.try_compact()
        assert calls == [1]  # the first compaction, not the next ones within the hour
        store.compaction._last_expire -= 3600
        store.try_compact()
        assert calls == [1, 1]
    finally:
        store.close()


# -- the command line: "[auth]" survives rich; TLS and header-timeout options -----------------
def test_the_refusal_to_bind_every_interface_keeps_auth_in_its_message(tmp_path):
    from typer.testing import CliRunner

    from ldpkit.cli import app

    config = tmp_path / "c.toml"
    config.write_text(
        '[collections.a]\nmechanism = "GRR"\nparams = {epsilon = 1.0, domain_size = 3}\n'
    )
    result = CliRunner().invoke(app, ["serve", str(config), "--host", "0.0.0.0"])
    assert result.exit_code == 2
    line = " ".join(result.output.split())
    assert "when the config has no [auth] tokens" in line, line
    for args, message in [
        (["--header-timeout", "0"], "header_timeout must be a number of seconds in (0, 3600]"),
        (["--ssl-keyfile", str(config)], "ssl_keyfile and ssl_certfile must be given together"),
        (
            ["--ssl-keyfile", str(tmp_path / "no.pem"), "--ssl-certfile", str(config)],
            "ssl_keyfile must be an existing PEM file",
        ),
    ]:
        result = CliRunner().invoke(app, ["serve", str(config), *args])
        assert result.exit_code == 2
        assert message in " ".join(result.output.split()), result.output


# -- real servers: header timeout, TLS, metrics directories --------------------------------
def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(tmp_path, *, env=None, ready=None, **main_kwargs):
    """``ldpkit.service.main`` in a process (group) of its own; waits until ``ready()``."""
    import json
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    config = tmp_path / "collector.json"
    config.write_text(
        json.dumps(
            {
                "database_url": main_kwargs.pop("database_url", f"sqlite:///{tmp_path / 'c.db'}"),
                "collections": {"c": SPEC.to_dict()},
            }
        )
    )
    port = _free_port()
    src = str(Path(__file__).resolve().parents[2] / "src")
    code = (
        "from ldpkit.service import main; "
        f"main({str(config)!r}, port={port}, log_level='error', **{main_kwargs!r})"
    )
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = src + os.pathsep + os.environ.get("PYTHONPATH", "")
    log = tmp_path / f"server.{port}.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            env=full_env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(log.read_text(errors="replace")[-3000:])
        try:
            if (ready or _healthy)(port):
                return proc, port
        except OSError:
            pass
        time.sleep(0.1)
    _stop(proc, "KILL")
    raise RuntimeError("collector did not start")


def _healthy(port):
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
        return r.status == 200


def _stop(proc, how="TERM"):
    import os
    import signal

    try:
        os.killpg(proc.pid, getattr(signal, f"SIG{how}"))
    except ProcessLookupError:
        return
    proc.wait(30)


def _read_response(sock) -> bytes:
    """Read one whole HTTP/1.1 response (head and Content-Length body) from ``sock``.

    A response may arrive in several segments (its head and body apart, on a loaded
    machine): reading only what one ``recv`` returns would leave its body to be taken
    for the next response.
    """
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed inside a response head: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside a response body"
        body += chunk
    assert len(body) == length, "more bytes than one response"
    return head + b"\r\n\r\n" + body


def test_half_sent_requests_are_closed_after_the_header_timeout(tmp_path):
    import socket
    import time

    proc, port = _serve(tmp_path, header_timeout=1.0)
    opened = []
    try:
        for i in range(50):  # half a request line, half a head, or nothing at all
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            opened.append(s)
            s.sendall([b"", b"POST /v1/rep", b"POST /v1/reports/c HTTP/1.1\r\nHost: x\r\n"][i % 3])
        half = list(opened)
        start = time.monotonic()
        # a whole request meanwhile is answered, and its keep-alive connection is not
        # cut while its next request's head arrives in time
        ok = socket.create_connection(("127.0.0.1", port), timeout=10)
        opened.append(ok)
        ok.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _read_response(ok).startswith(b"HTTP/1.1 200")
        for s in half:
            assert s.recv(100) == b""  # closed by the server (a timeout raises instead)
        waited = time.monotonic() - start
        assert 0.5 < waited < 30.0, waited  # (1 s; generous: a shared, loaded machine)
        ok.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _read_response(ok).startswith(b"HTTP/1.1 200")
    finally:
        for s in opened:  # closed on failure too: no unclosed socket warns in a later test
            s.close()
        _stop(proc)


def _self_signed(tmp_path):
    """A self-signed certificate for 127.0.0.1 (cryptography if installed, else openssl)."""
    import shutil
    import subprocess

    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    try:
        import cryptography  # noqa: F401
    except ImportError:
        if shutil.which("openssl") is None:
            pytest.skip("neither the cryptography package nor the openssl command is installed")
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                str(key),
                "-out",
                str(cert),
                "-days",
                "1",
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ],
            check=True,
            capture_output=True,
        )
        return key, cert
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(private, hashes.SHA256())
    )
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return key, cert


def test_serve_over_tls_with_a_key_and_certificate(tmp_path):
    import json
    import ssl
    import urllib.request

    key, cert = _self_signed(tmp_path)
    context = ssl.create_default_context(cafile=str(cert))

    def ready(port):
        with urllib.request.urlopen(
            f"https://127.0.0.1:{port}/healthz", timeout=1, context=context
        ) as r:
            return r.status == 200

    proc, port = _serve(tmp_path, ready=ready, ssl_keyfile=str(key), ssl_certfile=str(cert))
    try:
        req = urllib.request.Request(
            f"https://127.0.0.1:{port}/v1/reports/c",
            data=json.dumps(_body()).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=10, context=context) as r:
            assert r.status == 201
        with pytest.raises(OSError):  # plain HTTP is not served (URLError, disconnected)
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).read()
    finally:
        _stop(proc)


def test_stale_metrics_directories_are_removed_and_live_ones_kept(tmp_path):
    import subprocess
    import sys

    from ldpkit.service.serve import METRICS_OWNER, remove_stale_metrics_dirs

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # (its pid is free now; reuse within this test is unlikely and only keeps it)
    made = {}
    for name, owner in [("dead", str(dead.pid)), ("alive", str(os.getpid())), ("unowned", None)]:
        d = tmp_path / f"ldpkit-metrics-{name}"
        d.mkdir()
        (d / "ldpkit-metrics-1.bin").write_bytes(b"\0" * 8)
        if owner is not None:
            (d / METRICS_OWNER).write_text(owner)
        made[name] = d
    (tmp_path / "other-dir").mkdir()
    assert remove_stale_metrics_dirs(tmp_path) == [made["dead"]]
    assert not made["dead"].exists()
    assert made["alive"].exists() and made["unowned"].exists() and (tmp_path / "other-dir").exists()


def test_a_workers_server_killed_with_9_leaves_no_metrics_directory_behind(
    tmp_path, fresh_postgres
):
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {"TMPDIR": str(temp)}
    left = []
    for round_ in range(2):
        proc, _ = _serve(tmp_path, env=env, database_url=fresh_postgres, workers=2)
        dirs = sorted(temp.glob("ldpkit-metrics-*"))
        assert len(dirs) == 1, dirs  # the previous (killed) server's is gone
        assert (dirs[0] / "owner.pid").read_text() == str(proc.pid)
        left += dirs
        _stop(proc, "KILL" if round_ == 0 else "TERM")
    assert left[0] != left[1] and not left[0].exists()
    assert not left[1].exists()  # removed at a normal exit, as before


def test_the_retry_window_is_read_from_the_config_and_validated(db):
    config = {"database_url": db, "collections": {"c": SPEC.to_dict()}}
    app = app_from_config({**config, "deleted_keys_seconds": 86400})
    assert app.state.collector.store.deletes.deleted_keys_seconds == 86400.0
    app.state.collector.store.close()
    with pytest.raises(ValueError, match="deleted_keys_seconds must be a finite number >= 0"):
        app_from_config({**config, "deleted_keys_seconds": -1})
