"""Strings to symbols and prefix keys: the whole-array paths against per-user references."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ldpkit.discovery._strings import (
    empty_key,
    encode_distinct,
    encode_strings,
    extend_keys,
    level_keys,
    prefix_key_table,
)

_POOL = ["a", "z", "\x7f", "é", "ß", "\u07ff", "\u0800", "€", "中", "😀", "\U0010ffff"]


def _reference(values: list[str], max_length: int) -> list[list[int]]:
    """Each string's UTF-8 bytes up to its first NUL, cut at a whole character, padded."""
    rows = []
    for s in values:
        raw = s.split("\x00")[0].encode("utf-8")[:max_length]
        raw = raw.decode("utf-8", errors="ignore").encode("utf-8")  # a cut character goes
        rows.append(list(raw) + [0] * (max_length - len(raw)))
    return rows


@pytest.mark.parametrize("with_nul", [False, True])
def test_joined_encoding_matches_a_per_string_reference(with_nul):
    rnd = random.Random(3)
    pool = [*_POOL, "\x00"] if with_nul else _POOL
    for _ in range(60):
        values = ["".join(rnd.choices(pool, k=rnd.randint(0, 16))) for _ in range(25)]
        for max_length in (1, 2, 3, 4, 7, 12, 40):
            want = _reference(values, max_length)
            for form in (values, np.array(values, dtype=object), np.array(values)):
                got = encode_strings(form, max_length, None)
                assert got.dtype == np.uint8 and got.tolist() == want


def test_joined_encoding_refuses_a_lone_surrogate_anywhere_in_a_string():
    message = "values must be strings encodable as UTF-8 (no lone surrogates)"
    for values in (["ok", "x\ud800"], ["\ud83d", "\ude00"], ["a" * 40 + "\udfff"]):
        for form in (values, np.array(values, dtype=object), np.array(values)):
            with pytest.raises(ValueError) as err:
                encode_strings(form, 4, None)
            assert str(err.value) == message


def test_mixed_items_take_the_per_item_path():
    assert encode_strings(["ab", b"ab", np.str_("ab")], 3, None).tolist() == [[97, 98, 0]] * 3
    with pytest.raises(TypeError, match="values must be a sequence of strings, got an item"):
        encode_strings(["ab", 3], 3, None)


def test_level_keys_match_the_chained_keys_of_each_user():
    rng = np.random.default_rng(4)
    for dtype, high in ((np.uint8, 256), (np.uint16, 4000)):
        symbols = rng.integers(0, high, size=(300, 9)).astype(dtype)
        for levels in (rng.integers(0, 9, size=300), np.full(300, 8), rng.integers(-2, 12, 300)):
            want = np.zeros(300, dtype=np.uint64)
            for i, level in enumerate(levels.tolist()):
                if 0 <= level < 9:  # any other level keeps the key 0
                    key = empty_key(1)
                    for s in symbols[i : i + 1, : level + 1].T:
                        key = extend_keys(key, s)
                    want[i] = key[0]
            assert np.array_equal(level_keys(symbols, levels), want)
        table = prefix_key_table(symbols)  # every level of every row at once
        for level in range(9):
            assert np.array_equal(table[:, level], level_keys(symbols, np.full(300, level)))


def test_distinct_encoding_of_a_unicode_array_gathers_back_to_every_user():
    values = np.array(_random_strings(8000, 5, [*_POOL, "\x00", ""]))
    for max_length, alphabet in ((3, None), (12, None), (40, None)):
        symbols, inverse = encode_distinct(values, max_length, alphabet)
        assert inverse is not None and symbols.shape[0] <= 500
        assert np.array_equal(symbols[inverse], encode_strings(values.tolist(), max_length, None))
    few = np.array(_random_strings(100, 6, _POOL))  # too few users to group: one row each
    symbols, inverse = encode_distinct(few, 12, None)
    assert inverse is None and np.array_equal(symbols, encode_strings(few.tolist(), 12, None))
    as_list = values.tolist()  # a list of str: grouped by a dict, the same rows
    for max_length, alphabet in ((3, None), (12, None), (12, "".join(_POOL))):
        symbols, inverse = encode_distinct(as_list, max_length, alphabet)
        assert inverse is not None and symbols.shape[0] <= 500
        want = encode_strings(values, max_length, alphabet)
        assert np.array_equal(symbols[inverse], want)
    mixed = [s.encode("utf-8") if i % 3 else s for i, s in enumerate(as_list)]  # str and bytes
    symbols, inverse = encode_distinct(mixed, 12, None)
    assert inverse is not None and np.array_equal(symbols[inverse], encode_strings(mixed, 12, None))
    unique = [f"u{i}" for i in range(8000)]  # no repeats: grouping would not pay
    symbols, inverse = encode_distinct(unique, 12, None)
    assert inverse is None and symbols.shape[0] == 8000
    for bad in ([*as_list[:-1], bytearray(b"x")], [*as_list[:-1], 7]):  # refused as before
        with pytest.raises(TypeError):
            encode_distinct(bad, 12, None)
    with pytest.raises(ValueError, match="encodable as UTF-8"):
        encode_distinct([*as_list[:-1], "\ud800"], 12, None)


def _random_strings(n: int, seed: int, pool: list[str]) -> list[str]:
    rng = np.random.default_rng(seed)
    distinct = ["".join(rng.choice(pool, size=int(k))) for k in rng.integers(0, 20, 500)]
    return [distinct[i] for i in rng.integers(0, len(distinct), n)]


def test_unicode_arrays_are_encoded_vectorized_as_the_strings_are():
    # the U array's own UCS-4 code points through the vectorized UTF-8 encoder (ASCII rows
    # copied), against the joined encoding of the same strings
    values = np.array(_random_strings(3000, 1, [*_POOL, "\x00", ""]))
    ascii_only = np.array(_random_strings(3000, 2, ["a", "b", "\x7f", "\x00"]))
    for arr in (values, ascii_only, values[:0], np.array(["", ""])):
        for max_length in (1, 3, 4, 12, 40):
            got = encode_strings(arr, max_length, None)
            assert np.array_equal(got, encode_strings(arr.tolist(), max_length, None))
            assert got.tolist() == _reference(arr.tolist(), max_length)
    swapped = values.astype(values.dtype.newbyteorder(">"))  # big-endian code points
    for max_length in (3, 12):
        want = encode_strings(values, max_length, None)
        assert np.array_equal(encode_strings(swapped, max_length, None), want)
        assert np.array_equal(
            encode_strings(swapped, max_length, "".join(_POOL)),
            encode_strings(values, max_length, "".join(_POOL)),
        )
    forged = np.array([0x110000, 0x61, 0xE9, 0], dtype=np.uint32).view("<U2")
    message = r"values must be strings of Unicode code points \(at most U\+10FFFF\), got U\+110000"
    with pytest.raises(ValueError, match=message):
        encode_strings(forged, 4, None)  # a code point past U+10FFFF (only through a view)
    with pytest.raises(ValueError, match=message):
        encode_strings(forged, 4, "aé")
    raw = np.array([s.encode("utf-8") for s in values.tolist()])  # an S array: bytes
    assert np.array_equal(encode_strings(raw, 12, None), encode_strings(values, 12, None))


def test_alphabet_encoding_of_a_unicode_array_encodes_each_distinct_string_once():
    values = np.array(_random_strings(9000, 3, ["a", "b", "é", "z", "\x00"]))
    alphabet = "zéba"
    for max_length in (1, 5, 12):
        got = encode_strings(values, max_length, alphabet)
        assert np.array_equal(got, encode_strings(values.tolist(), max_length, alphabet))
    with pytest.raises(ValueError, match=r"alphabet characters, got \['b'\]"):
        encode_strings(values, 5, "zéa")


@pytest.mark.parametrize("max_length", [3, 6, 12])
@pytest.mark.parametrize("name", ["PEM", "TreeHist", "SFP"])
def test_unicode_and_bytes_arrays_give_the_reports_of_the_list_of_str(name, max_length):
    import ldpkit.discovery as discovery

    pool = ["a", "b", "c"] if name == "SFP" else [*_POOL, ""]
    spec = getattr(discovery, name)(epsilon=2.0, max_length=max_length)
    # 5000 users of 500 strings: the U array takes the distinct-string path
    values = _random_strings(5000, 4, pool)
    want = spec.randomize(values, rng=9).arrays
    forms = [np.array(values)]
    if name != "SFP":  # (a given alphabet is of characters: bytes are refused)
        forms.append(np.array([s.encode("utf-8") for s in values]))
    for form in forms:
        got = spec.randomize(form, rng=9).arrays
        assert got.keys() == want.keys()
        assert all(np.array_equal(got[k], want[k]) for k in got)
    if name != "SFP":  # a given alphabet, the U array grouped as well
        spec = getattr(discovery, name)(epsilon=2.0, max_length=max_length, alphabet="abcz")
        values = _random_strings(5000, 5, ["a", "b", "c", "z", ""])
        got = spec.randomize(np.array(values), rng=3).arrays
        want = spec.randomize(values, rng=3).arrays
        assert all(np.array_equal(got[k], want[k]) for k in got)
