"""The JavaScript client (clients/js) against the Python side.

- the shared vectors (tests/vectors/*.json) are what ``make_vectors.py`` writes now;
- ``node --test`` in clients/js passes (it checks the client against those vectors);
- reports randomized by the client under node, decoded by ldpkit, give unbiased
  frequency estimates (z-tests against the true histogram), and the same test fails
  when the server decodes them with a wrong epsilon.

The node parts skip (with the reason) when no ``node`` is on PATH, except in CI (``CI``
set), where they fail instead: ``.ci/run`` installs Debian's nodejs.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _jshelpers import CLIENT, NODE, js_reports, needs_node, send
from ldpkit.frequency import GRR, OLH, OUE, HadamardResponse
from ldpkit.io import reports_from_dict
from ldpkit.spec import Mechanism, Reports

ROOT = Path(__file__).resolve().parents[1]
VECTORS = ROOT / "tests" / "vectors"


def _make_vectors() -> Any:
    spec = importlib.util.spec_from_file_location("make_vectors", VECTORS / "make_vectors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_vectors_are_current() -> None:
    mv = _make_vectors()
    for name, content in mv.vectors().items():
        path = VECTORS / name
        assert path.read_text() == mv.render(content), (
            f"{path} is stale: run python tests/vectors/make_vectors.py"
        )


# numpy dispatches its transcendental functions (exp, log, expm1, ...) to SIMD code chosen per
# CPU, and the last bit differs between paths: the vectors must not depend on it. Regenerate
# them with the AVX-512 paths (and, below them, the AVX2 ones) switched off; on a CPU without
# those features this repeats the plain test, which is harmless.
_NARROWED_SIMD = ["X86_V4 AVX512_ICL AVX512_SPR", "X86_V3 X86_V4 AVX512_ICL AVX512_SPR"]


@pytest.mark.parametrize("disabled", _NARROWED_SIMD)
def test_vectors_are_current_on_narrower_simd(disabled: str) -> None:
    import os
    import sys

    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": disabled}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "src"), str(ROOT / "tests"), env.get("PYTHONPATH", "")]
    )
    check = (
        "import importlib.util, pathlib, sys\n"
        f"here = pathlib.Path({str(VECTORS)!r})\n"
        "spec = importlib.util.spec_from_file_location('make_vectors', here / 'make_vectors.py')\n"
        "mv = importlib.util.module_from_spec(spec); spec.loader.exec_module(mv)\n"
        "stale = [n for n, c in mv.vectors().items() if (here / n).read_text() != mv.render(c)]\n"
        "sys.exit(f'stale under narrowed SIMD: {stale}' if stale else 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_vector_bodies_decode_in_python() -> None:
    for case in json.loads((VECTORS / "bodies.json").read_text()):
        reports = reports_from_dict(case["body"])
        assert len(reports) == len(case["values"])


@needs_node
def test_node_test_suite() -> None:
    assert NODE is not None, "node must be on PATH in CI (.ci/run installs nodejs)"
    done = subprocess.run(
        [NODE, "--test"], cwd=CLIENT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _max_z(spec: Mechanism, reports: Reports, truth: np.ndarray) -> float:
    # the same arrays decoded under ``spec`` (which may differ from the one that made them)
    decoded = Reports(spec, **reports.arrays)
    est = spec.estimate(spec.aggregate(decoded))  # type: ignore[attr-defined]
    z = (est.frequencies - truth) / np.sqrt(est.variance)
    return float(np.max(np.abs(z)))


SPECS = [
    GRR(epsilon=1.0, domain_size=6),
    OUE(epsilon=1.0, domain_size=6),
    OLH(epsilon=1.0, domain_size=6),
    HadamardResponse(epsilon=1.0, domain_size=6),
]


@needs_node
@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_js_reports_give_unbiased_estimates(spec: Mechanism) -> None:
    counts = np.array([14000, 3000, 1500, 1000, 400, 100])  # n = 20_000
    truth = counts / counts.sum()
    reports = js_reports(spec, counts=counts, seed=20261123)
    assert len(reports) == counts.sum()
    assert _max_z(spec, reports, truth) <= 5.0
    # the check has power: decoding with epsilon x 1.3 is caught
    wrong = spec.replace(epsilon=spec.epsilon * 1.3)  # type: ignore[attr-defined]
    assert _max_z(wrong, reports, truth) > 6.0


@needs_node
@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_js_secure_coins_give_unbiased_estimates(spec: Mechanism) -> None:
    # the production path (crypto.getRandomValues, not reproducible): |z| <= 5.5 for all
    # 6 items fails by chance with probability < 3e-7
    counts = np.array([5000, 2000, 1500, 1000, 400, 100])
    reports = js_reports(spec, counts=counts, seed=None)
    assert _max_z(spec, reports, counts / counts.sum()) <= 5.5


@pytest.fixture
def live_collector(tmp_path: Path, serve_app: Any) -> Any:
    """A collector on 127.0.0.1 (SQLite in tmp_path, one bearer token) in a thread."""
    pytest.importorskip("uvicorn")
    import hashlib

    from ldpkit.service.app import create_app
    from ldpkit.service.auth import parse_tokens

    app = create_app(
        {s.name.lower(): s for s in SPECS},
        f"sqlite:///{tmp_path / 'collector.db'}",
        tokens=parse_tokens(
            [
                {
                    "name": "js",
                    "scopes": ["ingest", "read"],
                    "sha256": hashlib.sha256(b"t0ken-js-test").hexdigest(),
                }
            ]
        ),
    )
    return serve_app(app)


@needs_node
@pytest.mark.slow
def test_fetch_spec_and_send_to_a_live_collector(live_collector: str) -> None:
    import urllib.request

    counts = [600, 300, 200, 100, 50, 50]
    for spec in SPECS:
        name = spec.name.lower()
        arg = {
            "url": live_collector,
            "collection": name,
            "counts": counts,
            "batch": 400,
            "token": "t0ken-js-test",
        }
        assert send(arg) == {"stored": sum(counts)}
        request = urllib.request.Request(
            f"{live_collector}/v1/collections/{name}",
            headers={"Authorization": "Bearer t0ken-js-test"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            info = json.loads(response.read())
        assert (info["n"], info["batches"]) == (sum(counts), 4)
