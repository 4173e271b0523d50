"""ldpkit's HTTP collector: ingest report batches, roll their Stats up durably, serve estimates.

Needs the ``service`` extra (``pip install 'ldpkit[service]'``). Client code (randomizers)
never imports this package; clients only need :mod:`ldpkit.io` to encode their reports.

>>> from ldpkit import GRR
>>> from ldpkit.service import create_app
>>> app = create_app({"colors": GRR(epsilon=1.0, domain_size=3)}, "sqlite://")  # in memory
>>> sorted({r.path for r in app.routes if "collections" in r.path})  # doctest: +NORMALIZE_WHITESPACE
['/v1/admin/collections/{collection}/batches', '/v1/collections',
 '/v1/collections/{collection}', '/v1/collections/{collection}/buckets',
 '/v1/collections/{collection}/estimate', '/v1/collections/{collection}/stats']
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import shutil
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

try:
    import fastapi  # noqa: F401 - fail early with the install hint
    import sqlalchemy  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "ldpkit.service needs the service extra: pip install 'ldpkit[service]'"
    ) from exc

from ..encoder import Encoder
from ..spec import spec_from_dict
from .app import DEFAULT_DATABASE_URL, Collection, Limits, _check_origins, create_app
from .auth import Token, new_token, parse_tokens
from .quotas import QUOTA_KEYS, Quota, parse_quota
from .store import CollectorStore

__all__ = [
    "Collection",
    "CollectorStore",
    "Limits",
    "Quota",
    "Token",
    "app_from_config",
    "create_app",
    "is_loopback",
    "load_config",
    "main",
    "new_token",
]

log = logging.getLogger("ldpkit.service")

_TOP_KEYS = {
    "database_url",
    "store_reports",
    "bucket_seconds",
    "commit_window",
    "max_rollup_parts",
    "deleted_keys_seconds",
    "cors_origins",
    "limits",
    "quotas",
    "auth",
    "collections",
}
_LIMIT_KEYS = {"max_body_bytes", "max_decoded_bytes"}  # accepted at top level too (older files)


def load_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a collector config file (``.toml`` or ``.json``).

    The shape (TOML shown; JSON is the same structure)::

        database_url = "sqlite:///collector.db"   # optional
        store_reports = false                      # optional
        bucket_seconds = 3600                      # optional: roll-up bucket width
        commit_window = 0.003                      # optional: group-commit wait, seconds
        max_rollup_parts = 4096                    # optional: unfolded parts -> compact now
        deleted_keys_seconds = 2592000             # optional: deleted batches' keys kept 30 days
        cors_origins = ["https://example.org"]     # optional: browsers allowed to call

        [limits]                                   # optional: see ldpkit.service.Limits
        max_reports_per_batch = 100000

        [quotas]                                   # optional: per-token ingest quotas
        reports_per_minute = 1000000               # (see ldpkit.service.quotas)
        batches_per_second = 1000

        [auth]                                     # optional: bearer tokens, by sha256
        tokens = [{ name = "devices", scopes = ["ingest"], sha256 = "...", collections = ["browsers"] }]

        [collections.browsers]
        mechanism = "OLH"
        params = { epsilon = 1.0 }                 # domain_size defaults to len(categories)
        categories = ["chrome", "firefox", "safari"]
        unknown = "other"                          # optional: adds an "<other>" item
        missing = "item"                           # optional: adds a "<missing>" item
        description = "main browser"               # optional
    """
    path = Path(path)
    text = path.read_text()
    try:
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        raise ValueError(
            f"config {os.fspath(path)!r} must be valid {path.suffix or 'JSON'}: {exc}"
        ) from exc
    if not isinstance(data, dict):
        raise ValueError(f"config must be a table/object, got {type(data).__name__}")
    return data


def _collection(name: str, entry: Any) -> Collection:
    if not isinstance(entry, Mapping) or "mechanism" not in entry:
        raise ValueError(
            f"collections.{name} must have a 'mechanism' (and 'params'), got {entry!r}"
        )
    params = dict(entry.get("params", {}))
    encoder = None
    if entry.get("categories") is not None:
        encoder = Encoder(
            entry["categories"],
            unknown=entry.get("unknown", "error"),
            missing=entry.get("missing", "error"),
        )
        params.setdefault("domain_size", encoder.domain_size)
    spec = spec_from_dict({"mechanism": entry["mechanism"], "params": params})
    return Collection(spec, encoder=encoder, description=str(entry.get("description", "")))


def config_options(data: Mapping[str, Any]) -> tuple[dict[str, Collection], dict[str, Any]]:
    """Collections and ``create_app`` keyword arguments from a parsed config."""
    unknown = set(data) - _TOP_KEYS - _LIMIT_KEYS
    if unknown:
        raise ValueError(f"config keys must be among {sorted(_TOP_KEYS)}, got {sorted(unknown)}")
    entries = data.get("collections")
    if not isinstance(entries, Mapping) or not entries:
        raise ValueError("config must define at least one collection under 'collections'")
    collections = {name: _collection(name, entry) for name, entry in entries.items()}
    options: dict[str, Any] = {
        k: data[k]
        for k in (
            "database_url",
            "store_reports",
            "bucket_seconds",
            "commit_window",
            "max_rollup_parts",
            "deleted_keys_seconds",
        )
        if k in data
    }
    if "cors_origins" in data:
        origins = data["cors_origins"]
        if not isinstance(origins, list) or not all(isinstance(o, str) for o in origins):
            raise ValueError(f"cors_origins must be a list of origin strings, got {origins!r}")
        _check_origins(origins)  # at load: "*" is refused with its reason (issue 27)
        options["cors_origins"] = origins
    limits = dict(data.get("limits", {}))
    limits.update({k: data[k] for k in _LIMIT_KEYS if k in data})
    if limits:
        try:
            options["limits"] = Limits(**limits)
        except TypeError as exc:
            raise ValueError(
                f"limits must only set fields of ldpkit.service.Limits, got {sorted(limits)}"
            ) from exc
    if "quotas" in data:
        quotas = data["quotas"]
        if not isinstance(quotas, Mapping) or set(quotas) - set(QUOTA_KEYS):
            raise ValueError(
                f"quotas must be a table with keys among {list(QUOTA_KEYS)}, got {quotas!r}"
            )
        options["quotas"] = parse_quota(quotas, "quotas")
    if "auth" in data:
        auth = data["auth"]
        if not isinstance(auth, Mapping) or set(auth) != {"tokens"}:
            raise ValueError(f"auth must be a table with one key, tokens, got {auth!r}")
        options["tokens"] = parse_tokens(auth["tokens"], collections, options.get("quotas"))
    return collections, options


def app_from_config(config: str | os.PathLike[str] | Mapping[str, Any], **overrides: Any) -> Any:
    """A collector app from a config file path or an already-parsed config mapping.

    ``overrides`` (``database_url``, ``store_reports``, ``limits``...) win over the
    file's values.
    """
    data = dict(config) if isinstance(config, Mapping) else load_config(config)
    collections, options = config_options(data)
    options.update(overrides)
    return create_app(collections, options.pop("database_url", DEFAULT_DATABASE_URL), **options)


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _log_config(log_addresses: bool) -> dict[str, Any]:
    from uvicorn.config import LOGGING_CONFIG

    config = json.loads(json.dumps(LOGGING_CONFIG))
    if not log_addresses:  # privacy: the access log does not keep who sent what
        config["formatters"]["access"]["fmt"] = '%(levelprefix)s "%(request_line)s" %(status_code)s'
    return config


METRICS_DIR_PREFIX = "ldpkit-metrics-"
METRICS_OWNER = "owner.pid"
# The header read timeout (ldpkit.service._timeouts), carried to worker processes by this
# environment variable.
DEFAULT_HEADER_TIMEOUT = 5.0
HEADER_TIMEOUT_ENV = "LDPKIT_HEADER_TIMEOUT"


def remove_stale_metrics_dirs(root: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove the ``ldpkit-metrics-*`` directories (in ``root``, the temporary directory by
    default) whose owning server process no longer runs: ``main`` removes its own at exit,
    but a server killed with -9 cannot (issue 27). Directories without an owner file, or
    of a process still alive (or of another user), are kept. Returns those removed."""
    removed = []
    for path in Path(root or tempfile.gettempdir()).glob(f"{METRICS_DIR_PREFIX}*"):
        try:
            pid = int((path / METRICS_OWNER).read_text().strip())
        except (OSError, ValueError):
            continue
        try:
            os.kill(pid, 0)
            continue  # alive (or a reused pid: keep it, to be safe)
        except ProcessLookupError:
            pass
        except OSError:  # e.g. another user's process: alive
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path)
    return removed


def main(
    config: str | os.PathLike[str] | Mapping[str, Any],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    log_level: str = "info",
    access_log: bool = False,
    log_addresses: bool = False,
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    ssl_keyfile: str | os.PathLike[str] | None = None,
    ssl_certfile: str | os.PathLike[str] | None = None,
    **overrides: Any,
) -> None:
    """Serve the collector with uvicorn until interrupted (what ``ldpkit serve`` calls).

    Binds to localhost by default. Without ``[auth]`` in the config the collector is open
    to anyone who can reach it, so it then refuses any address but a loopback one. Serve
    TLS with ``ssl_keyfile`` and ``ssl_certfile`` (PEM files, both or neither), or put a
    TLS-terminating reverse proxy in front of it (docs/collector.md) before exposing it. A
    connection whose request head (request line and headers) has not arrived within
    ``header_timeout`` seconds (5 by default) is closed
    (:mod:`ldpkit.service._timeouts`). ``workers > 1`` runs
    that many processes (they share the database, so it must be PostgreSQL: SQLite allows
    one writer process); on Linux each process accepts on a ``SO_REUSEPORT`` socket of
    its own, so the kernel spreads connections over them (:mod:`ldpkit.service.supervisor`),
    elsewhere they share uvicorn's one socket. Their ``/metrics`` counters are shared through memory-mapped files
    in ``LDPKIT_METRICS_DIR`` (a temporary directory, removed at exit, when unset). The
    access log is off unless ``access_log`` (a line per report is a per-user record, and at
    one report per request it costs more CPU than storing the report); it leaves client
    addresses out unless ``log_addresses``.
    """
    import uvicorn

    from .store import make_url
    from .supervisor import reuse_port_supported, serve_workers

    data = dict(config) if isinstance(config, Mapping) else load_config(config)
    collections, options = config_options(data)
    options.update(overrides)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    if (
        isinstance(header_timeout, bool)
        or not isinstance(header_timeout, (int, float))
        or not 0 < header_timeout <= 3600
    ):
        raise ValueError(
            f"header_timeout must be a number of seconds in (0, 3600], got {header_timeout!r}"
        )
    if (ssl_keyfile is None) != (ssl_certfile is None):
        raise ValueError(
            "ssl_keyfile and ssl_certfile must be given together (a PEM private key and its "
            f"certificate chain), got ssl_keyfile={ssl_keyfile!r}, ssl_certfile={ssl_certfile!r}"
        )
    for name, path in (("ssl_keyfile", ssl_keyfile), ("ssl_certfile", ssl_certfile)):
        if path is not None and not Path(path).is_file():
            raise ValueError(f"{name} must be an existing PEM file, got {os.fspath(path)!r}")
    url = options.get("database_url", DEFAULT_DATABASE_URL)
    if workers > 1 and make_url(url).get_backend_name() == "sqlite":
        raise ValueError(
            f"workers must be 1 with SQLite (one writer process), got {workers}; use a "
            "postgresql+psycopg:// database_url for several worker processes"
        )
    if options.get("tokens") is None:
        if not is_loopback(host):
            raise ValueError(
                f"host must be a loopback address (127.0.0.1, ::1, localhost) when the config "
                f"has no [auth] tokens, got {host!r}: anyone could post reports or read estimates"
            )
        log.warning(
            "ldpkit collector: no [auth] configured, open to every local client on %s:%d "
            "(add [auth] tokens before exposing it)",
            host,
            port,
        )
    kwargs: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_level": log_level,
        "access_log": access_log,
        "log_config": _log_config(log_addresses),
        # uvicorn's HTTP protocol plus a header read timeout (issue 27), read from the
        # environment in every worker process
        "http": "ldpkit.service._timeouts:HeaderTimeoutProtocol",
    }
    os.environ[HEADER_TIMEOUT_ENV] = repr(float(header_timeout))
    if ssl_keyfile is not None:
        kwargs["ssl_keyfile"] = os.fspath(ssl_keyfile)
        kwargs["ssl_certfile"] = os.fspath(ssl_certfile)  # type: ignore[arg-type]
    options.setdefault("freeze_gc", True)  # a process of its own: see create_app
    if workers == 1:
        app = create_app(collections, options.pop("database_url", DEFAULT_DATABASE_URL), **options)
        uvicorn.run(app, **kwargs)
        return
    # Each worker process builds its own app from the same config (factory import string).
    # /metrics counters are shared through files in one directory (any worker may answer).
    made_dir = None
    metrics_dir = options.get("metrics_dir") or os.environ.get("LDPKIT_METRICS_DIR")
    if metrics_dir is None:
        remove_stale_metrics_dirs()
        metrics_dir = made_dir = tempfile.mkdtemp(prefix=METRICS_DIR_PREFIX)
        # Who owns it: a server killed with -9 cannot remove it, the next one does.
        (Path(metrics_dir) / METRICS_OWNER).write_text(str(os.getpid()))
    shared = {
        k: v for k, v in overrides.items() if isinstance(v, (str, int, float, bool, type(None)))
    }
    os.environ["LDPKIT_COLLECTOR_CONFIG"] = json.dumps(data)
    os.environ["LDPKIT_COLLECTOR_OVERRIDES"] = json.dumps(
        {"freeze_gc": options["freeze_gc"], **shared, "metrics_dir": metrics_dir}
    )
    try:
        # Fail here, once, on a bad config or database (and create the tables before the fork).
        options.pop("metrics_dir", None)
        check = create_app(
            collections, options.pop("database_url", DEFAULT_DATABASE_URL), **options
        )
        check.state.collector.store.close()
        if reuse_port_supported():  # one socket per process: connections spread evenly
            serve_workers("ldpkit.service.worker_app:app", workers, **kwargs)
        else:
            uvicorn.run("ldpkit.service.worker_app:app", factory=True, workers=workers, **kwargs)
    finally:
        if made_dir is not None:
            shutil.rmtree(made_dir, ignore_errors=True)
