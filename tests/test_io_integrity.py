"""Reports files carry a digest of their arrays: every single-bit flip of a small
file either raises ValueError or decodes to the very same reports."""

from __future__ import annotations

import io

import numpy as np
import pytest

from ldpkit import GRR, OUE
from ldpkit.io import (
    iter_reports_parquet,
    load_reports_parquet,
    reports_from_bytes,
    reports_to_bytes,
    save_reports_parquet,
)

pytest.importorskip("pyarrow")


def _flips(data: bytes, step: int):
    """Every ``step``-th single-bit flip of ``data``."""
    buf = bytearray(data)
    for bit in range(0, 8 * len(data), step):
        buf[bit // 8] ^= 1 << (bit % 8)
        yield bytes(buf)
        buf[bit // 8] ^= 1 << (bit % 8)


def _outcomes(data: bytes, reports, step: int) -> dict[str, int]:
    counts = {"error": 0, "same": 0}
    for flipped in _flips(data, step):
        try:
            got = reports_from_bytes(flipped, expected=reports.spec)
        except ValueError:
            counts["error"] += 1
            continue
        # Anything else (another exception, different reports) fails the test.
        assert got.equals(reports), "a bit flip decoded to different reports"
        counts["same"] += 1
    return counts


def _small(fmt: str):
    spec = OUE(epsilon=1.0, domain_size=12) if fmt == "npz" else GRR(epsilon=1.0, domain_size=7)
    reports = spec.randomize(np.arange(12) % 7, rng=5)
    return reports, reports_to_bytes(reports, format=fmt)


@pytest.mark.parametrize("fmt", ["npz", "parquet"])
def test_sampled_bit_flips_raise_or_decode_identically(fmt):
    reports, data = _small(fmt)
    counts = _outcomes(data, reports, step=13)  # a sample; the slow test does every bit
    assert counts["error"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["npz", "parquet"])
def test_every_bit_flip_raises_or_decodes_identically(fmt):
    reports, data = _small(fmt)
    counts = _outcomes(data, reports, step=1)
    assert counts["error"] + counts["same"] == 8 * len(data)


def _tampered(table, row: int):
    """The table with one item changed at ``row``, keeping the original metadata."""
    import pyarrow as pa

    values = table.column("values").to_numpy().copy()
    values[row] = (values[row] + 1) % 300
    changed = table.set_column(0, "values", pa.array(values, type=table.schema.field(0).type))
    return changed.replace_schema_metadata(table.schema.metadata)


def test_digest_mismatch_is_a_value_error():
    from ldpkit.io import reports_from_arrow, reports_to_arrow

    spec = GRR(epsilon=1.0, domain_size=300)
    reports = spec.randomize(np.arange(50) % 300, rng=1)
    table = reports_to_arrow(reports)
    assert reports_from_arrow(table).equals(reports)
    with pytest.raises(ValueError, match="digest of rows 0..49 does not match"):
        reports_from_arrow(_tampered(table, 17))


def test_row_groups_and_batches_are_checked():
    import pyarrow.parquet as pq

    spec = GRR(epsilon=1.0, domain_size=300)
    reports = spec.randomize(np.arange(100) % 300, rng=2)
    buf = io.BytesIO()
    save_reports_parquet(reports, buf, row_group_size=30)
    good = buf.getvalue()
    for batch_size in (None, 7, 45):
        got = list(iter_reports_parquet(io.BytesIO(good), batch_size=batch_size))
        assert got[0].concat(*got[1:]).equals(reports)
        assert batch_size is None or all(len(b) == batch_size for b in got[:-1])
    table = pq.read_table(io.BytesIO(good))
    bad = io.BytesIO()
    pq.write_table(_tampered(table, 65), bad, row_group_size=30)  # in the third group
    with pytest.raises(ValueError, match="digest of rows 60..89"):
        load_reports_parquet(io.BytesIO(bad.getvalue()))
    stream = iter_reports_parquet(io.BytesIO(bad.getvalue()))
    assert len(next(stream)) == 30 and len(next(stream)) == 30  # intact groups first
    with pytest.raises(ValueError, match="digest of rows 60..89"):
        next(stream)
