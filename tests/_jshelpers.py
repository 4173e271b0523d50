"""Helpers shared by the JavaScript-client tests (test_js_client, test_js_categorical, test_js_numeric).

pytest runs with ``--import-mode=importlib``, so test modules cannot import each other;
tests/conftest.py loads this file once as the module ``_jshelpers`` and the tests
``from _jshelpers import ...``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from ldpkit.io import reports_from_dict
from ldpkit.spec import Mechanism, Reports

CLIENT = Path(__file__).resolve().parents[1] / "clients" / "js"
NODE = shutil.which("node")

#: Skip without ``node`` except in CI (``CI`` set), where the test fails instead: ``.ci/run``
#: installs Debian's nodejs.
needs_node = pytest.mark.skipif(
    NODE is None and not os.environ.get("CI"),
    reason="node is not on PATH (Debian: apt-get install nodejs); CI must have it",
)


def run_node(tool: str, arg: dict[str, Any], *, timeout: float, stdin: bool = True) -> Any:
    """Run ``node tools/<tool>`` in clients/js with ``arg`` as JSON; its JSON output.

    ``arg`` goes on stdin (long value lists do not fit a command line), or as the first
    argument with ``stdin=False`` (tools/send.js reads only that).
    """
    assert NODE is not None, "node must be on PATH in CI (.ci/run installs nodejs)"
    text = json.dumps(arg)
    done = subprocess.run(
        [NODE, f"tools/{tool}", *([] if stdin else [text])],
        input=text if stdin else None,
        cwd=CLIENT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def js_reports(
    spec: Mechanism,
    *,
    seed: int | None,
    values: list[Any] | None = None,
    counts: np.ndarray | None = None,
) -> Reports:
    """Reports the client makes for ``values`` (or item v ``counts[v]`` times) under node.

    With ``seed`` the client's coins are a seeded splitmix64 stream (reproducible); with
    None they come from crypto.getRandomValues, as in production.
    """
    arg: dict[str, Any] = {
        "info": {"mechanism": spec.to_dict(), "fingerprint": spec.fingerprint},
        "seed": seed,
    }
    if values is not None:
        arg["values"] = values
    else:
        assert counts is not None, "give values or counts"
        arg["counts"] = np.asarray(counts).tolist()
    body = run_node("simulate.js", arg, timeout=300)
    return reports_from_dict(body, expected=spec)


def send(arg: dict[str, Any]) -> Any:
    """``node tools/send.js`` (fetch the spec from a collector, randomize, post): its output."""
    return run_node("send.js", arg, timeout=120, stdin=False)


def chi_square_p(observed: np.ndarray, expected: np.ndarray) -> float:
    """p-value of observed counts (any shape) under expected counts with the same sums.

    Pearson's chi-square over the cells the law gives mass, with (cells - 1) degrees of
    freedom; a report in a cell of zero mass gives p = 0.
    """
    observed, expected = np.ravel(observed), np.ravel(expected)
    keep = expected > 0
    if np.any(observed[~keep] > 0):
        return 0.0  # a report where the law puts no mass
    chi2 = float(np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep]))
    return float(sps.chi2.sf(chi2, int(keep.sum()) - 1))


# --- exact laws of the grid samplers (test_js_numeric, test_js_auto) ---------------------------
def rounding_weights(x: np.ndarray, steps: int) -> np.ndarray:
    """Sum over users of P[grid input k] under round_to_grid (length steps + 1)."""
    scaled = np.clip(x, 0.0, 1.0) * steps
    low = np.floor(scaled)
    frac = scaled - low
    k = low.astype(np.int64)
    out = np.bincount(k, weights=1.0 - frac, minlength=steps + 1)
    out += np.bincount(np.minimum(k + 1, steps), weights=frac, minlength=steps + 1)
    return out


def flat_bump_law(
    kw: np.ndarray, cells: int, w_low: int, extra: int, width: int, total: int
) -> np.ndarray:
    """Sum over users of P[cell] for P[c | k] = (w_low + extra [k <= c < k + width]) / T."""
    cums = np.concatenate([[0.0], np.cumsum(kw)])
    c = np.arange(cells)
    hi = np.clip(c + 1, 0, kw.size)
    lo = np.clip(c - width + 1, 0, kw.size)
    return (kw.sum() * float(w_low) + float(extra) * (cums[hi] - cums[lo])) / float(total)
