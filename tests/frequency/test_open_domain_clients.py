"""The open-domain clients' fast paths give the reference paths' keys and reports, byte for byte.

FLH draws its rows and coins on threads beside the item keys and hashes and randomizes in
one compiled pass from 2^16 users; below, and with the threshold raised, it takes the
sequential numpy path. Both must give the same reports for the same seed, on every kind
of input (int64, wide integers, lists of ``str``, numpy ``U`` arrays).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# Strings whose UTF-8 takes 1 to 4 bytes per character, the empty string, interior NULs
# (a trailing NUL is the U array's padding) and the extreme code points around surrogates.
_CORPUS = [
    "",
    "a",
    "hello world",
    "café",
    "naïve résumé",
    "中文字符",
    "日本語のテキスト",
    "😀",
    "👩‍👩‍👧",
    "a\x00b",
    "\x00x",
    "\x7f\x80",
    "\u07ff\u0800",
    "\ud7ff\ue000\uffff",
    "\U00010000",
    "\U0010ffff",
    "x" * 200,  # several BLAKE2b blocks
    "é" * 64,  # exactly one block of UTF-8 after the prefix byte: 129 bytes
    "a" * 127,  # 128 bytes with the prefix: one full block
]


def _code_point_keys_of(strings: list[str]) -> np.ndarray | None:
    from ldpkit.frequency._items import _PERSON
    from ldpkit.frequency._kernels_strings import code_point_keys

    arr = np.array(strings)
    codes = arr.view(np.uint32).reshape(arr.shape[0], -1)
    return code_point_keys(codes, np.arange(arr.shape[0]), _PERSON)


def test_code_point_keys_are_the_item_keys_of_the_strings():
    from ldpkit.frequency._items import item_key

    keys = _code_point_keys_of(_CORPUS)
    assert keys is not None
    assert keys.tolist() == [item_key(s) for s in _CORPUS]
    wrong = [item_key(s + "!") for s in _CORPUS]  # the check can fail
    assert not np.any(keys == np.array(wrong, dtype=np.uint64))


def test_code_point_keys_refuse_a_surrogate_for_the_reference_path_to_name():
    assert _code_point_keys_of(["ok", "bad\ud800"]) is None
    forged = np.full((3, 2), 0x61, dtype=np.uint32)
    forged[1, 0] = 0x110000
    from ldpkit.frequency._items import _PERSON
    from ldpkit.frequency._kernels_strings import code_point_keys

    assert code_point_keys(forged, np.arange(3), _PERSON) is None


def test_unicode_arrays_take_the_code_point_keys_and_match_the_list(monkeypatch):
    from ldpkit import _parallel

    monkeypatch.setattr(_parallel, "use_compiled", lambda *_: True)
    rng = np.random.default_rng(3)
    strings = [_CORPUS[i] for i in rng.integers(0, len(_CORPUS), 5000)]
    want = np.array([item_keys([s])[0] for s in _CORPUS], dtype=np.uint64)
    index = {s: i for i, s in enumerate(_CORPUS)}
    expected = want[[index[s] for s in strings]]
    assert np.array_equal(item_keys(np.array(strings)), expected)
    assert np.array_equal(item_keys(strings), expected)
    with pytest.raises(ValueError, match="values must be strings encodable as UTF-8"):
        item_keys(np.array([*strings, "bad\udfff"]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(exclude_categories=("Cs",))), min_size=1))
def test_code_point_keys_match_item_key_on_any_text(strings):
    from ldpkit.frequency._items import item_key

    arr = np.array(strings)
    if arr.dtype.itemsize == 0:  # only empty strings: no code point rows
        return
    keys = _code_point_keys_of(strings)
    assert keys is not None
    assert keys.tolist() == [item_key(str(s)) for s in arr]  # (trailing NULs: padding)


def test_flh_fast_client_falls_back_when_a_string_holds_a_nul(monkeypatch):
    n = flh_module._FUSED_MIN_USERS
    spec = FLH(epsilon=4.0, num_hashes=100)
    words = [f"w{i % 500}" for i in range(n)]
    words[17] = "a\x00b"  # the joined bytes then hold one separator too many
    fast = spec.randomize(words, rng=1)
    slow = _sequential(spec, words, 1, monkeypatch)
    assert np.array_equal(fast.values, slow.values) and np.array_equal(fast.rows, slow.rows)
    keys, inverse = item_codes(words)
    assert keys[inverse][17] == item_keys(["a\x00b"])[0] != item_keys(["ab"])[0]


def test_grouping_on_threads_is_the_one_thread_grouping(monkeypatch):
    from ldpkit import _parallel
    from ldpkit.frequency import _kernels_rows, _kernels_strings

    rng = np.random.default_rng(6)
    monkeypatch.setattr(_kernels_rows, "_MIN_BLOCK", 3)
    monkeypatch.setattr(_kernels_strings, "_MIN_BLOCK_BYTES", 5)
    for workers in (2, 5):
        monkeypatch.setattr(_parallel, "WORKERS", workers)
        for n, distinct in [(1, 1), (7, 3), (4000, 900), (4000, 1)]:
            base = rng.integers(0, 2**64, size=(distinct, 2), dtype=np.uint64)
            rows = base[rng.integers(0, distinct, n)]
            first, inverse = _kernels_rows.distinct_rows_compiled(rows)
            one_first, one_inverse = _kernels_rows._distinct(rows)
            assert np.array_equal(first, one_first) and np.array_equal(inverse, one_inverse)
            words = [_CORPUS[i] for i in rng.integers(0, len(_CORPUS), n)]
            words = [w.replace("\x00", "") for w in words]
            buf = np.frombuffer("\x00".join(words).encode(), dtype=np.uint8)
            grouped = _kernels_strings.group_segments(buf, n)
            assert grouped is not None
            seg_first, starts, ends, seg_inverse = grouped
            from ldpkit.frequency._items import distinct_in_order

            uniques, codes = distinct_in_order(words)
            assert [words[i] for i in seg_first] == uniques
            assert np.array_equal(seg_inverse, codes)
            spans = [buf[a:b].tobytes().decode() for a, b in zip(starts, ends, strict=True)]
            assert spans == uniques
