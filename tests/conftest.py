"""Test-suite settings: property tests are derandomized so a CI run is reproducible."""

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import settings

# Same examples on every run (fixed seed): a red CI run can be replayed exactly, and a
# green one cannot turn red by chance. Set HYPOTHESIS_PROFILE=explore to search anew.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _restore_mechanism_registry() -> Iterator[None]:
    """Forget mechanism classes a test defines (a doc's example subclass, say) when it ends.

    Defining a ``Mechanism`` subclass registers it by name for the whole process; without
    this, whichever tests an xdist worker happened to run earlier would change what later
    tests see in ``mechanism_registry()`` (the JS params vector, the parameter table).
    """
    from ldpkit import spec

    saved = dict(spec._REGISTRY)
    yield
    # Only classes from outside the package are forgotten: ldpkit's own modules register
    # theirs once, when first imported (possibly during this test), and are not re-imported.
    for name, cls in list(spec._REGISTRY.items()):
        if name in saved:
            spec._REGISTRY[name] = saved[name]
        elif not cls.__module__.startswith("ldpkit."):
            del spec._REGISTRY[name]


@pytest.fixture
def serve_app() -> Iterator[Callable[[Any], str]]:
    """Start ASGI apps with uvicorn on 127.0.0.1 (a free port) in threads; returns their URLs.

    Every server started through it is stopped when the test ends.
    """
    import socket
    import threading
    import time

    uvicorn = pytest.importorskip("uvicorn")
    running: list[tuple[Any, threading.Thread]] = []

    def start(app: Any) -> str:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        running.append((server, thread))
        deadline = time.monotonic() + 30
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                pytest.fail("the server did not start within 30 s")
            time.sleep(0.05)
        return f"http://127.0.0.1:{port}"

    yield start
    for server, thread in running:
        server.should_exit = True
        thread.join(timeout=30)


def _load_helpers(name: str) -> None:
    # test modules cannot import each other under --import-mode=importlib: a shared helper
    # module is loaded here once, under its own name, so that tests can import it
    import importlib.util
    import sys
    from pathlib import Path

    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


_load_helpers("_jshelpers")
_load_helpers("_streamhelpers")
_load_helpers("_servers")
_load_helpers("_chromium")
_load_helpers("_autohelpers")
_load_helpers("_discoveryhelpers")
