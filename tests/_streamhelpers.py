"""Helpers shared by the stream tests (test_topl, test_tops, test_local_baselines).

pytest runs with ``--import-mode=importlib``, so test modules cannot import each other;
tests/conftest.py loads this file once as the module ``_streamhelpers`` and the tests
``from _streamhelpers import ...``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def geometric_stream(n: int, seed: int = 0, bound: int = 100, *, p: float = 0.15) -> np.ndarray:
    """``n`` Geometric(``p``) values capped at ``bound``, as floats: a long-tailed stream."""
    return np.minimum(np.random.default_rng(seed).geometric(p, n), bound).astype(float)


def assert_same_dict(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Assert two (nested) state dicts are equal, arrays element by element."""
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], dict):
            assert_same_dict(a[key], b[key])
        elif isinstance(a[key], np.ndarray):
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        else:
            assert a[key] == b[key], key
