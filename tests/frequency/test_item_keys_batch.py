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
