"""Fuzz the whole public API: the registry, a deterministic sweep and hypothesis.

Each call must return a valid answer or raise ValueError/TypeError naming the parameter; no
leaked numpy/numba message, no hang (a per-call time limit in a worker process). Findings not
fixed yet are listed, one per line, in ``known_findings.txt``: a finding outside that list fails
the test, and the list shrinks as causes are fixed (``python tests/fuzz/harness.py
--write-known`` rewrites it from a sweep).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

HERE = Path(__file__).parent
harness = sys.modules["ldpkit_fuzz_harness"]  # loaded by tests/fuzz/conftest.py


def _known() -> set[str]:
    lines = (HERE / "known_findings.txt").read_text(encoding="utf-8").splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


@pytest.fixture(scope="module")
def runner():
    r = harness.Runner(timeout=20.0)
    yield r
    r.close()


def test_registry_covers_every_public_name():
    registry = harness.build_registry()
    covered = harness.covered_names(registry)
    names = harness.public_names()
    missing = [n for n in names if n not in covered and n not in harness.EXCLUDED]
    assert not missing, f"public names neither fuzzed nor excluded (with a reason): {missing}"
    stale = sorted(set(harness.EXCLUDED) - set(names))
    assert not stale, f"exclusions of names that are not public: {stale}"
    both = sorted(
        n for n in set(harness.EXCLUDED) & covered if harness.EXCLUDED[n] != harness._MODULE
    )
    assert not both, f"names both fuzzed and excluded: {both}"
    assert len(registry) >= 250


@pytest.mark.slow
def test_baselines_are_valid(runner):
    """Every entry's own baseline call gives a valid answer (else its cases prove nothing)."""
    registry = harness.build_registry()
    bad = []
    for name in registry:
        outcome = runner.run(name, {})
        if outcome.kind != "ok":
            bad.append(f"{name}: {outcome.kind} {outcome.detail}")
    assert not bad, "\n".join(bad)


def _check(runner: Any, findings: list[tuple[str, str, str, str]], title: str) -> None:
    known = _known()
    new = [f for f in findings if not (harness.finding_keys(f[1], f[2]) & known)]
    harness.SUMMARIES.append(f"{title}: {runner.summary()}; {len(new)} not in known_findings")
    assert not new, f"{len(new)} new fuzz finding(s):\n" + "\n".join(
        f"{kind} {name}({what}): {detail}" for kind, name, what, detail in new[:40]
    )


@pytest.mark.slow
def test_sweep():
    """Every entry x every parameter x every hostile variant (about 12,000 calls)."""
    registry = harness.build_registry()
    r = harness.Runner(timeout=20.0)
    try:
        for name, changed in harness.sweep_cases(registry):
            r.run(name, changed)
    finally:
        r.close()
    _check(r, r.findings, "sweep")


# --- hypothesis: random hostile values, one or two parameters at a time -----------------------

_SCALARS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.none(),
    st.text(max_size=5),
    st.sampled_from([0, -1, 1.5, 2**31, 1e308, -1e308, math.nan, math.inf]),
)
_DTYPES = st.sampled_from(["int64", "int8", "uint64", "float64", "float32", "bool", "U3", "O"])


@st.composite
def _arrays(draw: Any) -> Any:
    dtype = draw(_DTYPES)
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=12))
    if dtype in ("U3", "O"):
        arr = np.asarray(draw(hnp.arrays("U3", shape)), dtype=dtype)
    else:
        arr = draw(hnp.arrays(dtype, shape))
    if draw(st.booleans()) and arr.size:
        return np.ma.MaskedArray(arr, mask=draw(hnp.arrays(bool, arr.shape)))
    return arr


def _hostile(base: Any) -> st.SearchStrategy[Any]:
    """Values near ``base``'s kind (numbers for numbers, arrays for arrays) and anything else."""
    if isinstance(base, (np.ndarray, list, tuple)):
        return st.one_of(_arrays(), _arrays(), _SCALARS)
    return st.one_of(_SCALARS, _SCALARS, _arrays())


def _dtype_kind(base: Any) -> str:
    """numpy's dtype kind of ``base``; of its first element for a ragged list of arrays."""
    try:
        return np.asarray(base).dtype.kind
    except ValueError:  # e.g. constrained_inference's levels: arrays of different lengths
        return np.asarray(base[0]).dtype.kind


def _label(value: Any, base: Any) -> tuple[str, bool]:
    """A label for ``value`` and whether no correct entry may accept it."""
    if value is None:
        return "None", True
    if isinstance(value, np.ma.MaskedArray):
        return ("masked", bool(np.ma.getmaskarray(value).any()))
    if isinstance(value, str):
        return "str", True
    if isinstance(value, bool):
        return "True", not isinstance(base, bool)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan", True
        if math.isinf(value):
            return "inf", True
        int_base = isinstance(base, (int, np.integer)) and not isinstance(base, bool)
        return ("1.5", int_base and not value.is_integer())
    if isinstance(value, int):
        return "int", False
    arr = np.asarray(value)
    if arr.dtype.kind in "UO":
        return "str-array", arr.size > 0
    if arr.dtype.kind == "b":
        return "bool-array", arr.size > 0 and _dtype_kind(base) in "iuf"
    if arr.dtype.kind == "f" and arr.size and not np.isfinite(arr).all():
        return "nan-in", True
    return f"array-{arr.dtype.kind}", False


@pytest.fixture(scope="module")
def hypothesis_findings():
    found: list[tuple[str, str, str, str]] = []
    r = harness.Runner(timeout=20.0)
    yield r, found
    r.close()


@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: the findings are collected
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def _fuzz_once(data: Any, runner: Any) -> None:
    registry = harness.build_registry()
    names = sorted(registry)
    name = data.draw(st.sampled_from(names), label="entry")
    entry = registry[name]
    params = [p for p in entry.kwargs if p not in entry.fixed]
    if not params:
        return
    chosen = data.draw(
        st.lists(st.sampled_from(params), min_size=1, max_size=min(2, len(params)), unique=True)
    )
    changed = {}
    for param in chosen:
        value = data.draw(_hostile(entry.kwargs[param]), label=param)
        label, invalid = _label(value, entry.kwargs[param])
        changed[param] = (label, value, invalid)
    runner.run(name, changed)


@pytest.mark.slow
def test_hypothesis(hypothesis_findings):
    """400 random cases (about 30 s on a loaded 2-core machine)."""
    r, _ = hypothesis_findings
    _fuzz_once(runner=r)
    _check(r, r.findings, "hypothesis")


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def _fuzz_smoke(data: Any, runner: Any) -> None:
    _fuzz_once.hypothesis.inner_test(data, runner)


def test_hypothesis_smoke():
    """A quick sample of the random cases for the fast suite (make test-fast)."""
    r = harness.Runner(timeout=20.0)
    try:
        _fuzz_smoke(runner=r)
    finally:
        r.close()
    _check(r, r.findings, "hypothesis (smoke)")
