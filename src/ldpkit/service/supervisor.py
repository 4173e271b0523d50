"""``ldpkit serve --workers N``: N uvicorn processes, each accepting on a socket of its own.

uvicorn's own ``--workers`` binds one listening socket that every process accepts from.
On Linux, whichever process wakes first takes every connection waiting, so a burst of
long-lived connections (a load balancer's or a proxy's keep-alive pool, a load generator)
often lands on one process: ``benchmarks/collector.py`` saw all 16 of wrk's connections on
one of two processes in most runs (16/0, 16/0, 15/1, 14/2, 13/3, 12/4), the other process
idle. Here each process listens on a socket of its own, all bound to the same address with
``SO_REUSEPORT``, and the kernel assigns each new connection to one of them by a hash of
its addresses and ports, whatever the processes are doing (Linux >= 3.9; splits of 16
seen: 8/8, 9/7, 10/6).

The supervisor (this process) listens on the sockets before it starts the processes and
keeps them, so a connection assigned to a process still starting, or to one that died,
waits in its socket's queue until the replacement process, which gets the same socket,
accepts it. Before binding, the address is bound once *without* ``SO_REUSEPORT``:
that fails if any other process listens there, so a second server on the same port is
refused instead of silently sharing its connections (the kernel only lets processes of the
same user share a port anyway).

A process that dies is started again on its socket at once if it had served a while; one
that dies soon after its start (a bad config, a database that refuses it) is started again
after a delay that doubles with each such exit (0.5 s up to 30 s, :class:`RestartBackoff`),
so a crash at start-up costs a few processes a minute instead of five a second.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import time
from typing import Any

__all__ = ["RestartBackoff", "reuse_port_supported", "serve_workers"]

log = logging.getLogger("ldpkit.service")


def reuse_port_supported() -> bool:
    """Return True where ``SO_REUSEPORT`` spreads connections over the sockets (Linux)."""
    return hasattr(socket, "SO_REUSEPORT") and os.uname().sysname == "Linux"


class RestartBackoff:
    """When to start a worker process again after it exited.

    A process that ran at least ``healthy_after`` seconds is replaced at once (a crash under
    load, a kill -9: its socket's connections are waiting); one that exited sooner failed at
    start-up or soon after, and the next start of that worker waits ``initial`` seconds,
    then twice as long after each further early exit, at most ``maximum``.
    """

    def __init__(
        self, initial: float = 0.5, maximum: float = 30.0, healthy_after: float = 10.0
    ) -> None:
        self.initial, self.maximum, self.healthy_after = initial, maximum, healthy_after
        self._next = initial

    def delay(self, ran_for: float) -> float:
        """Seconds to wait before the next start, for a process that ran ``ran_for`` s."""
        if ran_for >= self.healthy_after:
            self._next = self.initial
            return 0.0
        delay, self._next = self._next, min(self.maximum, self._next * 2)
        return delay


def _bind(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(addr)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _child(sock: socket.socket, app: str, kwargs: dict[str, Any]) -> None:
    import uvicorn

    config = uvicorn.Config(app, factory=True, **kwargs)
    uvicorn.Server(config).run(sockets=[sock])


def serve_workers(app: str, workers: int, host: str, port: int, **kwargs: Any) -> None:
    """Run ``workers`` uvicorn processes serving the app factory ``app`` until SIGINT/SIGTERM.

    Each process serves its own ``SO_REUSEPORT`` socket (see the module docstring); a
    process that exits is started again on the same socket. ``kwargs`` go to
    ``uvicorn.Config`` (log level, access log, log config).
    """
    probe = _bind(host, port, reuse_port=False)  # EADDRINUSE if anyone listens there
    probe.close()
    sockets = [_bind(host, port, reuse_port=True) for _ in range(workers)]
    for sock in sockets:  # listening now: connections wait for a process still starting
        sock.listen(int(kwargs.get("backlog", 2048)))
    ctx = multiprocessing.get_context("spawn")
    args = {"host": host, "port": port, **kwargs}

    started = [0.0] * workers  # monotonic start time of each worker's process
    restart_at: list[float | None] = [None] * workers  # a dead worker's next start
    backoff = [RestartBackoff() for _ in range(workers)]

    def start(i: int) -> Any:
        proc = ctx.Process(target=_child, args=(sockets[i], app, args), daemon=False)
        proc.start()
        started[i] = time.monotonic()
        restart_at[i] = None
        return proc

    stopping = False

    def stop(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    procs: list[Any] = []
    try:
        procs = [start(i) for i in range(workers)]
        while not stopping:
            time.sleep(0.2)
            now = time.monotonic()
            for i, proc in enumerate(procs):
                if stopping or proc.is_alive():
                    continue
                at = restart_at[i]
                if at is None:
                    delay = backoff[i].delay(now - started[i])
                    at = restart_at[i] = now + delay
                    log.warning(
                        "worker process %d exited (code %s) after %.1f s: starting another%s",
                        proc.pid,
                        proc.exitcode,
                        now - started[i],
                        f" in {delay:.1f} s" if delay else "",
                    )
                if now >= at:
                    procs[i] = start(i)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()  # SIGTERM: uvicorn's graceful shutdown (lifespan, commits)
        deadline = time.monotonic() + 30
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        for sock in sockets:
            sock.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
