"""Roll-up rows keep their byte layout when a spec's Stats gained a report count.

The Stats of the mean mechanisms, SHE and the binned numerical mechanisms gained a
``count`` field equal to n (``spec.REPORT_COUNT``). The store does not write it: a row's n
column already holds it, so rows written before the field existed still read back (no stored
data is lost), and the count of what is read is that n.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit.numeric import StochasticRounding
from ldpkit.service.store import CollectorStore
from ldpkit.spec import REPORT_COUNT


@pytest.fixture
def store(tmp_path):
    s = CollectorStore(f"sqlite:///{tmp_path / 'c.db'}")
    yield s
    s.close()


def test_rows_without_the_count_read_back_with_count_n(store):
    spec = StochasticRounding(epsilon=1.0, low=0.0, high=1.0)
    stats = spec.aggregate(spec.randomize(np.linspace(0.0, 1.0, 500), rng=1))
    assert REPORT_COUNT in stats.arrays  # the field this test is about
    store.register("m", spec)
    layout = store.layouts["m"]
    # The packed row is what the rows of a spec without the count field held: the other
    # arrays, little-endian, in the schema's order.
    legacy = b"".join(
        np.ascontiguousarray(v, dtype=v.dtype.newbyteorder("<")).tobytes()
        for k, v in stats.arrays.items()
        if k != REPORT_COUNT
    )
    assert layout.pack(stats) == legacy and layout.row_bytes == len(legacy)
    back = layout.sum([legacy, legacy], 2 * stats.n)
    assert back == stats.merge(stats)
    store.bulk_load("m", [], [(0, "", stats, 1)])
    merged, batches = store.merged("m", spec)
    assert merged == stats and int(merged.arrays[REPORT_COUNT]) == stats.n and batches == 1
