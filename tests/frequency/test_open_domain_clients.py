"""The open-domain clients' fast paths give the reference paths' keys and reports, byte for byte.

FLH draws its rows and coins on threads beside the item keys and hashes and randomizes in
one compiled pass from 2^16 users; below, and with the threshold raised, it takes the
sequential numpy path. Both must give the same reports for the same seed, on every kind
of input (int64, wide integers, lists of ``str``, numpy ``U`` arrays).
"""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit.frequency import FLH
from ldpkit.frequency import flh as flh_module
from ldpkit.frequency._items import item_codes, item_keys


def _inputs(n: int, seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    words = [f"w{x}é" if x % 7 else f"中{x}" for x in rng.integers(0, 3000, n)]
    return {
        "int64": rng.integers(-50, 10**6, n),
        "wide": rng.integers(-(2**62), 2**62, n),
        "list": words,
        "U": np.array(words),
    }


def _sequential(spec: FLH, values: object, seed: int, monkeypatch: pytest.MonkeyPatch):
    with monkeypatch.context() as m:
        m.setattr(flh_module, "_FUSED_MIN_USERS", 1 << 62)
        return spec.randomize(values, rng=seed)


@pytest.mark.parametrize(("epsilon", "num_hashes"), [(0.5, 1), (1.0, 1000), (8.0, 1000), (12.0, 7)])
def test_flh_fused_client_gives_the_sequential_reports(epsilon, num_hashes, monkeypatch):
    n = flh_module._FUSED_MIN_USERS + 123
    spec = FLH(epsilon=epsilon, num_hashes=num_hashes)
    for name, values in _inputs(n, 1).items():
        fast = spec.randomize(values, rng=3)
        slow = _sequential(spec, values, 3, monkeypatch)
        assert fast.rows.dtype == slow.rows.dtype and fast.values.dtype == slow.values.dtype
        assert np.array_equal(fast.rows, slow.rows), name
        assert np.array_equal(fast.values, slow.values), name


def test_flh_fused_client_with_a_closed_domain_and_a_generator(monkeypatch):
    n = flh_module._FUSED_MIN_USERS
    spec = FLH(epsilon=2.0, num_hashes=64, domain_size=500)
    values = np.random.default_rng(4).integers(0, 500, n)
    fast = spec.randomize(values, rng=np.random.default_rng(9))
    slow = _sequential(spec, values, np.random.default_rng(9), monkeypatch)
    assert np.array_equal(fast.values, slow.values) and np.array_equal(fast.rows, slow.rows)
    with pytest.raises(ValueError, match="values must be"):
        spec.randomize(np.full(n, 500), rng=0)  # refused after the draws started


def test_flh_fused_client_refuses_bad_items_with_the_usual_message():
    spec = FLH(epsilon=1.0, num_hashes=16)
    n = flh_module._FUSED_MIN_USERS
    with pytest.raises(TypeError, match="values must be strings or integers"):
        spec.randomize(["a"] * (n - 1) + [1.5], rng=0)
    with pytest.raises(ValueError, match="values must be strings encodable as UTF-8"):
        spec.randomize(["a"] * (n - 1) + ["\ud800"], rng=0)


def test_item_codes_gather_to_item_keys():
    for values in _inputs(5000, 2).values():
        keys, inverse = item_codes(values)
        assert np.array_equal(keys[inverse], item_keys(values))


def test_exact_quotient_without_division():
    from ldpkit.frequency._kernels_hashing import grr_from_uniform

    rng = np.random.default_rng(0)
    for w_other in [1, 3, 773518704500474, 806481064901540224, (1 << 61) - 1]:
        g = max(2, min(1 << 32, ((1 << 62) - 1) // w_other))
        w_keep = w_other
        total = w_keep + (g - 1) * w_other
        u = rng.integers(0, total, 20000, dtype=np.int64)
        edges = w_keep + w_other * rng.integers(0, g - 1, 2000, dtype=np.int64)
        u = np.concatenate([u, edges, edges - 1, edges + 1, [total - 1]])
        u = u[(u >= 0) & (u < total)]
        values = rng.integers(0, g, u.size)
        got = grr_from_uniform(values, u, w_keep, w_other)
        other = (u - w_keep) // w_other
        want = np.where(u < w_keep, values, other + (other >= values))
        assert np.array_equal(got, want), w_other
