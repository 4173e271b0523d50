"""Item keys of many strings at once: the joined-digest path against one item_key per item."""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit.frequency._items import item_key, item_keys, keys_of


def test_keys_of_strings_match_item_key_per_item():
    items = ["", "a", "é", "中文", "😀", "x" * 300, "a\x00b"]
    want = [item_key(s) for s in items]
    assert keys_of(items).dtype == np.uint64
    assert keys_of(items).tolist() == want
    mixed = ["a", 7, np.int64(-3), "b"]
    assert keys_of(mixed).tolist() == [item_key(x) for x in mixed]
    assert keys_of([]).shape == (0,)


def test_keys_of_names_a_lone_surrogate():
    with pytest.raises(ValueError, match="values must be strings encodable as UTF-8, got"):
        keys_of(["ok", "bad\ud800"])
    with pytest.raises(ValueError, match="values must be strings encodable as UTF-8, got"):
        item_keys(np.array(["ok", "bad\ud800"], dtype=object))


def _unicode_strings(n: int, seed: int) -> list[str]:
    """Random strings over 1- to 4-byte characters (NUL, empty strings included)."""
    rng = np.random.default_rng(seed)
    pool = ["", "a", "Z", "\x00", "é", "ß", "\u07ff", "\u0800", "€", "中", "😀", "\U0010ffff"]
    distinct = ["".join(rng.choice(pool, size=int(k))) for k in rng.integers(0, 20, 400)]
    return [distinct[i] for i in rng.integers(0, len(distinct), n)]


def test_unicode_arrays_take_the_table_path_and_give_the_same_keys():
    from ldpkit.frequency import _items

    values = np.array(_unicode_strings(6000, 1))
    assert values.size >= _items._ROWS_MIN
    want = item_keys(np.array(values.tolist(), dtype=object))  # the dict path
    assert np.array_equal(item_keys(values), want)
    assert np.array_equal(item_keys(values[:10]), want[:10])  # below the table's minimum
    swapped = values.astype(values.dtype.newbyteorder(">"))  # big-endian code points
    assert np.array_equal(item_keys(swapped), want)
    forged = np.full(2000, 0x61, dtype=np.uint32)
    forged[7] = 0x110000  # past U+10FFFF: only a view can put it in a U array
    with pytest.raises(ValueError, match="values must be strings of Unicode code points"):
        item_keys(forged.view("<U1"))
    with pytest.raises(ValueError, match="values must be strings of Unicode code points"):
        item_keys(forged[:10].view("<U1"))  # the dict path too


def test_distinct_rows_is_exact_even_when_every_fingerprint_collides(monkeypatch):
    from ldpkit import _parallel
    from ldpkit.frequency import _items

    monkeypatch.setattr(_parallel, "use_compiled", lambda *_: False)  # the numpy version
    rng = np.random.default_rng(2)
    rows = rng.integers(0, 3, size=(5000, 20)).astype(np.uint8)  # 3 words per row
    first, inverse = _items.distinct_rows(rows)
    assert np.array_equal(rows[first][inverse], rows)
    assert first.size == np.unique(rows, axis=0).shape[0]
    # a hash that maps every word to 0: all fingerprints collide, the exact fallback runs
    monkeypatch.setattr(_items, "_mix64", lambda z: np.zeros_like(z))
    first, inverse = _items.distinct_rows(rows)
    assert np.array_equal(rows[first][inverse], rows)
    assert first.size == np.unique(rows, axis=0).shape[0]


def _partition(inverse: np.ndarray) -> np.ndarray:
    """Canonical group labels (numbered by first appearance): equal for equal partitions."""
    _, first_seen, labels = np.unique(inverse, return_index=True, return_inverse=True)
    return np.argsort(np.argsort(first_seen))[labels.reshape(-1)]


@pytest.mark.parametrize("shape, top", [((6000, 3), 3), ((60_000, 1), 40_000), ((1, 2), 9)])
def test_compiled_distinct_rows_match_the_numpy_version(monkeypatch, shape, top):
    pytest.importorskip("numba")
    from ldpkit import _parallel
    from ldpkit.frequency import _items
    from ldpkit.frequency._kernels_rows import distinct_rows_compiled

    rng = np.random.default_rng(7)
    # few values per word (many duplicates) or ~40,000 distinct rows (the table grows 6x)
    words = rng.integers(0, top, size=shape).astype(np.uint64)
    first, inverse = distinct_rows_compiled(words)
    assert np.array_equal(words[first][inverse], words)
    assert np.array_equal(first, np.sort(first))  # first appearances, in order
    assert np.array_equal(inverse[first], np.arange(first.size))
    monkeypatch.setattr(_parallel, "use_compiled", lambda *_: False)
    first_np, inverse_np = _items.distinct_rows(words)
    assert first_np.size == first.size == np.unique(words, axis=0).shape[0]
    assert np.array_equal(_partition(inverse_np), _partition(inverse))
    with pytest.raises(ValueError, match="words must be a 2-D array"):
        distinct_rows_compiled(np.zeros(3, dtype=np.uint64))


def test_unicode_keys_do_not_depend_on_the_compiled_table(monkeypatch):
    pytest.importorskip("numba")
    from ldpkit import _parallel

    values = np.array(_unicode_strings(20_000, 8))
    monkeypatch.setattr(_parallel, "use_compiled", lambda *_: True)
    compiled = item_keys(values)
    monkeypatch.setattr(_parallel, "use_compiled", lambda *_: False)
    assert np.array_equal(item_keys(values), compiled)
    assert np.array_equal(compiled, item_keys(values.tolist()))


def test_integer_arrays_of_wide_span_take_the_table_path():
    rng = np.random.default_rng(3)
    for arr in (
        rng.integers(-(2**62), 2**62, 3000)[rng.integers(0, 3000, 9000)],
        rng.integers(2**63, 2**64 - 1, 3000, dtype=np.uint64, endpoint=True),
    ):
        assert item_keys(arr).tolist() == [item_key(int(x)) for x in arr.tolist()]
    ints = [0, 1, -1, 127, 128, 255, 256, -128, -129, 2**63, -(2**80)]
    assert keys_of(ints).tolist() == [item_key(x) for x in ints]


class _Column:
    """A column of another library: only ``__array__`` (as pandas and pyarrow expose)."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def __array__(self, dtype=None, copy=None):
        """Return the column's values (numpy's array protocol)."""
        return self.values


def test_a_column_exposing_a_unicode_array_is_read_through_it():
    values = np.array(_unicode_strings(2000, 4))
    assert np.array_equal(item_keys(_Column(values)), item_keys(values))
    with pytest.raises(TypeError, match="values must be strings or integers"):
        item_keys(_Column(np.array([b"a", b"b"])))  # bytes are not items


@pytest.mark.parametrize("name", ["CMS", "HCMS", "FLH"])
def test_unicode_arrays_give_the_reports_of_the_list_of_str(name):
    import ldpkit

    spec = getattr(ldpkit, name)(epsilon=2.0, width=64, depth=8) if name != "FLH" else None
    spec = spec or ldpkit.FLH(epsilon=2.0, num_hashes=8)
    values = np.array(_unicode_strings(5000, 5))
    got = spec.randomize(values, rng=11).arrays
    want = spec.randomize(values.tolist(), rng=11).arrays
    assert got.keys() == want.keys()
    assert all(np.array_equal(got[k], want[k]) for k in got)


def test_compiled_string_grouping_is_the_dicts(monkeypatch):
    pytest.importorskip("numba")
    from ldpkit import _parallel
    from ldpkit.frequency._items import distinct_in_order, distinct_strings

    monkeypatch.setattr(_parallel, "use_compiled", lambda *_: True)
    items = [s.replace("\x00", "") for s in _unicode_strings(6000, 9)]
    items += ["x" * 100, "x" * 99, "x" * 100 + "y", "", "abcdefgh", "abcdefg"]
    items += ["y" * 50, "y" * 40 + "z" + "y" * 9, "y" * 50]  # differ past their 16th byte
    grouped = distinct_strings(items)
    assert grouped is not None
    uniques, inverse = grouped
    want_uniques, want_inverse = distinct_in_order(items)
    assert uniques == want_uniques  # the same groups, in the same first-seen order
    assert np.array_equal(inverse, want_inverse)
    assert np.array_equal(item_keys(items), keys_of(want_uniques)[want_inverse])
    # what the compiled pass does not take goes to the general path, which names it
    for bad in ("a\x00b", 3, b"a", "bad\ud800"):
        assert distinct_strings([*items, bad]) is None
    with pytest.raises(TypeError, match="values must be strings or integers"):
        item_keys([*items, 2.5])
    with pytest.raises(ValueError, match="values must be strings encodable as UTF-8"):
        item_keys([*items, "bad\ud800"])
    assert item_keys([*items, "a\x00b"])[-1] == item_key("a\x00b")
    monkeypatch.setattr(_parallel, "use_compiled", lambda *_: False)
    assert distinct_strings(items) is None


def test_compiled_string_segments_are_found_and_grouped_by_their_bytes():
    pytest.importorskip("numba")
    from ldpkit.frequency._kernels_strings import group_segments

    # equal lengths, other bytes; an empty segment; segments across word boundaries
    text = "ab\x00ba\x00ab\x00\x00ba\x00abcdefghij\x00abcdefghik\x00abcdefghij"
    buf = np.frombuffer(text.encode(), dtype=np.uint8)
    first, starts, ends, inverse = group_segments(buf, 8)
    assert first.tolist() == [0, 1, 3, 5, 6]
    assert inverse.tolist() == [0, 1, 0, 2, 1, 3, 4, 3]
    spans = [text.encode()[a:b] for a, b in zip(starts, ends, strict=True)]
    assert spans == [b"ab", b"ba", b"", b"abcdefghij", b"abcdefghik"]
    assert group_segments(buf, 7) is None  # a string held a NUL


def test_compiled_blake2b_keys_are_hashlibs(monkeypatch):
    pytest.importorskip("numba")
    from ldpkit import _parallel
    from ldpkit.frequency import _items

    rng = np.random.default_rng(12)
    # one block, the 127/128/129-byte boundaries (with the b"s" prefix), several blocks
    strings = ["", "a", "é", "😀", *("x" * k for k in range(120, 260)), "y" * 1000]
    strings += ["".join(rng.choice(list("abé中😀"), size=int(k))) for k in rng.integers(0, 80, 500)]
    monkeypatch.setattr(_parallel, "use_compiled", lambda *_: True)
    assert keys_of(strings).tolist() == [item_key(s) for s in strings]
    # a NUL or a lone surrogate: hashlib's path (which names the surrogate)
    assert _items._compiled_string_keys(["a", "b\x00c"]) is None
    assert keys_of(["a", "b\x00c"]).tolist() == [item_key("a"), item_key("b\x00c")]
    assert _items._compiled_string_keys(["a", "\ud800"]) is None
    with pytest.raises(ValueError, match="values must be strings encodable as UTF-8"):
        keys_of(["a", "\ud800"])


def test_compiled_blake2b_integer_keys_are_hashlibs(monkeypatch):
    pytest.importorskip("numba")
    from ldpkit import _parallel
    from ldpkit.frequency._kernels_blake import integer_keys_compiled

    edges = [0, 1, -1, 127, 128, 255, 256, -128, -129, -256, -257, 2**62, 2**63 - 1]
    edges += [-(2**63), -(2**63) + 1, *(2**k + d for k in range(64) for d in (-1, 0, 1))]
    rng = np.random.default_rng(13)
    values = np.array(
        [v for v in edges if -(2**63) <= v < 2**63]
        + rng.integers(-(2**63), 2**63 - 1, 500).tolist(),
        dtype=np.int64,
    )
    got = integer_keys_compiled(values, b"ldpkit.item.v1")
    assert got.tolist() == [item_key(int(v)) for v in values.tolist()]
    # both the dense and the table paths of item_keys take it
    monkeypatch.setattr(_parallel, "use_compiled", lambda *_: True)
    small = rng.integers(-50, 3000, 9000)
    assert item_keys(small).tolist() == [item_key(int(v)) for v in small.tolist()]
    wide = values[rng.integers(0, values.size, 4000)]
    assert item_keys(wide).tolist() == [item_key(int(v)) for v in wide.tolist()]
    unsigned = rng.integers(2**63, 2**64 - 1, 3000, dtype=np.uint64, endpoint=True)
    assert item_keys(unsigned).tolist() == [item_key(int(x)) for x in unsigned.tolist()]
