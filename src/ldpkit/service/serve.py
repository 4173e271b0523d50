"""``ldpkit serve``.

Check the serving options, then run the collector with uvicorn in one process or several
(:func:`main`), and the housekeeping around it (the shared metrics directory, the header
read timeout carried to worker processes, the access log format).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .app import create_app
from .config import DEFAULT_DATABASE_URL, config_options, load_config

__all__ = ["app_from_config", "is_loopback", "main", "remove_stale_metrics_dirs"]

log = logging.getLogger("ldpkit.service")


def is_loopback(host: str) -> bool:
    """Return True for 127.0.0.0/8, ::1 and ``localhost``."""
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
    """Remove the ``ldpkit-metrics-*`` directories whose owning server no longer runs.

    In ``root``, the temporary directory by default. ``main`` removes its own at exit,
    but a server killed with -9 cannot. Directories without an owner file, or
    of a process still alive (or of another user), are kept. Returns those removed.
    """
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
    from sqlalchemy.engine import make_url

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
        # uvicorn's HTTP protocol plus a header read timeout, read from the
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


def app_from_config(config: str | os.PathLike[str] | Mapping[str, Any], **overrides: Any) -> Any:
    """Return a collector app from a config file path or an already-parsed config mapping.

    ``overrides`` (``database_url``, ``store_reports``, ``limits``...) win over the
    file's values.
    """
    data = dict(config) if isinstance(config, Mapping) else load_config(config)
    collections, options = config_options(data)
    options.update(overrides)
    return create_app(collections, options.pop("database_url", DEFAULT_DATABASE_URL), **options)
