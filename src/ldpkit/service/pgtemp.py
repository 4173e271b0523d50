"""A throwaway PostgreSQL server in a temporary directory (tests and benchmarks).

Uses the server binaries of an installed PostgreSQL (Debian's ``postgresql`` package puts
them in ``/usr/lib/postgresql/<version>/bin``): ``initdb`` a data directory, start
``postgres`` on 127.0.0.1 with a free port and a private socket directory, and remove
everything on :meth:`TemporaryPostgres.stop`. PostgreSQL refuses to run as root, so as root
the server runs as the ``postgres`` system user (or ``nobody``) via ``runuser``.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["TemporaryPostgres", "find_pg_bin"]


def find_pg_bin() -> Path | None:
    """Directory holding ``initdb`` and ``postgres``, or None if no server is installed."""
    candidates = []
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).resolve().parent)
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for c in candidates:
        if (c / "initdb").exists() and (c / "postgres").exists():
            return c
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TemporaryPostgres:
    """Start with :meth:`start`, get a SQLAlchemy URL from :attr:`url`, :meth:`stop` at the end.

    ``fsync`` stays on (the default): durability tests kill the collector, not the
    database, but benchmarks should pay the real commit cost.
    """

    def __init__(self, bin_dir: Path | None = None) -> None:
        found = bin_dir or find_pg_bin()
        if found is None:
            raise RuntimeError("PostgreSQL server binaries (initdb, postgres) must be installed")
        self.bin_dir = found
        self.root = Path(tempfile.mkdtemp(prefix="ldpkit-pg-"))
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.user: str | None = None
        if os.geteuid() == 0:
            import pwd

            for name in ("postgres", "nobody"):
                try:
                    pw = pwd.getpwnam(name)
                except KeyError:
                    continue
                self.user = name
                os.chown(self.root, pw.pw_uid, pw.pw_gid)
                break
            else:
                raise RuntimeError("running as root needs a 'postgres' or 'nobody' user")

    @property
    def url(self) -> str:
        """The SQLAlchemy URL of the server."""
        return f"postgresql+psycopg://ldpkit@127.0.0.1:{self.port}/postgres"

    def _cmd(self, *args: str) -> list[str]:
        if self.user is None:
            return list(args)
        return ["runuser", "-u", self.user, "--", *args]

    def start(self, timeout: float = 30.0) -> TemporaryPostgres:
        """Create the cluster and start the server; wait until it accepts connections."""
        data = self.root / "data"
        subprocess.run(
            self._cmd(
                str(self.bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                "ldpkit",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
            ),
            check=True,
            capture_output=True,
        )
        with open(self.root / "server.log", "wb") as log:  # the server keeps its own fd
            self.proc = subprocess.Popen(
                self._cmd(
                    str(self.bin_dir / "postgres"),
                    "-D",
                    str(data),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "-k",
                    str(self.root),
                    "-c",
                    "max_connections=100",
                    "-c",
                    "shared_buffers=64MB",
                ),
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                text = (self.root / "server.log").read_text(errors="replace")
                raise RuntimeError(f"postgres must start, it exited: {text[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
                ready = subprocess.run(
                    [
                        str(self.bin_dir / "pg_isready"),
                        "-h",
                        "127.0.0.1",
                        "-p",
                        str(self.port),
                    ],
                    capture_output=True,
                )
                if ready.returncode == 0:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"postgres must accept connections within {timeout} s")

    def stop(self) -> None:
        """Stop the server and remove its files."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # smart shutdown of our own server process
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> TemporaryPostgres:
        """Start the server."""
        return self.start()

    def __exit__(self, *exc: object) -> None:
        """Stop the server."""
        self.stop()
